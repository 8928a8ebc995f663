// Throw helpers used everywhere: one place that formats boostcomm errors.
#pragma once

#include <sstream>
#include <string>

#include "boostcomm/error.h"

namespace boostcomm::core {

[[noreturn]] void raise(ErrorCategory category, int rank, const std::string& message);

// Formats the message only on failure, in a cold out-of-line function, so
// a check costs the hot path one compare and no stream set-up.
template <typename Format>
[[noreturn, gnu::cold, gnu::noinline]] void raiseFormatted(ErrorCategory category, int rank, Format&& format) {
  std::ostringstream os;
  format(os);
  raise(category, rank, os.str());
}

// BC_CHECK(cond, category, rank, stream-expr): throw when cond is false.
#define BC_CHECK(cond, category, rank, msg)                                                        \
  do {                                                                                             \
    if (!(cond)) [[unlikely]] {                                                                    \
      ::boostcomm::core::raiseFormatted((category), (rank), [&](std::ostream& bc_check_os_) { bc_check_os_ << msg; }); \
    }                                                                                              \
  } while (0)

#define BC_INVALID(cond, rank, msg) BC_CHECK(cond, ::boostcomm::ErrorCategory::kInvalidArgument, rank, msg)
#define BC_INTERNAL(cond, msg) BC_CHECK(cond, ::boostcomm::ErrorCategory::kInternal, -1, msg)

}  // namespace boostcomm::core
