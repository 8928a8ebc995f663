// The one exception type of boostcomm. Every failure carries a category, the
// rank that raised it (-1 when not known) and a message naming the argument.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace boostcomm {

enum class ErrorCategory {
  kInvalidArgument,  // bad input on this rank: null buffer, size mismatch, unknown name ...
  kMismatch,         // ranks disagree (count, dtype, topology file ...)
  kTimeout,          // a wait exceeded its deadline; the communicator is unusable afterwards
  kTransport,        // the backend (MPI, ...) reported an error
  kFinalized,        // use after finalize()
  kInternal,         // a broken invariant inside boostcomm (a bug: please report)
  kAborted,          // use after (or a wait cut short by) Communicator::abort()
};

std::string_view toString(ErrorCategory category);

class Error : public std::runtime_error {
 public:
  Error(ErrorCategory category, int rank, const std::string& message);
  ErrorCategory category() const noexcept { return category_; }
  int rank() const noexcept { return rank_; }
  // The message without the "[boostcomm rank N, category]" prefix.
  const std::string& detail() const noexcept { return detail_; }

 private:
  ErrorCategory category_;
  int rank_;
  std::string detail_;
};

}  // namespace boostcomm
