// ControlChannel: the stall inspector's side channel across nodes.
//
// Ranks on one node read each other's call status through shared memory
// (core/call_status.h). Ranks on other nodes cannot, and while the data path
// is stuck (a peer stopped, a mismatched schedule waiting for a message that
// never comes) nothing travels on it. So each communicator over MPI keeps a
// dedicated duplicate of its communicator for small control messages,
// driven only by the watchdog thread (watch/watchdog.h) with nonblocking calls:
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
// Needs MPI_THREAD_MULTIPLE (the watchdog calls MPI next to the caller's
// thread); without it there is no channel and the report says so.
#pragma once

#include "transport/mpi/mpi_c.h"

#include <cstdint>
#include <deque>
#include <memory>

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

class ControlChannel {
 public:
  // Collective over `comm` (MPI_Comm_dup). Null when MPI does not provide
  // MPI_THREAD_MULTIPLE or the dup fails.
  static std::unique_ptr<ControlChannel> create(MPI_Comm comm);
  ~ControlChannel();  // cancels the receive, waits (briefly) for sends, frees the communicator
  ControlChannel(const ControlChannel&) = delete;
  ControlChannel& operator=(const ControlChannel&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  // Nonblocking; the message is copied and kept until its send completes.
  void send(int peer, const ControlMessage& message);
  // The next message that arrived, if any (reposts the receive).
  bool poll(ControlMessage& out);
  // Completes finished sends; with waitMs > 0, waits that long for the rest.
  void flush(int waitMs);

 private:
  // How long closing waits for every rank to close too (see ~ControlChannel).
  static constexpr int kCloseWaitMs = 2000;
  explicit ControlChannel(MPI_Comm comm);
  void postReceive();

  MPI_Comm comm_;
  int rank_ = 0;
  int size_ = 0;
  MPI_Request recvRequest_ = MPI_REQUEST_NULL;
  ControlMessage incoming_;
  struct Outgoing {
    ControlMessage message;
    MPI_Request request = MPI_REQUEST_NULL;
  };
  std::deque<Outgoing> outgoing_;  // deque: a message's address stays valid while others are added
};

}  // namespace boostcomm::detail
