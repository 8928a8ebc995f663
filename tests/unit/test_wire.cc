// Wire formats (core/wire.h, docs/ALGORITHMS.md "Wire formats"): the codecs,
// then float32 allreduce over 16-bit wires in-process (flat ring and rhd on
// world sizes 1-8, hier on declared multi-node layouts): every rank bitwise
// identical, the error against a float64 reference inside the documented
// bound, and the bad inputs (float64/int payloads, an explicit format an
// algorithm cannot carry, ranks disagreeing) as errors on every rank.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "algorithms/registry.h"
#include "boostcomm/boostcomm.h"
#include "core/half.h"
#include "core/reduce.h"
#include "core/segment_list.h"
#include "core/tunables.h"
#include "core/wire.h"
#include "executor/schedule.h"
#include "executor/wire_steps.h"
#include "testing/inproc_group.h"
#include "tuning/cost_model.h"

namespace boostcomm {
namespace {

using core::wireBytes;

std::vector<float> randomFloats(std::size_t n, std::uint32_t seed, float scale) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen) * scale;
  return v;
}

std::vector<char> encoded(WireFormat f, const std::vector<float>& x) {
  std::vector<char> w(wireBytes(f, x.size()));
  core::encodeWire(f, x.data(), x.size(), w.data());
  return w;
}

std::vector<float> decoded(WireFormat f, const std::vector<char>& w, std::size_t n) {
  std::vector<float> y(n);
  core::decodeWire(f, w.data(), n, y.data());
  return y;
}

TEST(WireCodec, Bf16IsRoundToNearestEvenPerElement) {
  const std::vector<float> x = randomFloats(1001, 1, 1e3f);
  const std::vector<float> y = decoded(WireFormat::kBf16, encoded(WireFormat::kBf16, x), x.size());
  ASSERT_EQ(wireBytes(WireFormat::kBf16, x.size()), 2 * x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    ASSERT_EQ(y[i], core::bfloat16ToFloat(core::floatToBFloat16(x[i]))) << i;
    ASSERT_LE(std::fabs(y[i] - x[i]), std::ldexp(std::fabs(x[i]), -8)) << i;
  }
}

TEST(WireCodec, Fp16ScaleAvoidsOverflowAndUnderflow) {
  // float16 alone overflows above 65504 and loses precision below 6e-5; the
  // per-message scale keeps 11 significand bits at any magnitude.
  for (float scale : {1e-30f, 1e-6f, 1.0f, 6e4f, 1e6f, 1e30f, 3e38f}) {
    const std::vector<float> x = randomFloats(513, 2, scale);
    const std::vector<float> y = decoded(WireFormat::kFp16, encoded(WireFormat::kFp16, x), x.size());
    const float m = std::fabs(*std::max_element(x.begin(), x.end(), [](float a, float b) { return std::fabs(a) < std::fabs(b); }));
    for (std::size_t i = 0; i < x.size(); ++i) {
      ASSERT_TRUE(std::isfinite(y[i])) << "scale " << scale << " element " << i;
      // Relative 2^-11 for elements near the maximum; elements far below it
      // may fall into float16's subnormals: absolute 2^-24 of the scaled max.
      const double bound = std::max(std::ldexp(std::fabs(static_cast<double>(x[i])), -11), std::ldexp(static_cast<double>(m), -38));
      ASSERT_LE(std::fabs(static_cast<double>(y[i]) - x[i]), bound) << "scale " << scale << " element " << i;
    }
  }
}

// The vector paths (AVX2/F16C where the CPU has them) give the scalar
// reference's bits for any float32 bit pattern: NaNs, infinities, subnormals.
TEST(WireCodec, VectorPathsMatchTheScalarReferenceBitwise) {
  std::mt19937 gen(5);
  for (int trial = 0; trial < 50; ++trial) {
    const std::size_t n = 1 + gen() % 200;
    std::vector<float> x(n);
    for (float& v : x) v = __builtin_bit_cast(float, static_cast<std::uint32_t>(gen()));
    std::vector<std::uint16_t> got(n);
    core::encodeRun(WireFormat::kBf16, 0, x.data(), n, got.data());
    for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(got[i], core::floatToBFloat16(x[i])) << i;
    for (int k : {-20, 0, 13}) {
      const float scale = std::ldexp(1.0f, k);
      core::encodeRun(WireFormat::kFp16, k, x.data(), n, got.data());
      for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(got[i], core::floatToHalf(x[i] * scale)) << i << " k " << k;
      std::vector<float> back(n);
      core::decodeRun(WireFormat::kFp16, k, got.data(), n, back.data());
      for (std::size_t i = 0; i < n; ++i) {
        const float want = core::halfToFloat(got[i]) * std::ldexp(1.0f, -k);
        ASSERT_EQ(__builtin_bit_cast(std::uint32_t, back[i]), __builtin_bit_cast(std::uint32_t, want)) << i;
      }
    }
    std::uint32_t maxBits = 0;
    for (float v : x) maxBits = std::max(maxBits, __builtin_bit_cast(std::uint32_t, v) & 0x7FFFFFFFu);
    ASSERT_EQ(core::maxMagnitudeBits(x.data(), n), maxBits);
  }
}

// The owner's fused pass (round its chunk and make the allgather's message
// at once) gives exactly what rounding, then encoding, gave: any bit pattern.
TEST(WireCodec, FusedEncodeRoundMatchesRoundThenEncodeBitwise) {
  std::mt19937 gen(11);
  for (int trial = 0; trial < 60; ++trial) {
    const std::size_t n = gen() % 300;
    std::vector<float> x(n);
    for (float& v : x) {
      v = trial % 2 ? __builtin_bit_cast(float, static_cast<std::uint32_t>(gen()))
                    : std::ldexp(static_cast<float>(gen() % 20001) - 10000.0f, static_cast<int>(gen() % 40) - 20);
    }
    for (WireFormat f : {WireFormat::kBf16, WireFormat::kFp16}) {
      for (int k : {-20, 0, 13}) {
        std::vector<float> rounded = x;
        core::roundRun(f, k, rounded.data(), n);
        std::vector<std::uint16_t> want(n);
        core::encodeRun(f, k, x.data(), n, want.data());
        std::vector<float> fused = x;
        std::vector<std::uint16_t> got(n);
        core::encodeRoundRun(f, k, fused.data(), n, got.data());
        ASSERT_EQ(got, want) << "trial " << trial << " " << toString(f) << " k " << k;
        ASSERT_TRUE(n == 0 || std::memcmp(fused.data(), rounded.data(), n * sizeof(float)) == 0)  // n 0: null data()
            << "trial " << trial << " " << toString(f) << " k " << k;
      }
    }
  }
}

// The owner's round step makes the message of a send of the same elements
// that waits for it; other sends encode their own.
TEST(WireSchedule, RoundEncodesTheMessageOfTheSendAfterIt) {
  using executor::BufferId;
  using executor::BufRef;
  executor::Schedule s(Collective::kAllreduce, DataType::kFloat32, ReduceOp::kSum, "test");
  executor::WireScope scope(s, WireFormat::kBf16);
  const BufRef chunk{BufferId::kRecv, 400};
  const auto reduce = s.reduce(chunk, chunk, BufRef{BufferId::kScratch, 0}, 100);
  const auto round = s.wireRound(chunk, 100, reduce);
  const auto same = s.send(chunk, 400, 1, 0, {round});
  const auto later = s.send(chunk, 400, 2, 1);  // dependency added afterwards, as ringAllgather does
  s.addDependency(round);
  const auto part = s.send(chunk, 200, 1, 2, {round});  // fewer elements: its own message
  const auto other = s.send(BufRef{BufferId::kRecv, 0}, 400, 1, 3, {round});
  const auto& st = s.steps();
  EXPECT_TRUE(st[round].staged);
  EXPECT_TRUE(st[same].staged);
  EXPECT_TRUE(st[later].staged);
  EXPECT_EQ(st[same].src2.offsetBytes, st[round].src2.offsetBytes);
  EXPECT_EQ(st[later].src2.offsetBytes, st[round].src2.offsetBytes);
  EXPECT_FALSE(st[part].staged);
  EXPECT_FALSE(st[other].staged);
}

// In the flat ring every owned chunk's round makes the allgather's first message.
TEST(WireSchedule, RingOwnerRoundsFeedTheirSends) {
  for (int n : {2, 3, 4}) {
    algorithms::CollectiveSpec spec;
    spec.collective = Collective::kAllreduce;
    spec.dtype = DataType::kFloat32;
    spec.op = ReduceOp::kAvg;
    spec.count = 65537;
    spec.rank = n - 1;
    spec.size = n;
    spec.chunkBytes = 4096;
    spec.maxChunks = 8;
    spec.wire = WireFormat::kBf16;
    executor::Schedule s(spec.collective, spec.dtype, spec.op, "ring");
    algorithms::buildAllreduceRing(spec, s);
    std::size_t rounds = 0, stagedRounds = 0, stagedSends = 0;
    for (const executor::Step& st : s.steps()) {
      if (st.kind == executor::StepKind::kRound) {
        ++rounds;
        stagedRounds += st.staged;
      }
      if (st.kind == executor::StepKind::kSend) stagedSends += st.staged;
    }
    EXPECT_GT(rounds, 1u) << n;
    EXPECT_EQ(stagedRounds, rounds) << n;
    EXPECT_EQ(stagedSends, rounds) << n;
  }
}

// The ring's reduce-scatter decodes each received message as it reduces it
// (the receive leaves it in staging), and with bf16 the owner's rounding is
// done in the same pass; fp16's is not (its scale spans the chunk), nor is
// one after avg's divide. The allgather's receives decode as before.
TEST(WireSchedule, RingReducesDecodeTheirMessagesAndBf16RoundsInTheSamePass) {
  for (int n : {2, 3, 5}) {
    for (WireFormat wire : {WireFormat::kBf16, WireFormat::kFp16}) {
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg}) {
        algorithms::CollectiveSpec spec;
        spec.collective = Collective::kAllreduce;
        spec.dtype = DataType::kFloat32;
        spec.op = op;
        spec.count = 65537;
        spec.rank = 1;
        spec.size = n;
        spec.chunkBytes = 4096;
        spec.maxChunks = 8;
        spec.wire = wire;
        executor::Schedule s(spec.collective, spec.dtype, spec.op, "ring");
        algorithms::buildAllreduceRing(spec, s);
        const auto& steps = s.steps();
        std::size_t fusedRecvs = 0, plainRecvs = 0, reduces = 0, rounds = 0, foldedRounds = 0;
        for (std::size_t i = 0; i < steps.size(); ++i) {
          const executor::Step& st = steps[i];
          const std::string where = std::string(toString(wire)) + " " + std::string(toString(op)) + " n " + std::to_string(n);
          if (st.kind == executor::StepKind::kRecv) (st.fused ? fusedRecvs : plainRecvs) += 1;
          if (st.kind == executor::StepKind::kReduce) {
            ++reduces;
            ASSERT_TRUE(st.fused) << where;
            ASSERT_EQ(st.wire, wire) << where;
            // Its one dependency is the receive whose staged message it reads.
            ASSERT_EQ(st.depCount, 1u) << where;
            const executor::Step& recv = steps[s.deps()[st.depBegin]];
            ASSERT_TRUE(recv.kind == executor::StepKind::kRecv && recv.fused) << where;
            ASSERT_EQ(st.src2.buffer, recv.src2.buffer) << where;
            ASSERT_EQ(st.src2.offsetBytes, recv.src2.offsetBytes) << where;
            if (st.roundStep != executor::kNoStep) {
              const executor::Step& round = steps[st.roundStep];
              ASSERT_TRUE(round.kind == executor::StepKind::kRound && round.fused) << where;
              ASSERT_EQ(round.dst.offsetBytes, st.dst.offsetBytes) << where;
              ASSERT_EQ(round.count, st.count) << where;
            }
          }
          if (st.kind == executor::StepKind::kRound) {
            ++rounds;
            foldedRounds += st.fused;
          }
        }
        const std::size_t chunks = reduces / static_cast<std::size_t>(n - 1);
        EXPECT_EQ(fusedRecvs, reduces);
        EXPECT_EQ(plainRecvs, reduces);  // the allgather's, as many as the reduce-scatter's
        EXPECT_EQ(rounds, chunks);       // one per owned chunk
        const bool folds = wire == WireFormat::kBf16 && op == ReduceOp::kSum;
        EXPECT_EQ(foldedRounds, folds ? rounds : 0u) << toString(wire) << " " << toString(op) << " n " << n;
      }
    }
  }
}

// The fused pass gives exactly the bits of the three it replaces (decode
// into float32, reduce, then round and encode the result): every op, both
// formats, counts around the block size, dst a segment list.
TEST(WireReduceStep, FusedPassMatchesDecodeReduceRoundBitwise) {
  std::mt19937 gen(5);
  for (WireFormat wire : {WireFormat::kBf16, WireFormat::kFp16}) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMin, ReduceOp::kMax}) {
      for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{1023}, std::size_t{1024},
                            std::size_t{1025}, std::size_t{5003}}) {
        for (int mode = 0; mode < 3; ++mode) {  // 0: no round; 1: round in place; 2: round and stage
          const bool round = mode > 0;
          if (round && wire != WireFormat::kBf16) continue;
          std::vector<float> local(n), theirs(n);
          for (std::size_t i = 0; i < n; ++i) {
            local[i] = std::ldexp(static_cast<float>(gen() % 20001) - 10000.0f, static_cast<int>(gen() % 30) - 15);
            theirs[i] = std::ldexp(static_cast<float>(gen() % 20001) - 10000.0f, static_cast<int>(gen() % 30) - 15);
          }
          if (n > 3) theirs[3] = std::numeric_limits<float>::quiet_NaN();
          executor::Step step;
          step.kind = executor::StepKind::kReduce;
          step.count = n;
          step.wire = wire;
          std::vector<char> message(wireBytes(wire, n) + 4);
          core::encodeWire(wire, theirs.data(), n, message.data());

          // The reference: three passes.
          std::vector<float> decoded(n), want(n);
          core::decodeWire(wire, message.data(), n, decoded.data());
          core::reduce(want.data(), local.data(), decoded.data(), n, DataType::kFloat32, op);
          std::vector<char> wantStaged(wireBytes(wire, n) + 4, 0);
          if (round) core::encodeWire(wire, want.data(), n, wantStaged.data());
          if (round) core::roundThroughWire(wire, want.data(), n);

          // The fused pass, dst a list of uneven segments (runs cut mid-block).
          std::vector<float> out(n + 2, -1.0f);
          core::SegmentList list;
          const std::size_t cut1 = n / 3, cut2 = std::min(n, cut1 + 700);
          list.append(reinterpret_cast<char*>(out.data()), cut1 * sizeof(float));
          list.append(reinterpret_cast<char*>(out.data() + cut1 + 1), (cut2 - cut1) * sizeof(float));
          list.append(reinterpret_cast<char*>(out.data() + cut2 + 2), (n - cut2) * sizeof(float));
          std::vector<char> staged(wireBytes(wire, n) + 4, 0);
          executor::reduceWireStep(step, DataType::kFloat32, op, core::Operand{&list, nullptr, 0},
                                   core::Operand{nullptr, reinterpret_cast<char*>(local.data()), 0},
                                   message.data(), round, mode == 2 ? staged.data() : nullptr);
          std::vector<float> got;
          got.insert(got.end(), out.begin(), out.begin() + static_cast<std::ptrdiff_t>(cut1));
          got.insert(got.end(), out.begin() + static_cast<std::ptrdiff_t>(cut1 + 1),
                     out.begin() + static_cast<std::ptrdiff_t>(cut2 + 1));
          got.insert(got.end(), out.begin() + static_cast<std::ptrdiff_t>(cut2 + 2), out.end());
          const std::string where = std::string(toString(wire)) + " " + std::string(toString(op)) + " n " + std::to_string(n) +
                                    " mode " + std::to_string(mode);
          ASSERT_EQ(got.size(), n) << where;
          ASSERT_TRUE(n == 0 || std::memcmp(got.data(), want.data(), n * sizeof(float)) == 0) << where;
          if (mode == 2) {
            EXPECT_EQ(staged, wantStaged) << where;
          }
          // The gaps between the segments are untouched.
          if (n > 0) {
            EXPECT_EQ(out[cut1], -1.0f) << where;
          }
        }
      }
    }
  }
}

TEST(WireCodec, NonFiniteValuesPassThrough) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (WireFormat f : {WireFormat::kBf16, WireFormat::kFp16}) {
    const std::vector<float> x = {1.0f, -inf, 3.0f, nan, 1e20f, 0.0f, -0.0f};
    const std::vector<float> y = decoded(f, encoded(f, x), x.size());
    EXPECT_EQ(y[0], 1.0f);
    EXPECT_EQ(y[1], -inf);
    EXPECT_EQ(y[2], 3.0f);
    EXPECT_TRUE(std::isnan(y[3]));
    EXPECT_EQ(std::signbit(y[6]), true);
  }
}

// What bitwise agreement rests on: re-encoding decoded values gives the same
// message, so the owner's rounded chunk is exactly what receivers hold.
TEST(WireCodec, EncodingDecodedValuesIsIdempotent) {
  std::mt19937 gen(3);
  for (int trial = 0; trial < 400; ++trial) {
    const std::size_t n = 1 + gen() % 300;
    // Magnitudes spread over the whole float32 range, incl. maxima whose
    // float16 rounding crosses a power of two (2^15 - 1, 2^k * 0.99997).
    const float scale = std::ldexp(1.0f, static_cast<int>(gen() % 250) - 125);
    std::vector<float> x = randomFloats(n, static_cast<std::uint32_t>(trial), scale);
    if (trial % 3 == 0) x[gen() % n] = std::ldexp(1.0f - std::ldexp(1.0f, -12), static_cast<int>(gen() % 200) - 100);
    if (trial % 7 == 0) x[gen() % n] = std::numeric_limits<float>::denorm_min() * static_cast<float>(gen() % 100);
    for (WireFormat f : {WireFormat::kBf16, WireFormat::kFp16}) {
      const std::vector<char> w = encoded(f, x);
      const std::vector<float> y = decoded(f, w, n);
      // The same values again (the message bytes too, except that a message
      // whose values all rounded to zero re-encodes with scale 0).
      const std::vector<float> again = decoded(f, encoded(f, y), n);
      ASSERT_EQ(std::memcmp(again.data(), y.data(), n * sizeof(float)), 0) << "trial " << trial << " " << toString(f);
      if (std::any_of(y.begin(), y.end(), [](float v) { return v != 0.0f; })) {
        ASSERT_EQ(encoded(f, y), w) << "trial " << trial << " " << toString(f);
      }
      std::vector<float> r = x;
      core::roundThroughWire(f, r.data(), n);
      ASSERT_EQ(std::memcmp(r.data(), y.data(), n * sizeof(float)), 0) << "trial " << trial << " " << toString(f);
    }
  }
}

// Not a test of speed (no timing assertion): prints the conversion rates the
// cost model's kWireBf16ConvertGBps / kWireFp16ConvertGBps stand for.
TEST(WireCodec, PrintsConversionThroughput) {
  const std::vector<float> x = randomFloats(std::size_t{1} << 22, 4, 10.0f);
  for (WireFormat f : {WireFormat::kBf16, WireFormat::kFp16}) {
    std::vector<char> w(wireBytes(f, x.size()));
    std::vector<float> y(x.size());
    const auto t0 = std::chrono::steady_clock::now();
    core::encodeWire(f, x.data(), x.size(), w.data());
    const auto t1 = std::chrono::steady_clock::now();
    core::decodeWire(f, w.data(), x.size(), y.data());
    const auto t2 = std::chrono::steady_clock::now();
    const double bytes = static_cast<double>(x.size() * sizeof(float));
    std::printf("[wire] %s encode %.2f GB/s, decode %.2f GB/s (float32 bytes)\n", std::string(toString(f)).c_str(),
                bytes / std::chrono::duration<double>(t1 - t0).count() / 1e9,
                bytes / std::chrono::duration<double>(t2 - t1).count() / 1e9);
    ASSERT_LE(std::fabs(y[7] - x[7]), std::ldexp(std::fabs(x[7]), -8));
  }
}

// ---- allreduce over a wire -------------------------------------------------

double unitRoundoff(WireFormat f) { return f == WireFormat::kFp16 ? 0x1p-11 : 0x1p-8; }

struct ErrorStats {
  double maxRel = 0;   // max over elements of |got - ref| / sum_r |x_r|
  double meanRel = 0;  // mean of the same
};

// Runs an allreduce of random floats on `size` in-process ranks; checks all
// ranks bitwise identical and every element within roundings * u * sum|x|
// (+ the float32 additions); returns the measured error.
ErrorStats runWireAllreduce(int size, std::size_t count, const std::string& algorithm, WireFormat wire, ReduceOp op,
                            int roundings, bool inPlace = false) {
  std::vector<std::vector<float>> inputs(static_cast<std::size_t>(size));
  for (int r = 0; r < size; ++r) inputs[static_cast<std::size_t>(r)] = randomFloats(count, 100 + r, 1.0f);
  std::vector<std::vector<float>> results(static_cast<std::size_t>(size));
  std::vector<std::string> ran(static_cast<std::size_t>(size));
  std::vector<WireFormat> ranWire(static_cast<std::size_t>(size));
  detail::runInProcess(size, [&](Communicator& comm) {
    const auto me = static_cast<std::size_t>(comm.rank());
    std::vector<float> in = inputs[me];
    std::vector<float> out(count, -1.0f);
    CallOptions options;
    options.algorithm = algorithm;
    options.wire = wire;
    std::span<float> dst = inPlace ? std::span<float>(in) : std::span<float>(out);
    Work work = comm.allreduceAsync(std::span<const float>(in), dst, op, options);
    ran[me] = work.algorithm();
    ranWire[me] = work.wireFormat();
    work.wait();
    results[me] = std::vector<float>(dst.begin(), dst.end());
  });
  EXPECT_EQ(ran[0], algorithm);
  if (size > 1 && count > 0) {
    EXPECT_EQ(ranWire[0], wire) << algorithm;
  }
  for (int r = 1; r < size && count > 0; ++r) {  // memcmp of empty vectors' null data() is UB (UBSan)
    EXPECT_EQ(std::memcmp(results[0].data(), results[static_cast<std::size_t>(r)].data(), count * sizeof(float)), 0)
        << algorithm << " " << toString(wire) << " size " << size << " count " << count << ": rank " << r
        << " differs from rank 0";
  }
  ErrorStats stats;
  const double u = unitRoundoff(wire);
  for (std::size_t i = 0; i < count; ++i) {
    double ref = 0, sumAbs = 0, mx = -1e300;
    for (int r = 0; r < size; ++r) {
      ref += inputs[static_cast<std::size_t>(r)][i];
      sumAbs += std::fabs(inputs[static_cast<std::size_t>(r)][i]);
      mx = std::max(mx, static_cast<double>(inputs[static_cast<std::size_t>(r)][i]));
    }
    if (op == ReduceOp::kMax) ref = mx;
    if (op == ReduceOp::kAvg) {
      ref /= size;
      sumAbs /= size;
    }
    const double err = std::fabs(results[0][i] - ref);
    // Each rounding through the wire moves a partial sum by at most u of its
    // magnitude (<= sumAbs); the float32 additions and the avg division by
    // 2^-24 each; fp16's subnormal floor is far below these for unit inputs.
    const double bound = (roundings * u + (size + 1) * 0x1p-24) * sumAbs * (1 + 1e-6) + 1e-30;
    EXPECT_LE(err, bound) << algorithm << " " << toString(wire) << " size " << size << " element " << i;
    if (err > bound) break;
    const double rel = sumAbs > 0 ? err / sumAbs : 0.0;
    stats.maxRel = std::max(stats.maxRel, rel);
    stats.meanRel += rel;
  }
  if (count > 0) stats.meanRel /= static_cast<double>(count);
  return stats;
}

int log2Floor(int n) {
  int k = 0;
  while ((2 << k) <= n) ++k;
  return k;
}

// Roundings one element goes through (docs/ALGORITHMS.md, "Wire formats"):
// ring: n - 1 partial sums sent on, plus the owner's final rounding; rhd:
// one per halving stage, one for the folded-in input, the final one.
int ringRoundings(int n) { return n; }
int rhdRoundings(int n) { return log2Floor(n) + (n != (1 << log2Floor(n)) ? 1 : 0) + 1; }

TEST(WireAllreduce, FlatRingAndRhdAgreeBitwiseWithinTheBound) {
  for (int size : {1, 2, 3, 4, 5, 7, 8}) {
    for (std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{1000}, std::size_t{65537}}) {
      for (WireFormat wire : {WireFormat::kBf16, WireFormat::kFp16}) {
        runWireAllreduce(size, count, "ring", wire, ReduceOp::kSum, ringRoundings(size));
        runWireAllreduce(size, count, "rhd", wire, ReduceOp::kSum, rhdRoundings(size));
      }
    }
  }
}

TEST(WireAllreduce, AvgMinMaxAndInPlace) {
  for (int size : {3, 4}) {
    for (ReduceOp op : {ReduceOp::kAvg, ReduceOp::kMax}) {
      runWireAllreduce(size, 4099, "ring", WireFormat::kBf16, op, ringRoundings(size), /*inPlace=*/true);
      runWireAllreduce(size, 4099, "rhd", WireFormat::kFp16, op, rhdRoundings(size), /*inPlace=*/false);
    }
  }
}

class WireHier : public ::testing::TestWithParam<std::pair<std::string, int>> {
 protected:
  void SetUp() override {
    core::setTunableOverride(core::kTunableNodeLayout, GetParam().first);
    core::setTunableOverride(core::kTunableRingChunkBytes, "16384");  // several pipeline pieces and chunks
  }
  void TearDown() override {
    core::clearTunableOverride(core::kTunableNodeLayout);
    core::clearTunableOverride(core::kTunableRingChunkBytes);
    core::clearTunableOverride(core::kTunableHierInterAlgo);
  }
};

TEST_P(WireHier, InterNodePhaseCompressesBitwiseIdentical) {
  const int size = GetParam().second;
  const int nodes = static_cast<int>(std::count(GetParam().first.begin(), GetParam().first.end(), ',')) + 1;
  for (const char* inter : {"ring", "rhd", "native"}) {
    core::setTunableOverride(core::kTunableHierInterAlgo, inter);
    // native cannot carry a wire format: the inter phase then runs the ring.
    const int roundings = std::string(inter) == "rhd" ? rhdRoundings(nodes) : ringRoundings(nodes);
    for (std::size_t count : {std::size_t{1}, std::size_t{7}, std::size_t{1000}, std::size_t{100003}}) {
      for (WireFormat wire : {WireFormat::kBf16, WireFormat::kFp16}) {
        const ErrorStats s = runWireAllreduce(size, count, "hier", wire, ReduceOp::kSum, roundings);
        if (count == 100003 && std::string(inter) == "ring") {
          std::printf("[wire] hier %s %s count %zu: max rel error %.3g, mean %.3g (bound %.3g)\n",
                      GetParam().first.c_str(), std::string(toString(wire)).c_str(), count, s.maxRel, s.meanRel,
                      roundings * unitRoundoff(wire));
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Layouts, WireHier,
                         ::testing::Values(std::make_pair(std::string("2,2"), 4), std::make_pair(std::string("3,3"), 6),
                                           std::make_pair(std::string("3,3,3"), 9)),
                         [](const auto& info) { return "n" + std::to_string(info.param.second); });

TEST(WireAllreduce, SegmentListsCompressToo) {
  core::setTunableOverride(core::kTunableNodeLayout, "2,2");
  std::vector<std::vector<float>> results(4);
  detail::runInProcess(4, [&](Communicator& comm) {
    comm.setWireFormat(WireFormat::kFp16);
    // Three tensors of odd sizes: chunks straddle them.
    std::vector<float> a = randomFloats(1001, 7 + comm.rank(), 1.0f), b = randomFloats(3, 9 + comm.rank(), 1.0f),
                       c = randomFloats(40009, 11 + comm.rank(), 1.0f);
    std::vector<float> want(a.size() + b.size() + c.size());
    const View segs[3] = {View(std::span<float>(a)), View(std::span<float>(b)), View(std::span<float>(c))};
    CallOptions options;
    options.algorithm = "hier";
    Work w = comm.allreduceManyAsync(std::span<const View>(segs, 3), ReduceOp::kSum, options);
    EXPECT_EQ(w.wireFormat(), WireFormat::kFp16);
    w.wait();
    std::vector<float> all;
    all.insert(all.end(), a.begin(), a.end());
    all.insert(all.end(), b.begin(), b.end());
    all.insert(all.end(), c.begin(), c.end());
    results[static_cast<std::size_t>(comm.rank())] = all;
  });
  core::clearTunableOverride(core::kTunableNodeLayout);
  for (int r = 1; r < 4; ++r) EXPECT_EQ(results[0], results[static_cast<std::size_t>(r)]) << "rank " << r;
  // The first tensor against the float64 reference (2 nodes: 2 roundings).
  std::vector<std::vector<float>> a(4);
  for (int r = 0; r < 4; ++r) a[static_cast<std::size_t>(r)] = randomFloats(1001, 7 + r, 1.0f);
  double worst = 0;
  for (std::size_t i = 0; i < 1001; ++i) {
    double ref = 0, sumAbs = 0;
    for (int r = 0; r < 4; ++r) {
      ref += a[static_cast<std::size_t>(r)][i];
      sumAbs += std::fabs(a[static_cast<std::size_t>(r)][i]);
    }
    worst = std::max(worst, std::fabs(results[0][i] - ref) / sumAbs);
  }
  EXPECT_LE(worst, 2 * 0x1p-11 + 8 * 0x1p-24);
}

// ---- settings, pass-through and bad input ---------------------------------

TEST(WireSettings, OtherPayloadsPassThroughFromTheCommunicatorSetting) {
  detail::runInProcess(3, [](Communicator& comm) {
    comm.setWireFormat(WireFormat::kBf16);
    EXPECT_EQ(comm.wireFormat(), WireFormat::kBf16);
    // float64 and int32 travel as they are (exact), whatever the setting.
    std::vector<double> d(1001);
    std::vector<std::int32_t> n(1001);
    for (std::size_t i = 0; i < d.size(); ++i) {
      d[i] = 1.0 + 1e-12 * static_cast<double>(i) * (comm.rank() + 1);
      n[i] = 100000 * (comm.rank() + 1) + static_cast<std::int32_t>(i);
    }
    CallOptions ring;
    ring.algorithm = "ring";
    Work wd = comm.allreduceAsync(std::span<const double>(d), std::span<double>(d), ReduceOp::kSum, ring);
    EXPECT_EQ(wd.wireFormat(), WireFormat::kOff);
    wd.wait();
    comm.allreduce(std::span<const std::int32_t>(n), std::span<std::int32_t>(n), ReduceOp::kSum, ring);
    for (std::size_t i = 0; i < d.size(); ++i) {
      ASSERT_DOUBLE_EQ(d[i], 3.0 + 6e-12 * static_cast<double>(i));
      ASSERT_EQ(n[i], 600000 + 3 * static_cast<std::int32_t>(i));
    }
    EXPECT_EQ(comm.wireFormatOf(std::size_t{1} << 20, DataType::kFloat64), WireFormat::kOff);
  });
}

TEST(WireSettings, ExplicitFormatOnOtherDtypesIsAnErrorOnEveryRank) {
  std::vector<std::string> errors(3);
  detail::runInProcess(3, [&](Communicator& comm) {
    std::vector<double> d(10, 1.0);
    CallOptions options;
    options.wire = WireFormat::kBf16;
    try {
      comm.allreduce(std::span<const double>(d), std::span<double>(d), ReduceOp::kSum, options);
    } catch (const Error& e) {
      EXPECT_EQ(e.category(), ErrorCategory::kInvalidArgument);
      errors[static_cast<std::size_t>(comm.rank())] = e.what();
    }
  });
  for (const std::string& e : errors) {
    EXPECT_NE(e.find("CallOptions::wire bf16"), std::string::npos) << e;
    EXPECT_NE(e.find("float64"), std::string::npos) << e;
  }
}

TEST(WireSettings, ExplicitFormatWithAnAlgorithmThatCannotCarryIt) {
  std::vector<int> failed(2, 0);
  detail::runInProcess(2, [&](Communicator& comm) {
    std::vector<float> x(100, 1.0f);
    CallOptions options;
    options.wire = WireFormat::kFp16;
    options.algorithm = "native";
    try {
      comm.allreduce(std::span<const float>(x), std::span<float>(x), ReduceOp::kSum, options);
    } catch (const Error& e) {
      EXPECT_EQ(e.category(), ErrorCategory::kInvalidArgument);
      EXPECT_NE(std::string(e.what()).find("'native'"), std::string::npos) << e.what();
      failed[static_cast<std::size_t>(comm.rank())] = 1;
    }
  });
  EXPECT_EQ(failed, std::vector<int>({1, 1}));
}

TEST(WireSettings, RanksDisagreeingIsAMismatchOnEveryRank) {
  std::vector<int> mismatched(4, 0);
  detail::runInProcess(4, [&](Communicator& comm) {
    try {
      comm.setWireFormat(comm.rank() == 2 ? WireFormat::kFp16 : WireFormat::kBf16);
    } catch (const Error& e) {
      EXPECT_EQ(e.category(), ErrorCategory::kMismatch);
      EXPECT_NE(std::string(e.what()).find("rank 2 has fp16"), std::string::npos) << e.what();
      mismatched[static_cast<std::size_t>(comm.rank())] = 1;
    }
  });
  EXPECT_EQ(mismatched, std::vector<int>({1, 1, 1, 1}));
}

TEST(WireSettings, PerCallDisagreementIsCaughtByTheConsistencyCheck) {
  core::setTunableOverride(core::kTunableCheckConsistency, "1");
  std::vector<int> mismatched(3, 0);
  detail::runInProcess(3, [&](Communicator& comm) {
    std::vector<float> x(1000, 1.0f);
    CallOptions options;
    options.algorithm = "ring";
    options.wire = comm.rank() == 0 ? WireFormat::kOff : WireFormat::kBf16;
    try {
      comm.allreduce(std::span<const float>(x), std::span<float>(x), ReduceOp::kSum, options);
    } catch (const Error& e) {
      EXPECT_EQ(e.category(), ErrorCategory::kMismatch);
      EXPECT_NE(std::string(e.what()).find("wire format"), std::string::npos) << e.what();
      mismatched[static_cast<std::size_t>(comm.rank())] = 1;
    }
  });
  core::clearTunableOverride(core::kTunableCheckConsistency);
  EXPECT_EQ(mismatched, std::vector<int>({1, 1, 1}));
}

TEST(WireSettings, EnvironmentSettingAndAutoOnOneHost) {
  core::setTunableOverride(core::kTunableWireDtype, "auto");
  detail::runInProcess(4, [](Communicator& comm) {
    EXPECT_EQ(comm.wireFormat(), WireFormat::kAuto);
    // One host: auto never compresses, at any size, under any algorithm.
    for (std::size_t bytes = 4; bytes <= (std::size_t{256} << 20); bytes *= 4) {
      EXPECT_EQ(comm.wireFormatOf(bytes), WireFormat::kOff) << bytes;
    }
    std::vector<float> x(1 << 16, 1.0f);
    CallOptions ring;
    ring.algorithm = "ring";
    Work w = comm.allreduceAsync(std::span<const float>(x), std::span<float>(x), ReduceOp::kSum, ring);
    EXPECT_EQ(w.wireFormat(), WireFormat::kOff);
    w.wait();
    EXPECT_EQ(x[12345], 4.0f);
  });
  core::clearTunableOverride(core::kTunableWireDtype);
}

// The cost model behind auto: on a 1 Gbit/s link between 2 nodes x 2 ranks
// the bf16 wire pays for large payloads and not for small ones, for
// allreduce, allgather and reduce_scatter under ring and hier; native,
// broadcast and one node never change a prediction.
TEST(WireCostModel, PaysOnlyWhereTheSlowLinkDominates) {
  LinkModel intra, inter;
  intra.measured = true;
  intra.latencyUs = 1.0;
  intra.bandwidthGBps = 5.0;
  inter.measured = true;
  inter.latencyUs = 50.0;
  inter.bandwidthGBps = 0.117;  // 1 Gbit/s TCP
  const tuning::CostParams two = tuning::paramsFor(4, {2, 2}, 2, false, intra, inter);
  const std::size_t big = std::size_t{64} << 20;
  for (Collective coll : {Collective::kAllreduce, Collective::kAllgather, Collective::kReduceScatter}) {
    for (const char* algo : {"ring", "hier"}) {
      const double plain = tuning::predictUs(two, coll, algo, big);
      EXPECT_LT(tuning::predictUs(two, coll, algo, big, WireFormat::kBf16), 0.7 * plain) << toString(coll) << algo;
      EXPECT_GT(tuning::predictUs(two, coll, algo, 256, WireFormat::kBf16),
                0.9 * tuning::predictUs(two, coll, algo, 256))
          << toString(coll) << algo;
    }
    EXPECT_EQ(tuning::predictUs(two, coll, "native", big, WireFormat::kBf16), tuning::predictUs(two, coll, "native", big));
  }
  EXPECT_EQ(tuning::predictUs(two, Collective::kBroadcast, "hier", big, WireFormat::kBf16),
            tuning::predictUs(two, Collective::kBroadcast, "hier", big));
  const tuning::CostParams one = tuning::paramsFor(4, {4}, 4, true, intra, LinkModel{});
  EXPECT_EQ(tuning::predictUs(one, Collective::kAllreduce, "shm", big, WireFormat::kBf16),
            tuning::predictUs(one, Collective::kAllreduce, "shm", big));
}

}  // namespace
}  // namespace boostcomm

namespace boostcomm {
namespace {

// Error feedback (src/fusion/error_feedback.h). One rank: nothing crosses a
// link, so the output of a step is exactly this rank's rounded contribution
// round(g + e) and the residual telescopes: the sum of K outputs is K*g minus
// the last residual, within one bf16 rounding of K*g, where without feedback
// every step would lose the same 2^-10.
TEST(WireErrorFeedback, ResidualCarriesIntoTheNextStep) {
  detail::runInProcess(1, [](Communicator& comm) {
    const float g = 1.0f + 0x1p-10f;  // not a bfloat16: rounds to 1
    std::vector<float> grad(1000);
    GradientGroupOptions options;
    options.call.algorithm = "ring";
    options.call.wire = WireFormat::kBf16;
    options.errorFeedback = true;
    GradientGroup group(comm, {View(std::span<float>(grad))}, options);
    double sum = 0;
    constexpr int kSteps = 100;
    for (int k = 0; k < kSteps; ++k) {
      std::fill(grad.begin(), grad.end(), g);
      group.allreduce();
      ASSERT_EQ(grad[0], core::bfloat16ToFloat(core::floatToBFloat16(grad[0])));  // what was sent is a bf16
      sum += grad[0];
    }
    // Without feedback every output would be 1: the sum 100, off by 0.098.
    EXPECT_NEAR(sum, kSteps * static_cast<double>(g), 0x1p-8);
  });
}

// Several ranks, compressed ring: bitwise identical every step, within the bound.
TEST(WireErrorFeedback, RanksStayBitwiseIdentical) {
  constexpr int kRanks = 3;
  std::vector<std::vector<float>> last(kRanks);
  detail::runInProcess(kRanks, [&](Communicator& comm) {
    std::vector<float> a(4097), b(31);
    GradientGroupOptions options;
    options.call.algorithm = "ring";
    options.call.wire = WireFormat::kBf16;
    options.errorFeedback = true;
    options.average = true;
    GradientGroup group(comm, {View(std::span<float>(a)), View(std::span<float>(b))}, options);
    for (int k = 0; k < 5; ++k) {
      // Copied in: the group holds views of a and b.
      const std::vector<float> na = randomFloats(a.size(), 50 + 7 * comm.rank() + k, 1.0f);
      const std::vector<float> nb = randomFloats(b.size(), 90 + 7 * comm.rank() + k, 1.0f);
      std::copy(na.begin(), na.end(), a.begin());
      std::copy(nb.begin(), nb.end(), b.begin());
      group.allreduce();
    }
    last[static_cast<std::size_t>(comm.rank())] = a;
  });
  for (int r = 1; r < kRanks; ++r) EXPECT_EQ(last[0], last[static_cast<std::size_t>(r)]) << "rank " << r;
}

}  // namespace
}  // namespace boostcomm
