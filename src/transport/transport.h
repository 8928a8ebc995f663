// Transport: how bytes move between the ranks of a group.
//
// Two services: non-blocking point-to-point (isend / irecv / test) that the
// executor drives for boostcomm's own algorithms, and the backend's own
// collectives ("native"), blocking or non-blocking. Implementations: MPI
// (mpi/), the simulated network (sim/); in-process threads for unit tests live
// in the test-only library bc_testing (tests/testing/inproc_transport.h).
//
// Messages between one (source, destination, tag) triple are matched in the
// order they were posted (MPI's non-overtaking rule); algorithms rely on it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "boostcomm/error.h"
#include "boostcomm/types.h"
#include "core/segment_list.h"
#include "transport/shared_window.h"
#include "transport/side_channel.h"

namespace boostcomm::transport {

// Error{kTransport} for a message longer than the receive posted for it
// (MPI_ERR_TRUNCATE under MPI, the one transport whose receives may meet a
// longer message). Raised as this type, so a caller that turns it into a
// mismatch tests the type, not the backend's text.
class TruncationError : public Error {
 public:
  using Error::Error;
};

// An outstanding operation. Opaque slots filled by the transport that posted
// it; inactive (all zero) once complete. No allocation per request.
class SharedMemoryEngine;  // transport/shared_memory.h

struct Request {
  std::uintptr_t slot[2] = {0, 0};
  bool active() const { return slot[0] != 0 || slot[1] != 0; }
};

// Native collective calls: blocking when `req` is null, otherwise posted
// non-blocking and completed through test(*req). Counts are elements and fit
// in int32 (callers chunk larger payloads). ReduceOp::kAvg is not accepted:
// callers reduce with kSum and divide.
// A call as it travels beside a native collective's data: its fingerprint
// (core::Fingerprint::word() and count), its sequence number, the sender.
struct CallStamp {
  std::uint64_t word = 0;
  std::uint64_t count = 0;
  std::uint64_t sequence = 0;
  std::int64_t rank = -1;
  bool sameCall(const CallStamp& o) const { return word == o.word && count == o.count && sequence == o.sequence; }
  bool operator<(const CallStamp& o) const {
    if (word != o.word) return word < o.word;
    if (count != o.count) return count < o.count;
    if (sequence != o.sequence) return sequence < o.sequence;
    return rank < o.rank;
  }
};
inline constexpr std::size_t kCheckedAllreduceMaxBytes = 16384;

class Transport {
 public:
  virtual ~Transport() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string name() const = 0;
  // Largest tag usable by isend/irecv.
  virtual int maxTag() const = 0;

  // Whether a receive may be posted for more bytes than the message it
  // matches (MPI's rule: it completes with the message's bytes); a longer
  // message is an error either way. The inline fingerprint header
  // (executor.h) needs it.
  virtual bool acceptsShorterMessages() const { return false; }
  // Whether a thread of ours (the progress thread) may call this transport
  // while the application's threads call it too. MPI allows it only at
  // MPI_THREAD_MULTIPLE (boostcomm asks for it when it initialises MPI; an
  // application may have chosen less).
  virtual bool callableFromAnyThread() const { return true; }
  // Whether a receive is announced to its sender, which sends only once the
  // announcement arrived (Gloo's pairs), and the announcement queues behind
  // this rank's outgoing data: the executor then posts a large send to a peer
  // it also receives from only after that peer's header, with the receive
  // first, so the announcement leaves ahead of the data (executor.h).
  virtual bool announcesReceives() const { return false; }
  // Whether the backend's own collectives (native*) keep their time from call
  // to call between nodes (Gloo's ring over its pairs), so that online
  // selection keeps native unless it is slower than the best schedule by
  // more than OnlineSelection::kNativeWinPercent. Where they swing (Open
  // MPI's over TCP: 1.7x from call to call) native must instead be faster
  // than the best schedule by more than that.
  virtual bool repeatsNativeTimes() const { return false; }
  // Whether the backend's own collectives on this transport, blocking or not,
  // run one at a time in the order they were called (Gloo's native worker):
  // a later one waits, unsent, until the earlier ones are done. The progress
  // engine's share clock then charges a waiting one nothing
  // (ProgressEngine::enableShareClock).
  virtual bool runsNativesInTurn() const { return false; }
  // Completion signals. A transport whose requests complete on threads of
  // its own (Gloo's waiters and native worker) calls `signal` after each
  // completion, so that a progress thread can sleep until one instead of
  // polling test(); returns whether it will (false where completions are
  // seen only by polling: MPI, shared memory). An empty function stops the
  // calls; once this returns, no call of the previous function is running.
  virtual bool signalCompletions(std::function<void()> signal) {
    (void)signal;
    return false;
  }
  // From now on every message of this transport travels whole (one backend
  // message per isend), never cut into pieces (MpiTransport's streams): a
  // receive from any source is one posted receive and must match a whole
  // message. The point-to-point channel (Communicator::sendAsync) calls it.
  virtual void keepMessagesWhole() {}
  virtual void isend(const void* buf, std::size_t bytes, int peer, int tag, Request& req) = 0;
  virtual void irecv(void* buf, std::size_t bytes, int peer, int tag, Request& req) = 0;
  // One message gathered from (sent) or scattered into (received) several
  // pieces, in order: on the wire it is the same as isend/irecv of their
  // concatenation, so it matches a plain receive/send of that many bytes on
  // the peer (which may cut it differently). `pieces` need only live until
  // the call returns. The executor uses it for steps over segment lists
  // (core/segment_list.h) whose range straddles list segments.
  virtual void isendPieces(const core::Piece* pieces, std::size_t count, int peer, int tag, Request& req) = 0;
  virtual void irecvPieces(const core::Piece* pieces, std::size_t count, int peer, int tag, Request& req) = 0;
  // True when req has completed (req is then inactive). Never blocks.
  virtual bool test(Request& req) = 0;
  // A receive of the first message with `tag` from any other rank (torch's
  // recvAnysource). Complete it with testAnySource, which names the sender;
  // test() must not be used on it. Default: unsupported (kInvalidArgument).
  virtual void irecvAnySource(void* buf, std::size_t bytes, int tag, Request& req);
  // test() for irecvAnySource requests: on completion *source is the sender.
  virtual bool testAnySource(Request& req, int* source);

  virtual void nativeAllreduce(const void* send, void* recv, std::size_t count, DataType dtype, ReduceOp op,
                               Request* req) = 0;
  // recvCounts/displs: `size()` entries, in elements.
  virtual void nativeAllgatherv(const void* send, std::size_t sendCount, void* recv, const int* recvCounts,
                                const int* displs, DataType dtype, Request* req) = 0;
  virtual void nativeBroadcast(void* buf, std::size_t count, DataType dtype, int root, Request* req) = 0;
  // send holds size() * recvCount elements.
  virtual void nativeReduceScatter(const void* send, void* recv, std::size_t recvCount, DataType dtype,
                                   ReduceOp op, Request* req) = 0;
  virtual void nativeBarrier(Request* req) = 0;

  // Collective over this group: ranks with equal color form a sub-group,
  // ordered by (key, rank). A negative color returns nullptr for that rank.
  virtual std::unique_ptr<Transport> split(int color, int key) = 0;

  // Collective: an identifier of the node (shared-memory domain) of every
  // rank, equal for ranks on one node. Default: one node (threads of a process).
  virtual std::vector<long long> nodeIdOfEachRank() { return std::vector<long long>(static_cast<std::size_t>(size()), 0); }

  // Collective: the ranks of this group on this rank's node, as a group of
  // their own (MPI: MPI_COMM_TYPE_SHARED); nullptr where the transport has no
  // node split of its own (the store transport's node ids come through its
  // store; in-process ranks are one process).
  virtual std::unique_ptr<Transport> splitByNode() { return nullptr; }

  // The shared-memory engine of this group (transport/shared_memory.h), or
  // nullptr when its ranks do not all share one node or the transport has
  // none. Stable for the transport's life.
  virtual SharedMemoryEngine* sharedMemory() { return nullptr; }
  // Collective: whether every rank of this group is on this rank's node
  // (MPI: MPI_COMM_TYPE_SHARED). Default: nodeIdOfEachRank all equal.
  virtual bool groupOnThisNode();
  // Whether allocateSharedWindow is offered (the same on every rank).
  virtual bool offersSharedWindows() const { return false; }
  // Collective over a group on one node: `bytesPerRank` of memory per rank
  // that every rank maps (transport/shared_window.h); raises
  // Error{kTransport} when the backend fails. Only where offered.
  virtual std::unique_ptr<SharedWindow> allocateSharedWindow(std::size_t bytesPerRank);
  // Whether an engine can be attached (attachSharedMemory), by whoever
  // creates the communicator (src/shm builds on the transport, not the other
  // way round); once, before the first call.
  virtual bool takesSharedMemory() const { return false; }
  virtual void attachSharedMemory(std::unique_ptr<SharedMemoryEngine> engine);
  // A blocking native allreduce whose message also carries `mine`, for
  // callers that cannot read their peers' call status (several nodes): on
  // return `lo` and `hi` are the smallest and the largest stamp over all
  // ranks (CallStamp::operator<), the same on every rank, so ranks that made
  // different calls all see lo and hi name different calls before they use
  // the result. Payloads of at most kCheckedAllreduceMaxBytes, not kAvg.
  // False: not offered (the caller then runs nativeAllreduce).
  virtual bool nativeAllreduceChecked(const void* send, void* recv, std::size_t count, DataType dtype, ReduceOp op,
                                      const CallStamp& mine, CallStamp& lo, CallStamp& hi) {
    (void)send, (void)recv, (void)count, (void)dtype, (void)op, (void)mine, (void)lo, (void)hi;
    return false;
  }
  // Collective: a side channel of `messageBytes` messages beside this group's
  // data path (transport/side_channel.h); null where the transport offers
  // none (MPI without MPI_THREAD_MULTIPLE, the store and in-process
  // transports), or its creation failed.
  virtual std::unique_ptr<SideChannel> openSideChannel(std::size_t messageBytes) {
    (void)messageBytes;
    return nullptr;
  }
  // Ends the whole job at once, from any thread, after a fatal report (the
  // watchdog's deadline on a call stuck inside the backend): MPI_Abort
  // where MPI runs. Default: nothing (the caller then aborts this process).
  virtual void abortJob() {}
  // After a failure, before destruction: messages of this communicator may
  // still be in flight (peers' sends that nobody will receive). A backend
  // that reuses a freed communicator's context id would deliver them to a
  // later communicator (Open MPI's ob1 keeps fragments for an unknown
  // context id and replays them when one with that id is created), so keep
  // the backend's communicator instead of freeing it.
  virtual void keepBackendOnClose() {}
};

}  // namespace boostcomm::transport
