// The Communicator: collectives over a group of ranks.
//
// Semantics follow MPI: every rank of the communicator calls the same
// collectives in the same order with matching counts, dtypes, ops and roots,
// and in the same form: a blocking call on one rank does not match an *Async
// call on another (as in MPI, where blocking and non-blocking collectives
// never match).
// All ranks end with bitwise-identical results.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "boostcomm/buffer.h"
#include "boostcomm/link_stats.h"
#include "boostcomm/store.h"
#include "boostcomm/types.h"
#include "boostcomm/work.h"

namespace boostcomm {

namespace detail {
class CommunicatorImpl;
struct Access;  // the library's internal accessor (src/api/access.h)
}

struct CallOptions {
  // Algorithm name ("native", "ring", "rhd", ...); empty: the selection
  // (BOOSTCOMM_ALGO, tuning cache, strategy, table; docs/ALGORITHMS.md).
  std::string algorithm;
  // Deadline for a blocking call; empty uses BOOSTCOMM_TIMEOUT_MS (0 = none).
  std::optional<std::chrono::milliseconds> timeout;
  // Wire format of this allreduce, allgather(v) or reduce_scatter
  // (docs/ALGORITHMS.md, "Wire formats"); empty: the communicator's
  // (setWireFormat, BOOSTCOMM_WIRE_DTYPE). It compresses where the call runs
  // ring, rhd or hier (hier: its inter-node phase only); under native or shm
  // the payload travels as float32 (Work::wireFormat says which). Set
  // explicitly to kBf16/kFp16 on anything but a float32 allreduce, allgather
  // or reduce_scatter, or together with an algorithm that cannot carry it,
  // it is an error (kInvalidArgument); kOff asks for exact values whatever
  // the communicator's setting. Every rank must pass the same
  // (BOOSTCOMM_CHECK_CONSISTENCY=1 checks it).
  std::optional<WireFormat> wire;
};

// How collectives use the machine layout (docs/ALGORITHMS.md, "Strategy").
enum class Strategy {
  kFlat,           // every rank alike: the flat selection table
  kTopologyAware,  // hierarchical algorithms wherever there are several nodes with several ranks each
  kAuto,           // hierarchical on such layouts from BOOSTCOMM_HIER_MIN_BYTES up, flat below
};

struct CommStrategy {
  Strategy strategy = Strategy::kAuto;
  // "auto", or an algorithm name used for every collective that has one.
  std::string collectiveAlgorithm = "auto";
  // The algorithms of the two phases of hierarchical allreduce (defaults:
  // BOOSTCOMM_HIER_INTRA_ALGO, BOOSTCOMM_HIER_INTER_ALGO). "auto" means the
  // same for both: the library's built-in choice for that phase.
  // Intra-node: "auto" = shm when the node's ranks share a segment, else
  // ring; "shm" (shm where it can run, else ring: the same as auto); "ring".
  std::string intraAlgorithm = "auto";
  // Inter-node: "auto" = ring; "ring", "rhd" or "native".
  std::string interAlgorithm = "auto";
};

// "flat", "topology_aware", "auto"; empty when unknown.
std::optional<Strategy> parseStrategy(std::string_view name);

// Who advances asynchronous collectives (BOOSTCOMM_PROGRESS; docs/ARCHITECTURE.md).
enum class ProgressMode {
  kAuto,    // the caller, plus a progress thread once a client needs one (OverlapEngine, c10d backend)
  kCaller,  // only the caller: inside blocking calls, Work::test/wait and every other call
  kThread,  // a progress thread from creation, besides the caller
};
// "auto", "caller", "thread"; empty when unknown.
std::optional<ProgressMode> parseProgressMode(std::string_view name);

// Thread-safety contract. Every method may be called from any thread: one
// lock per communicator serialises them (and the progress thread takes it
// too). What stays the caller's job is the MPI matching rule above: when
// several threads issue collectives on one communicator, they must issue them
// in the same order on every rank. finalize() must not race with other calls.
// Completion callbacks (Work::onComplete) run without the lock and may call
// the communicator again.
class Communicator {
 public:
  // The MPI world. Initialises MPI (MPI_THREAD_MULTIPLE when available) if
  // nobody has; finalises it at finalize() only when boostcomm initialised it.
  static std::shared_ptr<Communicator> createMpiWorld();
  // `size` processes that are not one MPI job (torchrun, env://, file://):
  // collective over them. They rendezvous through `store` (every rank passes
  // a store reaching the same keys, its own distinct rank and the same size)
  // and talk over Gloo's TCP transport; node membership comes from host names
  // exchanged through the store (BOOSTCOMM_RANKS_PER_NODE / NODE_LAYOUT
  // override it). Fails within `timeout` (naming the store) when a rank does
  // not join; a rank whose size disagrees with rank 0's fails with kMismatch.
  static std::shared_ptr<Communicator> createFromStore(std::shared_ptr<KeyValueStore> store, int rank, int size,
                                                       std::chrono::milliseconds timeout);

  explicit Communicator(std::unique_ptr<detail::CommunicatorImpl> impl);
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const;
  int size() const;

  // recv = op over all ranks' send. In place when send.data == recv.data.
  void allreduce(ConstView send, View recv, ReduceOp op, const CallOptions& options = {});
  Work allreduceAsync(ConstView send, View recv, ReduceOp op, const CallOptions& options = {});

  // recv (size * send.count elements) = concatenation of every rank's send.
  // In place when send.data == recv.data + rank * send.count elements.
  void allgather(ConstView send, View recv, const CallOptions& options = {});
  Work allgatherAsync(ConstView send, View recv, const CallOptions& options = {});

  // Varying counts: rank i contributes recvCounts[i] elements; recv holds
  // their sum, packed in rank order. send.count must equal recvCounts[rank].
  void allgatherv(ConstView send, View recv, std::span<const std::size_t> recvCounts,
                  const CallOptions& options = {});
  Work allgathervAsync(ConstView send, View recv, std::span<const std::size_t> recvCounts,
                       const CallOptions& options = {});

  // buffer on every rank = buffer on root.
  void broadcast(View buffer, int root, const CallOptions& options = {});
  Work broadcastAsync(View buffer, int root, const CallOptions& options = {});

  // send has size * recv.count elements; rank i receives block i of the reduction.
  void reduceScatter(ConstView send, View recv, ReduceOp op, const CallOptions& options = {});
  Work reduceScatterAsync(ConstView send, View recv, ReduceOp op, const CallOptions& options = {});

  // Segment lists: one allreduce over the concatenation of `segments`, in
  // place (e.g. a model's gradient tensors), without packing them into one
  // buffer: the shared-memory engine copies in from and out to the segments,
  // ring/rhd steps send, receive and reduce them directly (a chunk may
  // straddle segments), native runs through a staging copy
  // (docs/ALGORITHMS.md, "Segment lists"). One dtype for the whole list; the
  // algorithm is selected by the total bytes, as allreduce. Every rank
  // passes the same list shape (counts and dtype in order) and op. Checked
  // on every call with one small allgather: overlapping segments, a null
  // pointer, mixed dtypes on any rank, or lists that differ between ranks are
  // an error on every rank (kInvalidArgument / kMismatch), before data moves.
  // The async form copies the list: it need not outlive the call (the
  // memory it names must, until the Work completes).
  void allreduceMany(std::span<const View> segments, ReduceOp op, const CallOptions& options = {});
  Work allreduceManyAsync(std::span<const View> segments, ReduceOp op, const CallOptions& options = {});
  // The same for broadcast: every segment on every rank = that segment on root
  // (one broadcast of the list; shm and native through a staging copy, binomial
  // addressing the segments directly). Same checks and agreement (root too).
  void broadcastMany(std::span<const View> segments, int root, const CallOptions& options = {});
  Work broadcastManyAsync(std::span<const View> segments, int root, const CallOptions& options = {});
  // allgather over tensor lists: recv[i] (size * send[i].count elements) =
  // send[i] of rank 0, rank 1, ... in rank order, for every i, as one
  // allgather of the lists (the caller's tensors are addressed in place:
  // ring/rd steps send and receive them directly, shm and native through a
  // staging copy). One dtype for both lists; every rank passes the same
  // counts. No send or recv segment may overlap another.
  void allgatherMany(std::span<const ConstView> send, std::span<const View> recv, const CallOptions& options = {});
  Work allgatherManyAsync(std::span<const ConstView> send, std::span<const View> recv,
                          const CallOptions& options = {});
  // reduce_scatter over tensor lists: recv[i] = block `rank` (recv[i].count
  // elements) of the reduction over ranks of send[i] (size * recv[i].count
  // elements), for every i, as one reduce_scatter. Same rules as allgatherMany.
  void reduceScatterMany(std::span<const ConstView> send, std::span<const View> recv, ReduceOp op,
                         const CallOptions& options = {});
  Work reduceScatterManyAsync(std::span<const ConstView> send, std::span<const View> recv, ReduceOp op,
                              const CallOptions& options = {});
  // The per-rank forms, for callers whose blocks are separate buffers (torch's
  // all_gather / all_gather_coalesced output lists, reduce_scatter's input
  // list): with n = send.size() (recv.size()), recvByRank (sendByRank) holds
  // size * n views, rank-major: recvByRank[r * n + i] receives send[i] of
  // rank r, and sendByRank[r * n + i] is the block of tensor i that rank r
  // receives the reduction of; each has the count of send[i] (recv[i]).
  // Otherwise the same collective, rules and checks as the forms above.
  void allgatherManyPerRank(std::span<const ConstView> send, std::span<const View> recvByRank,
                            const CallOptions& options = {});
  Work allgatherManyPerRankAsync(std::span<const ConstView> send, std::span<const View> recvByRank,
                                 const CallOptions& options = {});
  void reduceScatterManyPerRank(std::span<const ConstView> sendByRank, std::span<const View> recv, ReduceOp op,
                                const CallOptions& options = {});
  Work reduceScatterManyPerRankAsync(std::span<const ConstView> sendByRank, std::span<const View> recv, ReduceOp op,
                                     const CallOptions& options = {});

  void barrier(const CallOptions& options = {});
  Work barrierAsync(const CallOptions& options = {});

  // Point-to-point messages (torch's send / recv / recvAnysource). Not
  // collective: `buffer` goes to rank `peer`, where a recvAsync naming this
  // rank (or kAnySource) and the same tag receives it; messages between one
  // pair with one tag match in posting order. They use a channel of their
  // own, apart from the collectives' traffic, which every rank opens once
  // with enablePointToPoint() (collective; later calls return at once).
  // Counts must agree on both sides (element count x dtype size in bytes).
  // A bad peer (out of range, this rank), a tag outside [0, kMaxMessageTag]
  // or a null buffer is Error{kInvalidArgument} on the calling rank, at once.
  // Work::source() names the sender once a receive completed.
  static constexpr int kAnySource = -1;
  static constexpr int kMaxMessageTag = (1 << 30) - 1;
  void enablePointToPoint();
  Work sendAsync(ConstView buffer, int peer, int tag);
  Work recvAsync(View buffer, int peer, int tag);

  // Collective over the communicator (all ranks must pass the same settings).
  // Unknown names throw Error{kInvalidArgument} listing the valid ones.
  void configureCommStrategy(const CommStrategy& strategy);
  // Deadline of every wait of this communicator: beats BOOSTCOMM_TIMEOUT_MS
  // (default 10 min), loses to CallOptions::timeout; empty or 0 waits
  // forever. A deadline set here makes waits raise Error{kTimeout}, native
  // collectives included (docs/RELIABILITY.md). Not collective.
  void setTimeout(std::optional<std::chrono::milliseconds> timeout);
  // Abandons this rank's work: every operation in flight completes with
  // Error{kAborted} and later calls raise it. Any thread, not
  // collective (each rank aborts its own side); returns within about 1 s. A
  // call blocked inside the backend's blocking collective is not interrupted
  // (it ends at its deadline). finalize() still releases the resources.
  void abort();
  // For callers that check a collective's arguments themselves before calling
  // it (framework bindings: the c10d backend's tensor checks): this rank
  // rejected its next `collective` call and will raise its own error. Peers
  // that entered that call then fail promptly naming this rank instead of
  // waiting out the deadline, as for calls this communicator rejects itself
  // (docs/RELIABILITY.md, "Rejected calls"). Not collective; no effect on the
  // next call made here.
  void reportRejectedCall(Collective collective);
  // This rank's flight recorder as JSON: its last 256 collectives (sequence,
  // call, started or completed). Also dumped to BOOSTCOMM_TRACE_DIR at a
  // stall, mismatch, peer exit or deadline, each dump a new file (rank-N.json,
  // rank-N.2.json, ...); `boostcomm trace analyze DIR` compares ranks.
  std::string flightRecord() const;
  // Node layout in use: "1x4", "2x2", "3+1" ... (detected, or declared by
  // BOOSTCOMM_RANKS_PER_NODE / BOOSTCOMM_NODE_LAYOUT).
  std::string nodeLayout() const;

  // Algorithms that can run this collective here, native first.
  std::vector<std::string> algorithms(Collective coll) const;
  // The algorithm a call of `bytes` (nccl-tests payload) without
  // CallOptions::algorithm runs: BOOSTCOMM_ALGO, tuning cache, strategy and
  // table merged (docs/ALGORITHMS.md, "Selection"). Throws as the call would
  // when a forced algorithm cannot run it. A BOOSTCOMM_TUNING_CACHE is read
  // (collectively) at the first collective call; asked before it on one
  // detected node, this rank reads the file itself (once) and answers what
  // that read will install. With a declared layout or across nodes, before
  // the first call, the cache and the link facts the model layer uses are not
  // known yet: the answer is the untuned one.
  std::string selectedAlgorithm(Collective coll, std::size_t bytes) const;

  // Wire format of float32 allreduce, allgather(v) and reduce_scatter
  // (docs/ALGORITHMS.md, "Wire formats"; an allgather rounds each value once):
  // kOff, kBf16, kFp16 or kAuto; the default is BOOSTCOMM_WIRE_DTYPE.
  // Collective: every rank calls it with the same value; ranks passing
  // different values all throw Error{kMismatch}. Non-float32 payloads pass
  // through unchanged.
  void setWireFormat(WireFormat wire);
  WireFormat wireFormat() const;
  // How an allreduce (only) of `bytes` of `dtype` with `options` travels (its
  // algorithm as the selection or options.algorithm picks it): kOff, kBf16
  // or kFp16 (kAuto resolved by the cost model).
  WireFormat wireFormatOf(std::size_t bytes, DataType dtype = DataType::kFloat32,
                          const CallOptions& options = {}) const;

  // Registered communication buffers (zero-copy). Returns `bytes` of zeroed,
  // 64-byte aligned memory inside the node's shared segment when every rank
  // of the communicator is on one node (the "shm" algorithms then read and
  // write it in place: a collective whose send buffer lies in registered
  // memory skips the copy into the segment, one whose recv buffer does skips
  // the copy out); elsewhere ordinary memory with the same contract.
  // Collective: every rank calls it at the same point, in the same order,
  // with the same size; a rank asking for a different size makes every rank
  // throw Error{kMismatch}. Valid until freeBuffer() (also collective; no
  // collective may be using the buffer) or finalize().
  void* allocateBuffer(std::size_t bytes);
  void freeBuffer(void* buffer);
  // Registered memory owned by the returned pointer and its copies instead
  // of by the communicator: zeroed, page-aligned, valid for as long as any
  // copy lives (finalize() included), and given back when the last one goes
  // (on any thread, no communication). Null, on every rank alike, where the
  // communicator has no shared segment (its ranks span nodes, or
  // BOOSTCOMM_SHM=0), or where the node's shared memory cannot hold it
  // (rank 0 prints why): ordinary memory serves there. Collective like
  // allocateBuffer (same size on every rank, or kMismatch on every rank);
  // it first completes the collectives in flight. With a timeout set, a
  // rank that does not call it in time makes the others throw kTimeout
  // (the communicator is then done). What the c10d backend
  // gives DDP for its gradient buckets (Backend::allocateTensor).
  std::shared_ptr<void> allocateOwnedBuffer(std::size_t bytes);
  // Whether every rank of the communicator shares a node segment (what makes
  // registered memory zero-copy); the same on every rank. Local.
  bool hasSharedMemory() const;

  // Background progress: a library thread advances asynchronous collectives
  // whenever no caller does, so Works complete and their callbacks run while
  // the caller computes. Local (not collective). Blocking calls and
  // Work::wait always drive progress themselves, thread or not.
  void setProgressThread(bool on);
  bool progressThread() const;
  // What clients that need background progress call (OverlapEngine, the
  // c10d backend): starts the thread unless BOOSTCOMM_PROGRESS is "caller".
  void useProgressThread();
  // One progress sweep over the collectives in flight (never blocks): for
  // callers that do long local work (copies) between launches and waits.
  void progress();

  // Link accounting of this rank (boostcomm/link_stats.h); local, not
  // collective. reset: the counters restart after the snapshot.
  LinkStats linkStats(bool reset = false);

  // Completes outstanding work, releases buffers and, if boostcomm initialised
  // MPI, finalises it. Any later call throws Error{kFinalized}.
  void finalize();
  bool finalized() const;

 private:
  friend struct detail::Access;
  std::unique_ptr<detail::CommunicatorImpl> impl_;
};

}  // namespace boostcomm
