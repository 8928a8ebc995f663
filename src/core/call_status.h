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
#include <string_view>

#include "boostcomm/types.h"

namespace boostcomm::core {

struct Fingerprint {
  Collective collective = Collective::kAllreduce;
  DataType dtype = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  int root = 0;
  std::uint64_t count = 0;
  // The call was rejected by this rank's own argument checks before it
  // started (CallStatus::recordRejected): it never runs there.
  bool rejected = false;

  // collective | dtype << 8 | op << 16 | root << 24 | rejected << 63.
  std::uint64_t word() const {
    return static_cast<std::uint64_t>(collective) | static_cast<std::uint64_t>(dtype) << 8 |
           static_cast<std::uint64_t>(op) << 16 | static_cast<std::uint64_t>(static_cast<std::uint32_t>(root)) << 24 |
           static_cast<std::uint64_t>(rejected) << 63;
  }
  // Keeps only the fields `collective` reads (others stay at their defaults).
  static Fingerprint of(Collective collective, DataType dtype, ReduceOp op, int root, std::uint64_t count);
  static Fingerprint fromWord(std::uint64_t word, std::uint64_t count);
  bool operator==(const Fingerprint& o) const { return word() == o.word() && count == o.count; }
};

// The fingerprint as it travels in a point-to-point schedule's first message
// to each peer (executor/executor.h): fixed size, so ranks that disagree on
// the count still match each other's header message.
struct CallHeader {
  std::uint32_t magic = kMagic;
  std::int32_t rank = -1;      // the sender's world rank
  std::uint64_t sequence = 0;  // the call's sequence number in its communicator
  std::uint64_t word = 0;      // Fingerprint::word()
  std::uint64_t count = 0;
  std::uint32_t wire = 0;      // WireFormat of the call
  std::uint32_t reserved = 0;
  static constexpr std::uint32_t kMagic = 0x42434850;  // "BCHP"
};
static_assert(sizeof(CallHeader) == 40);

// Whether `theirs` (received from a peer) is a header of the same call as
// `mine` (the per-call check; compareHeaders words a difference).
inline bool sameCall(const CallHeader& mine, const CallHeader& theirs) {
  return theirs.magic == CallHeader::kMagic && theirs.sequence == mine.sequence && theirs.word == mine.word &&
         theirs.count == mine.count && theirs.wire == mine.wire;
}

// Empty when sameCall(mine, theirs); otherwise the mismatch in words, both
// ranks named.
std::string compareHeaders(const CallHeader& mine, const CallHeader& theirs);

// Text into a fixed buffer, without allocating or locking: the flight
// recorder's JSON is also written from a fatal-signal handler, where only
// async-signal-safe work is allowed. Output past the capacity is dropped
// (overflowed() says so).
class FixedWriter {
 public:
  FixedWriter(char* data, std::size_t capacity) : data_(data), capacity_(capacity) {}
  FixedWriter& put(std::string_view text);
  FixedWriter& put(std::uint64_t value);
  std::size_t size() const { return size_; }
  bool overflowed() const { return overflowed_; }

 private:
  char* data_;
  std::size_t capacity_;
  std::size_t size_ = 0;
  bool overflowed_ = false;
};

// `text` as the inside of a JSON string (quotes, backslashes and control
// characters escaped).
void putJsonText(FixedWriter& w, std::string_view text);

// "allreduce float32 x1000 sum", "broadcast float32 x1000 root 0", "barrier".
std::string describe(const Fingerprint& f);
void describeTo(FixedWriter& out, const Fingerprint& f);
// "rank 0: allreduce float32 x1000 sum, seq 7; rank 1: broadcast ..., seq 7".
std::string describeMismatch(int rankA, const Fingerprint& a, int rankB, const Fingerprint& b, std::uint64_t seq);
// The same, where the two calls' sequence numbers differ (an extra call on one rank).
std::string describeMismatch(int rankA, const Fingerprint& a, std::uint64_t seqA, int rankB, const Fingerprint& b,
                             std::uint64_t seqB);

// 256 calls: a few training steps of a bucketed DDP job (12 KiB per rank).
inline constexpr std::size_t kFlightRingEntries = 256;

// How long a peer's rejected entry (CallStatus::recordRejected) must stand
// before a rank waiting in that call reports it: ranks that all rejected the
// same bad call retry within microseconds to milliseconds of each other.
inline constexpr std::uint64_t kRejectedGraceNs = 2'000'000'000;

// Wall-clock time in ns from the coarse clock (CLOCK_REALTIME_COARSE: ~5 ns
// to read against ~20 ns for the precise one, resolution one kernel tick,
// 1-4 ms): when a call started and ended, comparable across the ranks of a
// host (and across hosts as far as their clocks agree), cheap enough for
// every call.
std::uint64_t coarseWallNs();

struct alignas(64) FlightEntry {  // one cache line: a peer's read of an entry is one line transfer
  std::atomic<std::uint64_t> tag{0};  // sequence + 1; 0 while being written
  std::atomic<std::uint64_t> word{0};
  std::atomic<std::uint64_t> count{0};
  // The algorithm's name: a pointer to a static string of the OWNER's
  // process (peers reading the shared segment must not follow it).
  std::atomic<std::uint64_t> algorithm{0};
  std::atomic<std::uint64_t> startNs{0};  // coarseWallNs() at the start
  std::atomic<std::uint64_t> wire{0};     // WireFormat of the call (CallHeader::wire)
  // The chained digest of the fingerprints of every call the owner started,
  // through this one (chainDigest; 0 in a rejected entry): equal digests at
  // a sequence mean equal calls up to it (but for a 2^-64 collision), so
  // one line per peer checks a batch of calls (StallInspector::agreedThrough).
  std::atomic<std::uint64_t> digest{0};
};
static_assert(sizeof(FlightEntry) == 64);

// The digest of call `seq` with fingerprint `f`, after `previous` (the
// digest through seq - 1; 0 before the first call). Never 0.
inline std::uint64_t chainDigest(std::uint64_t previous, std::uint64_t seq, const Fingerprint& f) {
  std::uint64_t x = previous ^ (f.word() * 0x9E3779B97F4A7C15ULL) ^ (f.count + 0xBF58476D1CE4E5B9ULL * (seq + 1));
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;  // splitmix64's finaliser
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  x ^= x >> 31;
  return x == 0 ? 1 : x;
}

struct alignas(64) CallStatus {
  std::atomic<std::uint64_t> started{0};    // sequence + 1 of the latest call started
  std::atomic<std::uint64_t> completed{0};  // sequence + 1 of the latest call completed
  std::atomic<std::uint32_t> blocking{0};   // 1 while inside a blocking backend call (cannot time out)
  std::atomic<std::uint32_t> pid{0};
  // The inode of the owner's /proc/self/ns/pid: a peer's pid means something
  // to this process (its liveness can be probed) only in the same namespace.
  std::atomic<std::uint64_t> pidNamespace{0};
  // sequence + 1 of the latest small collective this rank failed (its
  // deadline, abort, a peer gone): a peer that completes that call later
  // (its slots were all written) must not return it as a success
  // (shm/small_collective.cc, CallRecord::raiseIfPeerFailed).
  std::atomic<std::uint64_t> failed{0};
  alignas(64) FlightEntry ring[kFlightRingEntries];
  // ring[i]'s completion time (coarseWallNs; 0 while in flight), apart from
  // the entry: peers read an entry right when its owner's call returns (the
  // post-return and header checks), and the owner's store here must not
  // take that cache line away from them.
  alignas(64) std::atomic<std::uint64_t> endNs[kFlightRingEntries] = {};

  // The owner's side (a handful of relaxed stores and one release).
  void recordStart(std::uint64_t seq, const Fingerprint& f, const char* algorithm = nullptr,
                   std::uint32_t wireFormat = 0) {
    // The chain continues from the entry of call seq - 1 (sequences advance
    // by one per started call; a rejected call reuses its sequence).
    const std::uint64_t previous = seq == 0 ? 0 : digestOf(seq - 1);
    writeEntry(seq, f, algorithm, wireFormat, chainDigest(previous, seq, f));
    started.store(seq + 1, std::memory_order_release);
  }
  // A call this rank's argument checks rejected (it raised kInvalidArgument
  // here and never started): its entry says so, for peers that wait in that
  // call, and `started` stays (the rank's next call reuses the sequence and
  // overwrites the entry). Peers act on it only after kRejectedGraceNs: every
  // rank may have rejected the same bad call and be about to retry.
  void recordRejected(std::uint64_t seq, Fingerprint f) {
    f.rejected = true;
    writeEntry(seq, f, nullptr, 0, 0);
  }
  void recordEnd(std::uint64_t seq) {
    FlightEntry& e = ring[seq % kFlightRingEntries];
    if (e.tag.load(std::memory_order_relaxed) == seq + 1)
      endNs[seq % kFlightRingEntries].store(coarseWallNs(), std::memory_order_relaxed);
    if (completed.load(std::memory_order_relaxed) < seq + 1) completed.store(seq + 1, std::memory_order_release);
  }
  // The reader's side: the fingerprint of call `seq`, if still in the ring
  // (startNs: when it started, or was rejected).
  bool read(std::uint64_t seq, Fingerprint& out, std::uint64_t* startNs = nullptr) const;
  // Whether entry `seq` holds exactly (word, count): the post-return check's
  // common case, without decoding (false also while it is being written or
  // when it holds another call; read() then says which).
  bool holds(std::uint64_t seq, std::uint64_t word, std::uint64_t count) const {
    const FlightEntry& e = ring[seq % kFlightRingEntries];
    const std::uint64_t before = e.tag.load(std::memory_order_acquire);
    if (before != seq + 1) return false;
    const bool same = e.word.load(std::memory_order_relaxed) == word && e.count.load(std::memory_order_relaxed) == count;
    std::atomic_thread_fence(std::memory_order_acquire);
    return same && e.tag.load(std::memory_order_relaxed) == before;
  }
  // Whether entry `seq` is written and carries `digest` (every call through
  // `seq` equal to the reader's, chainDigest); false also while being written.
  bool holdsDigest(std::uint64_t seq, std::uint64_t digest) const {
    const FlightEntry& e = ring[seq % kFlightRingEntries];
    const std::uint64_t before = e.tag.load(std::memory_order_acquire);
    if (before != seq + 1) return false;
    const bool same = e.digest.load(std::memory_order_relaxed) == digest;
    std::atomic_thread_fence(std::memory_order_acquire);
    return same && e.tag.load(std::memory_order_relaxed) == before;
  }
  // The owner's digest through call `seq`, if still in its ring (else 0).
  std::uint64_t digestOf(std::uint64_t seq) const {
    const FlightEntry& e = ring[seq % kFlightRingEntries];
    return e.tag.load(std::memory_order_relaxed) == seq + 1 ? e.digest.load(std::memory_order_relaxed) : 0;
  }
  // The same entry as the header `rank` would have sent for call `seq`
  // (executor/executor.h: node peers exchange no header message). kGone: the
  // owner is more than kFlightRingEntries calls ahead and the entry was
  // reused (a broadcast root's eager sends complete without its receivers),
  // so the call cannot be checked any more; kNotYet: not started there yet.
  enum class Read : std::uint8_t { kNotYet, kRead, kGone };
  Read readHeader(std::uint64_t seq, int rank, CallHeader& out) const;

 private:
  // Entry `seq`, seqlocked: tag cleared, fields written, tag stored last.
  void writeEntry(std::uint64_t seq, const Fingerprint& f, const char* algorithm, std::uint32_t wireFormat,
                  std::uint64_t digest) {
    FlightEntry& e = ring[seq % kFlightRingEntries];
    e.tag.store(0, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
    e.word.store(f.word(), std::memory_order_relaxed);
    e.count.store(f.count, std::memory_order_relaxed);
    e.algorithm.store(reinterpret_cast<std::uintptr_t>(algorithm), std::memory_order_relaxed);
    e.startNs.store(coarseWallNs(), std::memory_order_relaxed);
    endNs[seq % kFlightRingEntries].store(0, std::memory_order_relaxed);
    e.wire.store(wireFormat, std::memory_order_relaxed);
    e.digest.store(digest, std::memory_order_relaxed);
    e.tag.store(seq + 1, std::memory_order_release);
  }
};

}  // namespace boostcomm::core
