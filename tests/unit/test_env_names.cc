// BOOSTCOMM_* environment names that are not tunables (core::environmentNameWarnings,
// checked by every communicator at creation): a retired name is an error
// naming its replacement, an unknown one is one warning per process, a
// tunable or a known test/build variable is silent.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "boostcomm/communicator.h"
#include "boostcomm/error.h"
#include "core/tunables.h"
#include "testing/inproc_group.h"

namespace boostcomm {
namespace {

std::vector<std::string> warningsOf(std::vector<const char*> env) {
  env.push_back(nullptr);
  return core::environmentNameWarnings(env.data());
}

// Sets an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) { ::setenv(name, value, 1); }
  ~ScopedEnv() { ::unsetenv(name_); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
};

TEST(EnvNames, RetiredNamesAreErrorsNamingTheReplacement) {
  const std::pair<const char*, const char*> renamed[] = {
      {"BOOSTCOMM_FUSION_BUCKET_BYTES=1024", "BOOSTCOMM_FUSION_BUCKET_BYTES was renamed to BOOSTCOMM_BUCKET_BYTES"},
      {"BOOSTCOMM_OVERLAP_BUCKET_BYTES=1024", "BOOSTCOMM_OVERLAP_BUCKET_BYTES was renamed to BOOSTCOMM_BUCKET_BYTES"},
      {"BOOSTCOMM_HIER_INTRA=ring", "BOOSTCOMM_HIER_INTRA was renamed to BOOSTCOMM_HIER_INTRA_ALGO"},
      {"BOOSTCOMM_HIER_INTER=rhd", "BOOSTCOMM_HIER_INTER was renamed to BOOSTCOMM_HIER_INTER_ALGO (same values)"},
  };
  for (const auto& [entry, message] : renamed) {
    try {
      warningsOf({"PATH=/usr/bin", entry});
      ADD_FAILURE() << entry << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.category(), ErrorCategory::kInvalidArgument) << e.what();
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    }
  }
}

TEST(EnvNames, TunablesAndKnownVariablesAreSilent) {
  std::vector<std::string> entries;
  for (const auto& t : core::allTunables()) entries.push_back(std::string(t.env) + "=x");
  entries.push_back("BOOSTCOMM_TEST_LARGE=1");
  entries.push_back("BOOSTCOMM_CLI=build/tools/boostcomm");
  entries.push_back("HOME=/root");
  entries.push_back("BOOSTCOMMFOO=1");  // not the prefix
  entries.push_back("XBOOSTCOMM_FOO=1");
  entries.push_back("BOOSTCOMM_HIER_INTER_ALGO");  // no '=': still the tunable's name
  std::vector<const char*> env;
  for (const std::string& e : entries) env.push_back(e.c_str());
  EXPECT_EQ(warningsOf(env), std::vector<std::string>{});
}

TEST(EnvNames, UnknownNamesWarnByName) {
  const std::vector<std::string> warnings =
      warningsOf({"BOOSTCOMM_FOO=1", "BOOSTCOMM_ALGO=ring", "BOOSTCOMM_TIMEOUT=5", "BOOSTCOMM_=", "OTHER=1"});
  ASSERT_EQ(warnings.size(), 3u);
  EXPECT_EQ(warnings[0], "boostcomm: warning: BOOSTCOMM_FOO is not a boostcomm variable (see `boostcomm tunables`)");
  EXPECT_NE(warnings[1].find("BOOSTCOMM_TIMEOUT is not"), std::string::npos) << warnings[1];
  EXPECT_NE(warnings[2].find("BOOSTCOMM_ is not"), std::string::npos) << warnings[2];
  // A prefix of a tunable's name or a name with a tunable as prefix is not that tunable.
  EXPECT_EQ(warningsOf({"BOOSTCOMM_ALG=ring", "BOOSTCOMM_ALGOX=ring"}).size(), 2u);
}

TEST(EnvNames, CommunicatorCreationRejectsARetiredName) {
  const ScopedEnv env("BOOSTCOMM_HIER_INTER", "ring");
  try {
    (void)detail::createInProcessGroup(2);
    ADD_FAILURE() << "a communicator was created with BOOSTCOMM_HIER_INTER set";
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), ErrorCategory::kInvalidArgument) << e.what();
    EXPECT_NE(std::string(e.what()).find("BOOSTCOMM_HIER_INTER_ALGO"), std::string::npos) << e.what();
  }
}

TEST(EnvNames, CommunicatorCreationWarnsOncePerProcess) {
  const ScopedEnv env("BOOSTCOMM_NOT_A_KNOB_FOR_TESTS", "1");
  ::testing::internal::CaptureStderr();
  for (int i = 0; i < 3; ++i) detail::runInProcess(2, [](Communicator& comm) { comm.barrier(); });
  const std::string err = ::testing::internal::GetCapturedStderr();
  const std::string line =
      "boostcomm: warning: BOOSTCOMM_NOT_A_KNOB_FOR_TESTS is not a boostcomm variable (see `boostcomm tunables`)\n";
  const auto first = err.find(line);
  ASSERT_NE(first, std::string::npos) << err;
  EXPECT_EQ(err.find(line, first + 1), std::string::npos) << "warned more than once:\n" << err;
}

}  // namespace
}  // namespace boostcomm
