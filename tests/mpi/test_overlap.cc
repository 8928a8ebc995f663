// OverlapEngine under mpirun (np 2 and 3): results against the float64
// reference, bitwise identical on every rank (hash allgather), for ready
// orders that differ between ranks, every buffer strategy, overlap on and
// off, registered (shared-memory) staging and heap staging, and buckets
// rebuilt from the first step. Own main; exits non-zero if any rank failed.
#include <mpi.h>

#include <cstdio>
#include <string>
#include <vector>

#include "boostcomm/boostcomm.h"
#include "unit/test_overlap_case.h"

namespace {

using namespace boostcomm;
using namespace boostcomm::testing;

int gFailures = 0;

void check(Communicator& comm, const std::string& what, const GradientSet& g, const StepsResult& r) {
  if (!r.failures.empty()) {
    ++gFailures;
    std::fprintf(stderr, "rank %d: %s: %s\n", comm.rank(), what.c_str(), r.failures.c_str());
  }
  // Bitwise identical on every rank: compare each step's hash with rank 0's.
  std::vector<std::int64_t> mine(r.hashes.begin(), r.hashes.end());
  std::vector<std::int64_t> root = mine;
  comm.broadcast(View(root.data(), root.size(), DataType::kInt64), 0);
  if (root != mine) {
    ++gFailures;
    std::fprintf(stderr, "rank %d: %s: results differ from rank 0's\n", comm.rank(), what.c_str());
  }
  const OverlapStepStats& s = r.stats.last;
  if (!(s.hiddenSeconds <= s.commSeconds && s.efficiency >= 0 && s.efficiency <= 1 && r.stats.last.buckets == r.buckets)) {
    ++gFailures;
    std::fprintf(stderr, "rank %d: %s: inconsistent stats (comm %g hidden %g efficiency %g)\n", comm.rank(),
                 what.c_str(), s.commSeconds, s.hiddenSeconds, s.efficiency);
  }
  (void)g;
}

void run(Communicator& comm) {
  // A model-like list: many small tensors (biases, norms) between large ones.
  std::vector<std::size_t> counts;
  for (int i = 0; i < 40; ++i) counts.push_back(i % 4 == 0 ? 70000 + 131 * static_cast<std::size_t>(i) : 1 + 17 * static_cast<std::size_t>(i));
  counts.push_back(0);
  counts.push_back(600000);  // larger than a bucket: reduced in place
  struct Case {
    const char* name;
    int stages;
    BufferStrategy buffers;
    bool enable;
    bool registered;
    bool fromFirstStep;
    bool bucketView = false;
  };
  const Case cases[] = {
      {"pingpong/2 stages", 2, BufferStrategy::kPingPong, true, true, false},
      {"single/1 stage", 1, BufferStrategy::kSingle, true, true, false},
      {"pingpong/3 stages heap", 3, BufferStrategy::kPingPong, true, false, false},
      {"no overlap", 2, BufferStrategy::kPingPong, false, true, false},
      {"buckets from first step", 2, BufferStrategy::kPingPong, true, true, true},
      {"bucket view/2 stages", 2, BufferStrategy::kPingPong, true, true, false, true},
      {"bucket view no overlap", 1, BufferStrategy::kPingPong, false, true, false, true},
  };
  for (const Case& c : cases) {
    for (bool sameOrder : {true, false}) {
      GradientSet g = makeGradients(counts, {DataType::kFloat32, DataType::kFloat32, DataType::kFloat64});
      OverlapOptions o;
      o.bucketBytes = 512 << 10;
      o.firstBucketBytes = 64 << 10;
      o.stages = c.stages;
      o.bufferStrategy = c.buffers;
      o.enable = c.enable;
      o.registeredBuffers = c.registered;
      o.bucketsFromFirstStep = c.fromFirstStep;
      o.bucketView = c.bucketView;
      o.timeout = std::chrono::milliseconds(60000);
      const StepsResult r = runEngineSteps(comm, g, o, 3, sameOrder);
      check(comm, std::string(c.name) + (sameOrder ? ", same order" : ", per-rank order"), g, r);
    }
  }
  // Average, as DDP uses it (the one division rounds once: checked with its bound).
  GradientSet g = makeGradients(counts, {DataType::kFloat32});
  OverlapOptions o;
  o.bucketBytes = 256 << 10;
  o.average = true;
  check(comm, "average", g, runEngineSteps(comm, g, o, 2, false));
  o.bucketView = true;
  check(comm, "average, bucket view", g, runEngineSteps(comm, g, o, 2, false));
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int failures = 0;
  {
    auto comm = Communicator::createMpiWorld();
    try {
      run(*comm);
    } catch (const std::exception& e) {
      ++gFailures;
      std::fprintf(stderr, "rank %d: unexpected error: %s\n", comm->rank(), e.what());
    }
    int mine = gFailures;
    comm->allreduce(ConstView(&mine, 1, DataType::kInt32), View(&failures, 1, DataType::kInt32), ReduceOp::kSum);
    if (comm->rank() == 0) std::printf("test_overlap: %s (%d failures over %d ranks)\n", failures ? "FAILED" : "passed", failures, comm->size());
    comm->finalize();
  }
  MPI_Finalize();
  return failures == 0 ? 0 : 1;
}
