// Wire formats under mpirun (docs/ALGORITHMS.md, "Wire formats"): float32
// allreduce with bf16 and fp16 messages under every algorithm that carries
// them here (ring, rhd; hier on a declared multi-node layout), then
// reduce_scatter and allgather (ring, hier), random inputs checked on every
// rank against the float64 reference within the documented bound, allreduce
// and allgather bitwise across ranks (rank 0's result broadcast and compared);
// float64 passes through exactly; explicit bad requests fail on every rank.
// With the argument --env-mismatch, rank 1 alone sets BOOSTCOMM_WIRE_DTYPE
// (and every rank BOOSTCOMM_CHECK_CONSISTENCY=1): a ring allreduce, which
// rank 1 would compress, must fail with kMismatch on every rank.
// Own main; exits non-zero when any rank saw a failure.
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "boostcomm/boostcomm.h"
#include "common/mpi_report.h"

namespace {

using namespace boostcomm;
using testing::MpiReport;

MpiReport* gReport = nullptr;

// Uniform in [-1, 1), from a hash of (rank, i): every rank computes every input.
float inputOf(int rank, std::size_t i) {
  std::uint64_t x = (static_cast<std::uint64_t>(rank) << 40) ^ i;
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  x ^= x >> 31;
  return static_cast<float>(static_cast<double>(x >> 40) * 0x1p-23 - 1.0);
}

int log2Floor(int n) {
  int k = 0;
  while ((2 << k) <= n) ++k;
  return k;
}

void check(Communicator& comm, const std::string& algorithm, WireFormat wire, std::size_t count, int roundings) {
  const int n = comm.size();
  const std::string what = algorithm + " " + std::string(toString(wire)) + " count " + std::to_string(count);
  std::vector<float> in(count), out(count, -7.0f);
  for (std::size_t i = 0; i < count; ++i) in[i] = inputOf(comm.rank(), i);
  CallOptions options;
  options.algorithm = algorithm;
  options.wire = wire;
  Work w = comm.allreduceAsync(std::span<const float>(in), std::span<float>(out), ReduceOp::kSum, options);
  if (w.wireFormat() != wire) gReport->fail(what + ": ran as " + std::string(toString(w.wireFormat())));
  w.wait();
  const double u = wire == WireFormat::kFp16 ? 0x1p-11 : 0x1p-8;
  double worst = 0;
  for (std::size_t i = 0; i < count; ++i) {
    double ref = 0, sumAbs = 0;
    for (int r = 0; r < n; ++r) {
      const double v = r == comm.rank() ? in[i] : inputOf(r, i);
      ref += v;
      sumAbs += std::fabs(v);
    }
    const double err = std::fabs(out[i] - ref);
    const double bound = (roundings * u + (n + 1) * 0x1p-24) * sumAbs * (1 + 1e-6);
    worst = std::max(worst, err / sumAbs);
    if (err > bound) {
      gReport->fail(what + ": element " + std::to_string(i) + " error " + std::to_string(err) + " > bound " +
                    std::to_string(bound));
      break;
    }
  }
  std::vector<float> first = out;
  MPI_Bcast(first.data(), static_cast<int>(count), MPI_FLOAT, 0, MPI_COMM_WORLD);
  if (std::memcmp(first.data(), out.data(), count * sizeof(float)) != 0) gReport->fail(what + ": differs from rank 0");
  if (comm.rank() == 0 && count >= 65537)
    std::printf("[wire] %s on %d ranks (%s): max rel error %.3g (bound %.3g)\n", what.c_str(), n,
                comm.nodeLayout().c_str(), worst, roundings * u);
}

// reduce_scatter of `count` elements per rank (this rank's block checked
// against the float64 reference) and allgather of `count` per rank (every
// value within one rounding of its owner's input, ranks bitwise identical).
void checkGatherScatter(Communicator& comm, const std::string& algorithm, WireFormat wire, std::size_t count,
                        int roundings) {
  const int n = comm.size();
  const int me = comm.rank();
  const std::string what = algorithm + " " + std::string(toString(wire)) + " count " + std::to_string(count);
  const double u = wire == WireFormat::kFp16 ? 0x1p-11 : 0x1p-8;
  CallOptions options;
  options.algorithm = algorithm;
  options.wire = wire;
  std::vector<float> in(count * static_cast<std::size_t>(n)), block(count);
  for (std::size_t i = 0; i < in.size(); ++i) in[i] = inputOf(me, i);
  Work rs = comm.reduceScatterAsync(std::span<const float>(in), std::span<float>(block), ReduceOp::kSum, options);
  if (rs.wireFormat() != wire) gReport->fail("reduce_scatter " + what + ": ran as " + std::string(toString(rs.wireFormat())));
  rs.wait();
  std::size_t rounded = 0;  // beyond float32 sums' error: the wire rounded them (a builder ignoring it would pass)
  for (std::size_t i = 0; i < count; ++i) {
    const std::size_t global = static_cast<std::size_t>(me) * count + i;
    double ref = 0, sumAbs = 0;
    for (int r = 0; r < n; ++r) {
      ref += inputOf(r, global);
      sumAbs += std::fabs(inputOf(r, global));
    }
    const double bound = (roundings * u + (n + 1) * 0x1p-24) * sumAbs * (1 + 1e-6);
    if (std::fabs(block[i] - ref) > bound) {
      gReport->fail("reduce_scatter " + what + ": element " + std::to_string(i) + " outside the bound");
      break;
    }
    if (std::fabs(block[i] - ref) > (n + 1) * 0x1p-24 * sumAbs) ++rounded;
  }
  if (count >= 1000 && rounded < count / 4) gReport->fail("reduce_scatter " + what + ": results look uncompressed");
  std::vector<float> mine(in.begin(), in.begin() + static_cast<std::ptrdiff_t>(count)), all(in.size(), -7.0f);
  Work ag = comm.allgatherAsync(std::span<const float>(mine), std::span<float>(all), options);
  if (ag.wireFormat() != wire) gReport->fail("allgather " + what + ": ran as " + std::string(toString(ag.wireFormat())));
  ag.wait();
  rounded = 0;
  for (std::size_t i = 0; i < all.size(); ++i) {
    const double x = inputOf(static_cast<int>(i / count), i % count);
    if (std::fabs(all[i] - x) > u * std::fabs(x) + 0x1p-39) {
      gReport->fail("allgather " + what + ": element " + std::to_string(i) + " not within one rounding");
      break;
    }
    if (all[i] != x) ++rounded;
  }
  if (count >= 1000 && rounded < all.size() / 2) gReport->fail("allgather " + what + ": values look uncompressed");
  std::vector<float> first = all;
  MPI_Bcast(first.data(), static_cast<int>(first.size()), MPI_FLOAT, 0, MPI_COMM_WORLD);
  if (first != all) gReport->fail("allgather " + what + ": differs from rank 0");
}

void sweep(Communicator& comm) {
  const int n = comm.size();
  const std::vector<std::string> available = comm.algorithms(Collective::kAllreduce);
  const bool hier = std::find(available.begin(), available.end(), "hier") != available.end();
  const int nodes = hier ? n / 2 : 1;  // the np4 entry declares 2 ranks per node
  for (WireFormat wire : {WireFormat::kBf16, WireFormat::kFp16}) {
    for (std::size_t count : {std::size_t{1}, std::size_t{7}, std::size_t{1000}, std::size_t{65537}}) {
      check(comm, "ring", wire, count, n);
      check(comm, "rhd", wire, count, log2Floor(n) + (n != (1 << log2Floor(n)) ? 1 : 0) + 1);
      if (hier) check(comm, "hier", wire, count, nodes);
      checkGatherScatter(comm, "ring", wire, count, n - 1);
      if (hier) checkGatherScatter(comm, "hier", wire, count, nodes - 1);
    }
  }
}

void passThroughAndBadInput(Communicator& comm) {
  comm.setWireFormat(WireFormat::kBf16);
  std::vector<double> d(4099);
  for (std::size_t i = 0; i < d.size(); ++i) d[i] = 1.0 + 1e-13 * static_cast<double>(i + comm.rank());
  CallOptions ring;
  ring.algorithm = "ring";
  comm.allreduce(std::span<const double>(d), std::span<double>(d), ReduceOp::kSum, ring);
  const int n = comm.size();
  for (std::size_t i = 0; i < d.size(); ++i) {
    const double want = n + 1e-13 * (static_cast<double>(i) * n + n * (n - 1) / 2.0);
    if (std::fabs(d[i] - want) > 1e-15 * n) {
      gReport->fail("float64 under a bf16 communicator setting was not passed through exactly");
      break;
    }
  }
  comm.setWireFormat(WireFormat::kOff);
  CallOptions bad;
  bad.wire = WireFormat::kFp16;
  std::vector<std::int32_t> ints(10, 1);
  try {
    comm.allreduce(std::span<const std::int32_t>(ints), std::span<std::int32_t>(ints), ReduceOp::kSum, bad);
    gReport->fail("explicit fp16 on int32 did not throw");
  } catch (const Error& e) {
    if (e.category() != ErrorCategory::kInvalidArgument) gReport->fail(std::string("wrong category: ") + e.what());
  }
}

}  // namespace

int main(int argc, char** argv) {
  const bool envMismatch = argc > 1 && std::string(argv[1]) == "--env-mismatch";
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (envMismatch) setenv("BOOSTCOMM_CHECK_CONSISTENCY", "1", 1);
  if (envMismatch && rank == 1) setenv("BOOSTCOMM_WIRE_DTYPE", "bf16", 1);
  int failures = 0;
  {
    auto comm = Communicator::createMpiWorld();
    MpiReport report(*comm);
    gReport = &report;
    if (envMismatch) {
      std::vector<float> x(1000, 1.0f);
      CallOptions ring;
      ring.algorithm = "ring";
      try {
        comm->allreduce(std::span<const float>(x), std::span<float>(x), ReduceOp::kSum, ring);
        report.fail("ranks disagreeing on BOOSTCOMM_WIRE_DTYPE did not throw");
      } catch (const Error& e) {
        if (e.category() != ErrorCategory::kMismatch ||
            std::string(e.what()).find("wire format") == std::string::npos) {
          report.fail(std::string("wrong error: ") + e.what());
        }
      }
    } else {
      report.section("sweep", sweep);
      report.section("pass-through and bad input", passThroughAndBadInput);
    }
    failures = report.finish();
  }
  MPI_Finalize();
  return failures;
}
