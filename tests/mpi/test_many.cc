// Segment-list allreduce (Communicator::allreduceMany) under mpirun: every
// algorithm this job offers (shm with its in-engine copy-in/copy-out from
// the segments, native through its staging copy, ring/rhd/rd with
// scatter-gather messages through MPI derived datatypes), every dtype and
// op on lists of 0, 1, 2 and 161 segments of odd and prime lengths, the real
// ResNet-50 gradient list (161 tensors, 25.6M floats), several lists in
// flight, GradientGroup and OverlapEngine in their default (segment-list)
// mode, broadcastMany on every broadcast algorithm; results checked on every rank against the float64 reference and
// across ranks bitwise (hash allgather); bad lists fail on every rank.
// Own main; exits non-zero when any rank saw a failure.
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "boostcomm/boostcomm.h"
#include "common/collective_case.h"
#include "common/mpi_report.h"
#include "common/test_data.h"
#include "workloads/model_profile.h"

namespace {

using namespace boostcomm;
using namespace boostcomm::testing;

MpiReport* gReport = nullptr;

void fail(const Communicator&, const std::string& what) { gReport->fail(what); }


// One list: fill, reduce, check against the reference here and bitwise across ranks.
// `input` (optional): this rank's whole list input, made once by the caller
// for several algorithms with fillReduceInput of the same dtype, op and seed. `passed` (optional): the first result that passed
// the float64 reference check; a later result bitwise equal to it passes
// too, any other is checked against the reference itself.
void runList(Communicator& comm, const std::vector<std::size_t>& counts, DataType dtype, ReduceOp op,
             const std::string& algorithm, std::uint64_t seed, bool async,
             const std::vector<unsigned char>* input = nullptr, std::vector<unsigned char>* passed = nullptr) {
  const std::string what = std::string(toString(dtype)) + " " + std::string(toString(op)) + " algo '" + algorithm +
                           "' " + std::to_string(counts.size()) + " segments";
  const std::size_t es = dataTypeSize(dtype);
  const std::size_t total = std::accumulate(counts.begin(), counts.end(), std::size_t{0});
  std::vector<std::vector<unsigned char>> memory;
  std::vector<View> segments;
  std::size_t first = 0;
  for (std::size_t n : counts) {
    memory.emplace_back(n * es + 1, 0x5A);
    if (input != nullptr) {
      if (n > 0) std::memcpy(memory.back().data(), input->data() + first * es, n * es);
    } else {
      fillReduceInput(memory.back().data(), dtype, op, Pattern::kExact, seed, comm.rank(), first, n);
    }
    segments.emplace_back(memory.back().data(), n, dtype);
    first += n;
  }
  CallOptions options;
  options.algorithm = algorithm;
  try {
    if (async) {
      comm.allreduceManyAsync(segments, op, options).wait();
    } else {
      comm.allreduceMany(segments, op, options);
    }
  } catch (const std::exception& e) {
    fail(comm, what + ": threw " + e.what());
    return;
  }
  std::vector<unsigned char> flat(total * es);
  first = 0;
  for (std::size_t s = 0; s < counts.size(); ++s) {
    if (memory[s][counts[s] * es] != 0x5A) fail(comm, what + ": guard byte after segment " + std::to_string(s));
    if (counts[s] > 0) std::memcpy(flat.data() + first * es, memory[s].data(), counts[s] * es);
    first += counts[s];
  }
  if (passed == nullptr || passed->empty() || *passed != flat) {
    const std::string bad = checkReduction(flat.data(), dtype, op, Pattern::kExact, seed, comm.size(), 0, total);
    if (!bad.empty()) fail(comm, what + ": " + bad);
    if (bad.empty() && passed != nullptr && passed->empty()) *passed = flat;
  }
  const std::uint64_t mine = hashBytes(flat.data(), flat.size());
  std::vector<std::uint64_t> all(static_cast<std::size_t>(comm.size()));
  MPI_Allgather(&mine, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, MPI_COMM_WORLD);
  for (int r = 0; r < comm.size(); ++r)
    if (all[static_cast<std::size_t>(r)] != all[0]) fail(comm, what + ": rank " + std::to_string(r) + " differs from rank 0");
}

// BC_TEST_ALGORITHM=NAME: that algorithm only (mpi.many.np3.cma: the shm
// engine's CMA mode changes nothing else); otherwise auto ("") and each one.
std::vector<std::string> algorithmsOf(Communicator& comm) {
  std::vector<std::string> algos = comm.algorithms(Collective::kAllreduce);
  if (const char* only = std::getenv("BC_TEST_ALGORITHM"); only != nullptr && *only != '\0') {
    if (std::find(algos.begin(), algos.end(), only) == algos.end())
      fail(comm, std::string("BC_TEST_ALGORITHM=") + only + ": not an algorithm of this job");
    return {only};
  }
  algos.insert(algos.begin(), "");
  return algos;
}

void sweep(Communicator& comm) {
  std::uint64_t seed = 1;
  for (const std::string& algo : algorithmsOf(comm)) {
    for (DataType dtype : kAllDataTypes) {
      for (ReduceOp op : kAllReduceOps) {
        if (op == ReduceOp::kAvg && !isFloatingPoint(dtype)) continue;
        for (std::size_t n : {0, 1, 2, 161}) runList(comm, listShape(n, 1), dtype, op, algo, seed++, n == 2);
      }
    }
    // Several shm chunks (256 KiB) and ring chunks (1 MiB) per list, straddled.
    runList(comm, listShape(161, 2003), DataType::kFloat32, ReduceOp::kSum, algo, seed++, false);
    runList(comm, listShape(60, 4099), DataType::kBFloat16, ReduceOp::kMax, algo, seed++, true);
  }
}

void resnet50(Communicator& comm) {
  std::vector<std::size_t> counts;
  for (const workloads::TensorProfile& t : workloads::resnet50().tensors) counts.push_back(t.count());
  const auto wanted = algorithmsOf(comm);
  // 25.6M floats: the input is made and the reference checked once, not per algorithm (runList).
  const std::size_t total = std::accumulate(counts.begin(), counts.end(), std::size_t{0});
  std::vector<unsigned char> input(total * sizeof(float));
  fillReduceInput(input.data(), DataType::kFloat32, ReduceOp::kSum, Pattern::kExact, 77, comm.rank(), 0, total);
  std::vector<unsigned char> passed;
  for (const char* algo : {"", "shm", "ring", "native"}) {
    const auto algos = comm.algorithms(Collective::kAllreduce);
    if (*algo && std::find(algos.begin(), algos.end(), algo) == algos.end()) continue;
    if (std::find(wanted.begin(), wanted.end(), algo) == wanted.end()) continue;
    runList(comm, counts, DataType::kFloat32, ReduceOp::kSum, algo, 77, false, &input, &passed);
  }
}

void inFlight(Communicator& comm) {
  constexpr int kLists = 5;
  std::vector<std::vector<std::vector<float>>> memory(kLists);
  std::vector<Work> works;
  for (int l = 0; l < kLists; ++l) {
    std::vector<View> segments;
    for (std::size_t n : listShape(30 + l, 500)) {
      memory[l].emplace_back(n, static_cast<float>(comm.rank() + l));
      segments.emplace_back(memory[l].back().data(), n, DataType::kFloat32);
    }
    CallOptions options;
    options.algorithm = l % 2 ? "ring" : "";
    works.push_back(comm.allreduceManyAsync(segments, ReduceOp::kSum, options));
  }
  for (int l = kLists; l-- > 0;) works[static_cast<std::size_t>(l)].wait();
  const int n = comm.size();
  for (int l = 0; l < kLists; ++l) {
    const float expected = static_cast<float>(n * (n - 1) / 2 + n * l);
    for (const auto& seg : memory[l])
      for (float v : seg)
        if (v != expected) {
          fail(comm, "in flight: list " + std::to_string(l) + " got " + std::to_string(v));
          return;
        }
  }
}

void drivers(Communicator& comm) {
  // GradientGroup and OverlapEngine default to segment lists: same results as the reference.
  std::vector<std::size_t> counts = listShape(161, 997);
  std::vector<std::vector<float>> memory;
  std::vector<View> views;
  std::vector<GradientTensor> named;
  for (std::size_t i = 0; i < counts.size(); ++i) {
    memory.emplace_back(counts[i]);
    views.emplace_back(memory.back().data(), counts[i], DataType::kFloat32);
  }
  auto fill = [&](std::uint64_t seed) {
    std::size_t first = 0;
    for (std::size_t i = 0; i < counts.size(); ++i) {
      fillReduceInput(memory[i].data(), DataType::kFloat32, ReduceOp::kSum, Pattern::kExact, seed, comm.rank(), first,
                      counts[i]);
      first += counts[i];
    }
  };
  auto check = [&](const char* who, std::uint64_t seed) {
    std::vector<float> flat;
    for (const auto& m : memory) flat.insert(flat.end(), m.begin(), m.end());
    const std::string bad =
        checkReduction(flat.data(), DataType::kFloat32, ReduceOp::kSum, Pattern::kExact, seed, comm.size(), 0, flat.size());
    if (!bad.empty()) fail(comm, std::string(who) + ": " + bad);
  };
  GradientGroupOptions go;
  go.bucketBytes = 1 << 20;  // several buckets
  GradientGroup group(comm, views, go);
  if (group.describe().find("segment-list") == std::string::npos) fail(comm, "GradientGroup: not in segment-list mode");
  for (std::uint64_t step = 0; step < 3; ++step) {
    fill(100 + step);
    group.allreduce();
    check("GradientGroup", 100 + step);
  }
  for (std::size_t i = 0; i < counts.size(); ++i) named.push_back({"t" + std::to_string(i), views[i]});
  OverlapOptions oo;
  oo.bucketBytes = 1 << 20;
  OverlapEngine engine(comm, named, oo);
  for (std::uint64_t step = 0; step < 3; ++step) {
    fill(200 + step);
    engine.beginBackward();
    for (std::size_t i = counts.size(); i-- > 0;) engine.markReady(i);
    engine.finishBackward();
    check("OverlapEngine", 200 + step);
  }
}

void broadcasts(Communicator& comm) {
  std::vector<std::string> algos = comm.algorithms(Collective::kBroadcast);
  algos.insert(algos.begin(), "");
  std::uint64_t seed = 900;
  for (const std::string& algo : algos) {
    for (std::size_t scale : {std::size_t{1}, std::size_t{3001}}) {
      const int root = static_cast<int>(seed % static_cast<std::uint64_t>(comm.size()));
      std::vector<std::vector<unsigned char>> mine, expected;
      std::vector<View> segments;
      for (std::size_t count : listShape(161, scale)) {
        mine.emplace_back(count * 2);
        expected.emplace_back(count * 2);
        fillBytes(mine.back().data(), mine.back().size(), seed + segments.size(), comm.rank());
        fillBytes(expected.back().data(), expected.back().size(), seed + segments.size(), root);
        segments.emplace_back(mine.back().data(), count, DataType::kFloat16);
      }
      CallOptions options;
      options.algorithm = algo;
      comm.broadcastMany(segments, root, options);
      for (std::size_t i = 0; i < mine.size(); ++i)
        if (mine[i] != expected[i]) {
          fail(comm, "broadcastMany algo '" + algo + "' root " + std::to_string(root) + ": segment " +
                         std::to_string(i) + " differs from the root's");
          break;
        }
      ++seed;
    }
  }
}

void badInput(Communicator& comm) {
  std::vector<float> a(100, 1.0f);
  std::vector<View> segments{View(a.data(), 60, DataType::kFloat32), View(a.data() + 60, 40, DataType::kFloat32)};
  if (comm.rank() == comm.size() - 1) segments[1] = View(a.data() + 59, 40, DataType::kFloat32);
  try {
    comm.allreduceMany(segments, ReduceOp::kSum);
    fail(comm, "overlapping segments on one rank: no error");
  } catch (const Error& e) {
    if (e.category() != ErrorCategory::kInvalidArgument) fail(comm, std::string("overlap: wrong category: ") + e.what());
  }
  segments[1] = View(a.data() + 60, comm.rank() == 0 ? 40 : 39, DataType::kFloat32);
  try {
    comm.allreduceMany(segments, ReduceOp::kSum);
    fail(comm, "lists differing across ranks: no error");
  } catch (const Error& e) {
    if (e.category() != ErrorCategory::kMismatch) fail(comm, std::string("mismatch: wrong category: ") + e.what());
  }
  // The communicator is still usable afterwards.
  segments[1] = View(a.data() + 60, 40, DataType::kFloat32);
  comm.allreduceMany(segments, ReduceOp::kSum);
  if (a[99] != static_cast<float>(comm.size())) fail(comm, "after errors: wrong result");
}

}  // namespace

int main() {
  auto comm = Communicator::createMpiWorld();
  MpiReport report(*comm);
  gReport = &report;
  report.section("sweep", sweep);
  report.section("resnet50", resnet50);
  report.section("in flight", inFlight);
  report.section("drivers", drivers);
  report.section("broadcast", broadcasts);
  report.section("bad input", badInput);
  return report.finish();
}
