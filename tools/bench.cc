// The sweep of `boostcomm bench`: plan sizes, allocate once, and for every
// (size, algorithm) run one checked call, warm up, time `repeats` blocks of
// `iters` calls, check again, and report the median block (with --interleave
// the blocks of a size's algorithms alternate).
//
// Why the details:
// - Each block's time is the max over ranks (MPI_Allreduce MAX): a collective
//   is done when its slowest rank is, and every rank then reports the same number.
// - A barrier (raw MPI) precedes each block so ranks start together; it is
//   the same barrier for every algorithm, the baseline included.
// - Results are checked on a call whose output was first filled with a
//   sentinel (so a no-op cannot pass) and again after the timed calls (so
//   state reused across calls, e.g. cached schedules, is covered too).
// - Buffers are allocated and touched once for the largest size: page faults
//   and malloc of fresh mmaps must not be timed (glibc serves >= 32 MiB with fresh mmaps).
#include "bench.h"

#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <limits>
#include <memory>

#include "cli_internal.h"
#include "bench_data.h"
#include "bench_mpi.h"
#include "boostcomm/communicator.h"
#include "boostcomm/version.h"
#include "cli_util.h"

namespace boostcomm::tools {
namespace {

using Clock = std::chrono::steady_clock;

constexpr std::size_t kAlignBytes = 4096;

// Frees heap buffers, or registered ones (--zero-copy) through their communicator.
struct FreeDeleter {
  Communicator* registeredWith = nullptr;
  void operator()(std::byte* p) const {
    if (registeredWith != nullptr) {
      registeredWith->freeBuffer(p);
    } else {
      std::free(p);
    }
  }
};
using AlignedBuffer = std::unique_ptr<std::byte, FreeDeleter>;

AlignedBuffer allocateTouched(std::size_t bytes) {
  const std::size_t rounded = std::max(kAlignBytes, (bytes + kAlignBytes - 1) / kAlignBytes * kAlignBytes);
  auto* p = static_cast<std::byte*>(std::aligned_alloc(kAlignBytes, rounded));
  if (p == nullptr) throw UsageError("cannot allocate " + std::to_string(rounded) + " bytes for the bench buffers");
  std::memset(p, 0, rounded);  // first touch now, not inside a timed call
  return AlignedBuffer(p);
}

// --zero-copy: the buffers live in the communicator's shared segment
// (Communicator::allocateBuffer, collective), so "shm" reads them in place.
AlignedBuffer allocateRegistered(Communicator& comm, std::size_t bytes) {
  auto* p = static_cast<std::byte*>(comm.allocateBuffer(std::max<std::size_t>(bytes, 1)));
  std::memset(p, 0, bytes);
  return AlignedBuffer(p, FreeDeleter{&comm});
}

// Each entry but mpi once per --wire format, as "NAME+WIRE".
std::vector<std::string> withWires(const BenchOptions& o, const std::vector<std::string>& algos) {
  for (const std::string& w : o.wires) {
    if (!parseWireFormat(w)) throw UsageError("--wire: '" + w + "' is not a wire format (off, bf16, fp16, auto)");
  }
  if (o.wires.empty()) return algos;
  std::vector<std::string> out;
  for (const std::string& a : algos) {
    if (a == kAlgoMpi || !wirePart(a).empty()) {
      out.push_back(a);
      continue;
    }
    for (const std::string& w : o.wires) out.push_back(a + "+" + w);
  }
  return out;
}

std::vector<std::string> resolveAlgos(const BenchOptions& o, const Communicator& comm) {
  const std::vector<std::string> available = comm.algorithms(o.collective);
  std::vector<std::string> algos;
  if (o.algos.empty()) {
    algos = available;
    algos.emplace_back(kAlgoSelected);
    algos.emplace_back(kAlgoMpi);
    return withWires(o, algos);
  }
  for (const std::string& entry : o.algos) {
    const std::string name = algoPart(entry);
    if (const std::string w = wirePart(entry); !w.empty() && (!parseWireFormat(w) || name == kAlgoMpi)) {
      throw UsageError("--algos: '" + entry + "': after '+' comes a wire format (off, bf16, fp16, auto), and "
                       "not for mpi");
    }
    const bool known = name == kAlgoSelected || name == kAlgoMpi ||
                       std::find(available.begin(), available.end(), name) != available.end();
    if (!known) {
      std::string list;
      for (const auto& a : available) list += a + ", ";
      throw UsageError("--algos: '" + name + "' cannot run " + std::string(toString(o.collective)) + " with " +
                       std::to_string(comm.size()) + (comm.size() == 1 ? " rank" : " ranks") + "; choose from " + list + kAlgoSelected + ", " +
                       kAlgoMpi);
    }
    if (std::find(algos.begin(), algos.end(), entry) == algos.end()) algos.push_back(entry);
  }
  return withWires(o, algos);
}

// --fingerprints-ab: every entry but mpi followed by its "@nofp" twin.
std::vector<std::string> withFingerprintTwins(const BenchOptions& o, const std::vector<std::string>& algos) {
  if (!o.fingerprintsAb) return algos;
  std::vector<std::string> out;
  for (const std::string& a : algos) {
    out.push_back(a);
    if (a != kAlgoMpi && !fingerprintsOff(a)) out.push_back(a + kNoFingerprintsSuffix);
  }
  return out;
}

// The communicator of the "@nofp" entries: the world again, built with
// fingerprints off (the tunable is read when a communicator is built).
std::shared_ptr<Communicator> createFingerprintsOffWorld() {
  core::setTunableOverride("BOOSTCOMM_FINGERPRINTS", "0");
  std::shared_ptr<Communicator> off;
  try {
    off = Communicator::createMpiWorld();
  } catch (...) {
    core::clearTunableOverride("BOOSTCOMM_FINGERPRINTS");
    throw;
  }
  core::clearTunableOverride("BOOSTCOMM_FINGERPRINTS");
  return off;
}

void validate(const BenchOptions& o, int ranks) {
  if (o.minBytes > o.maxBytes) throw UsageError("--minbytes must not exceed --maxbytes");
  if (o.stepFactor < 2 && o.minBytes != o.maxBytes) throw UsageError("--stepfactor must be at least 2");
  if (o.iters < 1) throw UsageError("--iters must be at least 1");
  if (o.warmup < 0) throw UsageError("--warmup must not be negative");
  if (o.repeats < 1) throw UsageError("--repeats must be at least 1");
  if (o.audit && o.auditMarginPercent < 0) throw UsageError("--audit-margin must not be negative");
  if (o.audit && !o.algos.empty() &&
      std::find(o.algos.begin(), o.algos.end(), std::string(kAlgoSelected)) == o.algos.end()) {
    throw UsageError("--audit compares 'selected' with the other algorithms: add 'selected' to --algos");
  }
  if (o.collective == Collective::kBarrier) throw UsageError("--collective barrier has no payload to sweep");
  if (o.fingerprintsAb && o.zeroCopy) {
    throw UsageError("--fingerprints-ab cannot be combined with --zero-copy (buffers registered with one "
                     "communicator)");
  }
  if (o.collective == Collective::kBroadcast && (o.root < 0 || o.root >= ranks)) {
    throw UsageError("--root " + std::to_string(o.root) + " is not a rank of the " + std::to_string(ranks) +
                     "-rank world");
  }
  if (isReducing(o.collective) && o.op == ReduceOp::kAvg && !isFloatingPoint(o.dtype)) {
    throw UsageError("--op avg is only defined for floating-point dtypes, not " + std::string(toString(o.dtype)));
  }
}

class Sweep {
 public:
  // offComm: the communicator of "@nofp" entries (null when there are none).
  Sweep(const BenchOptions& o, Communicator& comm, Communicator* offComm, const std::vector<SizePlan>& plans)
      : o_(o), comm_(comm), off_(offComm), mpi_(o.dtype, o.op) {
    std::size_t sendBytes = 0;
    std::size_t recvBytes = 0;
    for (const SizePlan& p : plans) {
      const std::size_t perRankBytes = p.countPerRank * dataTypeSize(o.dtype);
      sendBytes = std::max(sendBytes, o.collective == Collective::kAllgather ? perRankBytes : p.bytes);
      recvBytes = std::max(recvBytes, o.collective == Collective::kReduceScatter ? perRankBytes : p.bytes);
    }
    if (o.zeroCopy) {
      if (o.collective != Collective::kBroadcast) send_ = allocateRegistered(comm, sendBytes);
      recv_ = allocateRegistered(comm, recvBytes);
    } else {
      if (o.collective != Collective::kBroadcast) send_ = allocateTouched(sendBytes);
      recv_ = allocateTouched(recvBytes);
    }
  }

  BenchRecord measure(const SizePlan& plan, const std::string& algo) {
    std::size_t mismatches = 0;
    BenchRecord r = begin(plan, algo, mismatches);
    std::vector<double> blockUs;
    for (int rep = 0; rep < o_.repeats; ++rep) blockUs.push_back(timeBlock(plan, algo));
    if (o_.check) mismatches += verify(plan, algo);
    finish(r, blockUs, mismatches);
    return r;
  }

  // --interleave: block 1 of every algorithm, then block 2 of every one, ...:
  // a slow spell of a shared machine then hits all algorithms of a size alike,
  // and their ratios (tuned vs best, vs the baseline) are what it measures.
  std::vector<BenchRecord> measureInterleaved(const SizePlan& plan, const std::vector<std::string>& algos) {
    std::vector<BenchRecord> records;
    std::vector<std::size_t> mismatches(algos.size(), 0);
    for (std::size_t a = 0; a < algos.size(); ++a) records.push_back(begin(plan, algos[a], mismatches[a]));
    std::vector<std::vector<double>> blockUs(algos.size());
    for (int rep = 0; rep < o_.repeats; ++rep) {
      for (std::size_t a = 0; a < algos.size(); ++a) {
        prepareInputs(plan);  // the previous algorithm's output must not pass this one's check
        blockUs[a].push_back(timeBlock(plan, algos[a]));
        if (o_.check && rep + 1 == o_.repeats) mismatches[a] += verify(plan, algos[a]);
      }
    }
    for (std::size_t a = 0; a < algos.size(); ++a) finish(records[a], blockUs[a], mismatches[a]);
    return records;
  }

 private:
  // Inputs, one checked call (which also names the algorithm that ran), warm-up.
  BenchRecord begin(const SizePlan& plan, const std::string& algo, std::size_t& mismatches) {
    BenchRecord r;
    r.algorithm = algo;
    r.bytes = plan.bytes;
    r.count = plan.count;
    r.countPerRank = plan.countPerRank;
    // Warm-up first: the checked call that names the algorithm then sees
    // the settled selection (BOOSTCOMM_TUNING_CACHE is read at the first
    // call; online selection decides within a size's first calls).
    prepareInputs(plan);
    const int warmup = algoPart(algo) == kAlgoSelected ? std::max(o_.warmup, kSelectedMinWarmup) : o_.warmup;
    for (int i = 0; i < warmup; ++i) callOnce(plan, algo, false);
    prepareInputs(plan);
    r.ranAlgorithm = callOnce(plan, algo, /*wantName=*/true, &r.ranWire);
    r.wire = wirePart(algo);
    if (algoPart(algo) == kAlgoSelected) r.selectedAlgorithm = comm_.selectedAlgorithm(o_.collective, plan.bytes);
    mismatches = o_.check ? verify(plan, algo) : 0;
    return r;
  }

  // One timed block of `iters` calls after a barrier: per-call time, max over ranks.
  double timeBlock(const SizePlan& plan, const std::string& algo) {
    MPI_Barrier(MPI_COMM_WORLD);
    const auto start = Clock::now();
    for (int i = 0; i < o_.iters; ++i) callOnce(plan, algo, false);
    double elapsedUs = std::chrono::duration<double, std::micro>(Clock::now() - start).count();
    MPI_Allreduce(MPI_IN_PLACE, &elapsedUs, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return elapsedUs / o_.iters;
  }

  void finish(BenchRecord& r, const std::vector<double>& blockUs, std::size_t mismatches) {
    int failed = mismatches > 0 ? 1 : 0;
    MPI_Allreduce(MPI_IN_PLACE, &failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    r.check = !o_.check ? "skipped" : failed != 0 ? "fail" : "ok";
    r.timeUs = median(blockUs);
    r.timeUsMin = *std::min_element(blockUs.begin(), blockUs.end());
    r.timeUsMax = *std::max_element(blockUs.begin(), blockUs.end());
    r.algbwGBps = r.timeUs > 0 ? static_cast<double>(r.bytes) / (r.timeUs * 1e3) : 0.0;
    r.busbwGBps = r.algbwGBps * busBandwidthFactor(o_.collective, comm_.size());
  }

  std::size_t resultCount(const SizePlan& plan) const {
    return o_.collective == Collective::kReduceScatter ? plan.countPerRank : plan.count;
  }

  // Inputs are rewritten for every algorithm so a buggy one that scribbles
  // on its send buffer cannot fail the next algorithm's check. Outputs get
  // the sentinel (broadcast: on every rank but the root, whose buffer is the input).
  void prepareInputs(const SizePlan& plan) {
    const int rank = comm_.rank();
    switch (o_.collective) {
      case Collective::kAllreduce:
      case Collective::kReduceScatter: fillInput(send_.get(), plan.count, o_.dtype, o_.op, rank, 0); break;
      case Collective::kAllgather: fillInput(send_.get(), plan.countPerRank, o_.dtype, o_.op, rank, 0); break;
      case Collective::kBroadcast:
        if (rank == o_.root) fillInput(recv_.get(), plan.count, o_.dtype, o_.op, rank, 0);
        else fillSentinel(recv_.get(), plan.count, o_.dtype);
        return;
      case Collective::kBarrier: return;
    }
    fillSentinel(recv_.get(), resultCount(plan), o_.dtype);
  }

  std::size_t verify(const SizePlan& plan, const std::string& algo) {
    Expectation e;
    e.collective = o_.collective;
    e.dtype = o_.dtype;
    e.op = o_.op;
    e.ranks = comm_.size();
    e.rank = comm_.rank();
    e.root = o_.root;
    e.countPerRank = plan.countPerRank;
    // A 16-bit wire rounds what crosses it (the inputs are small integers,
    // so sums stay exact; kAvg quotients round once more).
    const auto wire = wirePart(algo).empty() ? comm_.wireFormat() : *parseWireFormat(wirePart(algo));
    if (wire != WireFormat::kOff) e.wireRoundoff = wire == WireFormat::kFp16 ? 0x1p-11 : 0x1p-8;
    return verifyResult(recv_.get(), resultCount(plan), e, algo.c_str());
  }

  // One collective call. With wantName the library call goes through the
  // *Async form to learn which algorithm really ran (Work::algorithm()).
  std::string callOnce(const SizePlan& plan, const std::string& entry, bool wantName, std::string* ranWire = nullptr) {
    const std::string algo = algoPart(entry);
    const DataType t = o_.dtype;
    if (algo == kAlgoMpi) {
      switch (o_.collective) {
        case Collective::kAllreduce: mpi_.allreduce(send_.get(), recv_.get(), plan.count); break;
        case Collective::kAllgather: mpi_.allgather(send_.get(), recv_.get(), plan.countPerRank); break;
        case Collective::kBroadcast: mpi_.broadcast(recv_.get(), plan.count, o_.root); break;
        case Collective::kReduceScatter: mpi_.reduceScatter(send_.get(), recv_.get(), plan.countPerRank); break;
        case Collective::kBarrier: break;
      }
      if (ranWire != nullptr) *ranWire = "off";
      return kAlgoMpi;
    }
    CallOptions options;
    if (algo != kAlgoSelected) options.algorithm = algo;
    if (const std::string w = wirePart(entry); !w.empty()) options.wire = parseWireFormat(w);
    const ConstView send(send_.get(), o_.collective == Collective::kAllgather ? plan.countPerRank : plan.count, t);
    const View recv(recv_.get(), resultCount(plan), t);
    Communicator& comm = fingerprintsOff(entry) ? *off_ : comm_;
    if (!wantName) {
      switch (o_.collective) {
        case Collective::kAllreduce: comm.allreduce(send, recv, o_.op, options); break;
        case Collective::kAllgather: comm.allgather(send, recv, options); break;
        case Collective::kBroadcast: comm.broadcast(recv, o_.root, options); break;
        case Collective::kReduceScatter: comm.reduceScatter(send, recv, o_.op, options); break;
        case Collective::kBarrier: break;
      }
      return algo;
    }
    Work work;
    switch (o_.collective) {
      case Collective::kAllreduce: work = comm.allreduceAsync(send, recv, o_.op, options); break;
      case Collective::kAllgather: work = comm.allgatherAsync(send, recv, options); break;
      case Collective::kBroadcast: work = comm.broadcastAsync(recv, o_.root, options); break;
      case Collective::kReduceScatter: work = comm.reduceScatterAsync(send, recv, o_.op, options); break;
      case Collective::kBarrier: break;
    }
    const char* ran = work.valid() ? work.algorithm() : nullptr;
    std::string name = ran != nullptr ? ran : algo;
    if (ranWire != nullptr) *ranWire = work.valid() ? std::string(toString(work.wireFormat())) : "off";
    if (work.valid()) work.wait(options.timeout);
    return name;
  }

  const BenchOptions& o_;
  Communicator& comm_;
  Communicator* off_;
  MpiBaseline mpi_;
  AlignedBuffer send_;
  AlignedBuffer recv_;
};

std::string hostName() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "unknown";
  return name;
}

std::string utcDate() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

std::string mpiLibraryVersion() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int length = 0;
  MPI_Get_library_version(text, &length);
  std::string s(text, static_cast<std::size_t>(length));
  if (const auto eol = s.find_first_of("\r\n,"); eol != std::string::npos) s.resize(eol);
  return s;
}

}  // namespace

std::vector<SizePlan> planSizes(const BenchOptions& o, int ranks) {
  const std::size_t elt = dataTypeSize(o.dtype);
  const bool perRank = o.collective == Collective::kAllgather || o.collective == Collective::kReduceScatter;
  const std::size_t unit = perRank ? elt * static_cast<std::size_t>(ranks) : elt;
  std::vector<SizePlan> plans;
  for (std::size_t s = o.minBytes; s <= o.maxBytes;) {
    SizePlan p;
    p.count = s / unit * (perRank ? static_cast<std::size_t>(ranks) : 1);
    p.countPerRank = perRank ? p.count / static_cast<std::size_t>(ranks) : p.count;
    p.bytes = p.count * elt;
    if (plans.empty() || plans.back().bytes != p.bytes) plans.push_back(p);
    if (s > std::numeric_limits<std::size_t>::max() / o.stepFactor) break;
    s = s == 0 ? 1 : s * o.stepFactor;  // -b 0 measures the empty call, then 1, f, f^2 ...
  }
  return plans;
}

bool isReducing(Collective coll) { return coll == Collective::kAllreduce || coll == Collective::kReduceScatter; }

double busBandwidthFactor(Collective coll, int ranks) {
  const double n = ranks;
  switch (coll) {
    case Collective::kAllreduce: return ranks > 1 ? 2.0 * (n - 1) / n : 0.0;
    case Collective::kAllgather:
    case Collective::kReduceScatter: return ranks > 1 ? (n - 1) / n : 0.0;
    case Collective::kBroadcast: return 1.0;
    case Collective::kBarrier: return 0.0;
  }
  return 0.0;
}

double measureMemcpyGBps() {
  constexpr std::size_t kBytes = std::size_t{64} << 20;
  constexpr int kRuns = 5;
  AlignedBuffer src = allocateTouched(kBytes);
  AlignedBuffer dst = allocateTouched(kBytes);
  std::memset(src.get(), 1, kBytes);
  std::vector<double> seconds;
  for (int i = 0; i < kRuns; ++i) {
    const auto start = Clock::now();
    std::memcpy(dst.get(), src.get(), kBytes);
    // Keep the compiler from proving the copy dead.
    asm volatile("" : : "r"(dst.get()) : "memory");
    seconds.push_back(std::chrono::duration<double>(Clock::now() - start).count());
  }
  return static_cast<double>(kBytes) / median(seconds) / 1e9;
}

int runBench(const BenchOptions& options, Communicator& comm) {
  const int ranks = comm.size();
  const bool printer = comm.rank() == 0;
  validate(options, ranks);
  const std::vector<std::string> algos = withFingerprintTwins(options, resolveAlgos(options, comm));
  const std::vector<SizePlan> plans = planSizes(options, ranks);
  const bool hasMpi = std::find(algos.begin(), algos.end(), kAlgoMpi) != algos.end();
  if (hasMpi && !plans.empty() &&
      plans.back().count > static_cast<std::size_t>(std::numeric_limits<int>::max())) {
    throw UsageError("--maxbytes: " + std::to_string(plans.back().count) +
                     " elements exceed MPI's int count; lower it or drop 'mpi' from --algos");
  }

  // Fail before a long sweep rather than after it when the JSON cannot be written.
  if (!options.outputPath.empty()) {
    int writable = 1;
    if (printer) writable = std::ofstream(options.outputPath, std::ios::app).good() ? 1 : 0;
    MPI_Bcast(&writable, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (writable == 0) throw UsageError("--output: cannot open '" + options.outputPath + "' for writing");
  }

  BenchMeta meta;
  meta.ranks = ranks;
  meta.options = options;
  meta.hostname = hostName();
  meta.version = versionString();
  meta.date = utcDate();
  meta.reduceIsa = core::reduceKernelIsa();
  meta.mpiLibrary = mpiLibraryVersion();
  // Rank 0 alone: other ranks copying at the same time would share the memory bus.
  if (printer) meta.memcpyGBps = measureMemcpyGBps();
  MPI_Barrier(MPI_COMM_WORLD);

  const bool anyOff = std::any_of(algos.begin(), algos.end(), [](const std::string& a) { return fingerprintsOff(a); });
  const std::shared_ptr<Communicator> offComm = anyOff ? createFingerprintsOffWorld() : nullptr;
  Sweep sweep(options, comm, offComm.get(), plans);
  if (printer) printBenchHeader(meta, algos);
  std::vector<BenchRecord> records;
  for (const SizePlan& plan : plans) {
    std::vector<BenchRecord> block;
    if (options.interleave) {
      block = sweep.measureInterleaved(plan, algos);
    } else {
      for (const std::string& algo : algos) block.push_back(sweep.measure(plan, algo));
    }
    if (printer) printSizeBlock(meta, block);
    records.insert(records.end(), block.begin(), block.end());
  }
  if (printer) {
    printBenchSummary(meta, records);
    if (!options.outputPath.empty()) writeBenchJson(meta, records, options.outputPath);
  }
  // Records are identical on every rank, so every rank reaches the same verdict.
  const int slowSizes = options.audit ? auditSelection(meta, records, printer) : 0;
  if (offComm) offComm->finalize();
  comm.finalize();
  const bool anyFailed = std::any_of(records.begin(), records.end(), [](const BenchRecord& r) { return r.check == "fail"; });
  if (anyFailed) return 1;
  return slowSizes > 0 ? kAuditFailedExit : 0;
}

}  // namespace boostcomm::tools
