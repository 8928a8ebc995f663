#include "algorithms/spec.h"

#include <algorithm>

namespace boostcomm::algorithms {

std::size_t CollectiveSpec::payloadBytes() const {
  const std::size_t es = elementSize();
  switch (collective) {
    case Collective::kAllreduce:
    case Collective::kBroadcast: return count * es;
    case Collective::kAllgather: {
      if (counts.empty()) return count * es * static_cast<std::size_t>(size);
      std::size_t total = 0;
      for (std::size_t c : counts) total += c;
      return total * es;
    }
    case Collective::kReduceScatter: return count * es * static_cast<std::size_t>(size);
    case Collective::kBarrier: return 0;
  }
  return 0;
}

Range evenPart(std::size_t total, int parts, int index) {
  const std::size_t p = static_cast<std::size_t>(parts);
  const std::size_t i = static_cast<std::size_t>(index);
  const std::size_t base = total / p;
  const std::size_t extra = total % p;  // the first `extra` parts get one more
  return Range{i * base + std::min(i, extra), base + (i < extra ? 1 : 0)};
}

std::vector<Range> blockLayout(const CollectiveSpec& spec) {
  std::vector<Range> blocks(static_cast<std::size_t>(spec.size));
  std::size_t offset = 0;
  for (int i = 0; i < spec.size; ++i) {
    const std::size_t c = spec.counts.empty() ? spec.count : spec.counts[static_cast<std::size_t>(i)];
    blocks[static_cast<std::size_t>(i)] = Range{offset, c};
    offset += c;
  }
  return blocks;
}

int chunksFor(const CollectiveSpec& spec, std::size_t segmentBytes, int tagsPerChunk) {
  const std::size_t chunkBytes = std::max<std::size_t>(spec.chunkBytes, 1);
  std::size_t chunks = (segmentBytes + chunkBytes - 1) / chunkBytes;
  chunks = std::clamp<std::size_t>(chunks, 1, static_cast<std::size_t>(std::max(spec.maxChunks, 1)));
  const std::size_t tagLimit = static_cast<std::size_t>(std::max(spec.tagSpan, 1) / std::max(tagsPerChunk, 1));
  return static_cast<int>(std::max<std::size_t>(1, std::min(chunks, tagLimit)));
}

bool isPowerOfTwo(int n) { return n > 0 && (n & (n - 1)) == 0; }

int largestPowerOfTwoAtMost(int n) {
  int p = 1;
  while (p * 2 <= n) p *= 2;
  return p;
}

}  // namespace boostcomm::algorithms
