// Every numeric, boolean and enum BOOSTCOMM_* tunable of the registry
// (src/core/tunables.def) set to hostile text: "", "abc", "-1", "2147483648",
// "4294967295", "1e3", "0x10", " 5 " and a 1 MiB string. Each value is either
// rejected with Error{kInvalidArgument} naming the variable, or accepted as
// documented (a plain decimal integer inside the declared range, exactly 0 or
// 1, or one of the enum's words); an accepted value must then let a
// communicator be created and compute right (or fail with an Error naming the
// variable), never crash. The selection strings (BOOSTCOMM_ALGO,
// BOOSTCOMM_SELECTION, BOOSTCOMM_NODE_LAYOUT, BOOSTCOMM_TUNING_CACHE) get the
// same texts through a communicator. ctest label `unit`.
#include <gtest/gtest.h>

#include <charconv>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "boostcomm/communicator.h"
#include "boostcomm/error.h"
#include "common/tunable_override.h"
#include "core/tunables.h"
#include "testing/inproc_group.h"

namespace boostcomm {
namespace {

std::vector<std::string> hostileTexts() {
  return {"", "abc", "-1", "2147483648", "4294967295", "1e3", "0x10", " 5 ", std::string(std::size_t{1} << 20, '7')};
}

// What the registry documents as accepted for `info` (tunables.def header).
bool documentedAccepts(const core::TunableInfo& info, const std::string& text) {
  if (info.type == core::TunableType::kInt) {
    std::int64_t value = 0;
    const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    return ec == std::errc() && ptr == text.data() + text.size() && value >= info.minValue && value <= info.maxValue;
  }
  const std::string_view words(info.words);
  std::size_t begin = 0;
  while (begin <= words.size()) {
    std::size_t end = words.find('|', begin);
    if (end == std::string_view::npos) end = words.size();
    if (words.substr(begin, end - begin) == text) return true;
    begin = end + 1;
  }
  return false;
}

// Reads the tunable as its kind does; true when the value was accepted.
bool typedRead(core::TunableKey key, core::TunableType type) {
  switch (type) {
    case core::TunableType::kInt: (void)core::tunableInt(key); return true;
    case core::TunableType::kBool: (void)core::tunableBool(key); return true;
    case core::TunableType::kEnum: (void)core::tunableEnum(key); return true;
    case core::TunableType::kString: (void)core::tunableString(key); return true;
  }
  return false;
}

// A 2-rank group created under the current settings runs an allreduce, an
// allgather and a broadcast; returns "" when all were right or failed with an
// Error naming `env`, else what went wrong.
std::string communicatorSurvives(const char* env) {
  std::vector<std::string> problems(2);
  try {
    detail::runInProcess(2, [&](Communicator& comm) {
      std::string& problem = problems[static_cast<std::size_t>(comm.rank())];
      try {
        std::vector<float> x(1001, static_cast<float>(comm.rank() + 1));
        comm.allreduce(std::span<const float>(x), std::span<float>(x), ReduceOp::kSum);
        for (float v : x) {
          if (v != 3.0f) problem = "allreduce gave " + std::to_string(v);
        }
        std::vector<float> mine(3, static_cast<float>(comm.rank())), all(6);
        comm.allgather(std::span<const float>(mine), std::span<float>(all));
        if (all[0] != 0.0f || all[5] != 1.0f) problem = "allgather was wrong";
        std::vector<float> b(5, static_cast<float>(comm.rank() + 7));
        comm.broadcast(std::span<float>(b), 1);
        if (b[4] != 8.0f) problem = "broadcast was wrong";
      } catch (const Error& e) {
        if (std::string(e.what()).find(env) == std::string::npos) problem = std::string("error not naming it: ") + e.what();
      }
    });
  } catch (const Error& e) {  // the group's creation itself
    if (std::string(e.what()).find(env) == std::string::npos) return std::string("creation error not naming it: ") + e.what();
  }
  return problems[0].empty() ? problems[1] : problems[0];
}

TEST(FuzzEnv, EveryNumericAndEnumTunableRejectsOrDocumentsEachHostileValue) {
  int rejected = 0;
  int accepted = 0;
  const auto all = core::allTunables();
  for (std::size_t i = 0; i < all.size(); ++i) {
    const core::TunableInfo& info = all[i];
    if (info.type == core::TunableType::kString) continue;
    const core::TunableKey key{i, info.env};
    for (const std::string& text : hostileTexts()) {
      const std::string shown = text.size() > 20 ? "<1 MiB of '7'>" : "'" + text + "'";
      testing::TunableOverride value(info.env, text);
      bool ok = false;
      try {
        ok = typedRead(key, info.type);
      } catch (const Error& e) {
        EXPECT_EQ(e.category(), ErrorCategory::kInvalidArgument) << info.env << "=" << shown;
        const std::string message = e.what();
        EXPECT_NE(message.find(info.env), std::string::npos) << info.env << "=" << shown << ": " << message;
        EXPECT_LT(message.size(), 4096u) << info.env << ": the message repeats the whole value";
        EXPECT_FALSE(documentedAccepts(info, text)) << info.env << "=" << shown << " is documented but rejected";
        ++rejected;
        continue;
      } catch (const std::exception& e) {
        ADD_FAILURE() << info.env << "=" << shown << " threw a non-boostcomm exception: " << e.what();
        continue;
      }
      ASSERT_TRUE(ok);
      EXPECT_TRUE(documentedAccepts(info, text)) << info.env << "=" << shown << " was accepted but is not in "
                                                 << core::tunableRule(info);
      ++accepted;
      EXPECT_EQ(communicatorSurvives(info.env), "") << info.env << "=" << shown;
    }
  }
  // Most hostile values are errors; the large integers fit some ranges.
  EXPECT_GT(rejected, 5 * accepted);
  EXPECT_GT(accepted, 0);
}

TEST(FuzzEnv, SelectionStringsNeverCrashACommunicator) {
  for (const char* env : {core::kTunableAlgo.env, core::kTunableSelectionTable.env, core::kTunableNodeLayout.env,
                          core::kTunableTuningCache.env}) {
    for (const std::string& text : hostileTexts()) {
      testing::TunableOverride value(env, text);
      const std::string shown = text.size() > 20 ? "<1 MiB>" : "'" + text + "'";
      EXPECT_EQ(communicatorSurvives(env), "") << env << "=" << shown;
    }
  }
}

}  // namespace
}  // namespace boostcomm
