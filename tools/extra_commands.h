// Subcommands that live in a file of their own. Each add*Command adds its
// CLI11 subcommand (options included) to `app` and returns how to run it;
// main() runs the one the user chose. Options must be bound to storage that
// outlives app.parse (e.g. a std::shared_ptr captured by `run`).
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

#include "boostcomm/communicator.h"

namespace boostcomm::tools {

struct ExtraCommand {
  CLI::App* app = nullptr;  // the subcommand (never null once add*Command returned)
  // true: main initialises MPI and passes the world Communicator (see
  // withMpi in main.cc: a boostcomm::Error aborts the job with exit code 2).
  // false: `run` gets nullptr and must not touch MPI.
  bool needsMpi = true;
  std::function<int(Communicator* comm)> run;
};

ExtraCommand addFusionCommand(CLI::App& app);    // fusion_cmd.cc: GradientGroup / CollectiveFusion benchmark
ExtraCommand addReplayCommand(CLI::App& app);    // replay_cmd.cc: training replay (before/after table)
ExtraCommand addTuneCommand(CLI::App& app);      // tune_cmd.cc: autotuning sweep and cache
ExtraCommand addSimulateCommand(CLI::App& app);  // simulate_cmd.cc: simulated cluster
ExtraCommand addTraceCommand(CLI::App& app);     // trace_cmd.cc: flight-record analysis

}  // namespace boostcomm::tools
