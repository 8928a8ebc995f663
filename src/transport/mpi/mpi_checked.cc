// MpiTransport::nativeAllreduceChecked: a blocking MPI_Allreduce whose
// message carries the call's stamp (transport.h), for communicators whose
// ranks cannot read each other's call status (several nodes, or shm off).
//
// The payload travels as ONE element of a contiguous datatype: two stamps
// (the smallest and the largest seen so far), then the data. MPI applies a
// user op to whole elements only, so however it splits or orders the
// reduction, each application sees both sides' stamps and data together:
// it keeps the smaller and the larger stamp and, when both sides describe
// the same call, reduces the data with that call's dtype and op (read from
// the stamp's fingerprint word). The stamps sit in front of the data so
// that a peer's shorter message (a count mismatch) still delivers its own.
// Every rank ends with the same two stamps; when they describe different
// calls, every rank knows before it uses the result.
//
// Cost: the staging copies (at most kCheckedAllreduceMaxBytes each way) and
// 64 bytes more per message; against a link's latency across nodes, little
// (docs/RELIABILITY.md).
#include <mpi.h>

#include <algorithm>
#include <cstring>

#include "core/call_status.h"
#include "core/check.h"
#include "core/reduce.h"
#include "transport/mpi/mpi_errors.h"
#include "transport/mpi/mpi_transport.h"

namespace boostcomm::transport {
namespace {

constexpr int kStampBytes = 2 * static_cast<int>(sizeof(CallStamp));
// Datatypes kept per transport; sizes beyond this many are built per call.
constexpr std::size_t kCachedTypes = 32;

void combineStamped(void* in, void* inout, int* len, MPI_Datatype* type) {
  int size = 0;
  if (MPI_Type_size(*type, &size) != MPI_SUCCESS || size < kStampBytes) return;
  for (int e = 0; e < *len; ++e) {
    const char* a = static_cast<const char*>(in) + static_cast<std::size_t>(e) * static_cast<std::size_t>(size);
    char* b = static_cast<char*>(inout) + static_cast<std::size_t>(e) * static_cast<std::size_t>(size);
    CallStamp aLo, aHi, bLo, bHi;
    std::memcpy(&aLo, a, sizeof aLo);
    std::memcpy(&aHi, a + sizeof aLo, sizeof aHi);
    std::memcpy(&bLo, b, sizeof bLo);
    std::memcpy(&bHi, b + sizeof bLo, sizeof bHi);
    // Both sides one call: reduce. Otherwise the result is not used.
    if (aLo.sameCall(aHi) && bLo.sameCall(bHi) && aLo.sameCall(bLo)) {
      const core::Fingerprint f = core::Fingerprint::fromWord(bLo.word, bLo.count);
      const auto dtype = static_cast<unsigned>(f.dtype);
      const auto op = static_cast<unsigned>(f.op);
      if (dtype < kNumDataTypes && op < kNumReduceOps && f.op != ReduceOp::kAvg &&
          f.count * dataTypeSize(f.dtype) <= static_cast<std::size_t>(size - kStampBytes)) {
        core::reduce(b + kStampBytes, a + kStampBytes, b + kStampBytes, f.count, f.dtype, f.op);
      }
    }
    const CallStamp lo = std::min(aLo, bLo);
    const CallStamp hi = std::max(aHi, bHi);
    std::memcpy(b, &lo, sizeof lo);
    std::memcpy(b + sizeof lo, &hi, sizeof hi);
  }
}

}  // namespace

bool MpiTransport::nativeAllreduceChecked(const void* send, void* recv, std::size_t count, DataType dtype,
                                          ReduceOp op, const CallStamp& mine, CallStamp& lo, CallStamp& hi) {
  const std::size_t bytes = count * dataTypeSize(dtype);
  BC_INTERNAL(bytes <= kCheckedAllreduceMaxBytes && op != ReduceOp::kAvg,
              "nativeAllreduceChecked: " << bytes << " bytes, op " << static_cast<int>(op));
  const int elementBytes = kStampBytes + static_cast<int>(bytes);
  if (checkedOp_ == MPI_OP_NULL) {
    mpi::checkMpi(MPI_Op_create(&combineStamped, /*commute=*/1, &checkedOp_), "MPI_Op_create", rank_);
  }
  MPI_Datatype type = MPI_DATATYPE_NULL;
  for (const auto& [size, t] : checkedTypes_) {
    if (size == elementBytes) type = t;
  }
  const bool cached = type != MPI_DATATYPE_NULL || checkedTypes_.size() < kCachedTypes;
  if (type == MPI_DATATYPE_NULL) {
    mpi::checkMpi(MPI_Type_contiguous(elementBytes, MPI_BYTE, &type), "MPI_Type_contiguous", rank_);
    mpi::checkMpi(MPI_Type_commit(&type), "MPI_Type_commit", rank_);
    if (cached) checkedTypes_.emplace_back(elementBytes, type);
  }
  checkedStage_.resize(static_cast<std::size_t>(elementBytes));
  char* stage = checkedStage_.data();
  std::memcpy(stage, &mine, sizeof mine);
  std::memcpy(stage + sizeof mine, &mine, sizeof mine);
  if (bytes > 0) std::memcpy(stage + kStampBytes, send, bytes);
  const int rc = MPI_Allreduce(MPI_IN_PLACE, stage, 1, type, checkedOp_, comm_);
  if (!cached) MPI_Type_free(&type);
  mpi::checkMpi(rc, "MPI_Allreduce", rank_);
  std::memcpy(&lo, stage, sizeof lo);
  std::memcpy(&hi, stage + sizeof lo, sizeof hi);
  if (lo.sameCall(hi) && bytes > 0) std::memcpy(recv, stage + kStampBytes, bytes);
  return true;
}

void MpiTransport::freeCheckedResources() {
  int finalized = 0;
  if (MPI_Finalized(&finalized) != MPI_SUCCESS || finalized) return;
  for (auto& [size, t] : checkedTypes_) MPI_Type_free(&t);
  checkedTypes_.clear();
  if (checkedOp_ != MPI_OP_NULL) MPI_Op_free(&checkedOp_);
}

}  // namespace boostcomm::transport
