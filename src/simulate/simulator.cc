#include "simulate/simulator.h"

#include <algorithm>
#include <cstring>
#include <queue>

#include "algorithms/node_layout.h"
#include "algorithms/registry.h"
#include "core/check.h"
#include "core/reduce.h"
#include "simulate/program.h"

namespace boostcomm::simulate {

using executor::BufferId;

namespace {

// Cost of local steps in copies of their bytes: a reduce streams two inputs
// and one output (3 accesses per element against a copy's 2).
constexpr double kCopyPasses = 1.0;
constexpr double kReducePasses = 1.5;
constexpr double kDividePasses = 1.0;

struct Event {
  double time;
  std::uint64_t seq;
  int rank;
  std::uint32_t index;  // op (kComplete) or job (kRelease)
  bool release;
  bool operator>(const Event& o) const { return time != o.time ? time > o.time : seq > o.seq; }
};

struct MatchKey {
  int src;
  int dst;
  std::uint64_t channel;
  bool operator==(const MatchKey&) const = default;
};

struct MatchKeyHash {
  std::size_t operator()(const MatchKey& k) const {
    std::uint64_t h = k.channel * 0x9E3779B97F4A7C15ull;
    h ^= (static_cast<std::uint64_t>(static_cast<std::uint32_t>(k.src)) << 32 | static_cast<std::uint32_t>(k.dst)) +
         0x7F4A7C159E3779B9ull + (h << 6) + (h >> 2);
    return static_cast<std::size_t>(h);
  }
};

// Posted, unmatched ends of each (source, destination, channel): all sends or
// all receives, in post order, as a list linked through Op::matched of the
// pending ops (they all live on one rank: the source for sends, the
// destination for receives). Open addressing with linear probing and
// backward-shift deletion: one cache miss per lookup, where a node-based
// std::unordered_map took two or three, and no allocation per message.
class MatchTable {
 public:
  struct Slot {
    std::uint64_t channel = 0;
    int src = 0;
    int dst = 0;
    std::uint32_t head = 0, tail = 0;
    std::uint8_t state = 0;  // 0 empty, 1 sends pending, 2 receives pending
  };

  MatchTable() { slots_.resize(1024); }

  Slot* find(const MatchKey& k) {
    for (std::size_t i = home(k);; i = (i + 1) & mask()) {
      Slot& s = slots_[i];
      if (s.state == 0) return nullptr;
      if (s.channel == k.channel && s.src == k.src && s.dst == k.dst) return &s;
    }
  }

  Slot& insert(const MatchKey& k) {
    if (2 * (used_ + 1) > slots_.size()) grow();
    std::size_t i = home(k);
    while (slots_[i].state != 0) i = (i + 1) & mask();
    ++used_;
    slots_[i].channel = k.channel;
    slots_[i].src = k.src;
    slots_[i].dst = k.dst;
    return slots_[i];
  }

  void erase(Slot* slot) {
    std::size_t i = static_cast<std::size_t>(slot - slots_.data());
    for (std::size_t j = (i + 1) & mask(); slots_[j].state != 0; j = (j + 1) & mask()) {
      const std::size_t k = home(MatchKey{slots_[j].src, slots_[j].dst, slots_[j].channel});
      // Slot j may move back to i unless its home lies cyclically in (i, j].
      const bool stays = i < j ? (k > i && k <= j) : (k > i || k <= j);
      if (!stays) {
        slots_[i] = slots_[j];
        i = j;
      }
    }
    slots_[i].state = 0;
    --used_;
  }

  std::size_t size() const { return used_; }

 private:
  std::size_t mask() const { return slots_.size() - 1; }
  std::size_t home(const MatchKey& k) const { return MatchKeyHash{}(k) & mask(); }
  void grow() {
    std::vector<Slot> old(slots_.size() * 2);
    old.swap(slots_);
    used_ = 0;
    for (const Slot& s : old) {
      if (s.state == 0) continue;
      Slot& n = insert(MatchKey{s.src, s.dst, s.channel});
      n = s;
    }
  }

  std::vector<Slot> slots_;
  std::size_t used_ = 0;
};

}  // namespace

struct Simulation::Engine {
  Engine(const Simulation& sim) : sim_(sim), network_(sim.cluster_) {
    if (sim.recordLinks_) {
      network_.setRecordLinks(true);
      network_.reset();
    }
  }

  const Simulation& sim_;
  simulate::Network network_;
  std::vector<RankProgram> programs_;
  std::vector<RankPlace> places_;
  std::vector<std::vector<std::uint32_t>> jobFirstOp_;   // [rank][job]
  std::vector<std::vector<std::uint32_t>> jobRemaining_;  // [rank][job]
  std::vector<std::vector<std::vector<char>>> scratch_;   // [rank][job], data mode
  std::vector<double> memoryCost_;                         // [job]: 1 / cache speed-up of its working set
  std::priority_queue<Event, std::vector<Event>, std::greater<>> queue_;
  MatchTable pending_;
  std::uint64_t seq_ = 0;
  SimResult result_;

  void push(double time, int rank, std::uint32_t index, bool release) {
    queue_.push(Event{time, seq_++, rank, index, release});
  }

  bool dataMode(std::uint32_t job) const { return !sim_.buffers_[job].empty(); }
  std::size_t elementSize(std::uint32_t job) const { return dataTypeSize(sim_.jobs_[job].request.dtype); }

  char* resolve(int rank, std::uint32_t job, BufferId buf, std::size_t offset) {
    const Bound& b = sim_.buffers_[job][static_cast<std::size_t>(rank)];
    char* base = nullptr;
    switch (buf) {
      case BufferId::kSend: base = static_cast<char*>(const_cast<void*>(b.send)); break;
      case BufferId::kRecv: base = static_cast<char*>(b.recv); break;
      case BufferId::kScratch: base = scratch_[static_cast<std::size_t>(rank)][job].data(); break;
    }
    return base + offset;
  }

  void build() {
    const int ranks = sim_.cluster_.ranks();
    programs_.resize(static_cast<std::size_t>(ranks));
    places_.resize(static_cast<std::size_t>(ranks));
    jobFirstOp_.resize(static_cast<std::size_t>(ranks));
    scratch_.resize(static_cast<std::size_t>(ranks));
    for (int r = 0; r < ranks; ++r) {
      const auto ru = static_cast<std::size_t>(r);
      RankPlace& place = places_[ru];
      place.rank = r;
      place.perNode = sim_.cluster_.ranksPerNode;
      place.nodes = sim_.cluster_.nodes;
      place.node = r / place.perNode;
      place.localRank = r % place.perNode;
      RankProgram& program = programs_[ru];
      for (const JobSpec& job : sim_.jobs_) {
        jobFirstOp_[ru].push_back(static_cast<std::uint32_t>(program.ops.size()));
        const algorithms::CollectiveSpec spec = sim_.specFor(job, r);
        executor::Schedule schedule(spec.collective, spec.dtype, spec.op, job.algorithm);
        algorithms::findAlgorithm(spec.collective, job.algorithm)->build(spec, schedule);
        program.appendJob(schedule, spec, place);
      }
      program.finish();
      for (std::size_t j = 0; j < sim_.jobs_.size(); ++j) {
        if (dataMode(static_cast<std::uint32_t>(j))) scratch_[ru].emplace_back(program.scratchBytesOfJob[j]);
        else scratch_[ru].emplace_back();
      }
      result_.ops += program.ops.size();
    }
    memoryCost_.assign(sim_.jobs_.size(), 1.0);
    for (std::size_t j = 0; j < sim_.jobs_.size(); ++j) {
      const RankProgram& first = programs_[0];
      const double perRank = static_cast<double>(workingSetBytes(sim_.specFor(sim_.jobs_[j], 0)) +
                                                 first.scratchBytesOfJob[j] + first.temporaryBytesOfJob[j]);
      memoryCost_[j] = 1.0 / sim_.cluster_.cacheSpeedupAt(perRank * sim_.cluster_.ranksPerNode);
    }
  }

  // One rank's send and receive buffers for a job (its scratch and the
  // backend's temporaries come from the program).
  static std::size_t workingSetBytes(const algorithms::CollectiveSpec& spec) {
    const std::size_t payload = spec.payloadBytes();
    const std::size_t share = payload / static_cast<std::size_t>(std::max(spec.size, 1));
    std::size_t buffers = payload;  // broadcast: one buffer
    switch (spec.collective) {
      case Collective::kAllreduce: buffers = 2 * payload; break;
      case Collective::kAllgather:
      case Collective::kReduceScatter: buffers = payload + share; break;
      default: break;
    }
    return buffers;
  }

  void release(int rank, std::uint32_t job, double now) {
    const auto ru = static_cast<std::size_t>(rank);
    double& start = result_.jobStartSeconds[job];
    start = std::min(start, now);
    RankProgram& program = programs_[ru];
    const std::uint32_t first = jobFirstOp_[ru][job];
    const std::uint32_t count = program.opsOfJob[job];
    if (count == 0) {
      jobDone(rank, job, now);
      return;
    }
    for (std::uint32_t i = first; i < first + count; ++i) {
      if (program.pending[i] == 0) startOp(rank, i, now);
    }
  }

  void jobDone(int rank, std::uint32_t job, double now) {
    double& end = result_.jobEndSeconds[job];
    end = std::max(end, now);
    const std::uint32_t next = job + 1;
    if (next < sim_.jobs_.size() && sim_.jobs_[next].afterPrevious) {
      push(std::max(now, sim_.jobs_[next].releaseSeconds), rank, next, true);
    }
  }

  void startOp(int rank, std::uint32_t index, double now) {
    Op& op = programs_[static_cast<std::size_t>(rank)].ops[index];
    switch (op.kind) {
      case OpKind::kSend:
      case OpKind::kRecv: post(rank, index, op, now); return;
      case OpKind::kReduce:
      case OpKind::kCopy:
      case OpKind::kDivide: break;
      case OpKind::kJoin: finish(rank, index, now); return;
      case OpKind::kTouch: push(network_.firstTouch(rank, op.bytes, now), rank, index, false); return;
    }
    const double passes = op.kind == OpKind::kReduce ? kReducePasses : op.kind == OpKind::kCopy ? kCopyPasses : kDividePasses;
    if (dataMode(op.job) && op.bytes > 0) runLocal(rank, op);
    const double finish = op.bytes == 0 ? now : network_.localWork(rank, op.bytes, passes, now, memoryCost_[op.job]);
    push(finish, rank, index, false);
  }

  void runLocal(int rank, const Op& op) {
    const JobSpec& job = sim_.jobs_[op.job];
    char* dst = resolve(rank, op.job, op.dstBuf, op.dstOff);
    const char* src = resolve(rank, op.job, op.srcBuf, op.srcOff);
    switch (op.kind) {
      case OpKind::kReduce:
        core::reduce(dst, src, resolve(rank, op.job, op.src2Buf, op.src2Off), op.bytes / elementSize(op.job),
                     job.request.dtype, job.request.op);
        break;
      case OpKind::kCopy:
        if (dst != src) std::memmove(dst, src, op.bytes);
        break;
      case OpKind::kDivide:
        core::divideBy(dst, op.bytes / elementSize(op.job), job.request.dtype, op.divisor);
        break;
      default: break;
    }
  }

  void post(int rank, std::uint32_t index, Op& op, double now) {
    const bool isSend = op.kind == OpKind::kSend;
    const MatchKey key{isSend ? rank : op.peer, isSend ? op.peer : rank, op.channel};
    const std::uint8_t state = isSend ? 1 : 2;
    MatchTable::Slot* slot = pending_.find(key);
    if (slot == nullptr || slot->state == state) {
      if (slot == nullptr) {
        slot = &pending_.insert(key);
        slot->state = state;
        slot->head = index;
      } else {
        programs_[static_cast<std::size_t>(rank)].ops[slot->tail].matched = index;
      }
      slot->tail = index;
      return;
    }
    // The oldest posted other end matches (MPI's non-overtaking order).
    const std::uint32_t other = slot->head;
    const int otherRank = isSend ? key.dst : key.src;
    if (other == slot->tail) pending_.erase(slot);
    else slot->head = programs_[static_cast<std::size_t>(otherRank)].ops[other].matched;
    const std::uint32_t sendOp = isSend ? index : other;
    const std::uint32_t recvOp = isSend ? other : index;
    const Op& s = programs_[static_cast<std::size_t>(key.src)].ops[sendOp];
    const Op& r = programs_[static_cast<std::size_t>(key.dst)].ops[recvOp];
    BC_INTERNAL(s.bytes <= r.bytes, "simulator: message of " << s.bytes << " B from rank " << key.src << " to "
                                                             << key.dst << " truncated to " << r.bytes << " B");
    if (dataMode(s.job) && s.bytes > 0) {
      std::memcpy(resolve(key.dst, r.job, r.dstBuf, r.dstOff), resolve(key.src, s.job, s.srcBuf, s.srcOff), s.bytes);
    }
    const double arrival = network_.transfer(key.src, key.dst, s.bytes, now, memoryCost_[s.job]);
    // One event finishes both ends (the receive's completion completes its send).
    programs_[static_cast<std::size_t>(key.dst)].ops[recvOp].matched = sendOp;
    push(arrival, key.dst, recvOp, false);
  }

  void complete(int rank, std::uint32_t index, double now) {
    RankProgram& program = programs_[static_cast<std::size_t>(rank)];
    const Op& op = program.ops[index];
    if (op.kind == OpKind::kRecv) finish(op.peer, op.matched, now);
    finish(rank, index, now);
  }

  void finish(int rank, std::uint32_t index, double now) {
    RankProgram& program = programs_[static_cast<std::size_t>(rank)];
    const Op& op = program.ops[index];
    for (std::uint32_t k = 0; k < op.succCount; ++k) {
      const std::uint32_t next = program.succ[op.succBegin + k];
      if (--program.pending[next] == 0) startOp(rank, next, now);
    }
    if (--jobRemaining_[static_cast<std::size_t>(rank)][op.job] == 0) jobDone(rank, op.job, now);
  }

  SimResult run() {
    build();
    const std::size_t jobs = sim_.jobs_.size();
    result_.jobStartSeconds.assign(jobs, 1e300);
    result_.jobEndSeconds.assign(jobs, 0);
    jobRemaining_.resize(programs_.size());
    for (std::size_t r = 0; r < programs_.size(); ++r) {
      jobRemaining_[r] = programs_[r].opsOfJob;
      for (std::uint32_t j = 0; j < jobs; ++j) {
        if (j == 0 || !sim_.jobs_[j].afterPrevious) push(sim_.jobs_[j].releaseSeconds, static_cast<int>(r), j, true);
      }
    }
    double now = 0;
    while (!queue_.empty()) {
      const Event e = queue_.top();
      queue_.pop();
      now = e.time;
      if (e.release) release(e.rank, e.index, now);
      else complete(e.rank, e.index, now);
    }
    BC_INTERNAL(pending_.size() == 0, "simulator: " << pending_.size()
                                                << " message(s) never matched (a schedule posts a send or "
                                                   "receive its peer never posts)");
    for (std::size_t r = 0; r < programs_.size(); ++r) {
      for (std::size_t j = 0; j < jobs; ++j) {
        BC_INTERNAL(jobRemaining_[r][j] == 0, "simulator: rank " << r << " job " << j << " stalled with "
                                                                 << jobRemaining_[r][j] << " ops left");
      }
    }
    result_.seconds = now;
    for (double& s : result_.jobStartSeconds) s = std::min(s, now);
    result_.network = network_.stats();
    result_.links = network_.links();
    return result_;
  }
};

Simulation::Simulation(const simulate::ClusterSpec& cluster) : cluster_(cluster) {
  simulate::validateCluster(cluster_);
  layout_ = std::make_unique<algorithms::NodeLayout>(
      algorithms::layoutFromSizes(std::vector<int>(static_cast<std::size_t>(cluster_.nodes), cluster_.ranksPerNode)));
}

Simulation::~Simulation() = default;

algorithms::CollectiveSpec Simulation::specFor(const JobSpec& job, int rank) const {
  algorithms::CollectiveSpec spec = job.request;
  spec.rank = rank;
  spec.size = cluster_.ranks();
  spec.layout = layout_.get();
  // No shared-memory engine is modelled: "shm" algorithms report unsupported
  // and hierarchical ones use their ring intra-node phases.
  spec.sharedMemory = false;
  spec.intraSharedMemory = false;
  return spec;
}

int Simulation::add(const JobSpec& job) {
  const algorithms::AlgorithmInfo* algo = algorithms::findAlgorithm(job.request.collective, job.algorithm);
  BC_INVALID(algo != nullptr, -1,
             "algorithm '" << job.algorithm << "' does not exist for " << toString(job.request.collective));
  const std::string reason = algo->unsupportedReason(specFor(job, 0));
  BC_INVALID(reason.empty(), -1,
             "algorithm '" << job.algorithm << "' cannot run " << toString(job.request.collective) << " on "
                           << cluster_.nodes << "x" << cluster_.ranksPerNode << ": " << reason);
  BC_INVALID(job.request.counts.empty() || job.request.counts.size() == static_cast<std::size_t>(ranks()), -1,
             "counts: " << job.request.counts.size() << " entries for " << ranks() << " ranks");
  jobs_.push_back(job);
  buffers_.emplace_back();
  return static_cast<int>(jobs_.size() - 1);
}

void Simulation::bind(int job, int rank, const void* send, void* recv) {
  BC_INVALID(job >= 0 && job < static_cast<int>(jobs_.size()), rank, "bind: no job " << job);
  BC_INVALID(rank >= 0 && rank < ranks(), rank, "bind: rank " << rank << " outside 0.." << ranks() - 1);
  // The simulator moves wire messages' bytes but makes no conversions, and
  // a fused reduce reads its message as 16-bit values: data would be wrong.
  BC_INVALID(jobs_[static_cast<std::size_t>(job)].request.wire == WireFormat::kOff, rank,
             "bind: data mode simulates payloads without a wire format (this job's: "
                 << toString(jobs_[static_cast<std::size_t>(job)].request.wire) << ")");
  auto& b = buffers_[static_cast<std::size_t>(job)];
  if (b.empty()) b.resize(static_cast<std::size_t>(ranks()));
  b[static_cast<std::size_t>(rank)] = Bound{send, recv};
}

SimResult Simulation::run() {
  for (const auto& b : buffers_) {
    for (std::size_t r = 0; r < b.size(); ++r) {
      BC_INVALID(b[r].recv != nullptr, static_cast<int>(r), "bind: data-mode job without a receive buffer on this rank");
    }
  }
  Engine engine(*this);
  return engine.run();
}

std::string Simulation::ranAlgorithm(const JobSpec& job) const {
  if (job.algorithm != "native") return job.algorithm;
  const algorithms::CollectiveSpec spec = specFor(job, 0);
  return "native(" + std::string(nativeModelOf(spec.collective, spec.payloadBytes(), spec.size)) + ")";
}

double simulateOnce(const simulate::ClusterSpec& cluster, const JobSpec& job) {
  Simulation sim(cluster);
  sim.add(job);
  return sim.run().seconds;
}

}  // namespace boostcomm::simulate
