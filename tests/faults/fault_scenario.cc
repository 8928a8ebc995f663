// One fault scenario under mpirun, for tests/faults/run_fault.sh (ctest label
// `faults`). Every rank prints what it saw as one line:
//   rank R: CAUGHT <category> after <s> s: <message>
//   rank R: OK <what>
// and the driver checks those lines (and the stall warning on stderr).
//
// Scenarios (argv[1]), 2 ranks, each after `good` correct calls (argv[2]):
//   stop        rank 1 stops itself (SIGSTOP) before the next allreduce; rank 0
//               must report the stall naming rank 1 and fail at its deadline,
//               then resumes rank 1 (SIGCONT) and ends the job.
//   op          rank 0 allreduce, rank 1 broadcast (1000 floats, native path)
//   count_shm   allreduce through shared memory, 16M vs 16M+1 floats
//   count_small allreduce through shared memory, 1000 vs 1001 floats
//   dtype_shm   allreduce through shared memory, float32 vs float64
//   root        broadcast root 0 vs root 1 (shared memory)
//   slow        rank 1 sleeps half the deadline (2 s of 4 s) before each of 3
//               allreduces: no error (a stall warning is allowed), right results
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <mpi.h>

#include "boostcomm/boostcomm.h"

using namespace boostcomm;

namespace {

double secondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

void goodCalls(Communicator& comm, int good, const char* algorithm) {
  std::vector<float> v(1000);
  CallOptions options;
  options.algorithm = algorithm;
  for (int i = 0; i < good; ++i) {
    for (std::size_t j = 0; j < v.size(); ++j) v[j] = static_cast<float>(comm.rank() + 1);
    comm.allreduce(ConstView(v.data(), v.size(), DataType::kFloat32), View(v.data(), v.size(), DataType::kFloat32),
                   ReduceOp::kSum, options);
    if (v[7] != static_cast<float>(comm.size() * (comm.size() + 1) / 2)) {
      std::printf("rank %d: WRONG good call %d gave %g\n", comm.rank(), i, v[7]);
      std::exit(3);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::string scenario = argc > 1 ? argv[1] : "op";
  const int good = argc > 2 ? std::atoi(argv[2]) : 500;
  auto comm = Communicator::createMpiWorld();
  const int rank = comm->rank();
  int pids[2] = {0, 0};
  const int mine = getpid();
  MPI_Allgather(&mine, 1, MPI_INT, pids, 1, MPI_INT, MPI_COMM_WORLD);
  const bool shm = scenario != "op" && scenario != "stop" && scenario != "slow";
  goodCalls(*comm, good, shm ? "shm" : "");
  std::fflush(stdout);
  const auto start = std::chrono::steady_clock::now();
  try {
    CallOptions viaShm;
    viaShm.algorithm = "shm";
    if (scenario == "slow") {
      for (int i = 0; i < 3; ++i) {
        if (rank == 1) std::this_thread::sleep_for(std::chrono::seconds(2));
        goodCalls(*comm, 1, "");
      }
    } else if (scenario == "stop") {
      if (rank == 1) raise(SIGSTOP);
      goodCalls(*comm, 1, "");
    } else if (scenario == "op") {
      std::vector<float> v(1000, 1.0f);
      if (rank == 0)
        comm->allreduce(ConstView(v.data(), v.size(), DataType::kFloat32), View(v.data(), v.size(), DataType::kFloat32),
                        ReduceOp::kSum);
      else
        comm->broadcast(View(v.data(), v.size(), DataType::kFloat32), 0);
    } else if (scenario == "count_shm" || scenario == "count_small") {
      const std::size_t n = (scenario == "count_shm" ? (std::size_t{16} << 20) : 1000) + (rank == 1 ? 1 : 0);
      std::vector<float> v(n, 1.0f);
      comm->allreduce(ConstView(v.data(), n, DataType::kFloat32), View(v.data(), n, DataType::kFloat32), ReduceOp::kSum,
                      viaShm);
    } else if (scenario == "dtype_shm") {
      std::vector<double> v(1000, 1.0);
      const DataType t = rank == 1 ? DataType::kFloat64 : DataType::kFloat32;
      comm->allreduce(ConstView(v.data(), 1000, t), View(v.data(), 1000, t), ReduceOp::kSum, viaShm);
    } else if (scenario == "root") {
      std::vector<float> v(1000, 1.0f);
      CallOptions bc;
      bc.algorithm = "shm";
      comm->broadcast(View(v.data(), v.size(), DataType::kFloat32), rank == 1 ? 1 : 0, bc);
    } else {
      std::printf("rank %d: unknown scenario %s\n", rank, scenario.c_str());
      return 2;
    }
    std::printf("rank %d: OK returned normally after %.2f s\n", rank, secondsSince(start));
  } catch (const Error& e) {
    std::printf("rank %d: CAUGHT %s after %.2f s: %s\n", rank, std::string(toString(e.category())).c_str(),
                secondsSince(start), e.what());
  }
  std::fflush(stdout);
  if (scenario == "stop") {
    // The stopped peer cannot finalize with us: resume it and end the job.
    if (rank == 0) kill(pids[1], SIGCONT);
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 0);
  }
  try {
    comm->finalize();
  } catch (const Error&) {
  }
  return 0;
}
