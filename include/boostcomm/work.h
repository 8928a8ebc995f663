// Handle of an asynchronous collective.
#pragma once

#include <chrono>
#include <memory>
#include <optional>

namespace boostcomm {

namespace detail {
class WorkState;
}

// A Work is returned by every *Async call. The operation progresses whenever
// test() or wait() is called on any Work of the same communicator (or any
// blocking call runs). Buffers passed to the call must stay valid and
// untouched until the Work completes.
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
  // Name of the algorithm that runs this operation (e.g. "ring", "native").
  const char* algorithm() const;

 private:
  std::shared_ptr<detail::WorkState> state_;
};

}  // namespace boostcomm
