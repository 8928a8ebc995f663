// Throw helpers used everywhere: one place that formats boostcomm errors.
#pragma once

#include <sstream>
#include <string>

#include "boostcomm/error.h"

namespace boostcomm::core {

[[noreturn]] void raise(ErrorCategory category, int rank, const std::string& message);

// BC_CHECK(cond, category, rank, stream-expr): throw when cond is false.
#define BC_CHECK(cond, category, rank, msg)                        \
  do {                                                             \
    if (!(cond)) {                                                 \
      std::ostringstream bc_check_os_;                             \
      bc_check_os_ << msg;                                         \
      ::boostcomm::core::raise((category), (rank), bc_check_os_.str()); \
    }                                                              \
  } while (0)

#define BC_INVALID(cond, rank, msg) BC_CHECK(cond, ::boostcomm::ErrorCategory::kInvalidArgument, rank, msg)
#define BC_INTERNAL(cond, msg) BC_CHECK(cond, ::boostcomm::ErrorCategory::kInternal, -1, msg)

}  // namespace boostcomm::core
