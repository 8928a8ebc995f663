// Recursive-doubling allgather(v), power-of-two ranks: at distance d partners
// swap the windows of blocks they hold, doubling them; log2(n) steps. Varying
// counts work because a window is always a contiguous run of blocks.
#include "algorithms/fold.h"
#include "algorithms/registry.h"

namespace boostcomm::algorithms {

using executor::BufferId;

void buildAllgatherRecursiveDoubling(const CollectiveSpec& spec, executor::Schedule& schedule) {
  const std::size_t es = spec.elementSize();
  const std::vector<Range> blocks = blockLayout(spec);
  auto start = [&](int b) { return b == spec.size ? blocks.back().offset + blocks.back().count : blocks[b].offset; };
  const int r = spec.rank;
  std::vector<StepId> prev = {
      schedule.copy(at(BufferId::kRecv, start(r), es), at(BufferId::kSend, 0, es), blocks[r].count * es)};
  int lo = r;
  int hi = r + 1;
  int tag = 0;
  for (int d = 1; d < spec.size; d *= 2, ++tag) {
    const int peer = r ^ d;
    const int width = hi - lo;
    const int otherLo = (r & d) == 0 ? hi : lo - width;
    const StepId sent =
        schedule.send(at(BufferId::kRecv, start(lo), es), (start(hi) - start(lo)) * es, peer, tag);
    dependOn(schedule, prev);
    const StepId got = schedule.recv(at(BufferId::kRecv, start(otherLo), es),
                                     (start(otherLo + width) - start(otherLo)) * es, peer, tag);
    dependOn(schedule, prev);
    prev = {sent, got};
    lo = std::min(lo, otherLo);
    hi = lo + 2 * width;
  }
}

}  // namespace boostcomm::algorithms
