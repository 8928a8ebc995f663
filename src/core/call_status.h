// Call fingerprints and the per-rank call status that peers read.
//
// Terms:
//   fingerprint — what a collective call is: (collective, dtype, op, root,
//                 count) plus its sequence number in the communicator. Every
//                 rank of a correct program has equal fingerprints at equal
//                 sequence numbers; a difference is a mismatch.
//   call status — one rank's record of its calls: the last started and last
//                 completed sequence number, and a ring of its most recent
//                 fingerprints (the flight recorder). Written only by its own
//                 rank, with plain atomic stores (a few ns per call); read by
//                 peers that share the memory (the shared-memory segment of a
//                 node communicator) and by the watchdog thread. Because it is
//                 memory, not a message, it can be read while the data path is
//                 stuck: that is the side channel of the stall inspector.
// The ring entries are seqlocked: the owner clears the tag, writes the
// fields, then stores the tag (sequence + 1) with release; a reader accepts
// an entry only if it reads the same nonzero tag before and after.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

#include "boostcomm/types.h"

namespace boostcomm::core {

struct Fingerprint {
  Collective collective = Collective::kAllreduce;
  DataType dtype = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  int root = 0;
  std::uint64_t count = 0;

  // collective | dtype << 8 | op << 16 | root << 24 (root < 2^39).
  std::uint64_t word() const {
    return static_cast<std::uint64_t>(collective) | static_cast<std::uint64_t>(dtype) << 8 |
           static_cast<std::uint64_t>(op) << 16 | static_cast<std::uint64_t>(static_cast<std::uint32_t>(root)) << 24;
  }
  // Keeps only the fields `collective` reads (others stay at their defaults).
  static Fingerprint of(Collective collective, DataType dtype, ReduceOp op, int root, std::uint64_t count);
  static Fingerprint fromWord(std::uint64_t word, std::uint64_t count);
  bool operator==(const Fingerprint& o) const { return word() == o.word() && count == o.count; }
};

// "allreduce float32 x1000 sum", "broadcast float32 x1000 root 0", "barrier".
std::string describe(const Fingerprint& f);
// "rank 0: allreduce float32 x1000 sum, seq 7; rank 1: broadcast ..., seq 7".
std::string describeMismatch(int rankA, const Fingerprint& a, int rankB, const Fingerprint& b, std::uint64_t seq);

inline constexpr std::size_t kFlightRingEntries = 64;

struct FlightEntry {
  std::atomic<std::uint64_t> tag{0};  // sequence + 1; 0 while being written
  std::atomic<std::uint64_t> word{0};
  std::atomic<std::uint64_t> count{0};
  std::atomic<std::uint64_t> unused{0};
};

struct alignas(64) CallStatus {
  std::atomic<std::uint64_t> started{0};    // sequence + 1 of the latest call started
  std::atomic<std::uint64_t> completed{0};  // sequence + 1 of the latest call completed
  std::atomic<std::uint32_t> blocking{0};   // 1 while inside a blocking backend call (cannot time out)
  std::atomic<std::uint32_t> pid{0};
  alignas(64) FlightEntry ring[kFlightRingEntries];

  // The owner's side (a handful of relaxed stores and one release).
  void recordStart(std::uint64_t seq, const Fingerprint& f) {
    FlightEntry& e = ring[seq % kFlightRingEntries];
    e.tag.store(0, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
    e.word.store(f.word(), std::memory_order_relaxed);
    e.count.store(f.count, std::memory_order_relaxed);
    e.tag.store(seq + 1, std::memory_order_release);
    started.store(seq + 1, std::memory_order_release);
  }
  void recordEnd(std::uint64_t seq) {
    if (completed.load(std::memory_order_relaxed) < seq + 1) completed.store(seq + 1, std::memory_order_release);
  }
  // The reader's side: the fingerprint of call `seq`, if still in the ring.
  bool read(std::uint64_t seq, Fingerprint& out) const;
};

}  // namespace boostcomm::core
