#include "shm/window_segment.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "core/check.h"

namespace boostcomm::shm {

WindowSegment::WindowSegment(transport::Transport& transport, std::size_t bytesPerRank)
    : SharedSegment(transport.rank(), bytesPerRank) {
  BC_INVALID(bytesPerRank <= static_cast<std::size_t>(PTRDIFF_MAX), rank_,
             "shared window of " << bytesPerRank << " bytes is too large");
  // Round up to whole cache lines so every part stays line-aligned. Open MPI
  // aligns parts only to 8 bytes: ask for a line more and start every part
  // at its first line boundary (each rank computes the same).
  const std::size_t rounded = std::max<std::size_t>((bytesPerRank + kLineBytes - 1) & ~(kLineBytes - 1), kLineBytes);
  window_ = transport.allocateSharedWindow(rounded + kLineBytes);
  bases_.resize(window_->bases.size());
  for (std::size_t r = 0; r < bases_.size(); ++r) {
    const std::uintptr_t aligned =
        (reinterpret_cast<std::uintptr_t>(window_->bases[r]) + kLineBytes - 1) & ~(kLineBytes - 1);
    bases_[r] = reinterpret_cast<char*>(aligned);
  }
  std::memset(bases_[static_cast<std::size_t>(rank_)], 0, rounded);
  // Nobody reads a peer's counters before that peer has zeroed them.
  try {
    transport.nativeBarrier(nullptr);
  } catch (...) {
    // Freeing the window is collective, and a peer may never get there:
    // leak the mapping rather than wait in the free.
    (void)window_.release();
    throw;
  }
}

SegmentFactory WindowSegment::factory(transport::Transport& transport) {
  return [&transport](std::size_t bytesPerRank) -> std::unique_ptr<SharedSegment> {
    return std::make_unique<WindowSegment>(transport, bytesPerRank);
  };
}

}  // namespace boostcomm::shm
