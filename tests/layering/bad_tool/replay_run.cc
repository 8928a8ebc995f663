// Input of unit.layering.cli_wrong_include: a tools/ file reaching into the
// engine directly (what tools/replay_run.cc did). The CLI include check must refuse it.
#include "cli_internal.h"
#include "boostcomm/communicator.h"
#include "overlap/overlap_impl.h"
