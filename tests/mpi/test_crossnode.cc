// Mismatches and stalls across nodes, under mpirun: the fingerprint header of
// point-to-point schedules, the control channel's notices (every rank, not
// only the culprit's neighbours, reports Error{kMismatch} naming both calls)
// and its status queries (a stall report names the rank that has not
// arrived and what it last did). Shared memory is off and the layout
// declares several nodes, so no call status is shared: what the ranks of
// two real nodes see. Own main; exits non-zero when any rank saw a failure.
#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "api/mpi_comm.h"
#include "boostcomm/boostcomm.h"

namespace {

using namespace boostcomm;

int gFailures = 0;
int gRank = 0;
int gSize = 1;

// The test's own deadline: communicator creation and the test's MPI calls
// have none, so a hang there (seen once as the context-id agreement of a
// communicator created after a dozen failed ones, on the emulated cluster)
// ends the job after kStuckSeconds naming the phase, instead of waiting for
// ctest's timeout.
constexpr int kStuckSeconds = 90;
std::atomic<const char*> gPhase{"start"};
std::atomic<long long> gPhaseSince{0};

long long nowSeconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void phase(const char* what) {
  gPhase.store(what);
  gPhaseSince.store(nowSeconds());
}

void startGuard() {
  phase("start");
  std::thread([] {
    while (true) {
      std::this_thread::sleep_for(std::chrono::seconds(1));
      if (nowSeconds() - gPhaseSince.load() > kStuckSeconds) {
        std::fprintf(stderr, "rank %d: FAIL: stuck for more than %d s in: %s; ending the job\n", gRank, kStuckSeconds,
                     gPhase.load());
        std::fflush(stderr);
        MPI_Abort(MPI_COMM_WORLD, 2);
      }
    }
  }).detach();
}

void fail(const std::string& what) {
  ++gFailures;
  std::fprintf(stderr, "rank %d: FAIL: %s\n", gRank, what.c_str());
}

struct Disagreement {
  const char* name;
  int culprit;
  std::size_t count;  // the culprit's count (others: base)
  DataType dtype;
  ReduceOp op;
  std::string culpritWords;
  std::size_t base = 1000;
};

// Every rank: a good call, then a call where `d.culprit` disagrees.
void mismatchCase(const char* algorithm, const Disagreement& d) {
  phase("communicator creation");
  auto comm = detail::createCommunicatorOverMpi(MPI_COMM_WORLD);
  phase("mismatch case");
  comm->setTimeout(std::chrono::milliseconds(20000));  // a miss shows as kTimeout, not a hang
  CallOptions options;
  options.algorithm = algorithm;
  const std::string label = std::string(algorithm) + " " + d.name;
  std::vector<float> ok(777, static_cast<float>(gRank + 1));
  try {
    comm->allreduce(std::span<const float>(ok), std::span<float>(ok), ReduceOp::kSum, options);
  } catch (const Error& e) {
    fail(label + ": the good call failed: " + e.what());
    return;
  }
  const float expected = static_cast<float>(gSize * (gSize + 1) / 2);
  for (float v : ok) {
    if (v != expected) {
      fail(label + ": wrong result of the good call");
      break;
    }
  }
  const bool culprit = gRank == d.culprit;
  const std::size_t count = culprit ? d.count : d.base;
  const DataType dtype = culprit ? d.dtype : DataType::kFloat32;
  std::vector<char> buffer(count * dataTypeSize(dtype), 0);
  const auto start = std::chrono::steady_clock::now();
  std::string what = "returned normally";
  ErrorCategory category = ErrorCategory::kInternal;
  try {
    comm->allreduce(ConstView(buffer.data(), count, dtype), View(buffer.data(), count, dtype),
                    culprit ? d.op : ReduceOp::kSum, options);
  } catch (const Error& e) {
    category = e.category();
    what = e.what();
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::string baseWords = "allreduce float32 x" + std::to_string(d.base) + " sum";
  if (category != ErrorCategory::kMismatch || what.find(baseWords) == std::string::npos ||
      what.find(d.culpritWords) == std::string::npos) {
    fail(label + ": expected kMismatch naming both calls, got: " + what);
  }
  double slowest = 0;
  phase("the test's MPI_Allreduce after a case");
  MPI_Allreduce(&seconds, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  phase("communicator destruction");
  if (gRank == 0) std::printf("%-22s every rank reported within %.2f s\n", label.c_str(), slowest);
  if (gRank == (d.culprit + 1) % gSize) std::printf("  e.g. rank %d: %s\n", gRank, what.c_str());
  std::fflush(stdout);
}

// A native (backend) allreduce where one rank reduces with max and the
// others with sum: MPI returns on every rank, with no fingerprint in its
// data, so that call's result is wrong everywhere. The cross-node audit
// (every watchdog tick, the completed calls' fingerprints go to a rank on the
// next node) must find it: every rank's later calls raise kMismatch naming
// both calls, within seconds.
void auditCase() {
  phase("communicator creation (audit case)");
  auto comm = detail::createCommunicatorOverMpi(MPI_COMM_WORLD);
  phase("audit case");
  comm->setTimeout(std::chrono::milliseconds(20000));
  CallOptions options;
  options.algorithm = "native";
  const int culprit = gSize > 2 ? 1 : 0;
  std::vector<float> data(1000, 1.0f);
  const auto start = std::chrono::steady_clock::now();
  std::string what = "no error within 15 s";
  ErrorCategory category = ErrorCategory::kInternal;
  try {
    comm->allreduce(std::span<const float>(data), std::span<float>(data), ReduceOp::kSum, options);
    comm->allreduce(std::span<const float>(data), std::span<float>(data),
                    gRank == culprit ? ReduceOp::kMax : ReduceOp::kSum, options);
    while (std::chrono::steady_clock::now() - start < std::chrono::seconds(15)) {
      comm->allreduce(std::span<const float>(data), std::span<float>(data), ReduceOp::kSum, options);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  } catch (const Error& e) {
    category = e.category();
    what = e.what();
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (category != ErrorCategory::kMismatch || what.find("allreduce float32 x1000 sum, seq 1") == std::string::npos ||
      what.find("allreduce float32 x1000 max, seq 1") == std::string::npos) {
    fail("audit: expected kMismatch naming both calls of seq 1, got (" + std::to_string(seconds) + " s): " + what);
  }
  double slowest = 0;
  phase("the test's MPI_Allreduce after the audit case");
  MPI_Allreduce(&seconds, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  phase("communicator destruction (audit case)");
  if (gRank == 0) std::printf("native op mismatch    every rank reported within %.2f s: %s\n", slowest, what.c_str());
  std::fflush(stdout);
}

// Two blocking native allreduces of 1000 floats (no deadline: the direct
// backend call), the second with the last rank's own dtype, op and count:
// the error that call raised on this rank ("returned normally" if none).
struct Raised {
  ErrorCategory category = ErrorCategory::kInternal;
  std::string what = "returned normally";
};
Raised nativeDisagreement(DataType culpritType, ReduceOp culpritOp, std::size_t culpritCount) {
  phase("communicator creation (native disagreement case)");
  auto comm = detail::createCommunicatorOverMpi(MPI_COMM_WORLD);
  phase("native disagreement case");
  const bool culprit = gRank == gSize - 1;
  CallOptions options;
  options.algorithm = "native";
  std::vector<float> data(std::max<std::size_t>(culpritCount, 1000), 1.0f);
  const DataType type = culprit ? culpritType : DataType::kFloat32;
  const std::size_t count = culprit ? culpritCount : 1000;
  Raised raised;
  try {
    comm->allreduce(std::span<const float>(data.data(), 1000), std::span<float>(data.data(), 1000), ReduceOp::kSum,
                    options);
    comm->allreduce(ConstView(data.data(), count, type), View(data.data(), count, type),
                    culprit ? culpritOp : ReduceOp::kSum, options);
  } catch (const Error& e) {
    raised = {e.category(), e.what()};
  }
  phase("communicator destruction (native disagreement case)");
  return raised;
}

// A different op, or a dtype of the same size, on the last rank: the stamp
// in the call's own data makes that very call raise kMismatch on every rank,
// naming both calls (not only a later one, as the audit would).
void stampCase(DataType culpritType, ReduceOp culpritOp, const char* culpritWords) {
  const Raised r = nativeDisagreement(culpritType, culpritOp, 1000);
  if (r.category != ErrorCategory::kMismatch || r.what.find("allreduce float32 x1000 sum, seq 1") == std::string::npos ||
      r.what.find(culpritWords) == std::string::npos ||
      r.what.find("carried in the backend call's data") == std::string::npos) {
    fail(std::string("stamp: expected the call itself to raise kMismatch naming ") + culpritWords + ", got: " + r.what);
  }
  if (gRank == 0) std::printf("native %s mismatch   the call itself raised: %s\n", culpritWords, r.what.c_str());
  std::fflush(stdout);
}

// A larger count on the last rank (2 ranks: at more, a rank the backend
// keeps inside its blocking call is ended by the watchdog, as RELIABILITY.md
// says). The other rank's backend reports a truncation, which the transport
// raises as TruncationError and the direct route turns into kMismatch naming
// that rank's call; the culprit finds the stamps differ.
void truncationCase() {
  const Raised r = nativeDisagreement(DataType::kFloat32, ReduceOp::kSum, 1001);
  const std::string expected = gRank == gSize - 1 ? "allreduce float32 x1001 sum, seq 1"
                                                  : "another rank's payload of this call is larger";
  if (r.category != ErrorCategory::kMismatch || r.what.find(expected) == std::string::npos) {
    fail("truncation: expected kMismatch saying '" + expected + "', got: " + r.what);
  }
  if (gRank == 0) std::printf("native count+1       the call itself raised: %s\n", r.what.c_str());
  std::fflush(stdout);
}

// The last rank never calls; the others time out with a report that names
// it and what it last started and completed (from the control channel).
void stallCase() {
  phase("communicator creation (stall case)");
  auto comm = detail::createCommunicatorOverMpi(MPI_COMM_WORLD);
  phase("stall case");
  const int missing = gSize - 1;
  CallOptions options;
  options.algorithm = "ring";
  std::vector<float> ok(100, 1.0f);
  comm->allreduce(std::span<const float>(ok), std::span<float>(ok), ReduceOp::kSum, options);
  if (gRank == missing) {
    std::this_thread::sleep_for(std::chrono::milliseconds(6000));  // its watchdog still answers
  } else {
    comm->setTimeout(std::chrono::milliseconds(4000));
    std::string what = "returned normally";
    try {
      comm->allreduce(std::span<const float>(ok), std::span<float>(ok), ReduceOp::kSum, options);
    } catch (const Error& e) {
      what = e.what();
    }
    const std::string named = "rank " + std::to_string(missing) + " (pid ";
    if (what.find("timeout") == std::string::npos || what.find(named) == std::string::npos ||
        what.find("last completed seq 0 (allreduce float32 x100 sum)") == std::string::npos) {
      fail("stall: expected a timeout naming rank " + std::to_string(missing) + " and its last call, got: " + what);
    }
    if (gRank == 0) std::printf("stall report: %s\n", what.c_str());
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

// The last rank's arguments fail its own checks (send and recv counts
// differ); the others entered the call. On one node they read the rejection
// in its call status and fail with kMismatch naming it after the grace
// (2 s), not at the deadline (20 s here). Then every rank passes the same
// bad call and retries at once: no false report.
void rejectedCase() {
  phase("communicator creation (rejected case)");
  auto comm = detail::createCommunicatorOverMpi(MPI_COMM_WORLD);
  phase("rejected case");
  comm->setTimeout(std::chrono::milliseconds(20000));
  std::vector<float> ok(1000, 1.0f), shortOut(999);
  comm->allreduce(std::span<const float>(ok), std::span<float>(ok), ReduceOp::kSum);
  // Every rank: the same bad call, then a good one at once.
  bool allRejected = false;
  try {
    comm->allreduce(std::span<const float>(ok), std::span<float>(shortOut), ReduceOp::kSum);
  } catch (const Error& e) {
    allRejected = e.category() == ErrorCategory::kInvalidArgument;
  }
  if (!allRejected) fail("rejected: the bad call on every rank was not kInvalidArgument");
  std::fill(ok.begin(), ok.end(), 1.0f);
  try {
    comm->allreduce(std::span<const float>(ok), std::span<float>(ok), ReduceOp::kSum);
    if (ok[0] != static_cast<float>(gSize)) fail("rejected: wrong result after every rank rejected the same call");
  } catch (const Error& e) {
    fail(std::string("rejected: the retry after a rejection on every rank failed: ") + e.what());
  }
  const int culprit = gSize - 1;
  const auto start = std::chrono::steady_clock::now();
  std::string what = "returned normally";
  ErrorCategory category = ErrorCategory::kInternal;
  try {
    if (gRank == culprit) {
      comm->allreduce(std::span<const float>(ok), std::span<float>(shortOut), ReduceOp::kSum);
    } else {
      comm->allreduce(std::span<const float>(ok), std::span<float>(ok), ReduceOp::kSum);
    }
  } catch (const Error& e) {
    category = e.category();
    what = e.what();
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (gRank == culprit) {
    if (category != ErrorCategory::kInvalidArgument) fail("rejected: the culprit got: " + what);
  } else if (category != ErrorCategory::kMismatch || what.find("REJECTED") == std::string::npos ||
             what.find("rank " + std::to_string(culprit) + ": allreduce float32 x999 sum REJECTED") == std::string::npos ||
             seconds > 10) {
    fail("rejected: expected kMismatch naming rank " + std::to_string(culprit) + "'s rejected call within 10 s, got (" +
         std::to_string(seconds) + " s): " + what);
  }
  double slowest = 0;
  MPI_Allreduce(&seconds, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  if (gRank == 0) std::printf("rejected on one rank  every rank reported within %.2f s: %s\n", slowest, what.c_str());
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &gRank);
  MPI_Comm_size(MPI_COMM_WORLD, &gSize);
  if (provided < MPI_THREAD_MULTIPLE) {
    if (gRank == 0) std::printf("MPI lacks MPI_THREAD_MULTIPLE: no control channel; skipped\n");
    MPI_Finalize();
    return 0;
  }
  startGuard();
  // No shared call status (shm off) and several declared nodes, unless
  // --one-node: every rank on this node with shared memory, where node peers
  // check each other's fingerprints in their published call status instead
  // of header messages (executor.h), and the stall report reads them there.
  const bool oneNode = argc > 1 && std::string(argv[1]) == "--one-node";
  if (oneNode) {
    --argc;
    ++argv;
  } else {
    setenv("BOOSTCOMM_SHM", "0", 1);
    setenv("BOOSTCOMM_RANKS_PER_NODE", gSize % 2 == 0 ? "2" : "1", 1);
  }
  const int last = gSize - 1;
  const int second = gSize > 2 ? 1 : 0;
  const Disagreement cases[] = {
      {"count+1", last, 1001, DataType::kFloat32, ReduceOp::kSum, "allreduce float32 x1001 sum"},
      {"count-1", second, 999, DataType::kFloat32, ReduceOp::kSum, "allreduce float32 x999 sum"},
      {"dtype", last, 1000, DataType::kFloat64, ReduceOp::kSum, "allreduce float64 x1000 sum"},
      {"op", second, 1000, DataType::kFloat32, ReduceOp::kMax, "allreduce float32 x1000 max"},
  };
  // First messages of 256 bytes (64 floats per rank), in the window where
  // no header travels inline (executor.h): node peers read each other's
  // status, and where the culprit's first message is inline (count+1,
  // count*2) the others meet a header in its place, or it meets a message
  // without one; either way both calls must be named on every rank.
  const std::size_t w = 64 * static_cast<std::size_t>(gSize);
  auto words = [](std::size_t n, const char* type, const char* op) {
    return std::string("allreduce ") + type + " x" + std::to_string(n) + " " + op;
  };
  const Disagreement window[] = {
      {"window count+1", last, w + 1, DataType::kFloat32, ReduceOp::kSum, words(w + 1, "float32", "sum"), w},
      {"window count-1", second, w - 1, DataType::kFloat32, ReduceOp::kSum, words(w - 1, "float32", "sum"), w},
      {"window count*2", last, 2 * w, DataType::kFloat32, ReduceOp::kSum, words(2 * w, "float32", "sum"), w},
      {"window op", second, w, DataType::kFloat32, ReduceOp::kMax, words(w, "float32", "max"), w},
  };
  std::vector<const char*> algorithms = {"ring", "rhd"};
  if (gSize % 2 == 0 && gSize >= 4 && !oneNode) algorithms.push_back("hier");
  // Optional argument: run only the cases whose label contains it ("rhd op", "stall").
  const std::string only = argc > 1 ? argv[1] : "";
  for (const char* algorithm : algorithms) {
    for (const Disagreement& d : cases) {
      if (only.empty() || (std::string(algorithm) + " " + d.name).find(only) != std::string::npos)
        mismatchCase(algorithm, d);
    }
    for (const Disagreement& d : window) {
      if (oneNode && (only.empty() || (std::string(algorithm) + " " + d.name).find(only) != std::string::npos))
        mismatchCase(algorithm, d);
    }
  }
  if (gSize >= 2 && (only.empty() || only == "stall")) stallCase();
  if (!oneNode && gSize >= 2 && (only.empty() || only == "audit")) auditCase();
  if (!oneNode && gSize >= 2 && (only.empty() || only == "stamp")) {
    stampCase(DataType::kFloat32, ReduceOp::kMax, "allreduce float32 x1000 max, seq 1");
    stampCase(DataType::kInt32, ReduceOp::kSum, "allreduce int32 x1000 sum, seq 1");
  }
  if (!oneNode && gSize == 2 && (only.empty() || only == "truncation")) truncationCase();
  if (oneNode && gSize >= 2 && (only.empty() || only == "rejected")) rejectedCase();
  int failures = 0;
  phase("the final MPI_Allreduce");
  MPI_Allreduce(&gFailures, &failures, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (gRank == 0) std::printf("%s: %d failure(s)\n", failures == 0 ? "PASS" : "FAIL", failures);
  MPI_Finalize();
  return failures == 0 ? 0 : 1;
}
