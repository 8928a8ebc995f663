// Helpers of the tests of the shared-memory small collectives
// (src/shm/small_collective.cc), run under mpirun with their own main.
#pragma once

#include <mpi.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "boostcomm/communicator.h"

namespace boostcomm::testing {

// The flight recorder's algorithm of this rank's latest call ("" if none).
inline std::string lastAlgorithm(const Communicator& comm) {
  const std::string record = comm.flightRecord();
  const std::string key = "\"algorithm\": \"";
  const std::size_t at = record.rfind(key);
  if (at == std::string::npos) return {};
  const std::size_t from = at + key.size();
  return record.substr(from, record.find('"', from) - from);
}

// Whether this rank's latest call ran as a small collective.
inline bool lastRanSmall(const Communicator& comm) { return lastAlgorithm(comm) == "shm_small"; }

// The documented default slot limit (shm/engine.h, smallAllreduceAutoBytes).
inline std::size_t smallLimitBytes(const Communicator& comm) {
  const unsigned threads = std::thread::hardware_concurrency();
  if (threads > 0 && static_cast<unsigned>(comm.size()) > threads) return 32768;
  return comm.size() == 2 ? 8192 : 4096;
}

// Whether every rank holds the same `bytes` (a hash of each, compared over
// MPI_COMM_WORLD; collective).
inline bool sameOnEveryRank(const std::vector<unsigned char>& bytes) {
  std::uint64_t mine = 1469598103934665603ULL;  // FNV-1a
  for (unsigned char b : bytes) mine = (mine ^ b) * 1099511628211ULL;
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  std::vector<std::uint64_t> all(static_cast<std::size_t>(size));
  MPI_Allgather(&mine, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, MPI_COMM_WORLD);
  return std::all_of(all.begin(), all.end(), [&](std::uint64_t h) { return h == mine; });
}

}  // namespace boostcomm::testing
