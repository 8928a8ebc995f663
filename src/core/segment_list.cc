#include "core/segment_list.h"

#include <cstring>

namespace boostcomm::core {

std::size_t SegmentList::pieceCount(std::size_t offset, std::size_t bytes) const {
  if (bytes == 0) return 0;
  return find(offset + bytes - 1) - find(offset) + 1;
}

char* SegmentList::contiguous(std::size_t offset, std::size_t bytes) const {
  if (bytes == 0 || offset >= totalBytes()) return nullptr;
  const std::size_t i = find(offset);
  if (offset + bytes > begin_[i + 1]) return nullptr;
  return data_[i] + (offset - begin_[i]);
}

void SegmentList::gather(void* dst, std::size_t offset, std::size_t bytes) const {
  char* out = static_cast<char*>(dst);
  forEachPiece(offset, bytes, [&](Piece p) {
    if (out != p.data) std::memcpy(out, p.data, p.bytes);
    out += p.bytes;
  });
}

void SegmentList::scatter(std::size_t offset, const void* src, std::size_t bytes) const {
  const char* in = static_cast<const char*>(src);
  forEachPiece(offset, bytes, [&](Piece p) {
    if (in != p.data) std::memcpy(p.data, in, p.bytes);
    in += p.bytes;
  });
}

}  // namespace boostcomm::core
