#include <array>
#include <cctype>
#include <string>

#include "boostcomm/types.h"
#include "boostcomm/version.h"
#include "core/check.h"

namespace boostcomm {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

const char* versionString() { return "0.1.0"; }

std::size_t dataTypeSize(DataType dtype) {
  switch (dtype) {
    case DataType::kFloat32: return 4;
    case DataType::kFloat64: return 8;
    case DataType::kFloat16: return 2;
    case DataType::kBFloat16: return 2;
    case DataType::kInt32: return 4;
    case DataType::kInt64: return 8;
    case DataType::kUInt8: return 1;
  }
  core::raise(ErrorCategory::kInvalidArgument, -1,
              "dtype: unknown value " + std::to_string(static_cast<int>(dtype)));
}

bool isFloatingPoint(DataType dtype) {
  return dtype == DataType::kFloat32 || dtype == DataType::kFloat64 || dtype == DataType::kFloat16 ||
         dtype == DataType::kBFloat16;
}

std::string_view toString(DataType dtype) {
  switch (dtype) {
    case DataType::kFloat32: return "float32";
    case DataType::kFloat64: return "float64";
    case DataType::kFloat16: return "float16";
    case DataType::kBFloat16: return "bfloat16";
    case DataType::kInt32: return "int32";
    case DataType::kInt64: return "int64";
    case DataType::kUInt8: return "uint8";
  }
  return "unknown-dtype";
}

std::string_view toString(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return "sum";
    case ReduceOp::kAvg: return "avg";
    case ReduceOp::kMin: return "min";
    case ReduceOp::kMax: return "max";
    case ReduceOp::kProd: return "prod";
  }
  return "unknown-op";
}

std::string_view toString(Collective coll) {
  switch (coll) {
    case Collective::kAllreduce: return "allreduce";
    case Collective::kAllgather: return "allgather";
    case Collective::kBroadcast: return "broadcast";
    case Collective::kReduceScatter: return "reduce_scatter";
    case Collective::kBarrier: return "barrier";
  }
  return "unknown-collective";
}

std::optional<DataType> parseDataType(std::string_view name) {
  const std::string n = lower(name);
  if (n == "float32" || n == "float" || n == "fp32" || n == "f32") return DataType::kFloat32;
  if (n == "float64" || n == "double" || n == "fp64" || n == "f64") return DataType::kFloat64;
  if (n == "float16" || n == "half" || n == "fp16" || n == "f16") return DataType::kFloat16;
  if (n == "bfloat16" || n == "bf16") return DataType::kBFloat16;
  if (n == "int32" || n == "int" || n == "i32") return DataType::kInt32;
  if (n == "int64" || n == "long" || n == "i64") return DataType::kInt64;
  if (n == "uint8" || n == "u8" || n == "byte") return DataType::kUInt8;
  return std::nullopt;
}

std::optional<ReduceOp> parseReduceOp(std::string_view name) {
  const std::string n = lower(name);
  if (n == "sum") return ReduceOp::kSum;
  if (n == "avg" || n == "mean") return ReduceOp::kAvg;
  if (n == "min") return ReduceOp::kMin;
  if (n == "max") return ReduceOp::kMax;
  if (n == "prod" || n == "product") return ReduceOp::kProd;
  return std::nullopt;
}

std::optional<Collective> parseCollective(std::string_view name) {
  const std::string n = lower(name);
  if (n == "allreduce") return Collective::kAllreduce;
  if (n == "allgather" || n == "allgatherv") return Collective::kAllgather;
  if (n == "broadcast" || n == "bcast") return Collective::kBroadcast;
  if (n == "reduce_scatter" || n == "reducescatter") return Collective::kReduceScatter;
  if (n == "barrier") return Collective::kBarrier;
  return std::nullopt;
}

std::string_view toString(WireFormat wire) {
  switch (wire) {
    case WireFormat::kOff: return "off";
    case WireFormat::kBf16: return "bf16";
    case WireFormat::kFp16: return "fp16";
    case WireFormat::kAuto: return "auto";
  }
  return "unknown-wire";
}

std::optional<WireFormat> parseWireFormat(std::string_view name) {
  const std::string n = lower(name);
  if (n == "off" || n == "none" || n == "float32") return WireFormat::kOff;
  if (n == "bf16" || n == "bfloat16") return WireFormat::kBf16;
  if (n == "fp16" || n == "float16") return WireFormat::kFp16;
  if (n == "auto") return WireFormat::kAuto;
  return std::nullopt;
}

}  // namespace boostcomm
