#include "transport/mpi/mpi_types.h"

#include <atomic>
#include <cstdio>
#include <exception>
#include <mutex>

#include "core/check.h"
#include "core/reduce.h"
#include "transport/mpi/mpi_errors.h"

namespace boostcomm::transport::mpi {
namespace {

struct MpiObjects {
  MPI_Datatype float16 = MPI_DATATYPE_NULL;
  MPI_Datatype bfloat16 = MPI_DATATYPE_NULL;
  MPI_Datatype block = MPI_DATATYPE_NULL;
  MPI_Op userOps[kNumReduceOps] = {};  // indexed by ReduceOp; kAvg stays MPI_OP_NULL
  int cleanupKeyval = MPI_KEYVAL_INVALID;
};

MpiObjects g_objects;
std::once_flag g_createOnce;
std::atomic<bool> g_freed{false};

// Callbacks run inside MPI's C code: an exception must not cross them, so an
// unexpected datatype or a failing kernel aborts with a message instead.
[[noreturn]] void abortFromCallback(const char* what) {
  std::fprintf(stderr, "[boostcomm] fatal error in MPI reduction callback: %s\n", what);
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::terminate();
}

bool dataTypeFromMpi(MPI_Datatype type, DataType& out) {
  if (type == g_objects.float16) {
    out = DataType::kFloat16;
  } else if (type == g_objects.bfloat16) {
    out = DataType::kBFloat16;
  } else if (type == MPI_FLOAT) {
    out = DataType::kFloat32;
  } else if (type == MPI_DOUBLE) {
    out = DataType::kFloat64;
  } else if (type == MPI_INT32_T) {
    out = DataType::kInt32;
  } else if (type == MPI_INT64_T) {
    out = DataType::kInt64;
  } else if (type == MPI_UINT8_T) {
    out = DataType::kUInt8;
  } else {
    return false;
  }
  return true;
}

template <ReduceOp Op>
void userReduce(void* in, void* inout, int* len, MPI_Datatype* type) {
  DataType dtype;
  if (!dataTypeFromMpi(*type, dtype)) abortFromCallback("datatype not created by boostcomm");
  try {
    core::reduce(inout, inout, in, static_cast<std::size_t>(*len), dtype, Op);
  } catch (const std::exception& e) {
    abortFromCallback(e.what());
  }
}

int freeObjects(MPI_Comm, int, void*, void*) {
  // Runs inside MPI_Finalize (MPI_COMM_SELF is freed first). Return codes are
  // ignored: there is no caller left to report to and MPI is going away.
  g_freed.store(true);
  for (MPI_Op& op : g_objects.userOps) {
    if (op != MPI_OP_NULL) MPI_Op_free(&op);
  }
  for (MPI_Datatype* t : {&g_objects.float16, &g_objects.bfloat16, &g_objects.block}) {
    if (*t != MPI_DATATYPE_NULL) MPI_Type_free(t);
  }
  return MPI_SUCCESS;
}

void createObjects() {
  int initialized = 0;
  int finalized = 0;
  checkMpi(MPI_Initialized(&initialized), "MPI_Initialized", -1);
  checkMpi(MPI_Finalized(&finalized), "MPI_Finalized", -1);
  BC_CHECK(initialized && !finalized, ErrorCategory::kFinalized, -1,
           "MPI datatypes requested while MPI is not initialized (or already finalized)");
  MpiObjects& o = g_objects;
  for (MPI_Op& op : o.userOps) op = MPI_OP_NULL;
  // Two distinct types (not one shared 2-byte type) so the reduction callback
  // can tell float16 from bfloat16 by the handle it receives.
  checkMpi(MPI_Type_contiguous(2, MPI_BYTE, &o.float16), "MPI_Type_contiguous(float16)", -1);
  checkMpi(MPI_Type_commit(&o.float16), "MPI_Type_commit(float16)", -1);
  checkMpi(MPI_Type_contiguous(2, MPI_BYTE, &o.bfloat16), "MPI_Type_contiguous(bfloat16)", -1);
  checkMpi(MPI_Type_commit(&o.bfloat16), "MPI_Type_commit(bfloat16)", -1);
  checkMpi(MPI_Type_contiguous(static_cast<int>(kBlockBytes), MPI_BYTE, &o.block), "MPI_Type_contiguous(block)", -1);
  checkMpi(MPI_Type_commit(&o.block), "MPI_Type_commit(block)", -1);
  constexpr int kCommutative = 1;
  auto makeOp = [&](ReduceOp op, MPI_User_function* fn) {
    checkMpi(MPI_Op_create(fn, kCommutative, &o.userOps[static_cast<int>(op)]), "MPI_Op_create", -1);
  };
  makeOp(ReduceOp::kSum, &userReduce<ReduceOp::kSum>);
  makeOp(ReduceOp::kMin, &userReduce<ReduceOp::kMin>);
  makeOp(ReduceOp::kMax, &userReduce<ReduceOp::kMax>);
  makeOp(ReduceOp::kProd, &userReduce<ReduceOp::kProd>);
  checkMpi(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, &freeObjects, &o.cleanupKeyval, nullptr),
           "MPI_Comm_create_keyval", -1);
  checkMpi(MPI_Comm_set_attr(MPI_COMM_SELF, o.cleanupKeyval, nullptr), "MPI_Comm_set_attr(MPI_COMM_SELF)", -1);
}

const MpiObjects& objects() {
  // If createObjects throws, call_once lets the next caller retry.
  std::call_once(g_createOnce, createObjects);
  BC_CHECK(!g_freed.load(), ErrorCategory::kFinalized, -1, "MPI datatypes used after MPI_Finalize");
  return g_objects;
}

}  // namespace

MPI_Datatype mpiDataType(DataType dtype) {
  switch (dtype) {
    case DataType::kFloat32: return MPI_FLOAT;
    case DataType::kFloat64: return MPI_DOUBLE;
    case DataType::kInt32: return MPI_INT32_T;
    case DataType::kInt64: return MPI_INT64_T;
    case DataType::kUInt8: return MPI_UINT8_T;
    case DataType::kFloat16: return objects().float16;
    case DataType::kBFloat16: return objects().bfloat16;
  }
  core::raise(ErrorCategory::kInvalidArgument, -1, "dtype: unknown value " + std::to_string(static_cast<int>(dtype)));
}

MPI_Op mpiOp(DataType dtype, ReduceOp op) {
  BC_INTERNAL(op != ReduceOp::kAvg, "mpiOp: ReduceOp::kAvg must be reduced as kSum and divided by the caller");
  // uint8 sum: Open MPI 4.1's AVX op component saturates 8- and 16-bit integer
  // sums instead of wrapping (open-mpi/ompi#8045, closed as wontfix); our
  // kernels wrap like every other integer type, so we reduce uint8 sums ourselves.
  BC_INVALID(static_cast<int>(op) < kNumReduceOps, -1, "op: unknown value " << static_cast<int>(op));
  const bool useOurOp = dtype == DataType::kFloat16 || dtype == DataType::kBFloat16 ||
                        (dtype == DataType::kUInt8 && op == ReduceOp::kSum);
  if (useOurOp) {
    const MPI_Op userOp = objects().userOps[static_cast<int>(op)];
    BC_INTERNAL(userOp != MPI_OP_NULL, "mpiOp: no user op for " << toString(op));
    return userOp;
  }
  // MPI reduces every other (dtype, op) pair we map correctly.
  switch (op) {
    case ReduceOp::kSum: return MPI_SUM;
    case ReduceOp::kMin: return MPI_MIN;
    case ReduceOp::kMax: return MPI_MAX;
    case ReduceOp::kProd: return MPI_PROD;
    case ReduceOp::kAvg: break;
  }
  core::raise(ErrorCategory::kInvalidArgument, -1, "op: unknown value " + std::to_string(static_cast<int>(op)));
}

MPI_Datatype mpiBlockType() { return objects().block; }

}  // namespace boostcomm::transport::mpi
