// ShmEngine: the shared-memory collectives of one node communicator.
//
// Phases of every collective, per chunk (a chunk is the pipelining unit:
// chunkBytes of the vector; the k-th chunk of the engine's life has the
// engine-wide number k, see segment.h):
//   copy-in  — a rank copies its input chunk into its slot ring (allreduce:
//              every slice but its own, which only it reads) and bumps
//              inputReady (skipped when its send buffer is registered: the
//              peers then read it in place);
//   reduce   — rank r reduces slice r of the chunk, reading every rank's
//              input directly in rank order (so every rank ends with the same
//              bits), writes it where peers can read it (its slot, or its
//              registered recv buffer) and bumps reduced;
//   copy-out — every rank copies the reduced slices into its recv buffer and
//              bumps consumed.
// The three run interleaved over consecutive chunks — a rank copies out chunk
// k while peers still reduce chunk k+1 — with no whole-buffer barrier, and a
// chunk is reduced and copied out soon after it was copied in, while it is
// still in cache. A slot is rewritten only after every rank consumed the
// chunk that used it before; payloads larger than the ring flow through it in
// rounds.
//
// Collectives run one after another in start() order; test() advances the
// running one (and the next ones) without ever waiting. A rank whose
// registered memory peers read returns only after they are done with it.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "shm/segment.h"
#include "transport/shared_memory.h"

namespace boostcomm::shm {

struct EngineConfig {
  std::size_t chunkBytes = 256 << 10;
  std::size_t slotBytes = 4 << 20;
  bool cma = false;  // segment lists through cross-memory attach when every rank can (cma.h)
};

// One collective in the engine's queue.
struct ShmOp {
  transport::SharedMemoryCall call;
  std::uint64_t sequence = 0;    // engine-wide collective number
  std::uint64_t firstChunk = 0;  // engine-wide number of its chunk 0
  std::uint64_t chunks = 0;
  std::size_t chunkCount = 0;    // elements per chunk (per block for reduce_scatter / allgather)
  enum class Phase : std::uint8_t { kPublish, kReadDescriptors, kRun, kDrain, kDone } phase = Phase::kPublish;
  std::uint64_t inNext = 0;      // chunk cursors, relative to firstChunk
  std::uint64_t reduceNext = 0;
  std::uint64_t outNext = 0;
  bool zeroCopyIn = false;       // this rank's input is read in place by peers
  bool zeroCopyOut = false;      // this rank's result is written to (and read from) its registered recv
  // Segment-list allreduce through CMA: every rank reduces its slice reading
  // the peers' tensors directly (process_vm_readv), writes it into its own
  // tensors in place, and copies the other slices out of the peers' tensors.
  // No slot ring. The lists stay untouched until every rank consumed them.
  bool cmaList = false;
};

class ShmEngine final : public transport::SharedMemoryEngine {
 public:
  // Collective over `control` (every rank must be on this node): its native
  // collectives carry the engine's few control words (CMA probe); `segments`
  // makes the shared segment and every registered buffer over the same
  // ranks. control must outlive the engine.
  ShmEngine(transport::Transport& control, SegmentFactory segments, const EngineConfig& config);
  ~ShmEngine() override;

  void start(const transport::SharedMemoryCall& call, transport::Request& req) override;
  bool test(transport::Request& req) override;
  std::uint64_t advances() const override { return advances_; }
  void* allocate(std::size_t bytes) override;
  // A POSIX segment whatever the engine's own segments are (its release must
  // be local: the holder may let go at any time, on any thread).
  std::shared_ptr<void> allocateOwned(std::size_t bytes) override;
  void release(void* buffer) override;
  bool isRegistered(const void* data, std::size_t bytes) const override;
  core::CallStatus* callStatus(int rank) override { return &control(rank).status; }
  core::Doorbell* doorbell() override { return &control(rank_).bell; }
  std::size_t smallAllreduceBytes() const override { return kSmallAllreduceBytes; }
  // Every rank reads every peer's slot and reduces all of them, so its cost
  // grows with ranks x bytes, while the chunked path spreads the reduction
  // and pays a handshake per chunk. Measured (docs/PERFORMANCE_HISTORY.md section 22):
  // at 2 ranks the small allreduce wins to 8 KiB and ties at 16 KiB; with
  // more ranks than hardware threads every handshake waits for a peer to
  // get a core, and it wins 2-5x at 8-32 KiB (3-4 ranks on 2 cores). So:
  // 32 KiB where the node is oversubscribed, else 8 KiB at 2 ranks and the
  // 4 KiB measured earlier above. Every rank of a node computes the same.
  std::size_t smallAllreduceAutoBytes() const override;
  int smallCollective(const transport::SmallCall& call, core::Fingerprint& theirs,
                      const std::function<void()>& poll) override;  // small_collective.cc

  // Used by the per-collective steps (shm_allreduce.cc, shm_gather.cc).
  int rank() const { return rank_; }
  int size() const { return size_; }
  RankControl& control(int rank) const { return layout_.control(*segment_, rank); }
  char* slot(int rank, std::uint64_t chunk) const { return layout_.slot(*segment_, rank, chunk); }
  // Rank's input / result base for the running collective; null: its slot ring.
  char* peerInput(int rank) const { return peerInput_[static_cast<std::size_t>(rank)]; }
  char* peerResult(int rank) const { return peerResult_[static_cast<std::size_t>(rank)]; }
  // Smallest value of a counter over all ranks.
  std::uint64_t minOver(Counter RankControl::*counter) const;
  bool allReached(Counter RankControl::*counter, std::uint64_t value) const { return minOver(counter) >= value; }
  // Whether this rank may overwrite the slot of engine-wide chunk `chunk`.
  bool slotFree(std::uint64_t chunk) const;
  std::size_t slotChunks() const { return layout_.slotChunks(); }
  std::size_t chunkBytes() const { return layout_.chunkBytes(); }
  // Scratch for reductions over more than two inputs (see shm_allreduce.cc).
  char* reduceScratch() { return reduceScratch_.data(); }
  std::size_t reduceScratchBytes() const { return reduceScratch_.size(); }
  // Per-rank input pointers of one reduction (capacity: size()).
  std::vector<const char*>& inputs() { return inputs_; }
  // CMA segment lists (shm_allreduce.cc): peers' pids, their lists (addresses
  // in the peer's space) and byte offsets for the running collective, and
  // per-rank slice scratch of chunkBytes each (size() + 1 of them).
  pid_t pid(int rank) const { return pids_[static_cast<std::size_t>(rank)]; }
  const core::SegmentList& peerList(int rank) const { return peerLists_[static_cast<std::size_t>(rank)]; }
  std::size_t peerListOffset(int rank) const { return peerListOffsets_[static_cast<std::size_t>(rank)]; }
  char* cmaScratch(int index) { return cmaScratch_.data() + static_cast<std::size_t>(index) * chunkBytes(); }

 private:
  struct Registration {
    std::shared_ptr<SharedSegment> window;  // shared with the holder of an owned buffer
    std::size_t bytes = 0;
    bool owned = false;  // allocateOwned: its holder frees it, not release()
  };
  // Finds [data, data + bytes) in this rank's registrations: index and offset.
  bool lookup(const void* data, std::size_t bytes, std::int32_t& index, std::uint64_t& offset) const;
  void plan(ShmOp& op);
  // Advances the head collective; true when anything moved.
  bool advance(ShmOp& op);
  bool publish(ShmOp& op);
  bool readDescriptors(ShmOp& op);
  // Reads peer r's list layout (CMA) from its descriptor into peerLists_[r].
  void readPeerList(int r, const Descriptor& d);
  // Probes process_vm_readv on the next rank; collective (every rank agrees).
  bool probeCma(bool wanted);
  bool progress();

  transport::Transport& control_;
  SegmentFactory segments_;
  int rank_ = 0;
  int size_ = 1;
  SegmentLayout layout_;
  std::unique_ptr<SharedSegment> segment_;
  std::vector<Registration> registrations_;
  std::vector<char*> peerInput_;
  std::vector<char*> peerResult_;
  std::vector<char> reduceScratch_;
  std::vector<const char*> inputs_;
  bool cma_ = false;
  std::vector<pid_t> pids_;
  std::vector<core::SegmentList> peerLists_;
  std::vector<std::size_t> peerListOffsets_;
  std::vector<char> cmaScratch_;
  std::vector<char*> peerData_;        // readPeerList scratch
  std::vector<std::size_t> peerBegin_;
  std::vector<ShmOp> queue_;  // running collective first; capacity kept
  std::size_t head_ = 0;      // queue_[head_] is running
  std::uint64_t nextSequence_ = 0;
  std::uint64_t completed_ = 0;  // collectives finished (all before this number)
  std::uint64_t nextChunk_ = 0;
  // Small collectives: per slot, sequence + 1 of the call that last wrote it
  // (0: none); and sequence + 1 of the latest call every rank is known to
  // have started (a rank that started call q has finished reading q - 1's slots).
  std::uint64_t smallSlotUse_[2] = {0, 0};
  std::uint64_t broadcastRingUse_[kBroadcastRingEntries] = {};
  std::uint64_t smallAllStarted_ = 0;
  // Until every rank has started call `atLeast` - 1 (smallAllStarted_ >=
  // atLeast): reads the peers' call status, and keeps the smallest value seen.
  template <typename Wait>
  void awaitAllStarted(std::uint64_t atLeast, Wait& wait);
  std::uint64_t advances_ = 0;  // progress() calls that moved something
};

// A spin-wait's pause: lets the sibling hyperthread run, saves power.
inline void cpuPause() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// Per-collective chunk steps; each returns true when it did something.
// shm_allreduce.cc: allreduce and reduce_scatter.
bool copyInReduceInput(ShmEngine& e, ShmOp& op);
bool reduceChunk(ShmEngine& e, ShmOp& op);
bool copyOutReduced(ShmEngine& e, ShmOp& op);
// Segment lists through CMA (ShmOp::cmaList).
bool cmaReduceChunk(ShmEngine& e, ShmOp& op);
bool cmaCopyOut(ShmEngine& e, ShmOp& op);
// shm_gather.cc: allgather and broadcast.
bool copyInGatherInput(ShmEngine& e, ShmOp& op);
bool copyOutGathered(ShmEngine& e, ShmOp& op);
// Chunks a collective moves, for plan().
std::uint64_t gatherChunks(const ShmEngine& e, ShmOp& op);
std::uint64_t reduceChunks(const ShmEngine& e, ShmOp& op);

}  // namespace boostcomm::shm
