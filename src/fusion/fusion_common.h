// Building blocks shared by GradientGroup and CollectiveFusion: the
// cross-rank agreement check and chunked copies that keep collectives in
// flight progressing while data is packed or unpacked.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "boostcomm/communicator.h"

namespace boostcomm::detail {

// Collective. Every rank contributes a signature of its input and its local
// error ("" when none). Throws on every rank when any rank had a local error
// (that rank with kInvalidArgument and its message, the others with
// kInvalidArgument naming it) or when signatures differ (kMismatch naming the
// ranks that differ from rank 0). `what` names the caller ("GradientGroup").
void agreeAcrossRanks(Communicator& comm, std::uint64_t signature, const std::string& localError, const char* what);

// Progress poke between copy pieces: a copy of many MiB would otherwise leave
// the collectives already launched idle for its whole duration.
using Progress = std::function<void()>;
inline constexpr std::size_t kCopyPieceBytes = 1 << 20;

// memcpy in pieces of kCopyPieceBytes, calling progress after each piece.
void copyWithProgress(void* dst, const void* src, std::size_t bytes, const Progress& progress);

// blocks x bytes: dst + b * dstStride <- src + b * srcStride.
void copyBlocks(void* dst, std::size_t dstStride, const void* src, std::size_t srcStride, std::size_t blocks,
                std::size_t bytes, const Progress& progress);

// FNV-1a step, for signatures built from several values.
std::uint64_t mixSignature(std::uint64_t hash, std::uint64_t value);

}  // namespace boostcomm::detail
