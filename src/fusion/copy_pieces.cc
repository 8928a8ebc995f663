#include "fusion/copy_pieces.h"

#include <cstring>

namespace boostcomm::detail {

void copyWithProgress(void* dst, const void* src, std::size_t bytes, const Progress& progress) {
  auto* d = static_cast<char*>(dst);
  const auto* s = static_cast<const char*>(src);
  while (bytes > 0) {
    const std::size_t piece = bytes < kCopyPieceBytes ? bytes : kCopyPieceBytes;
    std::memcpy(d, s, piece);
    d += piece;
    s += piece;
    bytes -= piece;
    if (progress) progress();
  }
}

void copyBlocks(void* dst, std::size_t dstStride, const void* src, std::size_t srcStride, std::size_t blocks,
                std::size_t bytes, const Progress& progress) {
  for (std::size_t b = 0; b < blocks; ++b)
    copyWithProgress(static_cast<char*>(dst) + b * dstStride, static_cast<const char*>(src) + b * srcStride, bytes,
                     progress);
}

}  // namespace boostcomm::detail
