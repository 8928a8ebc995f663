// Handle of an asynchronous collective.
#pragma once

#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <optional>

#include "boostcomm/types.h"

namespace boostcomm {

namespace detail {
class WorkState;
}

// A Work is returned by every *Async call. The operation progresses whenever
// test() or wait() is called on any Work of the same communicator, any other
// call of it runs, or its progress thread is on (Communicator::setProgressThread).
// Buffers passed to the call must stay valid and untouched until the Work
// completes.
//
// Thread safety: copies of a Work share one state; test(), wait() and
// onComplete() may be called from any thread. Completion is published with
// release/acquire order: once test() returns true (or a callback runs), the
// results are visible to that thread.
class Work {
 public:
  Work() = default;
  explicit Work(std::shared_ptr<detail::WorkState> state);

  // Progress and report completion. Throws the operation's error, if any.
  bool test();
  // Block until complete. With a timeout, throws Error{kTimeout} when it
  // passes; the communicator is then unusable (MPI cannot cancel a collective).
  void wait(std::optional<std::chrono::milliseconds> timeout = std::nullopt);
  bool valid() const { return state_ != nullptr; }
  // Runs `callback` exactly once when the operation completes (error null)
  // or fails (its error): on the thread that completes it (the progress
  // thread, or one inside a call of the communicator), outside the
  // communicator's lock, so it may call the communicator; at once, on this
  // thread, when already complete. One callback per Work.
  void onComplete(std::function<void(std::exception_ptr)> callback);
  // Name of the algorithm that runs this operation (e.g. "ring", "native").
  const char* algorithm() const;
  // A completed point-to-point receive: the rank that sent the message
  // (Communicator::recvAsync with kAnySource); -1 otherwise.
  int source() const;
  // How its float32 payload travels (kOff, kBf16, kFp16; CallOptions::wire).
  WireFormat wireFormat() const;

 private:
  std::shared_ptr<detail::WorkState> state_;
};

}  // namespace boostcomm
