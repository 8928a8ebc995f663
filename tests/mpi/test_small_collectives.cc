// The shared-memory small collectives other than allreduce
// (src/shm/small_collective.cc): blocking broadcasts, allgathers and
// reduce_scatters whose slot payload fits BOOSTCOMM_SHM_SMALL_BYTES on a
// one-node communicator, where the selection says native or shm. Broadcasts
// of at most 224 bytes go through the root's ring of 16 entries. Under
// mpirun; own main, non-zero exit when any rank saw a failure.
//
// Covers: that the path runs (the flight recorder names it) and where it
// does not (allgatherv, an explicit algorithm, beyond the limit); every
// dtype (and op) at sizes 0, 1, 7, primes, the ring's limit and the slot's,
// every root, results equal to the float64 reference with guard bytes (the
// shared case runner) and bitwise identical across ranks; the ring reused
// over runs of more than 16 broadcasts from one root, roots changing, and
// other collectives between; and ranks that disagree (count, dtype, root):
// kMismatch on every rank, naming both calls.
#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <vector>

#include "boostcomm/boostcomm.h"
#include "common/collective_case.h"
#include "common/mpi_report.h"
#include "common/small_path.h"
#include "common/test_data.h"

namespace {

using namespace boostcomm;
using namespace boostcomm::testing;

MpiReport* gReport = nullptr;

void fail(const Communicator& /*comm*/, const std::string& what) { gReport->fail(what); }


constexpr std::size_t kRingBytes = 224;  // shm/segment.h, kBroadcastRingBytes

void expectPath(Communicator& comm, const std::string& what, bool small) {
  const std::string algo = lastAlgorithm(comm);
  if ((algo == "shm_small") != small)
    fail(comm, what + (small ? " did not run as shm_small" : " ran as shm_small") + " (flight record: " + algo + ")");
}

void pathTaken(Communicator& comm) {
  const int n = comm.size();
  std::vector<float> x(4096, 1.0f), y(4096 * static_cast<std::size_t>(n));
  comm.barrier();  // the first call settles the configuration (general path)
  for (int root = 0; root < n; ++root) {
    comm.broadcast(std::span<float>(x.data(), 8), root);
    expectPath(comm, "a 32-byte broadcast from root " + std::to_string(root), true);
    comm.broadcast(std::span<float>(x.data(), 512), root);
    expectPath(comm, "a 2048-byte broadcast (slots, not the ring) from root " + std::to_string(root), true);
  }
  comm.allgather(std::span<const float>(x.data(), 8), std::span<float>(y.data(), 8 * static_cast<std::size_t>(n)));
  expectPath(comm, "a 32-byte allgather", true);
  if (y[8 * static_cast<std::size_t>(n) - 1] != 1.0f) fail(comm, "the 32-byte allgather is wrong");
  comm.reduceScatter(std::span<const float>(x.data(), 8 * static_cast<std::size_t>(n)), std::span<float>(y.data(), 8),
                     ReduceOp::kSum);
  expectPath(comm, "a reduce_scatter of 8 floats per rank", true);
  if (y[7] != static_cast<float>(n)) fail(comm, "the small reduce_scatter is wrong");
  // Beyond the slot: allgather's slot is one rank's block, reduce_scatter's all of them.
  const std::size_t limit = smallLimitBytes(comm) / sizeof(float);
  std::vector<float> big(limit + 1, 1.0f), bigOut((limit + 1) * static_cast<std::size_t>(n));
  comm.broadcast(std::span<float>(big.data(), limit), 0);
  expectPath(comm, "a broadcast at the limit", true);
  comm.broadcast(std::span<float>(big), 0);
  expectPath(comm, "a broadcast one element beyond the limit", false);
  comm.allgather(std::span<const float>(big.data(), limit), std::span<float>(bigOut.data(), limit * n));
  expectPath(comm, "an allgather of the limit per rank", true);
  comm.allgather(std::span<const float>(big), std::span<float>(bigOut));
  expectPath(comm, "an allgather one element beyond the limit", false);
  const std::size_t block = limit / static_cast<std::size_t>(n);
  comm.reduceScatter(std::span<const float>(bigOut.data(), block * n), std::span<float>(big.data(), block),
                     ReduceOp::kMax);
  expectPath(comm, "a reduce_scatter whose blocks fill the slot", true);
  comm.reduceScatter(std::span<const float>(bigOut.data(), (block + 1) * n), std::span<float>(big.data(), block + 1),
                     ReduceOp::kMax);
  expectPath(comm, "a reduce_scatter whose blocks overflow the slot", false);
  // An explicit algorithm is run as named; allgatherv is not a small collective.
  CallOptions named;
  named.algorithm = "binomial";
  comm.broadcast(std::span<float>(x.data(), 8), 0, named);
  expectPath(comm, "an explicit binomial broadcast", false);
  std::vector<std::size_t> counts(static_cast<std::size_t>(n), 2);
  counts[0] = 3;
  const std::size_t mine = counts[static_cast<std::size_t>(comm.rank())];
  comm.allgatherv(std::span<const float>(x.data(), mine), std::span<float>(y.data(), 2 * static_cast<std::size_t>(n) + 1),
                  counts);
  expectPath(comm, "an allgatherv", false);
}

void sweep(Communicator& comm) {
  for (TestCollective coll : {TestCollective::kBroadcast, TestCollective::kAllgather, TestCollective::kReduceScatter}) {
    for (DataType dtype : kAllDataTypes) {
      const std::size_t size = dataTypeSize(dtype);
      const std::size_t slot = coll == TestCollective::kReduceScatter
                                   ? smallLimitBytes(comm) / size / static_cast<std::size_t>(comm.size())
                                   : smallLimitBytes(comm) / size;
      std::vector<std::size_t> counts = {0, 1, 7, 13, 31, 127, slot};
      if (coll == TestCollective::kBroadcast) {
        counts.push_back(kRingBytes / size);
        counts.push_back(kRingBytes / size + 1);
      }
      const std::vector<ReduceOp> ops = {ReduceOp::kSum, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kProd};
      for (const CaseSpec& spec : sweepCases(coll, dtype, {""}, ops, counts, comm.size(), /*everyRoot=*/true)) {
        if (expectsInvalidArgument(spec)) continue;
        const CaseOutcome out = runCase(comm, spec);
        if (!out.error.empty()) fail(comm, describe(spec, comm.size()) + ": " + out.error);
        if (spec.count > 0 && !lastRanSmall(comm))
          fail(comm, describe(spec, comm.size()) + " did not run as shm_small");
        if (!resultsReplicated(spec)) continue;
        if (!sameOnEveryRank(out.result)) fail(comm, describe(spec, comm.size()) + ": results differ across ranks");
      }
    }
  }
}

// Runs of broadcasts longer than the ring from one root (its entries are
// reused only after every rank has started a later call), roots changing,
// payloads in and beyond the ring, and other small calls between them.
void ringReuse(Communicator& comm) {
  const int n = comm.size();
  std::vector<std::int32_t> buf(80), gathered(4 * static_cast<std::size_t>(n)), mine(4);
  // Every rank makes every call even after a wrong result (no early return:
  // ranks leaving the loop at different calls would wait for each other).
  bool reported = false;
  const auto report = [&](const std::string& what) {
    if (!reported) fail(comm, what);
    reported = true;
  };
  for (int i = 0; i < 400; ++i) {
    const int root = (i / 37) % n;  // runs of 37 calls from one root
    const std::size_t count = i % 5 == 4 ? 80 : 1 + static_cast<std::size_t>(i % 50);  // 320 bytes: slots
    for (std::size_t k = 0; k < count; ++k)
      buf[k] = comm.rank() == root ? static_cast<std::int32_t>(i * 1000 + static_cast<int>(k)) : -1;
    comm.broadcast(std::span<std::int32_t>(buf.data(), count), root);
    for (std::size_t k = 0; k < count; ++k) {
      if (buf[k] != static_cast<std::int32_t>(i * 1000 + static_cast<int>(k))) {
        report("broadcast " + std::to_string(i) + " from root " + std::to_string(root) + ": element " +
               std::to_string(k) + " is " + std::to_string(buf[k]));
        break;
      }
    }
    if (i % 23 == 22) {
      std::fill(mine.begin(), mine.end(), comm.rank() * 10 + i);
      comm.allgather(std::span<const std::int32_t>(mine), std::span<std::int32_t>(gathered));
      for (int r = 0; r < n; ++r) {
        if (gathered[static_cast<std::size_t>(r) * 4 + 3] != r * 10 + i) {
          report("allgather between broadcasts, call " + std::to_string(i) + ": rank " + std::to_string(r) +
                 "'s block is wrong");
          break;
        }
      }
    }
    if (i % 41 == 40) comm.barrier();
  }
}

// The last rank calls differently from the others in the call after a few
// hundred matching ones; every rank must raise kMismatch, at that call or
// (a broadcast root reads no peer's slot) at the small allreduce after it,
// naming the other side's call (a fresh communicator each time: a mismatch
// leaves it unusable).
void mismatch(const char* name, std::size_t theirCount, DataType theirType, int theirRoot,
              const std::string& theirWords) {
  auto comm = Communicator::createMpiWorld();
  const bool culprit = comm->rank() == comm->size() - 1;
  std::vector<float> warm(4, 1.0f);
  for (int i = 0; i < 300; ++i) comm->broadcast(std::span<float>(warm), i % comm->size());
  std::vector<std::uint64_t> data(16, 1), out(16);  // 128 bytes: room for any dtype below
  const std::size_t count = culprit ? theirCount : 8;
  const DataType dtype = culprit ? theirType : DataType::kFloat32;
  const int root = culprit ? theirRoot : 0;
  expectMismatch(
      *gReport, *comm, name,
      [&] {
        comm->broadcast(View(data.data(), count, dtype), root);
        comm->allreduce(std::span<const float>(warm), std::span<float>(warm), ReduceOp::kSum);
      },
      {"broadcast float32 x8 root 0", theirWords});
}

}  // namespace

int main(int argc, char** argv) {
  return runShmTest(argc, argv, [](MpiReport& report, Communicator& comm) {
    gReport = &report;
    report.section("path", pathTaken);
    report.section("sweep", sweep);
    report.section("ring reuse", ringReuse);
    const int last = comm.size() - 1;
    report.section("count", [](Communicator&) {
      mismatch("count", 9, DataType::kFloat32, 0, "broadcast float32 x9 root 0");
    });
    report.section("dtype", [](Communicator&) {
      mismatch("dtype", 8, DataType::kInt32, 0, "broadcast int32 x8 root 0");
    });
    report.section("root", [last](Communicator&) {
      mismatch("root", 8, DataType::kFloat32, last, "broadcast float32 x8 root " + std::to_string(last));
    });
  });
}
