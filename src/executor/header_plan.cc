// Execution's header plan (declared in executor/executor.h): the
// fingerprint header each point-to-point schedule exchanges with its peers
// (docs/RELIABILITY.md, "Across nodes"), inline in a first message where the
// transport allows it, else as a separate message on the call's last tag;
// node peers' headers are read from their call status instead. The steps
// themselves run in executor.cc.
#include <algorithm>
#include <cstring>
#include <string>

#include "core/check.h"
#include "executor/executor.h"
#include "transport/shared_memory.h"

namespace boostcomm::executor {

void Execution::collectHeaderPeers(const std::shared_ptr<const Schedule>& schedule) {
  if (binding_.headerTag < 0) {
    headersPending_ = 0;
    if (planned_ != nullptr) dropHeaderPlan();
    return;
  }
  if (planned_ != schedule || plannedInline_ != binding_.inlineHeaders || plannedList_ != listCall() ||
      plannedStatus_ != binding_.peerStatus) {
    buildHeaderPlan();
    planned_ = schedule;
    plannedInline_ = binding_.inlineHeaders;
    plannedList_ = listCall();
    plannedStatus_ = binding_.peerStatus;
  }
  // Per call: nothing agreed yet. A header that travels inline or is read
  // from our status needs no message of its own.
  for (PeerHeader& h : sendHeaders_) h.done = h.inlined || h.status != nullptr;
  for (PeerHeader& h : recvHeaders_) h.done = false;
  headersPending_ = headerMessages_;
}

void Execution::dropHeaderPlan() {
  planned_.reset();
  sendHeaders_.clear();
  recvHeaders_.clear();
  recvSlot_.clear();
  inlineOf_.clear();
  sendHold_.clear();
}

void Execution::buildHeaderPlan() {
  dropHeaderPlan();
  const auto& steps = schedule_->steps();
  // Peers per schedule are few (ring: 2, rhd: log2 n): a linear search.
  auto slot = [this](std::vector<PeerHeader>& list, std::size_t step, const Step& s) {
    for (std::size_t i = 0; i < list.size(); ++i) {
      if (list[i].comm == s.comm && list[i].peer == s.peer) {
        list[i].minTag = std::min(list[i].minTag, s.tag);
        return static_cast<std::uint32_t>(i);
      }
    }
    list.emplace_back();
    PeerHeader& h = list.back();
    h.comm = s.comm;
    h.peer = s.peer;
    h.firstStep = static_cast<std::uint32_t>(step);
    h.minTag = s.tag;
    const std::vector<core::CallStatus*>* statuses = binding_.peerStatus;
    if (s.comm == kWorldComm && statuses != nullptr && s.peer >= 0 && static_cast<std::size_t>(s.peer) < statuses->size()) {
      h.status = (*statuses)[static_cast<std::size_t>(s.peer)];
    }
    return static_cast<std::uint32_t>(list.size() - 1);
  };
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const Step& s = steps[i];
    if (s.kind == StepKind::kSend) {
      slot(sendHeaders_, i, s);
    } else if (s.kind == StepKind::kRecv) {
      if (recvSlot_.empty()) recvSlot_.assign(steps.size(), 0);
      recvSlot_[i] = slot(recvHeaders_, i, s);
    }
  }
  std::size_t inlineBytes = 0;
  for (std::vector<PeerHeader>* list : {&sendHeaders_, &recvHeaders_}) {
    for (std::size_t k = 0; k < list->size(); ++k) {
      PeerHeader& h = (*list)[k];
      if (!inlineable(h.firstStep)) continue;
      BC_INTERNAL(steps[h.firstStep].tag == h.minTag,
                  schedule_->algorithm() << ": the first message with peer " << h.peer
                                         << " does not have the smallest tag (the inline header needs both)");
      h.inlined = true;
      h.inlineOffset = inlineBytes;
      // A receive takes the largest inline message: a peer whose call differs is still read.
      const std::size_t data = steps[h.firstStep].kind == StepKind::kRecv ? kInlineHeaderBytes : steps[h.firstStep].bytes;
      inlineBytes += (sizeof(core::CallHeader) + data + 7) & ~std::size_t{7};
      if (inlineOf_.empty()) inlineOf_.assign(steps.size(), -1);
      inlineOf_[h.firstStep] = static_cast<std::int32_t>(k);
    }
  }
  if (inline_.size() < inlineBytes) inline_.resize(inlineBytes);
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const Step& s = steps[i];
    if (s.kind != StepKind::kSend || s.bytes < kHoldSendBytes) continue;
    for (std::size_t k = 0; k < recvHeaders_.size(); ++k) {
      if (recvHeaders_[k].comm != s.comm || recvHeaders_[k].peer != s.peer) continue;
      if (sendHold_.empty()) sendHold_.assign(steps.size(), -1);
      sendHold_[i] = static_cast<std::int32_t>(k);
      break;  // one entry per (comm, peer)
    }
  }
  // What progressHeaders waits for: header messages, and peers' status
  // entries (an inline header is checked when its step's message completes).
  headerMessages_ = 0;
  for (const PeerHeader& h : sendHeaders_) headerMessages_ += h.inlined || h.status != nullptr ? 0 : 1;
  for (const PeerHeader& h : recvHeaders_) headerMessages_ += h.inlined ? 0 : 1;
}

bool Execution::inlineable(std::size_t index) const {
  const Step& s = schedule_->steps()[index];
  const bool skipped = s.bytes >= kInlineSkipFrom && s.bytes <= kInlineSkipTo;
  return binding_.inlineHeaders && s.wire == WireFormat::kOff && !listCall() && s.bytes <= kInlineHeaderBytes &&
         !skipped;
}

std::string Execution::ownCallWords() const {
  const core::CallHeader& mine = binding_.header;
  return "collective mismatch: rank " + std::to_string(mine.rank) + " (seq " + std::to_string(mine.sequence) + ", " +
         core::describe(core::Fingerprint::fromWord(mine.word, mine.count)) + ", " + schedule_->algorithm() + ")";
}

void Execution::acceptInline(std::size_t index, PeerHeader& h, transport::Transport& world) {
  const Step& s = schedule_->steps()[index];
  const char* message = inline_.data() + h.inlineOffset;
  std::memcpy(&h.theirs, message, sizeof(core::CallHeader));
  if (!core::sameCall(binding_.header, h.theirs) || h.theirs.reserved != s.bytes) rejectInline(s, h, index, world);
  if (s.bytes > 0) std::memcpy(resolve(s.dst), message + sizeof(core::CallHeader), s.bytes);
  h.done = true;
}

void Execution::rejectInline(const Step& s, const PeerHeader& h, std::size_t index, transport::Transport& world) {
  core::CallHeader theirs = h.theirs;
  // No header in the message (the peer's call sends a larger first message,
  // or one in the skipped window), but a node peer's entry names its call.
  if (theirs.magic != core::CallHeader::kMagic && h.status != nullptr) {
    core::CallHeader read;
    if (h.status->readHeader(binding_.header.sequence, h.peer, read) == core::CallStatus::Read::kRead) theirs = read;
  }
  std::string m = core::compareHeaders(binding_.header, theirs);
  // The same call, but a first message of another length: the ranks run
  // different schedules (algorithm or chunking settings).
  if (m.empty()) {
    const std::string sent = h.theirs.magic == core::CallHeader::kMagic ? std::to_string(theirs.reserved)
                                                                       : "a message without the header";
    m = ownCallWords() + " expects " + std::to_string(s.bytes) + " bytes in its first message from peer " +
        std::to_string(s.peer) + ", which sent " + sent + ": the ranks run different algorithms or chunk sizes";
  }
  sendHeaderAnyway(index, world);  // a peer whose first receive from us is not inline waits for one
  core::raise(ErrorCategory::kMismatch, binding_.header.rank, m);
}

void Execution::sendHeaderAnyway(std::size_t index, transport::Transport& world) {
  // The peer's first message had no inline header: its call sends a larger
  // one, so it waits for a header message (or reads our status). Send it
  // one, so that it too names both calls instead of waiting. The request
  // stays in flight: a failed engine leaks its executions (progress_engine.h).
  const Step& s = schedule_->steps()[index];
  if (binding_.headerTag < 0 || headerAnyway_.active()) return;
  try {
    transportFor(s.comm, world).isend(&binding_.header, sizeof(core::CallHeader), s.peer, binding_.headerTag,
                                        headerAnyway_);
  } catch (const Error&) {
    // the mismatch being raised says more
  }
}

void Execution::raiseInlineTruncation(std::size_t index, const Error& e, transport::Transport& world) {
  sendHeaderAnyway(index, world);
  const Step& s = schedule_->steps()[index];
  core::raise(ErrorCategory::kMismatch, binding_.header.rank,
              ownCallWords() + " received a first message from peer " + std::to_string(s.peer) +
                  " longer than any this call's algorithm sends first: that rank made a different call (another "
                  "collective, count or algorithm); the backend reported: " + e.detail());
}

void Execution::postHeaders(transport::Transport& world) {
  for (PeerHeader& h : sendHeaders_) {
    if (h.done) continue;  // the peer reads our status, or our first message carries it
    transportFor(h.comm, world).isend(&binding_.header, sizeof(core::CallHeader), h.peer, binding_.headerTag, h.req);
  }
  for (PeerHeader& h : recvHeaders_) {
    h.theirs.magic = 0;
    if (h.status != nullptr || h.inlined) continue;
    transportFor(h.comm, world).irecv(&h.theirs, sizeof(core::CallHeader), h.peer, binding_.headerTag, h.req);
  }
}

void Execution::progressHeaders(transport::Transport& world, bool& any) {
  for (PeerHeader& h : sendHeaders_) {
    if (h.done || !transportFor(h.comm, world).test(h.req)) continue;
    h.done = true;
    --headersPending_;
  }
  for (PeerHeader& h : recvHeaders_) {
    if (h.done || h.inlined) continue;  // inline: accepted when its message completes (finishStep)
    if (h.status != nullptr) {
      const core::CallStatus::Read r = h.status->readHeader(binding_.header.sequence, h.peer, h.theirs);
      if (r == core::CallStatus::Read::kNotYet) continue;  // look again at the next progress
      if (r == core::CallStatus::Read::kGone) h.theirs = binding_.header;  // too far ahead to check: accepted
    } else if (!transportFor(h.comm, world).test(h.req)) {
      continue;
    }
    if (!core::sameCall(binding_.header, h.theirs)) {
      core::raise(ErrorCategory::kMismatch, world.rank(), core::compareHeaders(binding_.header, h.theirs));
    }
    h.done = true;
    --headersPending_;
    any = true;
  }
}

}  // namespace boostcomm::executor
