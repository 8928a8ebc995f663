// Timeline (Chrome trace) writer and reader, step statistics, and the
// engine's timeline: every file parses as JSON; a file cut off anywhere
// still reads (readTrace) with every complete event; rotation bounds the
// size; merge joins ranks.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>

#include "telemetry/run_info.h"
#include "telemetry/stats.h"
#include "telemetry/timeline.h"
#include "testing/inproc_group.h"
#include "unit/test_overlap_case.h"

namespace {

using namespace boostcomm;
namespace fs = std::filesystem;
namespace bt = boostcomm::testing;

// One directory per process, removed when the program exits.
struct TempDir {
  fs::path path = fs::temp_directory_path() / ("bc_timeline_" + std::to_string(::getpid()));
  TempDir() { fs::create_directories(path); }
  ~TempDir() {
    std::error_code ignored;
    fs::remove_all(path, ignored);
  }
};

std::string tempPath(const std::string& name) {
  static TempDir dir;
  return (dir.path / name).string();
}

std::string readAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void writeEvents(telemetry::Timeline& t, int count) {
  for (int i = 0; i < count; ++i) {
    t.complete("event " + std::to_string(i), "test", 1, 1000.0 + i, 2.5, {{"index", i}, {"name", "tensor\"" + std::to_string(i)}});
  }
}

TEST(Timeline, ClosedFileIsValidJson) {
  const std::string path = tempPath("closed.json");
  {
    telemetry::Timeline t({.path = path, .pid = 3});
    t.nameProcess("rank 3");
    t.nameThread(1, "engine");
    writeEvents(t, 50);
  }
  const nlohmann::json j = nlohmann::json::parse(readAll(path));
  ASSERT_TRUE(j.is_array());
  EXPECT_EQ(j.size(), 52u);
  const nlohmann::json& e = j.back();
  EXPECT_EQ(e["ph"], "X");
  EXPECT_EQ(e["pid"], 3);
  EXPECT_EQ(e["dur"], 2.5);
  EXPECT_EQ(e["args"]["index"], 49);
  const telemetry::TraceFile f = telemetry::readTrace(path);
  EXPECT_TRUE(f.complete);
  EXPECT_EQ(f.events.size(), 52u);
}

TEST(Timeline, InterruptedFileReadsAtEveryCutPoint) {
  // Flushed but never closed (the process died): no closing bracket.
  const std::string path = tempPath("open.json");
  telemetry::Timeline t({.path = path, .pid = 0});
  writeEvents(t, 20);
  t.flush();
  const std::string text = readAll(path);
  EXPECT_FALSE(nlohmann::json::accept(text));
  EXPECT_EQ(telemetry::readTrace(path).events.size(), 20u);
  // Appending "]" is all a strict parser needs: the file is a JSON array
  // missing only its end (what the Trace Event Format allows).
  EXPECT_EQ(nlohmann::json::parse(text + "]").size(), 20u);
  // A cut at any byte (a write interrupted mid-event) loses at most that event.
  const std::string cut = tempPath("cut.json");
  for (std::size_t at = 2; at <= text.size(); at += 7) {
    std::ofstream(cut, std::ios::binary | std::ios::trunc) << text.substr(0, at);
    const telemetry::TraceFile f = telemetry::readTrace(cut);
    const std::size_t complete = static_cast<std::size_t>(std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(at), '}')) / 3;
    EXPECT_GE(f.events.size() + 1, complete) << "cut at " << at;
    EXPECT_LE(f.events.size(), 20u);
    for (std::size_t i = 0; i < f.events.size(); ++i) EXPECT_EQ(f.events[i]["args"]["index"], i);
  }
  t.close();
}

TEST(Timeline, CorruptMiddleLineIsAnError) {
  const std::string path = tempPath("corrupt.json");
  std::ofstream(path) << "[\n{\"name\":\"a\",\"ph\":\"X\"}\n,{broken\n,{\"name\":\"b\",\"ph\":\"X\"}\n]\n";
  EXPECT_THROW(telemetry::readTrace(path), Error);
}

TEST(Timeline, RotationBoundsTheEventsKept) {
  const std::string path = tempPath("rotate.json");
  const std::string old = telemetry::rotatedTimelinePath(path);
  {
    telemetry::Timeline t({.path = path, .pid = 0, .maxEvents = 10});
    t.nameProcess("rank 0");
    writeEvents(t, 37);
  }
  const telemetry::TraceFile current = telemetry::readTrace(path);
  const telemetry::TraceFile previous = telemetry::readTrace(old);
  EXPECT_TRUE(current.complete);
  EXPECT_TRUE(previous.complete);
  // 37 events in files of 5: the last 2 here, the 5 before them in .old; each file names the process.
  EXPECT_EQ(current.events.size(), 1u + 2u);
  EXPECT_EQ(previous.events.size(), 1u + 5u);
  EXPECT_EQ(current.events.front()["name"], "process_name");
  EXPECT_EQ(current.events.back()["args"]["index"], 36);
  EXPECT_EQ(previous.events.back()["args"]["index"], 34);
  nlohmann::json parsed;
  EXPECT_NO_THROW(parsed = nlohmann::json::parse(readAll(path)));
  EXPECT_TRUE(parsed.is_array() || parsed.is_object());
}

TEST(Timeline, RankPathsAndMerge) {
  EXPECT_EQ(telemetry::rankTimelinePath("t.json", 1, 2), "t.rank1.json");
  EXPECT_EQ(telemetry::rankTimelinePath("t.json", 0, 1), "t.json");
  EXPECT_EQ(telemetry::rankTimelinePath("run{rank}/t.json", 3, 4), "run3/t.json");
  EXPECT_EQ(telemetry::rankTimelinePath("trace", 1, 2), "trace.rank1");
  EXPECT_EQ(telemetry::rotatedTimelinePath("t.json"), "t.old.json");
  const std::string a = tempPath("a.json");
  const std::string b = tempPath("b.json");
  {
    telemetry::Timeline ta({.path = a, .pid = 0});
    writeEvents(ta, 3);
    telemetry::Timeline tb({.path = b, .pid = 1});
    writeEvents(tb, 4);
    tb.flush();  // b is left unclosed until after the merge: merge reads it anyway
    ta.close();
    const std::string out = tempPath("merged.json");
    telemetry::mergeTraces({a, b}, out);
    const nlohmann::json j = nlohmann::json::parse(readAll(out));
    ASSERT_EQ(j.size(), 7u);
    EXPECT_EQ(j[0]["pid"], 0);
    EXPECT_EQ(j[6]["pid"], 1);
  }
}

TEST(Timeline, ProcessLabelsCarryTheRunInfo) {
  const telemetry::RunInfo info = telemetry::currentRunInfo();
  // This test binary's own command line, as main() got it.
  EXPECT_NE(info.command.find("test_"), std::string::npos) << info.command;
  EXPECT_FALSE(info.hostname.empty());
  ASSERT_EQ(info.date.size(), 20u) << info.date;  // 2025-01-31T12:00:00Z
  EXPECT_EQ(info.date[10], 'T');
  EXPECT_EQ(info.date.back(), 'Z');
  const std::string path = tempPath("labels.json");
  const std::string old = telemetry::rotatedTimelinePath(path);
  {
    telemetry::Timeline t({.path = path, .pid = 1, .maxEvents = 4});
    t.labelProcess({"prog --x 'a b'", "host1", "2025-01-31T12:00:00Z"});
    writeEvents(t, 5);  // rotates: both files must carry the labels
  }
  for (const std::string& file : {path, old}) {
    const telemetry::TraceFile f = telemetry::readTrace(file);
    ASSERT_FALSE(f.events.empty()) << file;
    const nlohmann::json& m = f.events.front();
    EXPECT_EQ(m["name"], "process_labels") << file;
    EXPECT_EQ(m["ph"], "M");
    EXPECT_EQ(m["pid"], 1);
    EXPECT_EQ(m["args"]["command"], "prog --x 'a b'");
    EXPECT_EQ(m["args"]["hostname"], "host1");
    EXPECT_EQ(m["args"]["labels"], "prog --x 'a b' (host1, 2025-01-31T12:00:00Z)");
  }
}

TEST(RunInfo, ShellJoinQuotesWhatAShellWouldSplit) {
  EXPECT_EQ(telemetry::shellJoin({"boostcomm", "bench", "-b", "8", "--output", "out/x.json"}),
            "boostcomm bench -b 8 --output out/x.json");
  EXPECT_EQ(telemetry::shellJoin({"a b", "", "it's", "$HOME"}), "'a b' '' 'it'\\''s' '$HOME'");
  EXPECT_EQ(telemetry::shellJoin({}), "");
}

TEST(Stats, UnionAndStepStats) {
  std::vector<telemetry::IntervalUs> some{{0, 10}, {5, 15}, {20, 30}, {21, 22}};
  EXPECT_DOUBLE_EQ(core::unionLength(some), 25.0);
  std::vector<telemetry::IntervalUs> none;
  EXPECT_DOUBLE_EQ(core::unionLength(none), 0.0);
  telemetry::StepTimes t;
  t.stepStartUs = 0;
  t.lastReadyUs = 100;
  t.waitStartUs = 100;
  t.waitEndUs = 110;
  t.comm = {{10, 30}, {40, 70}, {90, 110}};
  const OverlapStepStats s = telemetry::computeStepStats(t);
  EXPECT_DOUBLE_EQ(s.commSeconds, 70e-6);
  EXPECT_DOUBLE_EQ(s.exposedSeconds, 10e-6);
  EXPECT_DOUBLE_EQ(s.hiddenSeconds, 60e-6);
  EXPECT_NEAR(s.efficiency, 60.0 / 70.0, 1e-12);
  EXPECT_DOUBLE_EQ(s.computeSeconds, 100e-6);
  EXPECT_DOUBLE_EQ(s.stepSeconds, 110e-6);
  // Waiting longer than the communication took hides nothing (not a negative amount).
  t.waitEndUs = 200;
  EXPECT_DOUBLE_EQ(telemetry::computeStepStats(t).hiddenSeconds, 0.0);
  OverlapStats acc;
  telemetry::accumulate(acc, s);
  telemetry::accumulate(acc, telemetry::computeStepStats(t));
  EXPECT_EQ(acc.steps, 2u);
  EXPECT_DOUBLE_EQ(acc.mean.commSeconds, 70e-6);
  EXPECT_NEAR(acc.mean.efficiency, 30.0 / 70.0, 1e-12);
}

// Staging buffers (pingpong): packs and unpacks are on the timeline; with
// segment lists (the default) there are none to record.
class EngineTimeline : public ::testing::TestWithParam<BufferStrategy> {};

INSTANTIATE_TEST_SUITE_P(Buffers, EngineTimeline,
                         ::testing::Values(BufferStrategy::kPingPong, BufferStrategy::kSegmentList));

TEST_P(EngineTimeline, PerRankFilesHoldTheBuckets) {
  const bool staged = GetParam() != BufferStrategy::kSegmentList;
  const std::string pattern = tempPath(staged ? "engine{rank}.json" : "engine_list{rank}.json");
  std::mutex mutex;
  std::vector<std::size_t> buckets(2);
  detail::runInProcess(2, [&](Communicator& comm) {
    bt::GradientSet g = bt::makeGradients(bt::mixedCounts(), {DataType::kFloat32});
    OverlapOptions o;
    o.bufferStrategy = GetParam();
    o.bucketBytes = 16 << 10;
    o.firstBucketBytes = 4 << 10;
    o.timelinePath = pattern;
    const bt::StepsResult r = bt::runEngineSteps(comm, g, o, 2, true);
    EXPECT_EQ(r.failures, "");
    std::lock_guard lock(mutex);
    buckets[static_cast<std::size_t>(comm.rank())] = r.buckets;
  });
  for (int rank = 0; rank < 2; ++rank) {
    const std::string path = telemetry::rankTimelinePath(pattern, rank, 2);
    const nlohmann::json j = nlohmann::json::parse(readAll(path));
    std::size_t collectives = 0, packs = 0, unpacks = 0, fills = 0, waits = 0;
    for (const nlohmann::json& e : j) {
      if (e["ph"] == "M") continue;
      EXPECT_EQ(e["pid"], rank);
      const std::string cat = e["cat"];
      collectives += cat == "collective";
      packs += cat == "pack";
      unpacks += cat == "unpack";
      fills += cat == "fill";
      waits += cat == "wait";
      if (cat == "collective") {
        EXPECT_TRUE(e["args"].contains("bytes"));
        EXPECT_TRUE(e["args"].contains("first"));
      }
      if (cat == "pack") {
        EXPECT_EQ(std::string(e["name"]).rfind("pack grad", 0), 0u);
      }
    }
    EXPECT_EQ(collectives, 2 * buckets[static_cast<std::size_t>(rank)]);
    EXPECT_EQ(fills, 2 * buckets[static_cast<std::size_t>(rank)]);
    EXPECT_EQ(waits, 2u);
    if (staged) {
      EXPECT_GT(packs, 0u);
      EXPECT_GT(unpacks, 0u);
    } else {
      EXPECT_EQ(packs, 0u);
      EXPECT_EQ(unpacks, 0u);
    }
  }
}

}  // namespace
