#include "shm/engine.h"

#include <algorithm>
#include <utility>

#include <sys/mman.h>
#include <unistd.h>

#include "core/check.h"
#include "shm/cma.h"
#include "shm/posix_segment.h"

namespace boostcomm::shm {

namespace {

// Polls without progress before test() returns to the executor. The
// executor's wait polls kIdlePollsBeforeYield (64) times before it yields the
// core, so the spin before a yield is 64 x this many pauses: with 4, a few
// microseconds. With 256 (16384 pauses, ~0.35 ms) a rank whose peer waited
// for a core (more ranks than cores, or a vCPU the hypervisor took away)
// spun that long at every chunk handshake: 3 ranks on 2 cores took ~1.3 ms
// per allreduce of 4 KiB-64 KiB against raw MPI's 20-80 us; 2 ranks measured
// the same either way (docs/PERFORMANCE_HISTORY.md section 21).
constexpr std::uint32_t kPollsBeforeReturn = 4;
// Reductions over more than two inputs accumulate this many bytes at a time
// in L1-resident scratch (see shm_allreduce.cc).
constexpr std::size_t kReduceScratchBytes = 16 << 10;

// What every rank must agree on: the collective, its dtype, op and root, and
// the total element count (allgatherv: the sum of the counts).
core::Fingerprint fingerprintOf(const transport::SharedMemoryCall& c, int size) {
  std::uint64_t count = c.count;
  if (c.collective == Collective::kAllgather) {
    if (c.counts != nullptr) {
      count = 0;
      for (int r = 0; r < size; ++r) count += static_cast<std::uint64_t>(c.counts[r]);
    } else {
      count = c.count * static_cast<std::uint64_t>(size);
    }
  }
  return core::Fingerprint::of(c.collective, c.dtype, c.op, c.root, count);
}

}  // namespace

ShmEngine::ShmEngine(transport::Transport& control, SegmentFactory segments, const EngineConfig& config)
    : control_(control),
      segments_(std::move(segments)),
      rank_(control.rank()),
      size_(control.size()),
      layout_(std::max<std::size_t>((config.chunkBytes + kLineBytes - 1) & ~(kLineBytes - 1), kLineBytes),
              std::max<std::size_t>(2, config.slotBytes / std::max<std::size_t>(config.chunkBytes, 1))) {
  segment_ = segments_(layout_.bytesPerRank());
  peerInput_.assign(static_cast<std::size_t>(size_), nullptr);
  peerResult_.assign(static_cast<std::size_t>(size_), nullptr);
  inputs_.assign(static_cast<std::size_t>(size_), nullptr);
  reduceScratch_.assign(kReduceScratchBytes + kLineBytes, 0);
  queue_.reserve(64);
  cma_ = probeCma(config.cma);
  if (cma_) {
    peerLists_.resize(static_cast<std::size_t>(size_));
    peerListOffsets_.assign(static_cast<std::size_t>(size_), 0);
    cmaScratch_.assign((static_cast<std::size_t>(size_) + 1) * layout_.chunkBytes(), 0);
  }
}

bool ShmEngine::probeCma(bool wanted) {
  // Every rank learns every pid and the address of a value it can check, reads
  // the next rank's value, and the ranks agree (MIN): CMA is used only if
  // every rank may read its peers (ptrace permission can differ per process).
  const std::uint64_t probe = 0xB005C0DDULL ^ static_cast<std::uint64_t>(rank_);
  struct Entry {
    std::uint64_t pid;
    std::uint64_t address;
  };
  const Entry mine{static_cast<std::uint64_t>(getpid()), reinterpret_cast<std::uint64_t>(&probe)};
  static_assert(sizeof(Entry) == 2 * sizeof(std::int64_t));
  std::vector<Entry> all(static_cast<std::size_t>(size_));
  std::vector<int> counts(static_cast<std::size_t>(size_), 2);
  std::vector<int> displs(static_cast<std::size_t>(size_));
  for (int r = 0; r < size_; ++r) displs[static_cast<std::size_t>(r)] = 2 * r;
  control_.nativeAllgatherv(&mine, 2, all.data(), counts.data(), displs.data(), DataType::kInt64, nullptr);
  pids_.clear();
  for (const Entry& e : all) pids_.push_back(static_cast<pid_t>(e.pid));
  int ok = wanted ? 1 : 0;
  if (ok && size_ > 1) {
    const int next = (rank_ + 1) % size_;
    std::uint64_t got = 0;
    ok = cmaTryRead(pids_[static_cast<std::size_t>(next)], &got,
                    reinterpret_cast<const void*>(all[static_cast<std::size_t>(next)].address), sizeof got) &&
                 got == (0xB005C0DDULL ^ static_cast<std::uint64_t>(next))
             ? 1
             : 0;
  }
  int everyone = 0;
  // The probe value lives until every rank has read it (the allreduce follows all reads).
  control_.nativeAllreduce(&ok, &everyone, 1, DataType::kInt32, ReduceOp::kMin, nullptr);
  return everyone == 1;
}

ShmEngine::~ShmEngine() = default;

std::uint64_t ShmEngine::minOver(Counter RankControl::*counter) const {
  std::uint64_t lowest = UINT64_MAX;
  for (int r = 0; r < size_; ++r) {
    lowest = std::min(lowest, (control(r).*counter).value.load(std::memory_order_acquire));
  }
  return lowest;
}

bool ShmEngine::slotFree(std::uint64_t chunk) const {
  const std::uint64_t ring = layout_.slotChunks();
  return chunk < ring || allReached(&RankControl::consumed, chunk + 1 - ring);
}

bool ShmEngine::lookup(const void* data, std::size_t bytes, std::int32_t& index, std::uint64_t& offset) const {
  const char* p = static_cast<const char*>(data);
  if (p == nullptr || bytes == 0) return false;
  for (std::size_t i = 0; i < registrations_.size(); ++i) {
    const Registration& r = registrations_[i];
    if (!r.window) continue;
    const char* base = r.window->mine();
    if (p >= base && p + bytes <= base + r.bytes) {
      index = static_cast<std::int32_t>(i);
      offset = static_cast<std::uint64_t>(p - base);
      return true;
    }
  }
  return false;
}

bool ShmEngine::isRegistered(const void* data, std::size_t bytes) const {
  std::int32_t index = 0;
  std::uint64_t offset = 0;
  return lookup(data, bytes, index, offset);
}

void* ShmEngine::allocate(std::size_t bytes) {
  BC_INVALID(bytes > 0, rank_, "allocateBuffer: bytes is 0");
  BC_INVALID(queue_.size() == head_, rank_, "allocateBuffer: collectives are still in flight on the shared segment");
  Registration r;
  r.window = segments_(bytes);
  r.bytes = bytes;
  registrations_.push_back(std::move(r));
  return registrations_.back().window->mine();
}

std::shared_ptr<void> ShmEngine::allocateOwned(std::size_t bytes) {
  BC_INVALID(bytes > 0, rank_, "allocateOwnedBuffer: bytes is 0");
  BC_INVALID(queue_.size() == head_, rank_,
             "allocateOwnedBuffer: collectives are still in flight on the shared segment");
  Registration r;
  r.window = std::make_shared<PosixSegment>(control_, bytes);
  r.bytes = bytes;
  r.owned = true;
  registrations_.push_back(r);
  // The holder's last copy gives this rank's pages back (MADV_REMOVE frees a
  // shared-memory range while it stays mapped: the address range cannot be
  // reused by another allocation while the engine may still look it up, and
  // nobody reads it any more: a peer reads this rank's part only within a
  // collective this rank passed it to). The capture keeps the mapping until
  // then, so the memory outlives the engine when its holder does. Only in
  // this process: a forked child that drops its inherited copy must not
  // punch holes in the parent's live buffer.
  const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  const std::size_t span = (bytes + page - 1) / page * page;
  return std::shared_ptr<void>(r.window->mine(), [window = r.window, span, owner = getpid()](void* p) {
    if (getpid() == owner) (void)madvise(p, span, MADV_REMOVE);  // best effort: else freed with the mapping
  });
}

void ShmEngine::release(void* buffer) {
  for (Registration& r : registrations_) {
    if (r.window && r.window->mine() == buffer) {
      BC_INVALID(!r.owned, rank_, "freeBuffer: this buffer came from allocateOwnedBuffer; it is freed when its holder lets go");
      BC_INVALID(queue_.size() == head_, rank_, "freeBuffer: collectives are still in flight on the shared segment");
      r.window.reset();  // collective for an MPI window (MPI_Win_free)
      r.bytes = 0;
      return;
    }
  }
  core::raise(ErrorCategory::kInvalidArgument, rank_, "freeBuffer: pointer was not returned by allocateBuffer");
}

void ShmEngine::plan(ShmOp& op) {
  const transport::SharedMemoryCall& c = op.call;
  const std::size_t es = dataTypeSize(c.dtype);
  const bool reducing = c.collective == Collective::kAllreduce || c.collective == Collective::kReduceScatter;
  op.chunks = reducing ? reduceChunks(*this, op) : gatherChunks(*this, op);
  op.sequence = nextSequence_++;
  op.firstChunk = nextChunk_;
  nextChunk_ += op.chunks;
  std::size_t inputBytes = 0;
  std::size_t resultBytes = 0;
  switch (c.collective) {
    case Collective::kAllreduce: inputBytes = resultBytes = c.count * es; break;
    case Collective::kReduceScatter: inputBytes = c.count * es * static_cast<std::size_t>(size_); break;
    case Collective::kAllgather:
      inputBytes = (c.counts != nullptr ? static_cast<std::size_t>(c.counts[rank_]) : c.count) * es;
      break;
    case Collective::kBroadcast: inputBytes = rank_ == c.root ? c.count * es : 0; break;
    case Collective::kBarrier: break;
  }
  std::int32_t index = 0;
  std::uint64_t offset = 0;
  const void* input = c.collective == Collective::kBroadcast ? c.recv : c.send;
  op.zeroCopyIn = c.list == nullptr && c.sendList == nullptr && lookup(input, inputBytes, index, offset);
  op.zeroCopyOut = c.list == nullptr && lookup(c.recv, resultBytes, index, offset);
  // CMA reads peers' lists in place: allreduce only (allgather and broadcast
  // lists go through the slot ring, copied in from and out to the segments).
  op.cmaList = c.list != nullptr && cma_ && c.collective == Collective::kAllreduce;
  if (op.cmaList) op.inNext = op.chunks;  // the inputs are read in place
}

void ShmEngine::start(const transport::SharedMemoryCall& call, transport::Request& req) {
  BC_INTERNAL(!req.active(), "shm start: request is still active");
  BC_INVALID(call.collective != Collective::kBarrier, rank_, "shm: barrier is not a shared-memory collective");
  BC_INTERNAL(call.list == nullptr || call.collective != Collective::kReduceScatter,
              "shm: reduce_scatter does not run on a segment list");
  BC_INTERNAL((call.sendList != nullptr) == (call.list != nullptr && call.collective == Collective::kAllgather),
              "shm: an allgather on segment lists needs both lists (and only allgather has a send list)");
  if (head_ == queue_.size()) {
    queue_.clear();
    head_ = 0;
  }
  ShmOp& op = queue_.emplace_back();
  op.call = call;
  plan(op);
  req.slot[0] = op.sequence + 1;
}

bool ShmEngine::publish(ShmOp& op) {
  // The descriptor slot is reused kDescriptorRing collectives later: only
  // once every rank has read the descriptor that used it.
  if (op.sequence >= kDescriptorRing && !allReached(&RankControl::opsRead, op.sequence + 1 - kDescriptorRing)) {
    return false;
  }
  const transport::SharedMemoryCall& c = op.call;
  RankControl& mine = control(rank_);
  Descriptor& d = mine.descriptors[op.sequence % kDescriptorRing];
  d.inputBuffer = d.resultBuffer = -1;
  d.inputOffset = d.resultOffset = 0;
  const void* input = c.collective == Collective::kBroadcast ? c.recv : c.send;
  if (op.zeroCopyIn) lookup(input, 1, d.inputBuffer, d.inputOffset);
  if (op.zeroCopyOut) lookup(c.recv, 1, d.resultBuffer, d.resultOffset);
  d.cmaList = op.cmaList ? 1 : 0;
  if (op.cmaList) {
    d.listData = reinterpret_cast<std::uint64_t>(c.list->dataArray());
    d.listBegin = reinterpret_cast<std::uint64_t>(c.list->beginArray());
    d.listSegments = c.list->segments();
    d.listOffset = c.listOffsetBytes;
  }
  const core::Fingerprint f = fingerprintOf(c, size_);
  d.fingerprintWord = f.word();
  d.fingerprintCount = f.count;
  d.sequence.store(op.sequence + 1, std::memory_order_release);
  const std::uint64_t end = op.firstChunk + op.chunks;
  const bool hasInput = c.collective != Collective::kBroadcast || rank_ == c.root;
  // Inputs that need no copy are ready for every chunk at once.
  if (op.zeroCopyIn || op.cmaList || !hasInput) mine.inputReady.value.store(end, std::memory_order_release);
  if (c.collective != Collective::kAllreduce) mine.reduced.value.store(end, std::memory_order_release);
  if (c.collective != Collective::kAllreduce && c.collective != Collective::kReduceScatter) op.reduceNext = op.chunks;
  op.phase = ShmOp::Phase::kReadDescriptors;
  return true;
}

bool ShmEngine::readDescriptors(ShmOp& op) {
  const std::size_t ring = op.sequence % kDescriptorRing;
  for (int r = 0; r < size_; ++r) {
    if (control(r).descriptors[ring].sequence.load(std::memory_order_acquire) != op.sequence + 1) return false;
  }
  // Fingerprints first: with a different count or collective the chunk
  // counters would mean different things on different ranks (a rank could
  // finish with a plausible, wrong result while its peer waits forever).
  const Descriptor& own = control(rank_).descriptors[ring];
  for (int r = 0; r < size_; ++r) {
    const Descriptor& d = control(r).descriptors[ring];
    if (d.fingerprintWord == own.fingerprintWord && d.fingerprintCount == own.fingerprintCount) continue;
    core::raise(ErrorCategory::kMismatch, rank_,
                core::describeMismatch(rank_, core::Fingerprint::fromWord(own.fingerprintWord, own.fingerprintCount),
                                       r, core::Fingerprint::fromWord(d.fingerprintWord, d.fingerprintCount),
                                       op.sequence) +
                    " (shared-memory call number)");
  }
  for (int r = 0; r < size_; ++r) {
    const Descriptor& d = control(r).descriptors[ring];
    auto resolve = [&](std::int32_t index, std::uint64_t offset) -> char* {
      if (index < 0) return nullptr;
      const Registration& reg = registrations_.at(static_cast<std::size_t>(index));
      BC_INTERNAL(reg.window != nullptr, "shm: rank " << r << " names registered buffer " << index
                                                      << " that rank " << rank_ << " has freed");
      return reg.window->base(r) + offset;
    };
    peerInput_[static_cast<std::size_t>(r)] = resolve(d.inputBuffer, d.inputOffset);
    peerResult_[static_cast<std::size_t>(r)] = resolve(d.resultBuffer, d.resultOffset);
    // Every rank decides the same way (same engine, all list calls or none);
    // a rank that called a plain allreduce against another's list would
    // otherwise read memory that holds no input.
    BC_CHECK((d.cmaList != 0) == op.cmaList, ErrorCategory::kMismatch, rank_,
             "shm allreduce: rank " << r << (d.cmaList ? " passed a segment list" : " passed a buffer")
                                    << " but rank " << rank_ << (op.cmaList ? " a segment list" : " a buffer"));
    if (op.cmaList && r != rank_) readPeerList(r, d);
  }
  control(rank_).opsRead.value.store(op.sequence + 1, std::memory_order_release);
  op.phase = ShmOp::Phase::kRun;
  return true;
}

void ShmEngine::readPeerList(int r, const Descriptor& d) {
  // The peer's SegmentList storage (segment addresses and offsets), read
  // out of its address space: a few KiB per call for a model's tensors.
  const std::size_t n = static_cast<std::size_t>(d.listSegments);
  peerData_.resize(n);
  peerBegin_.resize(n + 1);
  const pid_t peer = pids_[static_cast<std::size_t>(r)];
  bool ok = n == 0 || cmaTryRead(peer, peerData_.data(), reinterpret_cast<const void*>(d.listData), n * sizeof(char*));
  ok = ok && cmaTryRead(peer, peerBegin_.data(), reinterpret_cast<const void*>(d.listBegin), (n + 1) * sizeof(std::size_t));
  BC_CHECK(ok, ErrorCategory::kTransport, rank_, "shm: cannot read rank " << r << "'s segment list (process_vm_readv)");
  core::SegmentList& list = peerLists_[static_cast<std::size_t>(r)];
  list.clear();
  for (std::size_t i = 0; i < n; ++i) list.append(peerData_[i], peerBegin_[i + 1] - peerBegin_[i]);
  peerListOffsets_[static_cast<std::size_t>(r)] = d.listOffset;
}

bool ShmEngine::advance(ShmOp& op) {
  bool any = false;
  if (op.phase == ShmOp::Phase::kPublish) {
    if (!publish(op)) return any;
    any = true;
  }
  if (op.phase == ShmOp::Phase::kReadDescriptors) {
    if (!readDescriptors(op)) return any;
    any = true;
  }
  if (op.phase == ShmOp::Phase::kRun) {
    const bool reducing =
        op.call.collective == Collective::kAllreduce || op.call.collective == Collective::kReduceScatter;
    // Drain before filling: copy out, then reduce, then copy in, so a chunk
    // leaves the pipeline soon after it entered (and is still in cache).
    bool moved = true;
    while (moved) {
      if (op.cmaList) {
        moved = cmaCopyOut(*this, op);
        moved = cmaReduceChunk(*this, op) || moved;
      } else if (reducing) {
        moved = copyOutReduced(*this, op);
        moved = reduceChunk(*this, op) || moved;
        moved = copyInReduceInput(*this, op) || moved;
      } else {
        moved = copyOutGathered(*this, op);
        moved = copyInGatherInput(*this, op) || moved;
      }
      any |= moved;
    }
    if (op.inNext < op.chunks || op.reduceNext < op.chunks || op.outNext < op.chunks) return any;
    op.phase = ShmOp::Phase::kDrain;
    any = true;
  }
  if (op.phase == ShmOp::Phase::kDrain) {
    // Peers read this rank's registered memory in place: it stays untouched
    // until they have consumed every chunk.
    if ((op.zeroCopyIn || op.zeroCopyOut || op.cmaList) &&
        !allReached(&RankControl::consumed, op.firstChunk + op.chunks)) {
      return any;
    }
    op.phase = ShmOp::Phase::kDone;
    any = true;
  }
  return any;
}

bool ShmEngine::progress() {
  bool any = false;
  while (head_ < queue_.size()) {
    ShmOp& op = queue_[head_];
    any |= advance(op);
    if (op.phase != ShmOp::Phase::kDone) break;
    ++head_;
    ++completed_;
  }
  if (any) {
    ++advances_;
    // A peer may be asleep waiting for what moved (ShmEngine::doorbell).
    for (int r = 0; r < size_; ++r) {
      if (r != rank_) control(r).bell.ring();
    }
  }
  return any;
}

bool ShmEngine::test(transport::Request& req) {
  if (!req.active()) return true;
  const std::uint64_t sequence = req.slot[0] - 1;
  std::uint32_t idle = 0;
  while (sequence >= completed_) {
    if (progress()) {
      idle = 0;
      continue;
    }
    if (++idle > kPollsBeforeReturn) return false;
    cpuPause();
  }
  req.slot[0] = 0;
  return true;
}

}  // namespace boostcomm::shm
