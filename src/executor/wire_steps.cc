#include "executor/wire_steps.h"

#include <algorithm>

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

}  // namespace boostcomm::executor
