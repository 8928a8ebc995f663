// Segment-list allgather and reduce_scatter (Communicator::allgatherMany /
// reduceScatterMany) under mpirun: every algorithm this job offers (shm and
// native through their staging copy, ring/rd with scatter-gather messages
// that straddle tensors and rank blocks, hier on a declared 2-node layout),
// float32 / bfloat16 / int64, lists of 0, 1, 2 and 161 tensors of odd and
// prime lengths, a float32 list of 1.3 MB per rank (more than one ring chunk); allgather results also
// compared across ranks bitwise (hash allgather). Own main; exits non-zero
// when any rank saw a failure.
#include <mpi.h>

#include <string>
#include <vector>

#include "boostcomm/boostcomm.h"
#include "common/many_split_case.h"
#include "common/mpi_report.h"
#include "common/test_data.h"

namespace {

using namespace boostcomm;
using namespace boostcomm::testing;

MpiReport* gReport = nullptr;

std::vector<std::string> algorithmsOf(Communicator& comm, Collective coll) {
  std::vector<std::string> algos = comm.algorithms(coll);
  algos.insert(algos.begin(), "");
  return algos;
}

void allgathers(Communicator& comm) {
  SplitCase c;
  for (const std::string& algo : algorithmsOf(comm, Collective::kAllgather)) {
    for (DataType dtype : {DataType::kFloat32, DataType::kBFloat16, DataType::kInt64}) {
      for (std::size_t tensors : {0, 1, 2, 161}) {
        c.counts = listShape(tensors, tensors == 161 && dtype == DataType::kFloat32 ? 61 : 1);
        c.dtype = dtype;
        c.algorithm = algo;
        c.async = tensors == 2;
        ++c.seed;
        c.perRank = c.seed % 2 == 1;  // every other case through the per-rank form
        std::vector<unsigned char> bytes;
        const std::string bad = runAllgatherMany(comm, c, &bytes);
        if (!bad.empty()) gReport->fail(describe(c, "allgatherMany") + ": " + bad);
        const std::uint64_t mine = hashBytes(bytes.data(), bytes.size());
        std::vector<std::uint64_t> all(static_cast<std::size_t>(comm.size()));
        MPI_Allgather(&mine, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, MPI_COMM_WORLD);
        for (int r = 1; r < comm.size(); ++r)
          if (all[static_cast<std::size_t>(r)] != all[0])
            gReport->fail(describe(c, "allgatherMany") + ": rank " + std::to_string(r) + " differs from rank 0");
      }
    }
  }
}

void reduceScatters(Communicator& comm) {
  SplitCase c;
  c.seed = 1000;
  for (const std::string& algo : algorithmsOf(comm, Collective::kReduceScatter)) {
    for (DataType dtype : {DataType::kFloat32, DataType::kBFloat16, DataType::kInt64}) {
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMin, ReduceOp::kAvg}) {
        if (op == ReduceOp::kAvg && !isFloatingPoint(dtype)) continue;
        for (std::size_t tensors : {0, 1, 2, 161}) {
          c.counts = listShape(tensors, tensors == 161 && dtype == DataType::kFloat32 ? 61 : 1);
          c.dtype = dtype;
          c.op = op;
          c.algorithm = algo;
          c.async = tensors == 1;
          ++c.seed;
          c.perRank = c.seed % 2 == 1;
          const std::string bad = runReduceScatterMany(comm, c);
          if (!bad.empty()) gReport->fail(describe(c, "reduceScatterMany") + ": " + bad);
        }
      }
    }
  }
}

}  // namespace

int main() {
  auto comm = Communicator::createMpiWorld();
  MpiReport report(*comm);
  gReport = &report;
  report.section("allgather", allgathers);
  report.section("reduce_scatter", reduceScatters);
  return report.finish();
}
