#include "common/inproc_harness.h"

#include <atomic>
#include <barrier>
#include <chrono>
#include <mutex>
#include <regex>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

#include "boostcomm/error.h"
#include "testing/inproc_group.h"

namespace boostcomm::testing {
namespace {

constexpr std::size_t kMaxFailures = 40;  // beyond this only the total is reported

// The error with every "rank <digits>" replaced by "rank *".
std::string withoutRank(const std::string& error) {
  static const std::regex kRank("rank [0-9]+");
  return std::regex_replace(error, kRank, "rank *");
}

// True when every rank failed with the same error (up to its rank number):
// reported once instead of once per rank.
bool sameOnEveryRank(const std::vector<CaseOutcome>& outcomes) {
  if (outcomes[0].error.empty()) return false;
  const std::string first = withoutRank(outcomes[0].error);
  for (const auto& outcome : outcomes) {
    if (outcome.error.empty() || withoutRank(outcome.error) != first) return false;
  }
  return true;
}

}  // namespace

std::vector<std::string> runCasesInProcess(int worldSize, const std::vector<CaseSpec>& cases) {
  std::vector<std::string> failures;
  std::size_t failureCount = 0;
  std::mutex failuresMutex;
  auto fail = [&](const std::string& line) {
    std::lock_guard lock(failuresMutex);
    if (++failureCount <= kMaxFailures) failures.push_back(line);
  };

  std::vector<CaseOutcome> outcomes(static_cast<std::size_t>(worldSize));
  std::barrier sync(worldSize);
  std::atomic<int> barrierArrivals{0};

  try {
    detail::runInProcess(worldSize, [&](Communicator& comm) {
      const int rank = comm.rank();
      CaseOutcome& mine = outcomes[static_cast<std::size_t>(rank)];
      for (const CaseSpec& spec : cases) {
        mine = CaseOutcome{};
        try {
          if (spec.coll == TestCollective::kBarrier) {
            // The last rank arrives late: nobody may leave before it arrived.
            if (rank == worldSize - 1) std::this_thread::sleep_for(std::chrono::milliseconds(2));
            barrierArrivals.fetch_add(1);
            mine = runCase(comm, spec);
            const int seen = barrierArrivals.load();
            if (seen < worldSize) {
              mine.error += "left the barrier after only " + std::to_string(seen) + " of " +
                            std::to_string(worldSize) + " ranks arrived";
            }
          } else {
            mine = runCase(comm, spec, /*checkReference=*/rank == 0);
          }
        } catch (const std::exception& e) {
          mine.error = std::string("threw: ") + e.what();
        }
        sync.arrive_and_wait();
        if (rank == 0) {
          const std::string what = describe(spec, worldSize);
          if (worldSize > 1 && sameOnEveryRank(outcomes)) {
            fail(what + " every rank, e.g. rank 0: " + outcomes[0].error);
          } else {
            for (int r = 0; r < worldSize; ++r) {
              const CaseOutcome& other = outcomes[static_cast<std::size_t>(r)];
              if (!other.error.empty()) fail(what + " rank " + std::to_string(r) + ": " + other.error);
            }
          }
          if (resultsReplicated(spec) && outcomes[0].error.empty()) {
            for (int r = 1; r < worldSize; ++r) {
              const CaseOutcome& other = outcomes[static_cast<std::size_t>(r)];
              if (!other.error.empty()) continue;
              if (other.result.size() != outcomes[0].result.size()) {
                fail(what + " rank " + std::to_string(r) + ": result size differs from rank 0");
                continue;
              }
              const std::string diff = compareBytes(other.result.data(), outcomes[0].result.data(),
                                                    other.result.size(), dataTypeSize(spec.dtype));
              if (!diff.empty()) fail(what + " rank " + std::to_string(r) + " is not bitwise identical to rank 0: " + diff);
            }
          }
          barrierArrivals.store(0);
        }
        sync.arrive_and_wait();
      }
    });
  } catch (const std::exception& e) {
    fail("ws=" + std::to_string(worldSize) + ": runInProcess threw: " + e.what());
  }
  if (failureCount > kMaxFailures) {
    failures.push_back("... and " + std::to_string(failureCount - kMaxFailures) + " more failures");
  }
  return failures;
}

std::vector<std::string> inProcessAlgorithms(int worldSize, Collective coll) {
  auto group = detail::createInProcessGroup(worldSize);
  return group.at(0)->algorithms(coll);
}

std::string formatFailures(const std::vector<std::string>& failures) {
  std::ostringstream out;
  out << failures.size() << " failure(s):";
  for (const auto& line : failures) out << "\n  " << line;
  return out.str();
}

std::vector<Error> errorsOnEveryRank(int worldSize, const std::function<void(Communicator&)>& fn) {
  std::mutex mutex;
  std::vector<Error> errors;
  detail::runInProcess(worldSize, [&](Communicator& comm) {
    try {
      fn(comm);
      ADD_FAILURE() << "rank " << comm.rank() << ": no error";
    } catch (const Error& e) {
      std::lock_guard lock(mutex);
      errors.push_back(e);
    }
  });
  EXPECT_EQ(errors.size(), static_cast<std::size_t>(worldSize));
  return errors;
}

TuningSignature inProcessSignature(int worldSize) {
  TuningSignature sig;
  std::mutex mutex;
  detail::runInProcess(worldSize, [&](Communicator& comm) {
    const TuningSignature s = currentSignature(comm);
    std::lock_guard lock(mutex);
    sig = s;
  });
  return sig;
}

}  // namespace boostcomm::testing
