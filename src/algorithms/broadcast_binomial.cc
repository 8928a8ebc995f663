// Binomial-tree broadcast, pipelined over chunks.
//
// Ranks are renumbered relative to the root (v = rank - root mod n). Node v
// receives from v minus its highest set bit and forwards to v + m for every
// power of two m > v with v + m < n, largest subtree first. Each chunk is
// forwarded as soon as it arrived, so a deep tree streams instead of waiting
// for the whole message at every level. log2(n) steps for small messages.
#include "algorithms/registry.h"

namespace boostcomm::algorithms {

using executor::BufferId;

void buildBroadcastBinomial(const CollectiveSpec& spec, executor::Schedule& schedule) {
  const int n = spec.size;
  const std::size_t es = spec.elementSize();
  const int v = (spec.rank - spec.root + n) % n;
  auto real = [&](int virt) { return (virt + spec.root) % n; };
  int highBit = 0;  // highest power of two <= v (0 for the root)
  for (int m = 1; m <= v; m *= 2) highBit = m;
  std::vector<int> children;
  int top = 1;
  while (top < n) top *= 2;
  for (int m = top; m >= 1; m /= 2) {
    if (m > v && v + m < n) children.push_back(real(v + m));
  }
  const int chunks = chunksFor(spec, spec.count * es, 1);
  for (int c = 0; c < chunks; ++c) {
    const Range part = evenPart(spec.count, chunks, c);
    const auto ref = at(BufferId::kRecv, part.offset, es);
    std::vector<StepId> arrived;
    if (v > 0) arrived.push_back(schedule.recv(ref, part.count * es, real(v - highBit), c));
    for (int child : children) {
      schedule.send(ref, part.count * es, child, c);
      schedule.addDependencies(arrived);
    }
  }
}

}  // namespace boostcomm::algorithms
