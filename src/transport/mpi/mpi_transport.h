// Transport over an MPI communicator.
//
// Point-to-point traffic is MPI_Isend/MPI_Irecv of bytes; native collectives
// are the MPI_* / MPI_I* collectives. A Request holds up to two MPI_Requests:
// messages above INT_MAX bytes travel as a block-typed part plus a byte
// remainder (see mpi_types.h), posted in that order on both sides so MPI's
// non-overtaking rule pairs them. Concurrent posts on the same (peer, tag)
// from several threads could interleave those two parts: don't do that.
//
// Messages to a rank on another node above the piece size
// (BOOSTCOMM_MPI_PIECE_BYTES, default just under Open MPI's TCP eager limit)
// travel as a stream of eager-sized messages, all posted at once, in order on
// both sides (the non-overtaking rule pairs them): a large message goes by
// MPI's rendezvous protocol, whose control messages (the receiver's ACK and
// PUT requests) share the TCP connection with the receiver's own outgoing
// data and queue behind it, so two ranks exchanging large messages at once
// often ran one direction after the other: half the link (docs/PERF_TORCH.md,
// "DDP across nodes"). Eager messages need no reply. The node of each rank is
// learnt from nodeIdOfEachRank(), which the communicator asks at
// construction unless a node layout is declared (BOOSTCOMM_NODE_LAYOUT,
// BOOSTCOMM_RANKS_PER_NODE) or shared memory is attached, and passed on to
// splits; until then, on one node, and on the point-to-point channel
// (keepMessagesWhole: an any-source receive matches one message), messages
// go whole. A receiving piece checks it got its whole length: ranks that cut
// differently fail with Error{kMismatch} instead of misaligning the stream.
#pragma once

#include "transport/mpi/mpi_c.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "transport/shared_memory.h"
#include "transport/transport.h"

namespace boostcomm::transport {

class MpiTransport final : public Transport {
 public:
  // ownsComm: the communicator is ours (a dup or split), so we set
  // MPI_ERRORS_RETURN on it and free it in the destructor. A borrowed
  // communicator keeps the application's error handler untouched.
  MpiTransport(MPI_Comm comm, bool ownsComm);
  ~MpiTransport() override;
  MpiTransport(const MpiTransport&) = delete;
  MpiTransport& operator=(const MpiTransport&) = delete;

  // Initializes MPI (MPI_THREAD_MULTIPLE requested) unless the application
  // already did, and returns a transport over a duplicate of MPI_COMM_WORLD so
  // boostcomm's traffic never matches the application's messages.
  static std::unique_ptr<MpiTransport> createWorld();

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string name() const override { return "mpi"; }
  int maxTag() const override { return maxTag_; }

  bool acceptsShorterMessages() const override { return true; }
  bool callableFromAnyThread() const override;
  void keepMessagesWhole() override {
    wholeMessages_ = true;
    pieceBytes_ = 0;
  }
  void isend(const void* buf, std::size_t bytes, int peer, int tag, Request& req) override;
  void irecv(void* buf, std::size_t bytes, int peer, int tag, Request& req) override;
  void isendPieces(const core::Piece* pieces, std::size_t count, int peer, int tag, Request& req) override;
  void irecvPieces(const core::Piece* pieces, std::size_t count, int peer, int tag, Request& req) override;
  bool test(Request& req) override;
  void keepBackendOnClose() override { keepComm_ = true; }
  void irecvAnySource(void* buf, std::size_t bytes, int tag, Request& req) override;
  bool testAnySource(Request& req, int* source) override;

  void nativeAllreduce(const void* send, void* recv, std::size_t count, DataType dtype, ReduceOp op,
                       Request* req) override;
  void nativeAllgatherv(const void* send, std::size_t sendCount, void* recv, const int* recvCounts,
                        const int* displs, DataType dtype, Request* req) override;
  void nativeBroadcast(void* buf, std::size_t count, DataType dtype, int root, Request* req) override;
  void nativeReduceScatter(const void* send, void* recv, std::size_t recvCount, DataType dtype, ReduceOp op,
                           Request* req) override;
  void nativeBarrier(Request* req) override;
  // The stamps travel in front of the data, in one element of a derived
  // datatype reduced by a user op (mpi_checked.cc).
  bool nativeAllreduceChecked(const void* send, void* recv, std::size_t count, DataType dtype, ReduceOp op,
                              const CallStamp& mine, CallStamp& lo, CallStamp& hi) override;

  std::unique_ptr<Transport> split(int color, int key) override;
  // The ranks that share memory with this one (MPI_COMM_TYPE_SHARED), in rank order.
  std::unique_ptr<MpiTransport> splitSharedMemory();
  std::unique_ptr<Transport> splitByNode() override { return splitSharedMemory(); }
  // The world rank of each rank's shared-memory leader (lowest rank on its node).
  std::vector<long long> nodeIdOfEachRank() override;

  MPI_Comm comm() const { return comm_; }

  // The shared-memory engine (src/shm/) when every rank is on one node;
  // attached by whoever creates the communicator (shm::attachSharedMemory),
  // since src/shm builds on this transport, not the other way round.
  SharedMemoryEngine* sharedMemory() override { return sharedMemory_.get(); }
  bool takesSharedMemory() const override { return true; }
  void attachSharedMemory(std::unique_ptr<SharedMemoryEngine> engine) override;
  // MPI_COMM_TYPE_SHARED; MPI_Win_allocate_shared (mpi_shared_window.cc).
  bool groupOnThisNode() override;
  bool offersSharedWindows() const override { return true; }
  std::unique_ptr<SharedWindow> allocateSharedWindow(std::size_t bytesPerRank) override;
  // MPI_Abort(MPI_COMM_WORLD) while MPI is initialised and not finalised.
  void abortJob() override;
  // A duplicate communicator (transport/mpi/mpi_side_channel.h).
  std::unique_ptr<SideChannel> openSideChannel(std::size_t messageBytes) override;

 private:
  void postBytes(bool isSend, void* buf, std::size_t bytes, int peer, int tag, Request& req);
  // Posts a message to a rank on another node as eager-sized pieces (see above).
  void postStream(bool isSend, void* buf, std::size_t bytes, int peer, int tag, Request& req);
  bool testStream(Request& req);
  void postPieces(bool isSend, const core::Piece* pieces, std::size_t count, int peer, int tag, Request& req);
  int checkedCount(std::size_t count, const char* what) const;
  std::vector<long long> nodeIds();
  void learnNodes(std::vector<long long> ids);
  // Whether a message of `bytes` to `peer` goes as a stream of pieces: above
  // the piece size, to a rank on another node.
  bool streams(std::size_t bytes, int peer) const;

  // Released first in the destructor: its MPI windows must go before the communicator.
  std::unique_ptr<SharedMemoryEngine> sharedMemory_;
  // nativeAllreduceChecked: the staging buffer, its user op, and a
  // contiguous datatype per element size used (a handful: sizes repeat).
  std::vector<char> checkedStage_;
  MPI_Op checkedOp_ = MPI_OP_NULL;
  std::vector<std::pair<int, MPI_Datatype>> checkedTypes_;
  void freeCheckedResources();
  MPI_Comm comm_;
  bool ownsComm_;
  bool keepComm_ = false;  // keepBackendOnClose(): leak comm_ (one context id) rather than free it
  int rank_ = -1;
  int size_ = 0;
  int maxTag_ = 0;
  // Each rank's node (from nodeIdOfEachRank, or the parent of a split;
  // empty until then, and pieceBytes_ 0).
  std::vector<long long> nodeIds_;
  std::size_t pieceBytes_ = 0;  // BOOSTCOMM_MPI_PIECE_BYTES; 0: messages go whole
  bool wholeMessages_ = false;  // keepMessagesWhole(): never pieces (inherited by splits)
};

// MPI_Finalize, but only when createWorld() was the one that initialized MPI
// (and nobody finalized it yet). Transports must be destroyed before.
void finalizeMpiIfOwned();
// True when boostcomm called MPI_Init_thread.
bool mpiInitializedByBoostcomm();
// The thread level MPI provides (MPI_THREAD_*), as reported by MPI_Query_thread.
int mpiThreadLevel();

}  // namespace boostcomm::transport
