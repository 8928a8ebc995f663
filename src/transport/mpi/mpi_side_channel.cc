#include "transport/mpi/mpi_side_channel.h"

#include <chrono>
#include <cstring>
#include <thread>

namespace boostcomm::transport {

namespace {
constexpr int kSideTag = 1;

bool mpiGone() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  return finalized != 0;
}
}  // namespace

std::unique_ptr<MpiSideChannel> MpiSideChannel::open(MPI_Comm comm, std::size_t messageBytes) {
  int level = MPI_THREAD_SINGLE;
  if (MPI_Query_thread(&level) != MPI_SUCCESS || level < MPI_THREAD_MULTIPLE) return nullptr;
  MPI_Comm dup = MPI_COMM_NULL;
  if (MPI_Comm_dup(comm, &dup) != MPI_SUCCESS) return nullptr;
  // Errors on the channel must never end the job: they only cost a message.
  MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN);
  return std::unique_ptr<MpiSideChannel>(new MpiSideChannel(dup, messageBytes));
}

MpiSideChannel::MpiSideChannel(MPI_Comm comm, std::size_t messageBytes)
    : comm_(comm), bytes_(messageBytes), incoming_(messageBytes) {
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
  postReceive();
}

MpiSideChannel::~MpiSideChannel() {
  if (mpiGone()) return;  // the application finalized MPI first: nothing left to free
  flush(500);
  // Quiesce before the free: a peer's message (a notice sent at its close, a
  // late status answer) that arrives after we freed the communicator is kept
  // by Open MPI's ob1 for the unknown context id and replayed into the next
  // communicator that reuses it, where it breaks that communicator's
  // per-peer message order: the emulated-cluster hang of
  // test_mpi_crossnode (a rank left in ompi_comm_nextcid). Every rank closes
  // its channel when it finalizes the communicator (collectively), and ob1
  // matches each peer's messages on one communicator in order, so once a
  // barrier on the channel has completed, everything the peers sent before
  // it has arrived. Bounded: a peer that never closes (stopped, dead, slow
  // by more than kCloseWaitMs) leaves the communicator leaked, not freed.
  MPI_Request barrier = MPI_REQUEST_NULL;
  bool quiet = MPI_Ibarrier(comm_, &barrier) == MPI_SUCCESS;
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(kCloseWaitMs);
  std::vector<unsigned char> ignored(bytes_);
  while (quiet) {
    int done = 0;
    if (MPI_Test(&barrier, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) {
      quiet = false;
    } else if (done) {
      break;
    } else if (std::chrono::steady_clock::now() >= until) {
      quiet = false;
    } else {
      poll(ignored.data());  // keep taking messages: a sender's rendezvous needs our receive
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  if (recvRequest_ != MPI_REQUEST_NULL) {
    MPI_Cancel(&recvRequest_);
    MPI_Wait(&recvRequest_, MPI_STATUS_IGNORE);
  }
  // A send to a stopped or dead peer may never complete: cancel it rather
  // than hang at exit (eager sends have completed locally long before).
  for (Outgoing& o : outgoing_) {
    if (o.request == MPI_REQUEST_NULL) continue;
    MPI_Cancel(&o.request);
    MPI_Request_free(&o.request);
  }
  if (quiet) MPI_Comm_free(&comm_);  // else leaked (with the barrier request): one context id
}

void MpiSideChannel::postReceive() {
  if (MPI_Irecv(incoming_.data(), static_cast<int>(bytes_), MPI_BYTE, MPI_ANY_SOURCE, kSideTag, comm_,
                &recvRequest_) != MPI_SUCCESS) {
    recvRequest_ = MPI_REQUEST_NULL;
  }
}

void MpiSideChannel::send(int peer, const void* message) {
  if (peer < 0 || peer >= size_ || peer == rank_) return;
  flush(0);
  outgoing_.emplace_back();
  Outgoing& o = outgoing_.back();
  o.message.assign(static_cast<const unsigned char*>(message), static_cast<const unsigned char*>(message) + bytes_);
  if (MPI_Isend(o.message.data(), static_cast<int>(bytes_), MPI_BYTE, peer, kSideTag, comm_, &o.request) !=
      MPI_SUCCESS)
    o.request = MPI_REQUEST_NULL;
}

bool MpiSideChannel::poll(void* out) {
  if (recvRequest_ == MPI_REQUEST_NULL) return false;
  int done = 0;
  if (MPI_Test(&recvRequest_, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS || !done) return false;
  std::memcpy(out, incoming_.data(), bytes_);
  postReceive();
  return true;
}

void MpiSideChannel::flush(int waitMs) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(waitMs);
  while (true) {
    for (Outgoing& o : outgoing_) {
      if (o.request == MPI_REQUEST_NULL) continue;
      int done = 0;
      if (MPI_Test(&o.request, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS || done) o.request = MPI_REQUEST_NULL;
    }
    while (!outgoing_.empty() && outgoing_.front().request == MPI_REQUEST_NULL) outgoing_.pop_front();
    if (outgoing_.empty() || std::chrono::steady_clock::now() >= until) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

}  // namespace boostcomm::transport
