// In-process communicators for unit tests: N ranks as threads of one process,
// over the inproc transport. Test-only (library bc_testing), never in libboostcomm.
#pragma once

#include <climits>
#include <functional>
#include <memory>
#include <vector>

#include "boostcomm/communicator.h"

namespace boostcomm::detail {

// Creates `worldSize` communicators sharing one in-process fabric; element i
// is rank i. maxTag: the largest tag the fabric allows (InProcFabric::create).
std::vector<std::shared_ptr<Communicator>> createInProcessGroup(int worldSize, int maxTag = INT_MAX);

// Runs fn(comm) on worldSize threads, one per rank, and rethrows the first
// exception any rank raised (after all threads have finished).
void runInProcess(int worldSize, const std::function<void(Communicator&)>& fn, int maxTag = INT_MAX);

}  // namespace boostcomm::detail
