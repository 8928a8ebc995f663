// Transport over Gloo's TCP transport (Debian's libgloo-dev, the same
// libgloo.so.0 that Debian's libtorch links), for processes that are not one
// MPI job: torchrun, env://, file://. They rendezvous through a key-value
// store (include/boostcomm/store.h; torch's c10d Store in the c10d backend).
//
// Two Gloo contexts over one TCP device, each a full mesh of pairs connected
// through the store: `p2p` carries boostcomm's own schedules (isend/irecv on
// unbound buffers, slot = kP2pSlotPrefix << 56 | tag, matched in posting
// order per pair and slot, as MPI's non-overtaking rule); `native` runs
// Gloo's own collectives (this transport's "native" baseline) on a worker
// thread, one at a time in posting order, so a non-blocking native call
// returns at once and completes through test(). Gloo's buffers complete
// only through blocking waits: waiter threads turn those into flags that
// test() reads (gloo_waiters.h). Keeping them on separate
// contexts means the worker and the progress thread never share a pair.
//
// Rendezvous keys, under the bridge's prefix (store_bridge.h):
//   join/<rank>  "<size>\n<node key>"   world size check and node detection
//   p2p/..., native/...                Gloo's own full-mesh addresses
//   split<n>/<color>/...               the sub-group of split number n
#pragma once

#include <gloo/rendezvous/context.h>
#include <gloo/transport/device.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "transport/gloo/store_bridge.h"
#include "transport/shared_memory.h"
#include "transport/transport.h"

namespace boostcomm::transport {

class GlooWaiters;
struct GlooNativeJob;

class CompletionSignal;  // gloo_link.h

class GlooTransport final : public Transport {
 public:
  // Collective over `size` processes: every rank passes a bridge reaching the
  // same keys. nodeIds empty: exchanged through the store (host name and
  // network namespace); otherwise this group's entries (a split).
  GlooTransport(StoreBridge store, std::shared_ptr<gloo::transport::Device> device, int rank, int size,
                std::vector<long long> nodeIds);
  ~GlooTransport() override;
  GlooTransport(const GlooTransport&) = delete;
  GlooTransport& operator=(const GlooTransport&) = delete;

  // The TCP device on BOOSTCOMM_GLOO_HOSTNAME (or this host, see tunables.def).
  static std::shared_ptr<gloo::transport::Device> createDevice(int rank);

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string name() const override { return "gloo"; }
  int maxTag() const override;
  bool announcesReceives() const override { return true; }
  bool repeatsNativeTimes() const override { return true; }
  bool runsNativesInTurn() const override { return true; }  // one worker thread, a FIFO
  bool signalCompletions(std::function<void()> signal) override;

  void isend(const void* buf, std::size_t bytes, int peer, int tag, Request& req) override;
  void irecv(void* buf, std::size_t bytes, int peer, int tag, Request& req) override;
  void isendPieces(const core::Piece* pieces, std::size_t count, int peer, int tag, Request& req) override;
  void irecvPieces(const core::Piece* pieces, std::size_t count, int peer, int tag, Request& req) override;
  bool test(Request& req) override;
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

  std::unique_ptr<Transport> split(int color, int key) override;
  std::vector<long long> nodeIdOfEachRank() override { return nodeIds_; }
  // The node's shm engine over a POSIX segment, attached by whoever creates
  // the communicator (shm::attachSharedMemory) when every rank is on one node.
  SharedMemoryEngine* sharedMemory() override { return sharedMemory_.get(); }
  bool takesSharedMemory() const override { return true; }
  void attachSharedMemory(std::unique_ptr<SharedMemoryEngine> engine) override { sharedMemory_ = std::move(engine); }

 public:
  struct Pending;  // gloo_link.h

 private:
  // peer < 0: a receive from any other rank.
  void post(bool isSend, void* buf, std::size_t bytes, int peer, int tag, Request& req, Pending* p);
  void checkPeer(int peer, int tag, const char* what) const;
  // Runs `fn` on the native worker: returns at once with req, else waits.
  void runNative(std::function<void()> fn, Request* req, const char* what);
  void workerLoop();
  void exchangeJoin();

  StoreBridge store_;
  std::shared_ptr<gloo::transport::Device> device_;
  int rank_;
  int size_;
  std::vector<long long> nodeIds_;
  // Before the threads that call it (waiters_, worker_): destroyed after them.
  std::unique_ptr<CompletionSignal> signal_;
  std::shared_ptr<gloo::rendezvous::Context> p2p_;
  std::shared_ptr<gloo::rendezvous::Context> native_;
  std::unique_ptr<GlooWaiters> waiters_;  // completes p2p_ messages (gloo_waiters.h)
  int splits_ = 0;

  std::mutex queueMutex_;
  std::condition_variable queueCv_;
  std::deque<std::shared_ptr<GlooNativeJob>> queue_;
  bool stopping_ = false;
  std::thread worker_;
  // Last member: its control exchanges use this transport's natives.
  std::unique_ptr<SharedMemoryEngine> sharedMemory_;
};

}  // namespace boostcomm::transport
