// Copies in pieces, shared by the bucket component (BucketSet) and
// CollectiveFusion: between pieces a progress poke keeps the collectives
// already in flight moving while data is packed or unpacked.
#pragma once

#include <cstddef>
#include <functional>

namespace boostcomm::detail {

// Progress poke between copy pieces: a copy of many MiB would otherwise leave
// the collectives already launched idle for its whole duration.
using Progress = std::function<void()>;
inline constexpr std::size_t kCopyPieceBytes = 1 << 20;

// memcpy in pieces of kCopyPieceBytes, calling progress after each piece.
void copyWithProgress(void* dst, const void* src, std::size_t bytes, const Progress& progress);

// blocks x bytes: dst + b * dstStride <- src + b * srcStride.
void copyBlocks(void* dst, std::size_t dstStride, const void* src, std::size_t srcStride, std::size_t blocks,
                std::size_t bytes, const Progress& progress);

}  // namespace boostcomm::detail
