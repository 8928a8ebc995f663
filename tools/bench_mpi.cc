#include "bench_mpi.h"

#include <mpi.h>

#include <stdexcept>
#include <string>

#include "cli_internal.h"

namespace boostcomm::tools {
namespace {

// User op for the 16-bit float types: inout = in op inout, via boostcomm's kernels.
template <DataType kType, ReduceOp kOp>
void halfReduce(void* in, void* inout, int* len, MPI_Datatype*) {
  core::reduce(inout, in, inout, static_cast<std::size_t>(*len), kType, kOp);
}

template <DataType kType>
MPI_User_function* halfFunction(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg: return &halfReduce<kType, ReduceOp::kSum>;
    case ReduceOp::kProd: return &halfReduce<kType, ReduceOp::kProd>;
    case ReduceOp::kMin: return &halfReduce<kType, ReduceOp::kMin>;
    case ReduceOp::kMax: return &halfReduce<kType, ReduceOp::kMax>;
  }
  return nullptr;
}

MPI_Datatype mpiDatatype(DataType dtype) {
  switch (dtype) {
    case DataType::kFloat32: return MPI_FLOAT;
    case DataType::kFloat64: return MPI_DOUBLE;
    case DataType::kFloat16:
    case DataType::kBFloat16: return MPI_UINT16_T;
    case DataType::kInt32: return MPI_INT32_T;
    case DataType::kInt64: return MPI_INT64_T;
    case DataType::kUInt8: return MPI_UINT8_T;
  }
  return MPI_DATATYPE_NULL;
}

MPI_Op mpiBuiltinOp(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg: return MPI_SUM;
    case ReduceOp::kProd: return MPI_PROD;
    case ReduceOp::kMin: return MPI_MIN;
    case ReduceOp::kMax: return MPI_MAX;
  }
  return MPI_OP_NULL;
}

void checkMpi(int rc, const char* call) {
  if (rc != MPI_SUCCESS) {
    char text[MPI_MAX_ERROR_STRING];
    int length = 0;
    MPI_Error_string(rc, text, &length);
    throw std::runtime_error(std::string(call) + " failed: " + std::string(text, length));
  }
}

}  // namespace

struct MpiBaseline::Handles {
  MPI_Datatype datatype;
  MPI_Op op;
};

MpiBaseline::MpiBaseline(DataType dtype, ReduceOp op) : dtype_(dtype), op_(op) {
  MPI_Comm_size(MPI_COMM_WORLD, &ranks_);
  handles_ = std::make_unique<Handles>(Handles{mpiDatatype(dtype), mpiBuiltinOp(op)});
  if (dtype == DataType::kFloat16 || dtype == DataType::kBFloat16) {
    MPI_User_function* fn = dtype == DataType::kFloat16 ? halfFunction<DataType::kFloat16>(op)
                                                        : halfFunction<DataType::kBFloat16>(op);
    checkMpi(MPI_Op_create(fn, /*commute=*/1, &handles_->op), "MPI_Op_create");
    ownsOp_ = true;
  }
}

MpiBaseline::~MpiBaseline() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (ownsOp_ && !finalized) MPI_Op_free(&handles_->op);
}

void MpiBaseline::finishAvg(void* recv, std::size_t count) {
  if (op_ == ReduceOp::kAvg) core::divideBy(recv, count, dtype_, ranks_);
}

void MpiBaseline::allreduce(const void* send, void* recv, std::size_t count) {
  const Handles& h = *handles_;
  checkMpi(MPI_Allreduce(send, recv, static_cast<int>(count), h.datatype, h.op, MPI_COMM_WORLD), "MPI_Allreduce");
  finishAvg(recv, count);
}

void MpiBaseline::allgather(const void* send, void* recv, std::size_t countPerRank) {
  const Handles& h = *handles_;
  const int n = static_cast<int>(countPerRank);
  checkMpi(MPI_Allgather(send, n, h.datatype, recv, n, h.datatype, MPI_COMM_WORLD), "MPI_Allgather");
}

void MpiBaseline::broadcast(void* buffer, std::size_t count, int root) {
  const Handles& h = *handles_;
  checkMpi(MPI_Bcast(buffer, static_cast<int>(count), h.datatype, root, MPI_COMM_WORLD), "MPI_Bcast");
}

void MpiBaseline::reduceScatter(const void* send, void* recv, std::size_t countPerRank) {
  const Handles& h = *handles_;
  checkMpi(MPI_Reduce_scatter_block(send, recv, static_cast<int>(countPerRank), h.datatype, h.op, MPI_COMM_WORLD),
           "MPI_Reduce_scatter_block");
  finishAvg(recv, countPerRank);
}

}  // namespace boostcomm::tools
