// Runs lists of CaseSpec on in-process groups (one thread per rank) and
// collects failures with the full combination in every message.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "boostcomm/communicator.h"
#include "boostcomm/error.h"
#include "boostcomm/autotune.h"

#include "common/collective_case.h"

namespace boostcomm::testing {

// Runs `cases` one after another on a fresh in-process group of `worldSize`
// ranks. Per case: rank 0 checks against the reference (every rank for
// reduce_scatter), every other rank's bytes are compared with rank 0's
// (bitwise-identical results), guard bytes are checked, barriers are checked
// with a shared arrival counter. Returns one line per failure, capped.
std::vector<std::string> runCasesInProcess(int worldSize, const std::vector<CaseSpec>& cases);

// comm.algorithms(coll) of rank 0 of a fresh in-process group.
std::vector<std::string> inProcessAlgorithms(int worldSize, Collective coll);

// Runs fn on every rank of a fresh in-process group, expecting every rank to
// throw boostcomm::Error (a rank that returns is a gtest failure naming it)
// and that all worldSize ranks did. Returns the errors, in arrival order.
std::vector<Error> errorsOnEveryRank(int worldSize, const std::function<void(Communicator&)>& fn);

// The tuning-cache signature of a fresh in-process group of worldSize ranks
// (what a cache written for such a group must carry).
TuningSignature inProcessSignature(int worldSize);

// Joins failures for a gtest message: "N failures:\n  ...".
std::string formatFailures(const std::vector<std::string>& failures);

}  // namespace boostcomm::testing
