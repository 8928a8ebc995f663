// The one internal header the boostcomm CLI (tools/) may include; everything
// else it uses is the public API (include/boostcomm/). The build checks it
// (cmake/check_cli_includes.cmake): a tools/ file that includes any other
// library header fails to build.
//
// Why each piece is here, not in the public API: the CLI reports on and
// drives internals that a library user has no business with.
//   core/tunables.h        `boostcomm tunables` lists the registry; bench and
//                          tune read the selection / fusion / cache settings
//   core/reduce.h          the reduction kernel ISA in the version line; the
//                          bench's local reference reduction
//   core/half.h            half / bfloat conversions of the bench's result check
//   core/check.h           checked integer conversions
//   models/model_profile.h the gradient profiles that replay, fusion and tune use
//   algorithms/registry.h  algorithm names and specs for `simulate`
//   simulate/*, transport/sim/sim_cluster.h
//                          the simulator behind `boostcomm simulate`
//   telemetry/timeline.h   replay's Chrome-trace timeline
//   telemetry/run_info.h   the command, host and date the tools write into their JSON
//   engine/engine_impl.h   engine::attachTimeline: replay traces the overlap engine
//   executor/link_meter.h  replay's link rows (linkRows, occupancy), the same
//                          arithmetic as the simulator's; setLinkAccounting
//                          for its accounting on/off comparison
//
// Only tools/ compiles this header; it sits in api/ as the library's one
// door for its own CLI and is not part of any layer's scope (bc_api's sources
// cannot include it: simulate and engine are not below api).
#pragma once

#include "algorithms/registry.h"
#include "core/check.h"
#include "core/half.h"
#include "core/reduce.h"
#include "core/tunables.h"
#include "engine/engine_impl.h"
#include "executor/link_meter.h"
#include "models/model_profile.h"
#include "simulate/cluster_file.h"
#include "simulate/predict.h"
#include "simulate/replay_sim.h"
#include "telemetry/run_info.h"
#include "telemetry/timeline.h"
#include "transport/sim/sim_cluster.h"

namespace boostcomm { class Communicator; }
namespace boostcomm::detail {
// Link accounting on or off for this rank (local; the default is BOOSTCOMM_LINK_STATS).
void setLinkAccounting(Communicator& comm, bool on);
}  // namespace boostcomm::detail
