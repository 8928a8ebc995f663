// SideChannel: fixed-size messages beside a transport's data path, for the
// stall inspector's control messages across nodes (watch/control_channel.h).
//
// While the data path is stuck nothing travels on it, so the channel is a
// group of its own (MPI: a duplicate communicator), driven by one thread other
// than the caller's (the watchdog), with nonblocking calls only. Its errors
// never end the job: a failed post or poll only loses that message.
#pragma once

#include <cstddef>

namespace boostcomm::transport {

class SideChannel {
 public:
  // Quiesces with every rank (bounded: a peer that never closes leaves the
  // backend's resources leaked, not freed) and frees them.
  virtual ~SideChannel() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Nonblocking; `message` (the channel's message size) is copied and kept
  // until its send completes. A peer out of range, or this rank, is ignored.
  virtual void send(int peer, const void* message) = 0;
  // The next message that arrived, copied into `out` (the message size);
  // false: none yet.
  virtual bool poll(void* out) = 0;
  // Completes finished sends; with waitMs > 0, waits that long for the rest.
  virtual void flush(int waitMs) = 0;
};

}  // namespace boostcomm::transport
