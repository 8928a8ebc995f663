// ControlChannel: the stall inspector's side channel across nodes.
//
// Ranks on one node read each other's call status through shared memory
// (core/call_status.h). Ranks on other nodes cannot, and while the data path
// is stuck (a peer stopped, a mismatched schedule waiting for a message that
// never comes) nothing travels on it. So each communicator over MPI keeps a
// side channel of its transport for small control messages
// (transport/side_channel.h; MPI: a duplicate of its communicator), driven
// only by the watchdog thread (watch/watchdog.h) with nonblocking calls:
//   query  — "what have you started and completed?" sent by a rank whose call
//            has waited a while to the ranks it cannot see;
//   status — the answer: started/completed counters, pid, and the
//            fingerprints of the last started, last completed and the asked-
//            about call (so the asker can also spot a mismatch of calls that
//            carry no fingerprint in their data, e.g. native collectives);
//   notice — "this communicator failed with a mismatch: <words>", sent to
//            every rank by the rank that saw it, so every rank reports
//            Error{kMismatch} naming both sides, not only the neighbours of
//            the culprit;
//   audit  — "here are the fingerprints of calls I completed": sent each
//            watchdog tick to one rank on another node, which compares them
//            with its own and answers with an audit ack (how far it could
//            compare). The check for calls that returned on every rank with
//            no fingerprint in their data (native collectives across nodes):
//            a disagreement is a notice, so the next call raises it.
// Messages are fixed-size (sizeof(ControlMessage), < 4 KiB: one eager MPI
// message over shared memory and TCP), so one posted receive from any source
// takes any of them.
// Where the transport offers no side channel (MPI without
// MPI_THREAD_MULTIPLE, the store transport) there is none, and the report
// says so.
#pragma once

#include <cstdint>
#include <memory>
#include <type_traits>
#include <utility>

#include "transport/transport.h"

namespace boostcomm::detail {

struct ControlEntry {
  std::uint64_t tag = 0;  // sequence + 1; 0: none
  std::uint64_t word = 0;
  std::uint64_t count = 0;
};

struct ControlMessage {
  enum Type : std::uint32_t { kQuery = 1, kStatus = 2, kNotice = 3, kAudit = 4, kAuditAck = 5 };
  static constexpr std::uint32_t kMagic = 0x42434343;  // "BCCC"
  static constexpr int kEntries = 3;                   // last started, last completed, asked-about
  static constexpr int kAuditEntries = 96;             // calls one audit carries
  std::uint32_t magic = kMagic;
  std::uint32_t type = 0;
  std::int32_t from = -1;
  std::uint32_t pid = 0;
  std::uint64_t started = 0;
  std::uint64_t completed = 0;
  std::uint64_t asked = 0;  // query: the asker's waiting sequence + 1; audit ack: compared below this
  ControlEntry entries[kEntries];
  char text[384] = {};  // notice: the mismatch in words (NUL-terminated, truncated)
  std::uint32_t auditCount = 0;  // audit: entries used, consecutive sequences
  ControlEntry audit[kAuditEntries];
};
static_assert(sizeof(ControlMessage) < 4096, "one eager message");
static_assert(std::is_trivially_copyable_v<ControlMessage>, "travels as bytes (transport::SideChannel)");

class ControlChannel {
 public:
  // Collective over `transport` (Transport::openSideChannel). Null where it
  // offers none.
  static std::unique_ptr<ControlChannel> create(transport::Transport& transport) {
    std::unique_ptr<transport::SideChannel> side = transport.openSideChannel(sizeof(ControlMessage));
    return side ? std::unique_ptr<ControlChannel>(new ControlChannel(std::move(side))) : nullptr;
  }

  int rank() const { return side_->rank(); }
  int size() const { return side_->size(); }
  // Nonblocking; the message is copied and kept until its send completes.
  void send(int peer, const ControlMessage& message) { side_->send(peer, &message); }
  // The next message that arrived, if any.
  bool poll(ControlMessage& out) { return side_->poll(&out) && out.magic == ControlMessage::kMagic; }
  // Completes finished sends; with waitMs > 0, waits that long for the rest.
  void flush(int waitMs) { side_->flush(waitMs); }

 private:
  explicit ControlChannel(std::unique_ptr<transport::SideChannel> side) : side_(std::move(side)) {}
  std::unique_ptr<transport::SideChannel> side_;
};

}  // namespace boostcomm::detail
