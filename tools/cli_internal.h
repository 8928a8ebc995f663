// The CLI's one gate to the library's internals: every other tools/ file
// includes only the public API (include/boostcomm/), its own headers and this
// one. The build checks it (cmake/check_cli_includes.cmake): a tools/ file
// that includes a library header directly fails to build.
//
// Why each piece is here, not in the public API: the CLI reports on and
// drives internals that a library user has no business with.
//   core/tunables.h          `boostcomm tunables` lists the registry; bench and
//                            tune read the selection / fusion / cache settings
//   core/reduce.h            the reduction kernel ISA in the version line; the
//                            bench's local reference reduction
//   core/half.h              half / bfloat conversions of the bench's result check
//   core/check.h             checked integer conversions
//   workloads/model_profile.h the gradient profiles that replay, fusion and tune use
//   algorithms/registry.h    algorithm names and specs for `simulate`
//   simulate/*               the simulator behind `boostcomm simulate`, its cluster files
//   telemetry/timeline.h     replay's Chrome-trace timeline
//   telemetry/run_info.h     the command, host and date the tools write into their JSON
//   overlap/overlap_impl.h   overlap::attachTimeline: replay traces the overlap engine
//   executor/link_meter.h    replay's link rows (linkRows, occupancy), the same
//                            arithmetic as the simulator's
//   api/link_accounting.h    setLinkAccounting, for replay's accounting on/off comparison
#pragma once

#include "algorithms/registry.h"
#include "api/link_accounting.h"
#include "core/check.h"
#include "core/half.h"
#include "core/reduce.h"
#include "core/tunables.h"
#include "executor/link_meter.h"
#include "overlap/overlap_impl.h"
#include "simulate/cluster_file.h"
#include "simulate/predict.h"
#include "simulate/replay_sim.h"
#include "simulate/sim_cluster.h"
#include "telemetry/run_info.h"
#include "telemetry/timeline.h"
#include "workloads/model_profile.h"
