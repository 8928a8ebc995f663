// Timeline: a Chrome-trace ("Trace Event Format") file of what one rank did,
// for Perfetto (ui.perfetto.dev) or chrome://tracing.
//
// File layout, chosen so that an interrupted run leaves a loadable file:
// the JSON *array* form of the format, one event per line, the separating
// comma at the start of the next event's line:
//     [
//     {"name":"process_name","ph":"M",...}
//     ,{"name":"allreduce b3","ph":"X","ts":...,"dur":...,"args":{...}}
//     ]
// Writes go out in whole events, so a file cut off between two flushes lacks
// only the closing "]", which the Trace Event Format explicitly allows for the
// array form (it exists for traces of processes that may not exit cleanly);
// Horovod's timeline relies on the same rule. A file cut in the middle of a
// line (disk full, kill during write) is repaired by readTrace(), which drops
// the partial last event. Rejected: the {"traceEvents":[...]} object form;
// a truncated object is not valid anywhere.
//
// Bounded size: after `maxEvents / 2` events the file is closed and renamed
// to <stem>.old.json (replacing the previous one) and a fresh file started, so
// the latest events are kept (what one wants when a long run hangs) and
// disk use stays under maxEvents events in two valid files.
//
// Thread-safe: the engine's thread and the caller's thread both record.
// Events are buffered and flushed every flushBytes and at flush() (the
// engine flushes at the end of each step).
#pragma once

#include <cstddef>
#include <cstdio>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "telemetry/run_info.h"

namespace boostcomm::telemetry {

// Microseconds since the Unix epoch: the steady clock, anchored once per
// process to the wall clock. Monotonic within a process (so durations are
// exact), and ranks on one host (or NTP-synchronised hosts) share the origin,
// so per-rank files merge by concatenation. A double holds today's ~1.8e15 us
// to 0.25 us.
double nowUs();

struct TimelineOptions {
  std::string path;
  int pid = 0;  // the rank
  std::size_t maxEvents = 200000;
  std::size_t flushBytes = 64u << 10;
};

class Timeline {
 public:
  // Throws Error{kInvalidArgument} naming the path when it cannot be opened.
  explicit Timeline(TimelineOptions options);
  ~Timeline();  // close()
  Timeline(const Timeline&) = delete;
  Timeline& operator=(const Timeline&) = delete;

  void nameProcess(std::string_view name);
  void nameThread(int tid, std::string_view name);
  // Where the trace came from: a "process_labels" metadata event (viewers
  // show args.labels next to the process) whose args also carry the RunInfo
  // fields, for charts (python3 -m boostcomm.plot) to title the timeline.
  void labelProcess(const RunInfo& info);
  // A complete event ("ph":"X"): [startUs, startUs + durationUs) on thread tid.
  void complete(std::string_view name, std::string_view category, int tid, double startUs, double durationUs,
                nlohmann::json args = nullptr);
  // A counter event ("ph":"C"): viewers draw each numeric field of `values`
  // as a track named `name` (e.g. link bytes per level per step).
  void counter(std::string_view name, double tsUs, nlohmann::json values);
  void flush();
  void close();  // writes the closing "]"; idempotent
  const std::string& path() const { return options_.path; }
  std::size_t eventsWritten() const { return totalEvents_; }

 private:
  // A timed event (complete, counter): rotates the file when it is full.
  void appendEvent(const nlohmann::json& event);
  void appendLocked(const nlohmann::json& event);
  void openLocked();
  void flushLocked();
  void rotateLocked();

  TimelineOptions options_;
  std::mutex mutex_;
  std::FILE* file_ = nullptr;
  std::string buffer_;
  std::size_t eventsInFile_ = 0;
  std::size_t totalEvents_ = 0;
  std::vector<nlohmann::json> metadata_;  // repeated at the top of every rotated file
};

// The per-rank path for `path`: "{rank}" replaced by the rank; else, with
// several ranks, ".rank<N>" inserted before a ".json" suffix (or appended).
std::string rankTimelinePath(const std::string& path, int rank, int size);
// <stem>.old.json for a.json; path + ".old" otherwise.
std::string rotatedTimelinePath(const std::string& path);

struct TraceFile {
  std::vector<nlohmann::json> events;
  bool complete = false;         // ended with "]"
  std::size_t droppedBytes = 0;  // partial last event removed by the repair
};

// Reads a timeline written by Timeline (or any JSON-array trace, one event
// per line), tolerating a missing "]" and a cut-off last line. Throws
// Error{kInvalidArgument} naming the file and line for anything else.
TraceFile readTrace(const std::string& path);

// Merges per-rank traces (each pid = its rank) into one array-form file.
void mergeTraces(const std::vector<std::string>& inputs, const std::string& output);

}  // namespace boostcomm::telemetry
