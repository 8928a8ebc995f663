// Schedule: an algorithm as data.
//
// A builder turns a collective request into a Schedule: a list of steps
// (send, recv, reduce, copy, divide, native) with dependencies. Steps address
// memory symbolically — (buffer, byte offset) where buffer is the call's send
// buffer, recv buffer or the communicator's scratch — so one Schedule is built
// once per (collective, algorithm, count, dtype, op, root) and reused by every
// later call with fresh pointers (no allocation on the hot path).
//
// Terms used by builders:
//   block   — the part of the vector owned by one rank (allgather/reduce_scatter layout);
//   segment — the part of the vector a ring step moves (ring algorithms use blocks as segments);
//   chunk   — a pipelining unit inside a segment, so reduce of one chunk overlaps transfer of the next.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "boostcomm/types.h"

namespace boostcomm::executor {

enum class BufferId : std::uint8_t { kSend, kRecv, kScratch };

struct BufRef {
  BufferId buffer = BufferId::kRecv;
  std::size_t offsetBytes = 0;
};

enum class StepKind : std::uint8_t {
  kSend,    // send `bytes` from src to peer
  kRecv,    // receive `bytes` from peer into dst
  kReduce,  // dst = src op src2, `count` elements of the schedule's dtype
  kCopy,    // dst = src, `bytes` (skipped when both resolve to the same address)
  kDivide,  // dst /= divisor, `count` elements (finishes kAvg)
  kNative,  // the backend's own collective over the whole call (see NativeCall)
  kShm,     // the transport's shared-memory engine runs the call (NativeCall parameters)
  kRound,   // dst = what a receiver decodes from dst sent in `wire` format, `count` float32 (core/wire.h)
};

// Parameters of a kNative step; pointers come from the bound buffers.
struct NativeCall {
  Collective collective = Collective::kAllreduce;
  std::size_t count = 0;         // elements: allreduce/broadcast total, allgather send count, reduce_scatter recv count
  std::size_t elementOffset = 0; // chunk start (elements) for chunked allreduce/broadcast
  int root = 0;
};

inline constexpr std::uint32_t kNoStep = 0xFFFFFFFFu;

struct Step {
  StepKind kind = StepKind::kCopy;
  BufRef dst;
  BufRef src;
  BufRef src2;
  std::size_t bytes = 0;  // send / recv / copy
  std::size_t count = 0;  // reduce / divide
  int peer = -1;
  int tag = 0;            // per-schedule tag, < the call's tag span (at most kMaxStepTag)
  int divisor = 1;
  std::uint32_t depBegin = 0;  // dependencies: deps[depBegin, depBegin + depCount)
  std::uint32_t depCount = 0;
  std::uint8_t comm = 0;       // which communicator: kWorldComm, kIntraComm, kInterComm
  // kNative / kShm: place among this schedule's steps of that kind on `comm`
  // (the order they are issued in; see IssueLedger in executor.h).
  std::uint32_t issueIndex = 0;
  // Send/recv of float32 data as a 16-bit wire message (core/wire.h): `count`
  // elements, `bytes` their wire size, src2 a scratch staging area of `bytes`.
  // A send encodes src into staging when it starts; a recv receives into
  // staging and decodes into dst when it completes. kRound: the format.
  WireFormat wire = WireFormat::kOff;
  // The message is made ahead (Schedule::linkRoundToSend): on a kRound, also
  // leave dst's message in src2; on a wire send, src2 already holds it (its
  // kRound dependency wrote it), so the send does not encode again.
  bool staged = false;
  // Work folded into a reduce (Schedule::reduceReceived, wireRound): on a
  // wire kRecv, its message is left in staging (dst is not written); on a
  // kReduce, src2 is that message, decoded block by block as it is reduced;
  // on a kRound, its reduce rounds (and stages) the elements instead.
  bool fused = false;
  // kReduce with fused: the bf16 kRound over the same elements that it does
  // too (kNoStep: none), a block at a time while the block is in cache.
  std::uint32_t roundStep = kNoStep;
  NativeCall native;           // kNative: parameters; src/dst hold the send/recv base refs
};

// Collective step kinds whose issue order the backend matches across ranks
// (MPI collectives, shm engine calls): the lanes of an IssueLedger.
inline constexpr int kNumIssueLanes = 2;
inline int issueLane(StepKind kind) { return kind == StepKind::kShm ? 1 : 0; }
inline bool isIssueOrdered(StepKind kind) { return kind == StepKind::kNative || kind == StepKind::kShm; }

// Most tags one schedule may use; a communicator whose transport allows
// fewer gives its calls a smaller span (CollectiveSpec::tagSpan).
inline constexpr int kMaxStepTag = 1 << 16;

// Communicators a step can address. Hierarchical algorithms run flat
// building blocks on the node's ranks (intra) and across nodes (inter).
inline constexpr std::uint8_t kWorldComm = 0;
inline constexpr std::uint8_t kIntraComm = 1;
inline constexpr std::uint8_t kInterComm = 2;
inline constexpr int kNumComms = 3;

// A frame lets a flat builder run unchanged inside a composed algorithm:
// every step added while the frame is active is moved to communicator
// `comm`, its tag shifted by `tagOffset`, its send/recv buffer references
// redirected (`send`/`recv`: the buffer and byte offset that stand in for
// offset 0 of the flat builder's send/recv buffer), and steps without
// dependencies wait for `after` (the previous phase).
struct Frame {
  std::uint8_t comm = kWorldComm;
  int tagOffset = 0;
  BufRef send{BufferId::kSend, 0};
  BufRef recv{BufferId::kRecv, 0};
  std::vector<std::uint32_t> after;
};

class Schedule {
 public:
  Schedule() = default;
  Schedule(Collective coll, DataType dtype, ReduceOp op, std::string algorithm);

  using StepId = std::uint32_t;

  StepId send(BufRef src, std::size_t bytes, int peer, int tag, std::initializer_list<StepId> deps = {});
  StepId recv(BufRef dst, std::size_t bytes, int peer, int tag, std::initializer_list<StepId> deps = {});
  StepId reduce(BufRef dst, BufRef a, BufRef b, std::size_t count, std::initializer_list<StepId> deps = {});
  // dst = a op (what receive `recv` received into `received`, its dst as the
  // builder named it), after it; nothing else may read `received`. With a
  // wire format the message is decoded as it is reduced, a block at a time,
  // never written out as float32 (one pass over dst instead of two).
  StepId reduceReceived(BufRef dst, BufRef a, BufRef received, std::size_t count, StepId recv);
  StepId copy(BufRef dst, BufRef src, std::size_t bytes, std::initializer_list<StepId> deps = {});
  StepId divide(BufRef dst, std::size_t count, int divisor, std::initializer_list<StepId> deps = {});
  StepId native(const NativeCall& call, std::initializer_list<StepId> deps = {});
  // avgDivisor: what kAvg divides by (the engine divides once, itself).
  StepId shm(const NativeCall& call, int avgDivisor, std::initializer_list<StepId> deps = {});
  // Wire format of the send/recv steps added from now on (kOff: float32 as
  // is). Builders that support a wire format set it for their own steps
  // (WireScope); their step bytes stay in float32 terms and add() converts.
  void setWire(WireFormat wire);
  WireFormat wire() const { return wire_; }
  // Where a builder's chunk becomes final on its owner before being sent on:
  // with a wire format, a kRound step after `after` so the owner keeps the
  // value receivers decode (ranks agree bitwise); returns it, or `after`
  // when no wire format is set.
  StepId wireRound(BufRef dst, std::size_t count, StepId after);
  // Add one more dependency to the most recently added step.
  void addDependency(StepId dep);
  // Add dependencies given at run time (vector form) to the last step.
  void addDependencies(const std::vector<StepId>& deps);

  // Steps added until popFrame() are transformed by `frame` (frames do not nest).
  void pushFrame(Frame frame);
  void popFrame();
  // Steps in [begin, end) that no later step of that range depends on: waiting
  // for them means waiting for the whole range.
  std::vector<StepId> sinks(StepId begin, StepId end) const;

  // Scratch bytes the schedule addresses (grows as builders reserve).
  std::size_t reserveScratch(std::size_t bytes);
  std::size_t scratchBytes() const { return scratchBytes_; }

  const std::vector<Step>& steps() const { return steps_; }
  const std::vector<StepId>& deps() const { return deps_; }
  Collective collective() const { return collective_; }
  DataType dtype() const { return dtype_; }
  ReduceOp op() const { return op_; }
  const std::string& algorithm() const { return algorithm_; }
  std::size_t elementSize() const;
  bool empty() const { return steps_.empty(); }
  // Only backend collectives (and the avg divide): a blocking backend call
  // can run it without stalling other steps. (Kept as steps are added.)
  bool nativeOnly() const { return nativeOnly_; }
  // Only steps on the world communicator, none of them shared memory: its
  // transport alone advances this schedule. (Kept as steps are added: the
  // engine asks at every launch.)
  bool onWorldMessagesOnly() const { return worldMessagesOnly_; }
  // kNative (lane 0) / kShm (lane 1) steps on communicator `comm`.
  std::uint32_t issueCount(int lane, int comm) const { return issueCount_[lane][comm]; }

  // Checks invariants (deps point backwards, peers below worldSize, tags in
  // [0, tagSpan)); throws kInternal.
  void validate(int worldSize, int tagSpan = kMaxStepTag) const;
  // Human-readable dump, one step per line (tests, debugging).
  std::string toString() const;

 private:
  StepId add(Step step, std::initializer_list<StepId> deps);
  // When wire send `send` depends on kRound `dep` over the same elements,
  // the round encodes the send's message as it rounds (one pass, not two).
  void linkRoundToSend(StepId send, StepId dep);
  StepId chainAfterPrevious(StepId id);

  Collective collective_ = Collective::kAllreduce;
  DataType dtype_ = DataType::kFloat32;
  ReduceOp op_ = ReduceOp::kSum;
  std::string algorithm_;
  std::vector<Step> steps_;
  std::vector<StepId> deps_;
  std::size_t scratchBytes_ = 0;
  std::uint32_t issueCount_[kNumIssueLanes][kNumComms] = {};
  Frame frame_;
  bool framed_ = false;
  WireFormat wire_ = WireFormat::kOff;
  bool worldMessagesOnly_ = true;  // see onWorldMessagesOnly()
  bool nativeOnly_ = true;         // see nativeOnly()
};

// Sets the schedule's wire format for one builder's steps, restoring it after.
class WireScope {
 public:
  WireScope(Schedule& schedule, WireFormat wire) : schedule_(schedule), saved_(schedule.wire()) {
    schedule_.setWire(wire);
  }
  ~WireScope() { schedule_.setWire(saved_); }
  WireScope(const WireScope&) = delete;
  WireScope& operator=(const WireScope&) = delete;

 private:
  Schedule& schedule_;
  WireFormat saved_;
};

}  // namespace boostcomm::executor
