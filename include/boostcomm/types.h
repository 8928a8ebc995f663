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

}  // namespace boostcomm
