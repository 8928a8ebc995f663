// The shared-memory small allreduce (src/shm/small_collective.cc): blocking
// allreduces up to BOOSTCOMM_SHM_SMALL_BYTES on a one-node communicator,
// where the selection says native or shm. Under mpirun; own main, non-zero exit
// when any rank saw a failure.
//
// Covers: that the path runs (the flight recorder names it), every dtype and
// op on sizes around a cache line and the size limit (BOOSTCOMM_SHM_SMALL_BYTES
// auto: 32 KiB with more ranks than hardware threads, else 8 KiB at 2 ranks,
// 4 KiB above), in place, results
// equal to the float64 reference (the shared case runner, with guard bytes)
// and bitwise identical across ranks; slot reuse across other collectives
// (native broadcast, a large shm allreduce, async calls, barriers) between
// small calls; and ranks that disagree on op, dtype or count: kMismatch on
// every rank, naming both calls; a deadline on one rank only.
#include <mpi.h>

#include <algorithm>
#include <chrono>
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


void sweep(Communicator& comm) {
  for (DataType dtype : kAllDataTypes) {
    const std::size_t limit = smallLimitBytes(comm) / dataTypeSize(dtype);
    for (ReduceOp op : kAllReduceOps) {
      for (std::size_t count : {std::size_t{1}, std::size_t{7}, std::size_t{13}, std::size_t{31}, std::size_t{127},
                                std::size_t{509}, limit - 1, limit, limit + 1}) {
        for (bool inPlace : {false, true}) {
          CaseSpec spec;
          spec.dtype = dtype;
          spec.op = op;
          spec.count = count;
          spec.inPlace = inPlace;
          spec.seed = count * 7 + static_cast<std::size_t>(op);
          if (expectsInvalidArgument(spec)) continue;
          const CaseOutcome out = runCase(comm, spec);
          if (!out.error.empty()) fail(comm, describe(spec, comm.size()) + ": " + out.error);
          // Every rank computes the whole reduction itself: same bits everywhere.
          if (!sameOnEveryRank(out.result)) fail(comm, describe(spec, comm.size()) + ": results differ across ranks");
        }
      }
    }
  }
}

// The path is taken where it should be, and not beyond its limit or for avg.
void pathTaken(Communicator& comm) {
  std::vector<float> x(1024, 1.0f), y(1025);
  // The first call settles the configuration (general path); 512 bytes is
  // native in the built-in table at 2-4 ranks on one node.
  comm.allreduce(std::span<const float>(x.data(), 128), std::span<float>(y.data(), 128), ReduceOp::kSum);
  comm.allreduce(std::span<const float>(x.data(), 128), std::span<float>(y.data(), 128), ReduceOp::kSum);
  if (!lastRanSmall(comm)) fail(comm, "a 512-byte float32 sum did not run as shm_small: " + comm.flightRecord());
  // 4096 bytes: the built-in table says shm there; the small allreduce
  // runs instead (faster at 2-4 ranks on one node).
  comm.allreduce(std::span<const float>(x), std::span<float>(y.data(), 1024), ReduceOp::kSum);
  if (!lastRanSmall(comm)) fail(comm, "a 4096-byte float32 sum (table: shm) did not run as shm_small");
  if (y[0] != static_cast<float>(comm.size())) fail(comm, "the 4096-byte sum is wrong");
  // An explicit shm is run as named.
  CallOptions shm;
  shm.algorithm = "shm";
  comm.allreduce(std::span<const float>(x), std::span<float>(y.data(), 1024), ReduceOp::kSum, shm);
  if (lastRanSmall(comm)) fail(comm, "an explicit shm ran as shm_small");
  // At the limit it runs, one element beyond it not.
  const std::size_t limit = smallLimitBytes(comm) / sizeof(float);
  std::vector<float> big(limit + 1, 1.0f), bigOut(limit + 1);
  comm.allreduce(std::span<const float>(big.data(), limit), std::span<float>(bigOut.data(), limit), ReduceOp::kSum);
  if (!lastRanSmall(comm)) fail(comm, std::to_string(limit * 4) + " bytes (the limit) did not run as shm_small");
  if (bigOut[limit - 1] != static_cast<float>(comm.size())) fail(comm, "the sum at the limit is wrong");
  comm.allreduce(std::span<const float>(big), std::span<float>(bigOut), ReduceOp::kSum);
  if (lastRanSmall(comm)) fail(comm, std::to_string(limit * 4 + 4) + " bytes ran as shm_small (beyond the limit)");
  comm.allreduce(std::span<const float>(x.data(), 8), std::span<float>(y.data(), 8), ReduceOp::kAvg);
  if (lastRanSmall(comm)) fail(comm, "avg ran as shm_small");
}

// A per-call deadline on one rank only (CallOptions::timeout; whether a
// communicator has a deadline is compared across ranks at its first call):
// the small allreduce takes a deadline itself, so every rank still runs it,
// and the calls complete. (It used to send the rank with a deadline down
// the engine's chunked path while the others waited in the small
// allreduce, until that deadline.)
void deadlineOnOneRank(Communicator& comm) {
  CallOptions options;
  if (comm.rank() == 0) options.timeout = std::chrono::milliseconds(20000);
  std::vector<float> x(1024, 1.0f), y(1024);
  for (int i = 0; i < 20; ++i) {
    comm.allreduce(std::span<const float>(x), std::span<float>(y), ReduceOp::kSum, options);
    if (!lastRanSmall(comm)) fail(comm, "call " + std::to_string(i) + " did not run as shm_small");
    if (y[1023] != static_cast<float>(comm.size())) fail(comm, "call " + std::to_string(i) + " is wrong");
  }
}

// Small calls between others, so that a slot's previous user was not small.
void reuse(Communicator& comm) {
  const int n = comm.size();
  const float expect = static_cast<float>(n * (n - 1) / 2);
  std::vector<float> small(5), out(5), bcast(3), large(300000), largeOut(300000);
  for (int i = 0; i < 600; ++i) {
    for (float& v : small) v = static_cast<float>(comm.rank()) + static_cast<float>(i);
    switch (i % 6) {
      case 0: comm.allreduce(std::span<const float>(small), std::span<float>(out), ReduceOp::kSum); break;
      case 1:
        comm.allreduce(std::span<const float>(small), std::span<float>(out), ReduceOp::kSum);
        comm.allreduce(std::span<const float>(small), std::span<float>(out), ReduceOp::kSum);
        break;
      case 2:
        bcast.assign(3, comm.rank() == 0 ? static_cast<float>(i) : -1.0f);
        comm.broadcast(std::span<float>(bcast), 0);
        if (bcast[2] != static_cast<float>(i)) fail(comm, "broadcast between small calls is wrong");
        comm.allreduce(std::span<const float>(small), std::span<float>(out), ReduceOp::kSum);
        break;
      case 3:
        large.assign(large.size(), 1.0f);
        comm.allreduce(std::span<const float>(large), std::span<float>(largeOut), ReduceOp::kSum);
        if (largeOut[299999] != static_cast<float>(n)) fail(comm, "large allreduce between small calls is wrong");
        comm.allreduce(std::span<const float>(small), std::span<float>(out), ReduceOp::kSum);
        break;
      case 4: comm.allreduceAsync(std::span<const float>(small), std::span<float>(out), ReduceOp::kSum).wait(); break;
      case 5:
        comm.barrier();
        comm.allreduce(std::span<const float>(small), std::span<float>(out), ReduceOp::kSum);
        break;
    }
    const float want = expect + static_cast<float>(n) * static_cast<float>(i);
    if (out[0] != want || out[4] != want) {
      fail(comm, "iteration " + std::to_string(i) + ": got " + std::to_string(out[0]) + ", want " +
                     std::to_string(want));
      return;
    }
  }
}

// The last rank calls differently; every rank must raise kMismatch naming
// both calls (a fresh communicator each time: a mismatch leaves it unusable).
void mismatch(const char* name, DataType theirType, std::size_t theirCount, ReduceOp theirOp,
              const std::string& mineWords, const std::string& theirWords) {
  auto comm = Communicator::createMpiWorld();
  const bool culprit = comm->rank() == comm->size() - 1;
  std::vector<float> warm(4, 1.0f), warmOut(4);
  for (int i = 0; i < 500; ++i) comm->allreduce(std::span<const float>(warm), std::span<float>(warmOut), ReduceOp::kSum);
  std::vector<std::uint64_t> in(16, 1), out(16);  // 128 bytes: room for any dtype below
  const DataType dtype = culprit ? theirType : DataType::kFloat32;
  const std::size_t count = culprit ? theirCount : 8;
  const ReduceOp op = culprit ? theirOp : ReduceOp::kSum;
  expectMismatch(
      *gReport, *comm, name,
      [&] { comm->allreduce(ConstView(in.data(), count, dtype), View(out.data(), count, dtype), op); },
      {mineWords, theirWords});
}

}  // namespace

int main(int argc, char** argv) {
  return runShmTest(argc, argv, [](MpiReport& report, Communicator&) {
    gReport = &report;
    report.section("path", pathTaken);
    report.section("sweep", sweep);
    report.section("reuse", reuse);
    report.section("deadline on one rank", deadlineOnOneRank);
    report.section("op", [](Communicator&) {
      mismatch("op", DataType::kFloat32, 8, ReduceOp::kMax, "allreduce float32 x8 sum", "allreduce float32 x8 max");
    });
    report.section("dtype", [](Communicator&) {
      mismatch("dtype", DataType::kInt32, 8, ReduceOp::kSum, "allreduce float32 x8 sum", "allreduce int32 x8 sum");
    });
    report.section("count", [](Communicator&) {
      mismatch("count", DataType::kFloat32, 9, ReduceOp::kSum, "allreduce float32 x8 sum", "allreduce float32 x9 sum");
    });
  });
}
