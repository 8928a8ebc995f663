#include "watch/control_channel.h"

#include <chrono>
#include <thread>

namespace boostcomm::detail {

namespace {
constexpr int kControlTag = 1;

bool mpiGone() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  return finalized != 0;
}
}  // namespace

std::unique_ptr<ControlChannel> ControlChannel::create(MPI_Comm comm) {
  int level = MPI_THREAD_SINGLE;
  if (MPI_Query_thread(&level) != MPI_SUCCESS || level < MPI_THREAD_MULTIPLE) return nullptr;
  MPI_Comm dup = MPI_COMM_NULL;
  if (MPI_Comm_dup(comm, &dup) != MPI_SUCCESS) return nullptr;
  // Errors on the channel must never end the job: they only cost the report.
  MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN);
  return std::unique_ptr<ControlChannel>(new ControlChannel(dup));
}

ControlChannel::ControlChannel(MPI_Comm comm) : comm_(comm) {
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
  postReceive();
}

ControlChannel::~ControlChannel() {
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
  while (quiet) {
    int done = 0;
    if (MPI_Test(&barrier, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) {
      quiet = false;
    } else if (done) {
      break;
    } else if (std::chrono::steady_clock::now() >= until) {
      quiet = false;
    } else {
      ControlMessage ignored;
      poll(ignored);  // keep taking messages: a sender's rendezvous needs our receive
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

void ControlChannel::postReceive() {
  if (MPI_Irecv(&incoming_, sizeof(ControlMessage), MPI_BYTE, MPI_ANY_SOURCE, kControlTag, comm_, &recvRequest_) !=
      MPI_SUCCESS) {
    recvRequest_ = MPI_REQUEST_NULL;
  }
}

void ControlChannel::send(int peer, const ControlMessage& message) {
  if (peer < 0 || peer >= size_ || peer == rank_) return;
  flush(0);
  outgoing_.emplace_back();
  Outgoing& o = outgoing_.back();
  o.message = message;
  if (MPI_Isend(&o.message, sizeof(ControlMessage), MPI_BYTE, peer, kControlTag, comm_, &o.request) != MPI_SUCCESS)
    o.request = MPI_REQUEST_NULL;
}

bool ControlChannel::poll(ControlMessage& out) {
  if (recvRequest_ == MPI_REQUEST_NULL) return false;
  int done = 0;
  if (MPI_Test(&recvRequest_, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS || !done) return false;
  out = incoming_;
  postReceive();
  return out.magic == ControlMessage::kMagic;
}

void ControlChannel::flush(int waitMs) {
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

}  // namespace boostcomm::detail
