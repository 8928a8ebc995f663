#include "transport/pending_messages.h"

#include <algorithm>
#include <mutex>

#include "core/call_status.h"

namespace boostcomm::transport {

namespace {

struct Registry {
  std::mutex mutex;
  std::vector<const PendingMessageSource*> sources;
};

Registry& pendingRegistry() {
  static Registry* r = new Registry;  // never destroyed: transports may outlive static destruction
  return *r;
}

// Labels come from store prefixes: keep the JSON well formed whatever they hold.
std::string jsonText(const std::string& s) {
  std::string out(6 * s.size(), '\0');  // \u00XX at most per character
  core::FixedWriter w(out.data(), out.size());
  core::putJsonText(w, s);
  out.resize(w.size());
  return out;
}

std::string describe(const PendingMessage& m) {
  std::string s = m.isSend ? "send to " : "recv from ";
  s += m.peer < 0 ? std::string("any rank") : "rank " + std::to_string(m.peer);
  return s + " tag " + std::to_string(m.tag) + " (" + std::to_string(m.bytes) + " B, " + m.state + ", " +
         m.transport + ")";
}

}  // namespace

void registerPendingMessageSource(const PendingMessageSource* source) {
  Registry& r = pendingRegistry();
  std::lock_guard lock(r.mutex);
  r.sources.push_back(source);
}

void unregisterPendingMessageSource(const PendingMessageSource* source) {
  Registry& r = pendingRegistry();
  std::lock_guard lock(r.mutex);
  std::erase(r.sources, source);
}

std::vector<PendingMessage> pendingMessages() {
  std::vector<PendingMessage> out;
  {
    Registry& r = pendingRegistry();
    std::lock_guard lock(r.mutex);
    for (const PendingMessageSource* s : r.sources) s->appendPendingMessages(out);
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const PendingMessage& a, const PendingMessage& b) { return a.ageMs > b.ageMs; });
  return out;
}

std::string pendingMessagesJson(const std::vector<PendingMessage>& messages) {
  std::string out;
  for (const PendingMessage& m : messages) {
    if (!out.empty()) out += ",\n";
    out += "  {\"transport\": \"" + jsonText(m.transport) + "\", \"kind\": \"" + (m.isSend ? "send" : "recv") +
           "\", \"peer\": " + std::to_string(m.peer) + ", \"tag\": " + std::to_string(m.tag) +
           ", \"bytes\": " + std::to_string(m.bytes) + ", \"age_ms\": " + std::to_string(m.ageMs) +
           ", \"state\": \"" + m.state + "\"}";
  }
  return out;
}

std::string pendingMessagesSummary(const std::vector<PendingMessage>& messages) {
  if (messages.empty()) return {};
  const PendingMessage& oldest = messages.front();
  return std::to_string(messages.size()) + " transport message(s) not complete, the oldest posted " +
         std::to_string(oldest.ageMs) + " ms ago: " + describe(oldest);
}

}  // namespace boostcomm::transport
