// Point-to-point messages (Communicator::sendAsync / recvAsync): torch's
// send / recv / recvAnysource.
//
// They travel on a transport of their own, a split of the communicator's
// group made once by enablePointToPoint() (collective), so a user's tags
// never meet the tag windows of collectives in flight and a message posted
// on one rank only cannot shift the collectives' call numbering (messages
// are not collective: ranks post different numbers of them). A message is
// not a schedule: it is posted at once and the progress engine tests it
// beside the collectives (ProgressEngine::track), so its Work completes on
// the progress thread like theirs.
#include "api/communicator_impl.h"
#include "core/check.h"

namespace boostcomm::detail {

void CommunicatorImpl::enablePointToPoint() {
  executor::EngineLock lock(*engine_);
  checkUsable();
  if (p2p_ || size_ == 1) return;
  // The split is a blocking collective: finish our collectives in flight
  // first (see ensureSubCommunicators).
  engine_->drain(deadlineFor({}), "enablePointToPoint", rank_);
  p2p_ = transport_->split(0, rank_);
  if (p2p_) p2p_->keepMessagesWhole();  // receives from any source match one message
  BC_INTERNAL(p2p_ && p2p_->size() == size_ && p2p_->rank() == rank_, "point-to-point split does not match the group");
  engine_->signalFrom(*p2p_);  // a receive waited on by the thread then sleeps, not polls
}

bool CommunicatorImpl::pointToPointEnabled() const {
  std::lock_guard lock(mutex_);
  return p2p_ != nullptr || size_ == 1;
}

Work CommunicatorImpl::postMessage(bool isSend, void* data, std::size_t count, DataType dtype, int peer, int tag) {
  const char* what = isSend ? "send" : "recv";
  executor::EngineLock lock(*engine_);
  checkUsable();
  BC_INVALID(peer != rank_, rank_, what << ": peer " << peer << " is this rank (a message needs another rank)");
  BC_INVALID((peer >= 0 && peer < size_) || (!isSend && peer == Communicator::kAnySource), rank_,
             what << ": peer " << peer << " out of range for " << size_ << " ranks"
                  << (isSend ? "" : " (kAnySource = -1 receives from any rank)"));
  BC_INVALID(tag >= 0 && tag <= Communicator::kMaxMessageTag, rank_,
             what << ": tag " << tag << " outside [0, " << Communicator::kMaxMessageTag << "]");
  BC_INVALID(data != nullptr || count == 0, rank_, what << ": null buffer for " << count << " elements");
  BC_INVALID(p2p_ != nullptr, rank_,
             what << ": point-to-point messages are not enabled on this communicator (every rank calls "
                     "enablePointToPoint() once first; it is collective)");
  const std::size_t bytes = count * dataTypeSize(dtype);
  auto work = std::make_shared<WorkState>();
  work->comm = this;
  work->algorithm = "p2p";
  transport::Request request;
  if (isSend) {
    p2p_->isend(data, bytes, peer, tag, request);
  } else if (peer == Communicator::kAnySource) {
    p2p_->irecvAnySource(data, bytes, tag, request);
  } else {
    p2p_->irecv(data, bytes, peer, tag, request);
    work->source = peer;
  }
  engine_->track(*p2p_, request, !isSend && peer == Communicator::kAnySource, work);
  engine_->progress();
  return Work(work);
}

}  // namespace boostcomm::detail
