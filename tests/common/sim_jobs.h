// Simulator test jobs: one float32 allreduce of `bytes` run by `algorithm`.
#pragma once

#include <cstddef>
#include <string>

#include "simulate/simulator.h"

namespace boostcomm::testing {

inline simulate::JobSpec simAllreduce(const std::string& algorithm, std::size_t bytes) {
  simulate::JobSpec job;
  job.algorithm = algorithm;
  job.request.count = bytes / 4;
  return job;
}

}  // namespace boostcomm::testing
