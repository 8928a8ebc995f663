// The shared segment: memory every rank of a node maps, and its layout.
//
// SharedSegment: each rank of a node group contributes `bytesPerRank` and
// addresses every peer's part directly. Two implementations, chosen by the
// transport: an MPI_Win_allocate_shared window (window_segment.h, under mpirun)
// and a POSIX shared-memory object (posix_segment.h, under the store
// transport, where there is no MPI communicator). The engine's segment is one
// such segment; each registered buffer (zero-copy) is another, made by the
// same SegmentFactory.
//
// Layout of each rank's part of the engine segment:
//   [RankControl: counters and descriptor ring, written only by this rank]
//   [slot ring: kSlotChunks chunks of chunkBytes, the copy-in staging area]
// Every counter sits on its own cache line, so a rank publishing one never
// invalidates the line a peer is spinning on for another.
//
// Counters count chunks engine-wide (across collectives, never reset): the
// chunks of the k-th collective follow those of the (k-1)-th, so a counter
// value says both which collective and which chunk — sequence numbers
// instead of flags that would have to be cleared between calls.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "core/call_status.h"
#include "core/doorbell.h"

namespace boostcomm::shm {

inline constexpr std::size_t kLineBytes = 64;
// Descriptors of this many collectives may be pending per rank (ranks drift
// apart by at most this many collectives before the slowest catches up).
inline constexpr std::size_t kDescriptorRing = 16;

struct alignas(kLineBytes) Counter {
  std::atomic<std::uint64_t> value{0};
};
static_assert(sizeof(Counter) == kLineBytes);

// Where one rank's data of one collective lives: a registered buffer (index,
// byte offset) or, with index -1, its slot ring.
struct alignas(kLineBytes) Descriptor {
  std::atomic<std::uint64_t> sequence{0};  // collective number + 1, stored last (release)
  std::int32_t inputBuffer = -1;
  std::int32_t resultBuffer = -1;
  std::uint64_t inputOffset = 0;
  std::uint64_t resultOffset = 0;
  // Segment-list call read through CMA (engine.h, kCmaList): where this rank's
  // list lives in its own address space (SegmentList storage), and the
  // call's byte offset into it. listSegments 0 with cmaList: an empty list.
  std::uint32_t cmaList = 0;
  std::uint64_t listData = 0;    // char* const* (segment addresses)
  std::uint64_t listBegin = 0;   // const std::size_t* (segments + 1 offsets)
  std::uint64_t listSegments = 0;
  std::uint64_t listOffset = 0;
  // The call's fingerprint (core/call_status.h), compared by every rank when
  // it reads the descriptors: a mismatch is an error on every rank.
  std::uint64_t fingerprintWord = 0;
  std::uint64_t fingerprintCount = 0;
};

// A small collective's payload beside its call's sequence and fingerprint
// (small_collective.cc): the first line holds both with the first 32 bytes
// of data, so a peer reads a small call's check and data in one line
// transfer; the fingerprint costs no extra message and no extra read.
template <std::size_t Bytes>
struct alignas(kLineBytes) TaggedSlot {
  std::atomic<std::uint64_t> tag{0};  // sequence + 1 of the call held, stored last (release)
  std::uint64_t word = 0;             // its Fingerprint::word()
  std::uint64_t count = 0;            // its element count
  std::uint64_t reserved = 0;
  char data[Bytes];
};

// Slots of the small collectives, two per rank: call number q uses slot q % 2.
inline constexpr std::size_t kSmallAllreduceBytes = 32768;
using SmallSlot = TaggedSlot<kSmallAllreduceBytes>;
static_assert(offsetof(SmallSlot, data) == 32);

// The small broadcast's ring: payloads up to kBroadcastRingBytes, call q in
// entry q % kBroadcastRingEntries of the root. A root reuses an entry only
// once every rank has started a later call than the one it held, so a root
// may run that many calls ahead of its receivers, as the backend's eager
// messages let it (two slots held it in step with them: 2.5x slower than
// MPI_Bcast at 8-128 B).
inline constexpr std::size_t kBroadcastRingEntries = 16;
inline constexpr std::size_t kBroadcastRingBytes = 224;
using BroadcastEntry = TaggedSlot<kBroadcastRingBytes>;
static_assert(sizeof(BroadcastEntry) == 4 * kLineBytes);

struct RankControl {
  Counter inputReady;  // chunks whose input this rank has made readable
  Counter reduced;     // chunks whose slice this rank has reduced (allreduce)
  Counter consumed;    // chunks this rank will read no more of anyone's data
  Counter opsRead;     // collectives whose descriptors this rank has read
  Descriptor descriptors[kDescriptorRing];
  SmallSlot small[2];
  BroadcastEntry broadcastRing[kBroadcastRingEntries];
  // The owning communicator's call status (stall inspector, flight recorder).
  core::CallStatus status;
  // Rung by every peer whose engine moved anything (ShmEngine::progress): this
  // rank's progress thread sleeps on it while it waits on them.
  core::Doorbell bell;
};

// Every rank's part is 64-byte aligned and zero-filled when the (collective)
// constructor of an implementation returns on every rank. Destruction is
// collective for the MPI window (MPI_Win_free), local for POSIX segments.
class SharedSegment {
 public:
  virtual ~SharedSegment() = default;
  SharedSegment(const SharedSegment&) = delete;
  SharedSegment& operator=(const SharedSegment&) = delete;

  char* base(int rank) const { return bases_[static_cast<std::size_t>(rank)]; }
  char* mine() const { return base(rank_); }
  std::size_t bytesPerRank() const { return bytesPerRank_; }

 protected:
  SharedSegment(int rank, std::size_t bytesPerRank) : bytesPerRank_(bytesPerRank), rank_(rank) {}
  std::vector<char*> bases_;
  std::size_t bytesPerRank_ = 0;
  int rank_ = 0;
};

// Collective over the engine's node group: a new segment of bytesPerRank per rank.
using SegmentFactory = std::function<std::unique_ptr<SharedSegment>(std::size_t bytesPerRank)>;

// Addresses inside the engine segment.
class SegmentLayout {
 public:
  SegmentLayout(std::size_t chunkBytes, std::size_t slotChunks);
  std::size_t bytesPerRank() const { return slotOffset_ + chunkBytes_ * slotChunks_; }
  std::size_t chunkBytes() const { return chunkBytes_; }
  std::size_t slotChunks() const { return slotChunks_; }

  RankControl& control(const SharedSegment& w, int rank) const {
    return *reinterpret_cast<RankControl*>(w.base(rank));
  }
  // The staging chunk of engine-wide chunk number `chunk` in rank's slot ring.
  char* slot(const SharedSegment& w, int rank, std::uint64_t chunk) const {
    return w.base(rank) + slotOffset_ + (chunk % slotChunks_) * chunkBytes_;
  }

 private:
  std::size_t chunkBytes_;
  std::size_t slotChunks_;
  std::size_t slotOffset_;
};

}  // namespace boostcomm::shm
