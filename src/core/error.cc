#include "boostcomm/error.h"

#include "core/check.h"

namespace boostcomm {
namespace {

std::string format(ErrorCategory category, int rank, const std::string& message) {
  std::string out = "[boostcomm";
  if (rank >= 0) out += " rank " + std::to_string(rank);
  out += ", ";
  out += toString(category);
  out += "] ";
  out += message;
  return out;
}

}  // namespace

std::string_view toString(ErrorCategory category) {
  switch (category) {
    case ErrorCategory::kInvalidArgument: return "invalid argument";
    case ErrorCategory::kMismatch: return "mismatch across ranks";
    case ErrorCategory::kTimeout: return "timeout";
    case ErrorCategory::kTransport: return "transport failure";
    case ErrorCategory::kFinalized: return "use after finalize";
    case ErrorCategory::kInternal: return "internal error";
    case ErrorCategory::kAborted: return "aborted";
  }
  return "unknown";
}

Error::Error(ErrorCategory category, int rank, const std::string& message)
    : std::runtime_error(format(category, rank, message)), category_(category), rank_(rank), detail_(message) {}

namespace core {
void raise(ErrorCategory category, int rank, const std::string& message) { throw Error(category, rank, message); }
}  // namespace core

}  // namespace boostcomm
