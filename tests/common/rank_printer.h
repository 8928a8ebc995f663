// For gtest programs run under mpirun: ranks other than 0 print only their
// failures, each prefixed with the rank, instead of the full progress log.
#pragma once

namespace boostcomm::testing {

// Call after InitGoogleTest, before RUN_ALL_TESTS; does nothing on rank 0.
void printOnlyFailuresOnNonRootRanks(int rank);

}  // namespace boostcomm::testing
