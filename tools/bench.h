// `boostcomm bench`: an nccl-tests style sweep of one collective over message
// sizes and algorithms, with the raw MPI call on MPI_COMM_WORLD as baseline.
//
// Terms used by the bench files:
//   S (bytes)      the nccl-tests size: the message for allreduce/broadcast,
//                  the whole gathered/scattered array for allgather/reduce_scatter.
//   count          elements of S; countPerRank = count / ranks for
//                  allgather/reduce_scatter (one rank's contribution / share).
//   block          `iters` back-to-back calls timed together; repeated
//                  `repeats` times, the median block is reported.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "boostcomm/communicator.h"
#include "boostcomm/types.h"

namespace boostcomm::tools {

struct BenchOptions {
  std::size_t minBytes = 4;
  std::size_t maxBytes = std::size_t{64} << 20;
  std::size_t stepFactor = 4;
  Collective collective = Collective::kAllreduce;
  DataType dtype = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  int iters = 20;
  int warmup = 5;
  int repeats = 3;
  bool interleave = false;  // alternate the algorithms' timed blocks within a size
  int root = 0;
  std::vector<std::string> algos;  // empty: every applicable one + "selected" + "mpi"
  // --wire: each algorithm (but mpi) runs once per listed wire format
  // ("off", "bf16", "fp16", "auto") as "NAME+WIRE"; empty: the
  // communicator's (BOOSTCOMM_WIRE_DTYPE). --algos may name "NAME+WIRE" itself.
  std::vector<std::string> wires;
  bool check = true;
  bool zeroCopy = false;  // buffers from Communicator::allocateBuffer (registered, zero-copy for "shm")
  std::string outputPath;  // JSON; empty: none
  bool audit = false;      // compare 'selected' with the best measured algorithm per size
  double auditMarginPercent = 10;  // --audit fails when selected is slower than best by more
  // --fingerprints-ab: each algorithm (but mpi) also runs as "NAME@nofp" on a
  // second communicator built with BOOSTCOMM_FINGERPRINTS=0, so the cost of
  // the always-on check is measured within one run (best with --interleave).
  bool fingerprintsAb = false;
};

// 'selected' runs at least this many warm-up calls: online selection
// (docs/TUNING.md) tries its candidates in the first calls of a size class.
inline constexpr int kSelectedMinWarmup = 15;  // 4 candidates x 3 rounds; the 13th call runs the winner

// "NAME+WIRE@nofp" entries of --algos: the algorithm, the wire format and the
// fingerprints-off parts (the last two optional).
inline constexpr const char* kNoFingerprintsSuffix = "@nofp";
inline bool fingerprintsOff(const std::string& entry) {
  const std::string_view suffix = kNoFingerprintsSuffix;
  return entry.size() > suffix.size() && entry.compare(entry.size() - suffix.size(), suffix.size(), suffix) == 0;
}
inline std::string algoPart(const std::string& entry) { return entry.substr(0, entry.find_first_of("+@")); }
inline std::string wirePart(const std::string& entry) {
  const std::size_t plus = entry.find('+');
  if (plus == std::string::npos) return std::string();
  return entry.substr(plus + 1, entry.find('@', plus) == std::string::npos ? std::string::npos
                                                                            : entry.find('@', plus) - plus - 1);
}

// Algorithm names with a special meaning in --algos.
inline constexpr const char* kAlgoSelected = "selected";  // no CallOptions::algorithm
inline constexpr const char* kAlgoMpi = "mpi";            // raw MPI on MPI_COMM_WORLD

struct BenchMeta {
  int ranks = 0;
  BenchOptions options;
  double memcpyGBps = 0;
  std::string hostname;
  std::string version;
  std::string date;  // ISO 8601, UTC
  std::string reduceIsa;
  std::string mpiLibrary;
};

// One (size, algorithm) measurement; identical on every rank.
struct BenchRecord {
  std::string algorithm;  // as requested: "ring", "selected", "mpi", ...
  std::string ranAlgorithm;  // what ran (Work::algorithm()); "mpi" for the baseline
  std::string wire;     // as requested ("bf16", ...; empty: the communicator's)
  std::string ranWire;  // what the payload travelled as (Work::wireFormat()): "off", "bf16", "fp16"
  // "selected" records: what Communicator::selectedAlgorithm reports for the
  // size (equal to ranAlgorithm, or selection is broken); empty otherwise.
  std::string selectedAlgorithm;
  std::size_t bytes = 0;  // S after rounding to whole elements
  std::size_t count = 0;
  std::size_t countPerRank = 0;
  double timeUs = 0;  // per call, median over repeats of the max over ranks
  double timeUsMin = 0;  // fastest / slowest repeat, to show the noise
  double timeUsMax = 0;
  double algbwGBps = 0;
  double busbwGBps = 0;
  std::string check;  // "ok", "fail", "skipped"
};

// Runs the sweep on the MPI world `comm` and finalizes it; returns the exit code
// (0 all checks passed, 1 some check failed, kAuditFailedExit: --audit found
// a size where the selection is slower than the best by more than the
// margin). Throws UsageError / Error.
inline constexpr int kAuditFailedExit = 3;
int runBench(const BenchOptions& options, Communicator& comm);

// One size of a sweep after rounding to whole elements (and to a multiple
// of the rank count for allgather/reduce_scatter); sizes that round alike
// appear once. Shared by bench and simulate.
struct SizePlan {
  std::size_t bytes = 0;
  std::size_t count = 0;
  std::size_t countPerRank = 0;
};
std::vector<SizePlan> planSizes(const BenchOptions& o, int ranks);

// --- helpers shared by bench.cc and bench_report.cc ---

// busbw / algbw for the collective (nccl-tests convention).
double busBandwidthFactor(Collective coll, int ranks);
bool isReducing(Collective coll);

void printBenchHeader(const BenchMeta& meta, const std::vector<std::string>& algos);
// One table block for all algorithms of one size; "vs_mpi" = time_mpi / time.
void printSizeBlock(const BenchMeta& meta, const std::vector<BenchRecord>& records);
void printBenchSummary(const BenchMeta& meta, const std::vector<BenchRecord>& records);
// --audit: per size, the selected algorithm's time against the fastest
// measured algorithm (not counting 'selected' and 'mpi'); rank 0 prints the
// table when `print`. Returns the number of sizes slower than the best by
// more than the margin.
int auditSelection(const BenchMeta& meta, const std::vector<BenchRecord>& records, bool print);
void writeBenchJson(const BenchMeta& meta, const std::vector<BenchRecord>& records, const std::string& path);

// Single-thread memcpy bandwidth in GB/s (1e9 B/s): median of 5 copies of 64 MiB.
double measureMemcpyGBps();

}  // namespace boostcomm::tools
