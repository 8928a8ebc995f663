#include "shm/segment.h"

namespace boostcomm::shm {

SegmentLayout::SegmentLayout(std::size_t chunkBytes, std::size_t slotChunks)
    : chunkBytes_(chunkBytes), slotChunks_(slotChunks) {
  // Slots start on a page so the staging ring never shares a page with the
  // counters peers spin on.
  constexpr std::size_t kPageBytes = 4096;
  slotOffset_ = (sizeof(RankControl) + kPageBytes - 1) & ~(kPageBytes - 1);
}

}  // namespace boostcomm::shm
