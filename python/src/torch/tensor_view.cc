#include "torch/tensor_view.h"

#include <c10/util/Exception.h>

#include <optional>

namespace boostcomm::python {

DataType dataTypeOf(at::ScalarType type, const char* what, int rank) {
  switch (type) {
    case at::kFloat: return DataType::kFloat32;
    case at::kDouble: return DataType::kFloat64;
    case at::kHalf: return DataType::kFloat16;
    case at::kBFloat16: return DataType::kBFloat16;
    case at::kInt: return DataType::kInt32;
    case at::kLong: return DataType::kInt64;
    case at::kByte: return DataType::kUInt8;
    default:
      TORCH_CHECK(false, "boostcomm: ", what, " has dtype ", type, " (rank ", rank,
                  "); supported: float32, float64, float16, bfloat16, int32, int64, uint8");
  }
}

namespace {

void checkMemory(const at::Tensor& tensor, const char* what, int rank) {
  TORCH_CHECK(tensor.defined(), "boostcomm: ", what, " is an undefined tensor (rank ", rank, ")");
  TORCH_CHECK(tensor.layout() == at::kStrided, "boostcomm: ", what, " has layout ", tensor.layout(), " (rank ", rank,
              "); boostcomm supports dense (strided) tensors only: call .to_dense() first");
  TORCH_CHECK(tensor.device().is_cpu(), "boostcomm: ", what, " is on device ", tensor.device(), " (rank ", rank,
              "); this build of boostcomm supports: cpu");
  TORCH_CHECK(tensor.is_contiguous(), "boostcomm: ", what, " is not contiguous (rank ", rank,
              "); call .contiguous() first");
}

bool supported(at::ScalarType type) {
  switch (type) {
    case at::kFloat: case at::kDouble: case at::kHalf: case at::kBFloat16: case at::kInt: case at::kLong:
    case at::kByte:
      return true;
    default:
      return false;
  }
}

}  // namespace

View bytesOf(const at::Tensor& tensor, const char* what, int rank) {
  checkMemory(tensor, what, rank);
  if (supported(tensor.scalar_type())) return viewOf(tensor, what, rank);
  return View(tensor.data_ptr(), static_cast<std::size_t>(tensor.nbytes()), DataType::kUInt8);
}

View rawBytesOf(const at::Tensor& tensor, const char* what, int rank) {
  checkMemory(tensor, what, rank);
  return View(tensor.data_ptr(), static_cast<std::size_t>(tensor.nbytes()), DataType::kUInt8);
}

bool overlaps(const at::Tensor& a, const at::Tensor& b) {
  if (a.nbytes() == 0 || b.nbytes() == 0) return false;
  const auto* pa = static_cast<const char*>(a.data_ptr());
  const auto* pb = static_cast<const char*>(b.data_ptr());
  return pa < pb + b.nbytes() && pb < pa + a.nbytes();
}

View viewOf(const at::Tensor& tensor, const char* what, int rank) {
  checkMemory(tensor, what, rank);
  return View(tensor.data_ptr(), static_cast<std::size_t>(tensor.numel()), dataTypeOf(tensor.scalar_type(), what, rank));
}

ReduceOp reduceOpOf(const c10d::ReduceOp& op, int rank) {
  switch (op.op_) {
    case c10d::ReduceOp::SUM:
    case c10d::ReduceOp::PREMUL_SUM: return ReduceOp::kSum;
    case c10d::ReduceOp::AVG: return ReduceOp::kAvg;
    case c10d::ReduceOp::PRODUCT: return ReduceOp::kProd;
    case c10d::ReduceOp::MIN: return ReduceOp::kMin;
    case c10d::ReduceOp::MAX: return ReduceOp::kMax;
    default:
      TORCH_CHECK(false, "boostcomm: reduce op ", static_cast<int>(op.op_), " is not supported (rank ", rank,
                  "); supported: SUM, AVG, PRODUCT, MIN, MAX, PREMUL_SUM");
  }
}

namespace {

// The factor of a PREMUL_SUM as a scalar (a one-element tensor factor is read once).
std::optional<c10::Scalar> premulFactor(const at::Tensor& tensor, const c10d::ReduceOp& op, int rank) {
  if (op.op_ != c10d::ReduceOp::PREMUL_SUM) return std::nullopt;
  TORCH_CHECK(at::isFloatingType(tensor.scalar_type()), "boostcomm: PREMUL_SUM needs a floating-point tensor, got ",
              tensor.scalar_type(), " (rank ", rank, ")");
  const auto* supplement = dynamic_cast<const c10d::PreMulSumSupplement*>(op.supplement_.get());
  TORCH_CHECK(supplement != nullptr, "boostcomm: PREMUL_SUM without its factor (rank ", rank, ")");
  if (supplement->tensor_factor.defined()) return supplement->tensor_factor.item();
  return c10::Scalar(supplement->double_factor);
}

}  // namespace

at::Tensor premultiplied(const at::Tensor& input, const c10d::ReduceOp& op, int rank) {
  const auto factor = premulFactor(input, op, rank);
  return factor ? input.mul(*factor) : input;
}

void premultiplyInPlace(const at::Tensor& tensor, const c10d::ReduceOp& op, int rank) {
  if (const auto factor = premulFactor(tensor, op, rank)) tensor.mul_(*factor);
}

}  // namespace boostcomm::python
