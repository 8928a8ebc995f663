// `boostcomm`: the command-line tool. Subcommands: bench, tunables,
// algorithms, topo, version, and those of extra_commands.h (fusion, replay,
// tune, simulate). Exit codes: 0 success, 1 a bench result check failed,
// 2 bad usage or a boostcomm::Error, 3 any other failure; CLI11's own codes
// for unparsable command lines.
//
// The tool owns MPI's lifetime (MPI_Init_thread here, MPI_Finalize at exit),
// so boostcomm's finalize() leaves MPI to us and the raw-MPI baseline can run
// on MPI_COMM_WORLD alongside the library.
#include <mpi.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <functional>
#include <iostream>
#include <sstream>

#include "cli_internal.h"
#include "bench.h"
#include "boostcomm/error.h"
#include "boostcomm/version.h"
#include "cli_util.h"
#include "commands.h"
#include "extra_commands.h"

namespace bt = boostcomm::tools;

namespace {

CLI::Validator parsedBy(std::function<bool(const std::string&)> ok, std::string what, std::string desc) {
  return CLI::Validator(
      [ok = std::move(ok), what = std::move(what)](std::string& value) {
        return ok(value) ? std::string() : "'" + value + "' is not " + what;
      },
      std::move(desc));
}

// Runs body with MPI initialised. A boostcomm::Error may be raised on one rank
// only, with the others blocked in a collective: with more than one rank the
// job is aborted (exit code 2) while the communicator is still alive, so
// nothing waits on a peer that is gone.
int withMpi(int& argc, char**& argv, const std::function<int(boostcomm::Communicator&)>& body) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0;
  int size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int rc = 0;
  std::shared_ptr<boostcomm::Communicator> comm;
  try {
    comm = boostcomm::Communicator::createMpiWorld();
    rc = body(*comm);
  } catch (const bt::UsageError& e) {
    // Detected identically on every rank: report once, exit cleanly.
    if (rank == 0) std::fprintf(stderr, "boostcomm: error: %s\n", e.what());
    rc = 2;
  } catch (const boostcomm::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    std::fflush(stderr);
    if (size > 1) MPI_Abort(MPI_COMM_WORLD, 2);
    rc = 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "boostcomm: rank %d: unexpected error: %s\n", rank, e.what());
    std::fflush(stderr);
    if (size > 1) MPI_Abort(MPI_COMM_WORLD, 3);
    rc = 3;
  }
  comm.reset();
  MPI_Finalize();
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"boostcomm: collectives for distributed training, accelerated over MPI"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("boostcomm ") + boostcomm::versionString());

  // --- bench ---
  bt::BenchOptions bench;
  std::string minText = "4";
  std::string maxText = "64M";
  std::string collText = "allreduce";
  std::string dtypeText = "float32";
  std::string opText = "sum";
  const auto bytesCheck = parsedBy([](const std::string& s) { return bt::parseBytes(s).has_value(); },
                                   "a size in bytes (e.g. 8, 4K, 1M, 2G)", "BYTES");
  CLI::App* benchCmd = app.add_subcommand(
      "bench", "Time a collective over a sweep of sizes for each algorithm and raw MPI (run under mpirun)");
  benchCmd->add_option("-b,--minbytes", minText, "Smallest size S in bytes; K/M/G suffixes are powers of 1024")
      ->check(bytesCheck)
      ->capture_default_str();
  benchCmd->add_option("-e,--maxbytes", maxText, "Largest size S in bytes")->check(bytesCheck)->capture_default_str();
  benchCmd->add_option("-f,--stepfactor", bench.stepFactor, "Multiply the size by this factor each step")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  benchCmd
      ->add_option("-c,--collective", collText,
                   "allreduce, allgather, broadcast or reduce_scatter. S is the message for allreduce/broadcast "
                   "and the whole array for allgather/reduce_scatter (nccl-tests convention)")
      ->check(parsedBy([](const std::string& s) { return boostcomm::parseCollective(s).has_value(); },
                       "a collective (allreduce, allgather, broadcast, reduce_scatter)", "COLLECTIVE"))
      ->capture_default_str();
  benchCmd->add_option("-d,--dtype", dtypeText, "float32, float64, float16, bfloat16, int32, int64 or uint8")
      ->check(parsedBy([](const std::string& s) { return boostcomm::parseDataType(s).has_value(); },
                       "a dtype (float32, float64, float16, bfloat16, int32, int64, uint8)", "DTYPE"))
      ->capture_default_str();
  benchCmd->add_option("-o,--op", opText, "sum, avg, min, max or prod (reducing collectives)")
      ->check(parsedBy([](const std::string& s) { return boostcomm::parseReduceOp(s).has_value(); },
                       "a reduce op (sum, avg, min, max, prod)", "OP"))
      ->capture_default_str();
  benchCmd->add_option("-n,--iters", bench.iters, "Timed calls per block")->capture_default_str();
  benchCmd->add_option("-w,--warmup", bench.warmup, "Untimed calls before timing each (size, algorithm)")
      ->capture_default_str();
  benchCmd->add_flag("--interleave", bench.interleave,
                     "Alternate the algorithms' timed blocks within a size (block 1 of each, then block 2, ...)");
  benchCmd->add_option("--repeats", bench.repeats, "Timed blocks per (size, algorithm); the median is reported")
      ->capture_default_str();
  benchCmd->add_option("-r,--root", bench.root, "Root rank of broadcast")->capture_default_str();
  benchCmd
      ->add_option("--algos", bench.algos,
                   "Comma list of algorithms; 'selected' = the selection table's choice, 'mpi' = raw MPI on "
                   "MPI_COMM_WORLD. Default: every applicable algorithm, selected and mpi")
      ->delimiter(',');
  benchCmd
      ->add_option("--wire", bench.wires,
                   "Comma list of wire formats (off, bf16, fp16, auto): every algorithm but mpi runs once per "
                   "format, as NAME+WIRE (float32 allreduce, allgather, reduce_scatter; docs/ALGORITHMS.md, "
                   "'Wire formats')")
      ->delimiter(',');
  benchCmd->add_flag("--check,!--no-check", bench.check,
                     "Check results against a locally computed reference (default on)");
  benchCmd->add_flag("--zero-copy", bench.zeroCopy,
                     "Allocate the bench buffers with Communicator::allocateBuffer (registered shared memory: "
                     "'shm' then reads and writes them in place; every algorithm and the mpi baseline use them)");
  benchCmd->add_option("--output", bench.outputPath, "Write results as JSON (schema: docs/BENCH_JSON.md)");
  benchCmd->add_flag("--audit", bench.audit,
                     "After the sweep, print per size the selected algorithm, the fastest measured one and their "
                     "ratio; exit 3 when the selection is slower than the best by more than --audit-margin");
  benchCmd->add_flag("--fingerprints-ab", bench.fingerprintsAb,
                     "Also run every algorithm but mpi as NAME@nofp, on a second communicator with "
                     "BOOSTCOMM_FINGERPRINTS=0: the cost of the always-on mismatch check within one run "
                     "(use with --interleave)");
  benchCmd->add_option("--audit-margin", bench.auditMarginPercent, "Allowed slowdown of 'selected' in percent")
      ->capture_default_str();

  // --- tunables / algorithms / version ---
  bool markdown = false;
  CLI::App* tunablesCmd = app.add_subcommand("tunables", "List every BOOSTCOMM_* environment knob");
  tunablesCmd->add_flag("--markdown", markdown, "Print the table of docs/TUNABLES.md");
  CLI::App* algorithmsCmd = app.add_subcommand(
      "algorithms", "List the algorithms per collective and what the selection table picks per size");
  CLI::App* versionCmd = app.add_subcommand("version", "Print the boostcomm, MPI and kernel versions");
  bt::TopoOptions topo;
  CLI::App* topoCmd = app.add_subcommand(
      "topo", "Detect nodes, ranks per node, hwloc facts and measured link latency/bandwidth (run under mpirun)");
  topoCmd->add_flag("--json", topo.json, "Print the JSON topology file instead of a table");
  topoCmd->add_flag("--probe,!--no-probe", topo.probe, "Measure intra/inter-node links with ping-pong probes (default on)");
  topoCmd->add_flag("--memory,!--no-memory", topo.memory,
                    "Also measure node 0's memory: copy rates, cache, fresh pages (~2 s; default on with probes)");
  topoCmd->add_option("--probe-sizes", topo.probeSizes,
                      "Probe message sizes, e.g. 8,4K,64K,1M,4M,16M,64M (default up to 4M; add larger ones for "
                      "links shaped by a token bucket, whose bursts hide the sustained rate)")
      ->delimiter(',');
  topoCmd->add_option("--output", topo.outputPath, "Also write the JSON topology file here");
  topoCmd->add_option("--load", topo.loadPath, "Show this topology file after checking that it matches the job");

  const bt::ExtraCommand extras[] = {bt::addFusionCommand(app), bt::addReplayCommand(app),
                                     bt::addTuneCommand(app), bt::addSimulateCommand(app),
                                     bt::addTraceCommand(app)};

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // Under mpirun every rank parses the same line: let one of them speak.
    if (bt::launcherRank() != 0) {
      std::ostringstream sink;
      return app.exit(e, sink, sink);
    }
    return app.exit(e);
  }

  try {
    if (*versionCmd) return bt::runVersion();
    if (*tunablesCmd) return bt::runTunables(markdown);
  } catch (const boostcomm::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }
  for (const bt::ExtraCommand& extra : extras) {
    if (!*extra.app) continue;
    if (extra.needsMpi) return withMpi(argc, argv, [&](boostcomm::Communicator& comm) { return extra.run(&comm); });
    try {
      return extra.run(nullptr);
    } catch (const bt::UsageError& e) {
      std::fprintf(stderr, "boostcomm: error: %s\n", e.what());
      return 2;
    } catch (const boostcomm::Error& e) {
      std::fprintf(stderr, "%s\n", e.what());
      return 2;
    }
  }
  if (*algorithmsCmd) {
    return withMpi(argc, argv, [](boostcomm::Communicator& comm) { return bt::runAlgorithms(comm); });
  }
  if (*topoCmd) {
    return withMpi(argc, argv, [&](boostcomm::Communicator& comm) { return bt::runTopo(topo, comm); });
  }
  // bench: every text option was validated by its check above.
  bench.minBytes = *bt::parseBytes(minText);
  bench.maxBytes = *bt::parseBytes(maxText);
  bench.collective = *boostcomm::parseCollective(collText);
  bench.dtype = *boostcomm::parseDataType(dtypeText);
  bench.op = *boostcomm::parseReduceOp(opText);
  return withMpi(argc, argv, [&](boostcomm::Communicator& comm) { return bt::runBench(bench, comm); });
}

int boostcomm::tools::runVersion() {
  char mpi[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int length = 0;
  MPI_Get_library_version(mpi, &length);  // callable before MPI_Init (MPI-3)
  std::string mpiText(mpi, static_cast<std::size_t>(length));
  if (const auto eol = mpiText.find_first_of("\r\n"); eol != std::string::npos) mpiText.resize(eol);
  std::printf("boostcomm %s\nMPI: %s\nreduce kernels: %s\n", boostcomm::versionString(), mpiText.c_str(),
              boostcomm::core::reduceKernelIsa());
  return 0;
}
