// Shared-memory collectives ("shm") and zero-copy registered buffers, under
// mpirun on one node. Own main: MPI init/finalize through boostcomm; exits
// non-zero when any rank saw a failure.
//
// Covers: every dtype and op on odd sizes (through the shared case runner,
// which checks against a float64 / wraparound reference and guard bytes),
// payloads larger than the staging ring (rounds), several collectives in
// flight at once, buffer reuse across calls, registered buffers (zero-copy
// in, out, in place), a rank that asks for a different registered size, and
// owned registered buffers (allocateOwnedBuffer).
#include <mpi.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "boostcomm/boostcomm.h"
#include "common/collective_case.h"
#include "common/test_data.h"

namespace {

using namespace boostcomm;
using namespace boostcomm::testing;

int gFailures = 0;

void fail(const Communicator& comm, const std::string& what) {
  ++gFailures;
  std::fprintf(stderr, "rank %d: %s\n", comm.rank(), what.c_str());
}

void expectOk(Communicator& comm, const CaseSpec& spec) {
  const CaseOutcome out = runCase(comm, spec);
  if (!out.error.empty()) fail(comm, describe(spec, comm.size()) + ": " + out.error);
}

// Every dtype x op x odd size, the four collectives, in place and async too.
void sweep(Communicator& comm) {
  // 1 and 13: smaller than a cache line per rank; 1000003: several chunks
  // (one chunk is 256 KiB by default); 3000017 floats: 12 MB, three rounds
  // of the 4 MiB staging ring.
  const std::size_t counts[] = {1, 13, 4097, 1000003};
  for (DataType dtype : kAllDataTypes) {
    for (ReduceOp op : kAllReduceOps) {
      for (std::size_t count : counts) {
        for (TestCollective coll : {TestCollective::kAllreduce, TestCollective::kReduceScatter}) {
          CaseSpec spec;
          spec.coll = coll;
          spec.dtype = dtype;
          spec.op = op;
          spec.algorithm = "shm";
          spec.count = count;
          spec.seed = count;
          if (expectsInvalidArgument(spec)) continue;  // integer avg: covered by test_bad_input
          expectOk(comm, spec);
          spec.inPlace = coll == TestCollective::kAllreduce && count == 4097;
          spec.async = count == 13;
          expectOk(comm, spec);
        }
      }
    }
    for (std::size_t count : counts) {
      for (TestCollective coll : {TestCollective::kAllgather, TestCollective::kAllgatherv}) {
        CaseSpec spec;
        spec.coll = coll;
        spec.dtype = dtype;
        spec.algorithm = "shm";
        spec.count = count;
        spec.inPlace = coll == TestCollective::kAllgather && count == 13;
        expectOk(comm, spec);
      }
      for (int root = 0; root < comm.size(); ++root) {
        CaseSpec spec;
        spec.coll = TestCollective::kBroadcast;
        spec.dtype = dtype;
        spec.algorithm = "shm";
        spec.count = count;
        spec.root = root;
        expectOk(comm, spec);
      }
    }
  }
  CaseSpec big;
  big.algorithm = "shm";
  big.count = 3000017;
  expectOk(comm, big);
}

// Several collectives in flight at once, of different kinds and mixed with a
// point-to-point algorithm, all waited for at the end; then reused buffers.
void inFlight(Communicator& comm) {
  const int n = comm.size();
  const std::size_t count = 300001;
  CallOptions shm;
  shm.algorithm = "shm";
  CallOptions ring;
  ring.algorithm = "ring";
  for (int round = 0; round < 3; ++round) {
    std::vector<float> a(count), b(count), ra(count), rb(count), rc(count);
    fillReduceInput(a.data(), DataType::kFloat32, ReduceOp::kSum, Pattern::kExact, 11 + round, comm.rank(), 0, count);
    fillReduceInput(b.data(), DataType::kFloat32, ReduceOp::kSum, Pattern::kExact, 22 + round, comm.rank(), 0, count);
    std::vector<double> g(1000), gathered(1000 * static_cast<std::size_t>(n));
    for (std::size_t i = 0; i < g.size(); ++i) g[i] = comm.rank() * 1e6 + static_cast<double>(i) + round;
    std::vector<int> bc(777, comm.rank() == 1 % n ? 42 + round : -1);
    std::vector<Work> works;
    works.push_back(comm.allreduceAsync(std::span<const float>(a), std::span<float>(ra), ReduceOp::kSum, shm));
    works.push_back(comm.allgatherAsync(std::span<const double>(g), std::span<double>(gathered), shm));
    works.push_back(comm.allreduceAsync(std::span<const float>(b), std::span<float>(rb), ReduceOp::kSum, ring));
    works.push_back(comm.broadcastAsync(std::span<int>(bc), 1 % n, shm));
    works.push_back(comm.allreduceAsync(std::span<const float>(a), std::span<float>(rc), ReduceOp::kSum, shm));
    for (std::size_t i = works.size(); i-- > 0;) works[i].wait();  // out of order on purpose
    const std::string ea = checkReduction(ra.data(), DataType::kFloat32, ReduceOp::kSum, Pattern::kExact, 11 + round,
                                          n, 0, count);
    const std::string eb = checkReduction(rb.data(), DataType::kFloat32, ReduceOp::kSum, Pattern::kExact, 22 + round,
                                          n, 0, count);
    if (!ea.empty()) fail(comm, "in flight: shm allreduce " + ea);
    if (!eb.empty()) fail(comm, "in flight: ring allreduce " + eb);
    if (std::memcmp(ra.data(), rc.data(), count * sizeof(float)) != 0) fail(comm, "in flight: repeated allreduce differs");
    for (int r = 0; r < n; ++r) {
      for (std::size_t i = 0; i < g.size(); ++i) {
        if (gathered[static_cast<std::size_t>(r) * g.size() + i] != r * 1e6 + static_cast<double>(i) + round) {
          fail(comm, "in flight: allgather block " + std::to_string(r) + " wrong");
          break;
        }
      }
    }
    for (int v : bc) {
      if (v != 42 + round) {
        fail(comm, "in flight: broadcast wrong");
        break;
      }
    }
  }
}

// Registered buffers: zero-copy input, output, both, in place; reused.
void registered(Communicator& comm) {
  const int n = comm.size();
  const std::size_t count = 1500007;  // several chunks, odd
  const std::size_t bytes = count * sizeof(float);
  float* in = static_cast<float*>(comm.allocateBuffer(bytes));
  float* out = static_cast<float*>(comm.allocateBuffer(bytes));
  std::vector<float> plainIn(count), plainOut(count);
  CallOptions shm;
  shm.algorithm = "shm";
  for (int round = 0; round < 4; ++round) {
    const std::uint64_t seed = 100 + static_cast<std::uint64_t>(round);
    fillReduceInput(in, DataType::kFloat32, ReduceOp::kSum, Pattern::kExact, seed, comm.rank(), 0, count);
    std::memcpy(plainIn.data(), in, bytes);
    struct Variant {
      const char* name;
      const float* send;
      float* recv;
    };
    // The last two mix the cases across ranks: a peer that reads one rank's
    // input in place and another's from its slot, in the same chunk.
    const bool even = comm.rank() % 2 == 0;
    const Variant variants[] = {{"registered in and out", in, out},
                                {"registered in", in, plainOut.data()},
                                {"registered out", plainIn.data(), out},
                                {"registered in and out on even ranks only", even ? in : plainIn.data(),
                                 even ? out : plainOut.data()},
                                {"registered in on odd ranks, out on even ranks", even ? plainIn.data() : in,
                                 even ? out : plainOut.data()}};
    for (const Variant& v : variants) {
      std::fill(v.recv, v.recv + count, -1.0f);
      comm.allreduce(std::span<const float>(v.send, count), std::span<float>(v.recv, count), ReduceOp::kSum, shm);
      const std::string e =
          checkReduction(v.recv, DataType::kFloat32, ReduceOp::kSum, Pattern::kExact, seed, n, 0, count);
      if (!e.empty()) fail(comm, std::string("allreduce ") + v.name + ": " + e);
    }
    // In place in registered memory (the input is overwritten by the result).
    comm.allreduce(std::span<const float>(in, count), std::span<float>(in, count), ReduceOp::kSum, shm);
    const std::string e = checkReduction(in, DataType::kFloat32, ReduceOp::kSum, Pattern::kExact, seed, n, 0, count);
    if (!e.empty()) fail(comm, "allreduce registered in place: " + e);
  }
  // Reduce-scatter and allgather from registered memory, broadcast in it.
  const std::size_t block = count / static_cast<std::size_t>(n);
  fillReduceInput(in, DataType::kFloat32, ReduceOp::kMax, Pattern::kExact, 7, comm.rank(), 0, block * n);
  comm.reduceScatter(std::span<const float>(in, block * n), std::span<float>(out, block), ReduceOp::kMax, shm);
  const std::string rs = checkReduction(out, DataType::kFloat32, ReduceOp::kMax, Pattern::kExact, 7, n,
                                        block * static_cast<std::size_t>(comm.rank()), block);
  if (!rs.empty()) fail(comm, "reduce_scatter registered: " + rs);
  for (std::size_t i = 0; i < block; ++i) in[i] = static_cast<float>(comm.rank() * 3 + static_cast<int>(i % 1000));
  comm.allgather(std::span<const float>(in, block), std::span<float>(out, block * n), shm);
  for (int r = 0; r < n; ++r) {
    if (out[static_cast<std::size_t>(r) * block + 999] != static_cast<float>(r * 3 + 999 % 1000)) {
      fail(comm, "allgather registered: block " + std::to_string(r) + " wrong");
    }
  }
  for (std::size_t i = 0; i < count; ++i) in[i] = comm.rank() == 0 ? static_cast<float>(i % 4093) : 0.0f;
  comm.broadcast(std::span<float>(in, count), 0, shm);
  for (std::size_t i = 0; i < count; i += 997) {
    if (in[i] != static_cast<float>(i % 4093)) {
      fail(comm, "broadcast registered: element " + std::to_string(i) + " wrong");
      break;
    }
  }
  comm.freeBuffer(out);
  comm.freeBuffer(in);
}

// A rank asking for a different size: every rank gets Error{kMismatch}
// naming the sizes, and the communicator stays usable.
void sizeMismatch(Communicator& comm) {
  const std::size_t bytes = comm.rank() == comm.size() - 1 ? 8192 : 4096;
  try {
    void* p = comm.allocateBuffer(bytes);
    comm.freeBuffer(p);
    fail(comm, "allocateBuffer with mismatched sizes did not throw");
  } catch (const Error& e) {
    const std::string what = e.what();
    if (e.category() != ErrorCategory::kMismatch || what.find("8192") == std::string::npos ||
        what.find("4096") == std::string::npos) {
      fail(comm, "allocateBuffer mismatch: unexpected error: " + what);
    }
  }
  std::vector<float> x(100, 1.0f), y(100);
  comm.allreduce(std::span<const float>(x), std::span<float>(y), ReduceOp::kSum);
  if (y[99] != static_cast<float>(comm.size())) fail(comm, "allreduce after the mismatch error is wrong");
}

// Owned registered buffers (allocateOwnedBuffer, what DDP's buckets get):
// taken while a collective is in flight (completed first), zeroed, reduced
// in place, refused by freeBuffer, given back when the holder lets go, and
// a size mismatch is kMismatch on every rank. `kept` outlives finalize
// (checked in main).
std::shared_ptr<void> owned(Communicator& comm) {
  const int n = comm.size();
  const std::size_t count = 1000003;  // several chunks, odd
  const std::size_t bytes = count * sizeof(float);
  std::vector<float> x(4099, 1.0f), y(4099);
  Work pending = comm.allreduceAsync(std::span<const float>(x), std::span<float>(y), ReduceOp::kSum);
  std::shared_ptr<void> a = comm.allocateOwnedBuffer(bytes);
  pending.wait();
  if (y[4098] != static_cast<float>(n)) fail(comm, "owned: the allreduce in flight was wrong");
  if (!a) {
    fail(comm, "owned: allocateOwnedBuffer returned null on one node");
    return nullptr;
  }
  const long page = sysconf(_SC_PAGESIZE);
  if (reinterpret_cast<std::uintptr_t>(a.get()) % static_cast<std::uintptr_t>(page) != 0) {
    fail(comm, "owned: buffer is not page-aligned");
  }
  float* f = static_cast<float*>(a.get());
  if (std::any_of(f, f + count, [](float v) { return v != 0.0f; })) fail(comm, "owned: buffer is not zeroed");
  CallOptions shm;
  shm.algorithm = "shm";
  fillReduceInput(f, DataType::kFloat32, ReduceOp::kSum, Pattern::kExact, 31, comm.rank(), 0, count);
  comm.allreduce(std::span<const float>(f, count), std::span<float>(f, count), ReduceOp::kSum, shm);
  const std::string e = checkReduction(f, DataType::kFloat32, ReduceOp::kSum, Pattern::kExact, 31, n, 0, count);
  if (!e.empty()) fail(comm, "owned: allreduce in place: " + e);
  try {
    comm.freeBuffer(a.get());
    fail(comm, "owned: freeBuffer accepted an owned buffer");
  } catch (const Error& err) {
    if (err.category() != ErrorCategory::kInvalidArgument) fail(comm, std::string("owned: freeBuffer: ") + err.what());
  }
  // Given back: the holder's last copy goes, and the pages leave memory
  // (the engine keeps the range mapped, so mincore may look at it).
  const std::size_t span = (bytes + static_cast<std::size_t>(page) - 1) / static_cast<std::size_t>(page) *
                           static_cast<std::size_t>(page);
  std::vector<unsigned char> resident(span / static_cast<std::size_t>(page));
  void* range = a.get();
  auto residentPages = [&] {
    if (mincore(range, span, resident.data()) != 0) return -1L;
    return static_cast<long>(std::count_if(resident.begin(), resident.end(), [](unsigned char v) { return v & 1; }));
  };
  if (residentPages() <= 0) fail(comm, "owned: the written buffer has no resident pages");
  a.reset();
  if (const long left = residentPages(); left != 0) {
    fail(comm, "owned: " + std::to_string(left) + " pages still resident after the holder let go");
  }
  // A rank asking for a different size.
  const std::size_t odd = comm.rank() == n - 1 ? 8192 : 4096;
  try {
    std::shared_ptr<void> b = comm.allocateOwnedBuffer(odd);
    fail(comm, "allocateOwnedBuffer with mismatched sizes did not throw");
  } catch (const Error& err) {
    const std::string what = err.what();
    if (err.category() != ErrorCategory::kMismatch || what.find("8192") == std::string::npos) {
      fail(comm, "allocateOwnedBuffer mismatch: unexpected error: " + what);
    }
  }
  std::shared_ptr<void> kept = comm.allocateOwnedBuffer(4096);
  if (kept) std::fill_n(static_cast<int*>(kept.get()), 1024, 7 + comm.rank());
  return kept;
}

}  // namespace

int main() {
  auto comm = Communicator::createMpiWorld();
  const std::vector<std::string> algos = comm->algorithms(Collective::kAllreduce);
  if (std::find(algos.begin(), algos.end(), "shm") == algos.end()) {
    if (comm->rank() == 0) std::printf("SKIPPED: no shared-memory engine (BOOSTCOMM_SHM=0?)\n");
    comm->finalize();
    return 0;
  }
  auto section = [&](const char* name, void (*fn)(Communicator&)) {
    try {
      fn(*comm);
    } catch (const std::exception& e) {
      fail(*comm, std::string(name) + ": threw " + e.what());
    }
  };
  section("sweep", sweep);
  section("in flight", inFlight);
  section("registered", registered);
  section("size mismatch", sizeMismatch);
  std::shared_ptr<void> kept;
  try {
    kept = owned(*comm);
  } catch (const std::exception& e) {
    fail(*comm, std::string("owned: threw ") + e.what());
  }
  int total = 0;
  MPI_Allreduce(&gFailures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (comm->rank() == 0) std::printf("%s: %d failure(s) across %d ranks\n", total ? "FAILED" : "PASSED", total, comm->size());
  const int rank = comm->rank();
  comm->finalize();
  // An owned buffer outlives the communicator that made it.
  if (kept && !std::all_of(static_cast<int*>(kept.get()), static_cast<int*>(kept.get()) + 1024,
                           [rank](int v) { return v == 7 + rank; })) {
    std::fprintf(stderr, "rank %d: owned: buffer changed after finalize\n", rank);
    return 1;
  }
  return total == 0 ? 0 : 1;
}
