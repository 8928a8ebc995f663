// Element types, reduction operations and collective kinds of the public API.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace boostcomm {

// 16-bit floats (float16, bfloat16) are reduced in float32 and rounded once per
// reduction step.
enum class DataType : std::uint8_t { kFloat32, kFloat64, kFloat16, kBFloat16, kInt32, kInt64, kUInt8 };
inline constexpr int kNumDataTypes = 7;

// kAvg is only defined for floating-point types: an integer average would
// truncate silently, so it is rejected with an error instead.
enum class ReduceOp : std::uint8_t { kSum, kAvg, kMin, kMax, kProd };
inline constexpr int kNumReduceOps = 5;

enum class Collective : std::uint8_t { kAllreduce, kAllgather, kBroadcast, kReduceScatter, kBarrier };
inline constexpr int kNumCollectives = 5;

// Wire format: how float32 payloads travel on the links a collective
// compresses (docs/ALGORITHMS.md, "Wire formats"). Every reduction still
// accumulates in float32; only the bytes on the wire are 16-bit.
//   kOff   float32 on the wire (exact);
//   kBf16  bfloat16 (8 significand bits, float32's range);
//   kFp16  float16 (11 significand bits) scaled per message by a power of two
//          so the message's largest magnitude cannot overflow;
//   kAuto  the cost model decides per call: 16-bit where the slow link pays
//          for the conversions (several nodes), float32 elsewhere.
enum class WireFormat : std::uint8_t { kOff, kBf16, kFp16, kAuto };

std::size_t dataTypeSize(DataType dtype);
bool isFloatingPoint(DataType dtype);
std::string_view toString(DataType dtype);
std::string_view toString(ReduceOp op);
std::string_view toString(Collective coll);
// Parse the names printed by toString (also accepts common aliases such as
// "float", "fp16", "half", "bf16", "int", "avg"/"mean"). Empty when unknown.
std::optional<DataType> parseDataType(std::string_view name);
std::optional<ReduceOp> parseReduceOp(std::string_view name);
std::optional<Collective> parseCollective(std::string_view name);
// "off", "bf16", "fp16", "auto" (also "bfloat16", "float16", "none").
std::string_view toString(WireFormat wire);
std::optional<WireFormat> parseWireFormat(std::string_view name);

}  // namespace boostcomm
