// Autotuning under mpirun: the *Autotune calls return the right result
// (float64 reference) and the same algorithm on every rank; afterwards
// collectiveAlgorithm "auto" uses the tuned choice, a forced algorithm still
// wins; the cache survives a save/load through a file, a foreign or corrupt
// file is refused identically on every rank, and BOOSTCOMM_TUNING_CACHE is
// honoured by a communicator's first call. Own main; exits non-zero when any
// rank saw a failure.
#include <mpi.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "boostcomm/boostcomm.h"
#include "core/tunables.h"

namespace {

using namespace boostcomm;

int gFailures = 0;

#define CHECK(cond, ...)                                                        \
  do {                                                                          \
    if (!(cond)) {                                                              \
      std::fprintf(stderr, "rank %d: FAILED %s: ", worldRank(), #cond);         \
      std::fprintf(stderr, __VA_ARGS__);                                        \
      std::fprintf(stderr, "\n");                                               \
      ++gFailures;                                                              \
    }                                                                           \
  } while (0)

int worldRank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

// Rank 0's text on every rank.
std::string broadcastText(std::string text) {
  int length = static_cast<int>(text.size());
  MPI_Bcast(&length, 1, MPI_INT, 0, MPI_COMM_WORLD);
  text.resize(static_cast<std::size_t>(length));
  MPI_Bcast(text.data(), length, MPI_CHAR, 0, MPI_COMM_WORLD);
  return text;
}

bool sameOnAllRanks(const std::string& text) { return broadcastText(text) == text; }

float value(int rank, std::size_t i) { return static_cast<float>((rank + 1) * 0.5 + static_cast<double>(i % 13)); }
double reference(int ranks, std::size_t i) {
  double sum = 0;
  for (int r = 0; r < ranks; ++r) sum += value(r, i);
  return sum;
}

void autotuneCollectives(Communicator& comm) {
  const int n = comm.size();
  const int me = comm.rank();
  for (std::size_t count : {std::size_t{100}, std::size_t{20000}, std::size_t{300000}}) {
    std::vector<float> in(count);
    for (std::size_t i = 0; i < count; ++i) in[i] = value(me, i);
    std::vector<float> out(count, -1.0f);
    const AutotuneResult r = allreduceAutotune(comm, std::span(in), std::span(out), ReduceOp::kSum);
    std::size_t bad = 0;
    for (std::size_t i = 0; i < count; ++i) bad += out[i] != static_cast<float>(reference(n, i));
    CHECK(bad == 0, "allreduceAutotune(%zu): %zu wrong elements", count, bad);
    CHECK(sameOnAllRanks(r.selectedAlgorithm), "allreduceAutotune(%zu): ranks chose differently (%s here)", count,
          r.selectedAlgorithm.c_str());
    CHECK(r.entry.find("native") != nullptr, "native was not a candidate");
    CHECK(r.speedup > 0, "speedup %f", r.speedup);
    // "auto" now follows the tuned choice.
    Work w = comm.allreduceAsync(std::span(in), std::span(out), ReduceOp::kSum);
    w.wait();
    CHECK(r.selectedAlgorithm == w.algorithm(), "auto used %s, tuned %s (%zu elements)", w.algorithm(),
          r.selectedAlgorithm.c_str(), count);
    bad = 0;
    for (std::size_t i = 0; i < count; ++i) bad += out[i] != static_cast<float>(reference(n, i));
    CHECK(bad == 0, "auto allreduce after tuning (%zu): %zu wrong elements", count, bad);
    // A second autotune of the size class is answered from the cache.
    const AutotuneResult again = allreduceAutotune(comm, std::span(in), std::span(in), ReduceOp::kSum);
    CHECK(again.fromCache && again.selectedAlgorithm == r.selectedAlgorithm, "second autotune re-measured");
    bad = 0;
    for (std::size_t i = 0; i < count; ++i) bad += in[i] != static_cast<float>(reference(n, i));
    CHECK(bad == 0, "in-place allreduceAutotune (%zu): %zu wrong elements", count, bad);
  }
  // Reduce-scatter and allgather.
  const std::size_t block = 4096;
  std::vector<float> rsIn(block * static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < rsIn.size(); ++i) rsIn[i] = value(me, i);
  std::vector<float> rsOut(block);
  const AutotuneResult rs = reduceScatterAutotune(comm, std::span(rsIn), std::span(rsOut), ReduceOp::kSum);
  std::size_t bad = 0;
  for (std::size_t i = 0; i < block; ++i) bad += rsOut[i] != static_cast<float>(reference(n, me * block + i));
  CHECK(bad == 0, "reduceScatterAutotune: %zu wrong elements", bad);
  CHECK(sameOnAllRanks(rs.selectedAlgorithm), "reduceScatterAutotune: ranks chose differently");
  std::vector<double> agIn(block, me + 0.25);
  std::vector<double> agOut(block * static_cast<std::size_t>(n));
  const AutotuneResult ag = allgatherAutotune(comm, std::span(agIn), std::span(agOut));
  bad = 0;
  for (std::size_t i = 0; i < agOut.size(); ++i) bad += agOut[i] != static_cast<double>(i / block) + 0.25;
  CHECK(bad == 0, "allgatherAutotune: %zu wrong elements", bad);
  CHECK(sameOnAllRanks(ag.selectedAlgorithm), "allgatherAutotune: ranks chose differently");

  // A forced algorithm beats the tuned choice.
  CommStrategy forced;
  forced.collectiveAlgorithm = "ring";
  comm.configureCommStrategy(forced);
  std::vector<float> x(20000, 1.0f);
  Work w = comm.allreduceAsync(std::span(x), std::span(x), ReduceOp::kSum);
  w.wait();
  CHECK(std::string(w.algorithm()) == "ring", "forced ring, ran %s", w.algorithm());
}

void cacheFiles(Communicator& comm) {
  auto cache = tuningCacheOf(comm);
  CHECK(cache != nullptr && !cache->entries().empty(), "no cache after autotuning");
  if (!cache) return;
  char dir[] = "/tmp/bc_autotune_XXXXXX";
  const std::string base = broadcastText(comm.rank() == 0 ? std::string(mkdtemp(dir)) : std::string());
  const std::string good = base + "/good.json";
  const std::string foreign = base + "/foreign.json";
  const std::string corrupt = base + "/corrupt.json";
  if (comm.rank() == 0) {
    cache->save(good);
    std::string text = cache->toJson();
    const std::string key = "\"world_size\": " + std::to_string(comm.size());
    text.replace(text.find(key), key.size(), "\"world_size\": 977");
    std::ofstream(foreign) << text;
    std::ofstream(corrupt) << "{\"format\": \"boostcomm-tuning-cache\", \"entries\": [";
  }
  MPI_Barrier(MPI_COMM_WORLD);
  TuningCache loaded;
  CHECK(loadTuningCache(comm, good, loaded).status == TuningCache::LoadStatus::kLoaded, "good cache not loaded");
  CHECK(loaded.entries().size() == cache->entries().size(), "entries lost in the file");
  TuningCache other;
  const auto f = loadTuningCache(comm, foreign, other);
  CHECK(f.status == TuningCache::LoadStatus::kMismatch && f.notice.find("977 ranks") != std::string::npos,
        "foreign cache: %s", f.notice.c_str());
  const auto c = loadTuningCache(comm, corrupt, other);
  CHECK(c.status == TuningCache::LoadStatus::kCorrupt && c.notice.find("corrupt") != std::string::npos,
        "corrupt cache: %s", c.notice.c_str());
  CHECK(loadTuningCache(comm, base + "/missing.json", other).status == TuningCache::LoadStatus::kMissing,
        "missing cache");

  // BOOSTCOMM_TUNING_CACHE: a new communicator (a world over the same ranks)
  // takes the file's winners at its first call.
  core::setTunableOverride(core::kTunableTuningCache, good);
  auto fresh = Communicator::createMpiWorld();
  const TuningEntry& e = cache->entries().front();
  if (e.collective == Collective::kAllreduce && e.dtype == DataType::kFloat32) {
    std::vector<float> x(e.bytes / sizeof(float), 1.0f);
    Work w = fresh->allreduceAsync(std::span(x), std::span(x), ReduceOp::kSum);
    w.wait();
    CHECK(e.winner == w.algorithm(), "env cache: auto used %s, cache says %s", w.algorithm(), e.winner.c_str());
    CHECK(x[0] == static_cast<float>(comm.size()), "env cache: wrong sum %f", x[0]);
  }
  core::clearTunableOverride(core::kTunableTuningCache);
  if (comm.rank() == 0) {
    for (const std::string& p : {good, foreign, corrupt}) std::remove(p.c_str());
    rmdir(base.c_str());
  }
}

}  // namespace

int main(int argc, char** argv) {
  // MPI is ours, so the second world communicator of cacheFiles() does not
  // finalise it when it goes away.
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  core::setTunableOverride(core::kTunableTuneSamples, "3");
  auto comm = Communicator::createMpiWorld();
  auto section = [&](const char* name, void (*fn)(Communicator&)) {
    try {
      fn(*comm);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "rank %d: FAILED %s: threw %s\n", comm->rank(), name, e.what());
      ++gFailures;
    }
  };
  section("autotune", autotuneCollectives);
  section("cache files", cacheFiles);
  int total = 0;
  MPI_Allreduce(&gFailures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (comm->rank() == 0) {
    std::printf("%s: %d failure(s) across %d ranks\n", total ? "FAILED" : "PASSED", total, comm->size());
  }
  comm->finalize();
  MPI_Finalize();
  return total == 0 ? 0 : 1;
}
