#include "core/wire_feedback.h"

#include <algorithm>
#include <cstdint>

#include "core/wire.h"

namespace boostcomm::core {

void applyWireFeedback(WireFormat format, FloatRuns runs, float* residual) {
  if (format != WireFormat::kBf16 && format != WireFormat::kFp16) return;
  // v = g + e, and the largest |v| (fp16's one scale for the buffer).
  std::uint32_t maxBits = 0;
  float* e = residual;
  for (auto [p, n] : runs) {
    for (std::size_t i = 0; i < n; ++i) p[i] += e[i];
    maxBits = std::max(maxBits, maxMagnitudeBits(p, n));
    e += n;
  }
  const int k = format == WireFormat::kFp16 ? fp16ScaleExponent(maxBits) : 0;
  // r = round(v) in place; e = v - r.
  e = residual;
  for (auto [p, n] : runs) {
    std::copy(p, p + n, e);
    roundRun(format, k, p, n);
    for (std::size_t i = 0; i < n; ++i) e[i] -= p[i];
    e += n;
  }
}

}  // namespace boostcomm::core
