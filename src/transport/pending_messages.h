// Messages a transport posted and has not yet seen complete, for the stall
// report: the watchdog's warning summarises them, and the flight record
// (watch/stall_inspector.h, BOOSTCOMM_TRACE_DIR) lists them under
// "messages". A flight record names calls; this names what their messages
// wait on (peer, tag, bytes, age, and where the transport holds them):
// a message held for seconds where no thread waits on it points at our
// own bookkeeping rather than at the network.
//
// Process-wide: a transport that can describe its messages registers a
// source for its life. Sources are called under the registry's lock.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace boostcomm::transport {

struct PendingMessage {
  std::string transport;  // which transport (the source's label)
  bool isSend = false;
  int peer = -1;  // -1: a receive from any rank
  int tag = 0;
  std::size_t bytes = 0;
  std::int64_t ageMs = 0;  // since it was posted
  const char* state = "";  // where the transport holds it (a static string)
};

class PendingMessageSource {
 public:
  virtual ~PendingMessageSource() = default;
  virtual void appendPendingMessages(std::vector<PendingMessage>& out) const = 0;
};

void registerPendingMessageSource(const PendingMessageSource* source);
void unregisterPendingMessageSource(const PendingMessageSource* source);  // waits out a report in progress

// Every registered source's messages, oldest first.
std::vector<PendingMessage> pendingMessages();
// As the contents of a JSON array: one object per line.
std::string pendingMessagesJson(const std::vector<PendingMessage>& messages);
// One line for a warning: how many, and the oldest; empty when none.
std::string pendingMessagesSummary(const std::vector<PendingMessage>& messages);

}  // namespace boostcomm::transport
