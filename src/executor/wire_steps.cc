#include "executor/wire_steps.h"

#include <algorithm>

#include "core/check.h"
#include "core/reduce.h"
#include "core/wire.h"

namespace boostcomm::executor {
namespace {

// fp16's scale exponent over the whole message; 0 for bf16.
int scaleOf(const Step& step, const core::Operand& data) {
  if (step.wire != WireFormat::kFp16) return 0;
  std::uint32_t maxBits = 0;
  const core::Operand ops[1] = {data};
  core::forEachRun(ops, step.count * sizeof(float), [&](char* const* p, std::size_t n) {
    maxBits = std::max(maxBits, core::maxMagnitudeBits(reinterpret_cast<const float*>(p[0]), n / sizeof(float)));
  });
  return core::fp16ScaleExponent(maxBits);
}

}  // namespace

void encodeWireStep(const Step& step, const core::Operand& src, char* staging) {
  if (step.count == 0) return;
  const int k = scaleOf(step, src);
  core::writeWireHeader(step.wire, k, staging);
  auto* out = reinterpret_cast<std::uint16_t*>(staging + core::wireHeaderBytes(step.wire));
  const core::Operand ops[1] = {src};
  core::forEachRun(ops, step.count * sizeof(float), [&](char* const* p, std::size_t n) {
    core::encodeRun(step.wire, k, reinterpret_cast<const float*>(p[0]), n / sizeof(float), out);
    out += n / sizeof(float);
  });
}

void decodeWireStep(const Step& step, const char* staging, const core::Operand& dst) {
  if (step.count == 0) return;
  const int k = core::readWireHeader(step.wire, staging);
  const auto* in = reinterpret_cast<const std::uint16_t*>(staging + core::wireHeaderBytes(step.wire));
  const core::Operand ops[1] = {dst};
  core::forEachRun(ops, step.count * sizeof(float), [&](char* const* p, std::size_t n) {
    core::decodeRun(step.wire, k, in, n / sizeof(float), reinterpret_cast<float*>(p[0]));
    in += n / sizeof(float);
  });
}

void roundWireStep(const Step& step, const core::Operand& buf, char* staging) {
  if (step.count == 0) return;
  const int k = scaleOf(step, buf);
  const core::Operand ops[1] = {buf};
  if (staging == nullptr) {
    core::forEachRun(ops, step.count * sizeof(float), [&](char* const* p, std::size_t n) {
      core::roundRun(step.wire, k, reinterpret_cast<float*>(p[0]), n / sizeof(float));
    });
    return;
  }
  // The scale of buf before rounding is the scale of the rounded values
  // (idempotence), so this message is the one the send would encode.
  core::writeWireHeader(step.wire, k, staging);
  auto* out = reinterpret_cast<std::uint16_t*>(staging + core::wireHeaderBytes(step.wire));
  core::forEachRun(ops, step.count * sizeof(float), [&](char* const* p, std::size_t n) {
    core::encodeRoundRun(step.wire, k, reinterpret_cast<float*>(p[0]), n / sizeof(float), out);
    out += n / sizeof(float);
  });
}

void reduceWireStep(const Step& step, DataType dtype, ReduceOp op, const core::Operand& dst, const core::Operand& src,
                    const char* message, bool round, char* staging) {
  if (step.count == 0) return;
  BC_INTERNAL(!round || step.wire == WireFormat::kBf16, "a fused round needs bf16 (fp16's scale spans the chunk)");
  const int k = core::readWireHeader(step.wire, message);
  const auto* in = reinterpret_cast<const std::uint16_t*>(message + core::wireHeaderBytes(step.wire));
  std::uint16_t* out = nullptr;
  if (staging != nullptr) {
    core::writeWireHeader(step.wire, 0, staging);
    out = reinterpret_cast<std::uint16_t*>(staging + core::wireHeaderBytes(step.wire));
  }
  // 4 KiB of decoded values: with the block of dst and src it stays in L1.
  constexpr std::size_t kBlock = 1024;
  alignas(64) float decoded[kBlock];
  const core::Operand ops[2] = {dst, src};
  core::forEachRun(ops, step.count * sizeof(float), [&](char* const* p, std::size_t n) {
    auto* d = reinterpret_cast<float*>(p[0]);
    const auto* s = reinterpret_cast<const float*>(p[1]);
    for (std::size_t left = n / sizeof(float); left > 0;) {
      const std::size_t m = std::min(left, kBlock);
      core::decodeRun(step.wire, k, in, m, decoded);
      core::reduce(d, s, decoded, m, dtype, op);
      if (round && out != nullptr) {
        core::encodeRoundRun(step.wire, 0, d, m, out);
        out += m;
      } else if (round) {
        core::roundRun(step.wire, 0, d, m);
      }
      in += m;
      d += m;
      s += m;
      left -= m;
    }
  });
}

}  // namespace boostcomm::executor
