// Chrome-trace timeline writer and reader; format and rotation rules in timeline.h.
#include "telemetry/timeline.h"

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "core/check.h"

namespace boostcomm::telemetry {

namespace {

struct ClockAnchor {
  std::chrono::steady_clock::time_point steady = std::chrono::steady_clock::now();
  double systemUs = std::chrono::duration<double, std::micro>(std::chrono::system_clock::now().time_since_epoch()).count();
};

const ClockAnchor& anchor() {
  static const ClockAnchor a;
  return a;
}

bool endsWith(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

double nowUs() {
  const ClockAnchor& a = anchor();
  return a.systemUs + std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - a.steady).count();
}

std::string rankTimelinePath(const std::string& path, int rank, int size) {
  if (const auto at = path.find("{rank}"); at != std::string::npos) {
    std::string out = path;
    out.replace(at, 6, std::to_string(rank));
    return out;
  }
  if (size <= 1) return path;
  const std::string tag = ".rank" + std::to_string(rank);
  if (endsWith(path, ".json")) return path.substr(0, path.size() - 5) + tag + ".json";
  return path + tag;
}

std::string rotatedTimelinePath(const std::string& path) {
  if (endsWith(path, ".json")) return path.substr(0, path.size() - 5) + ".old.json";
  return path + ".old";
}

Timeline::Timeline(TimelineOptions options) : options_(std::move(options)) {
  BC_INVALID(!options_.path.empty(), options_.pid, "Timeline: path is empty");
  BC_INVALID(options_.maxEvents >= 2, options_.pid, "Timeline: maxEvents " << options_.maxEvents << " is below 2");
  std::lock_guard lock(mutex_);
  openLocked();
}

Timeline::~Timeline() { close(); }

void Timeline::openLocked() {
  file_ = std::fopen(options_.path.c_str(), "w");
  BC_INVALID(file_ != nullptr, options_.pid, "Timeline: cannot open '" << options_.path << "' for writing");
  buffer_ = "[";
  eventsInFile_ = 0;
  // Every file names its process and threads, so either half of a rotated
  // pair reads on its own.
  for (const nlohmann::json& m : metadata_) appendLocked(m);
  flushLocked();
}

void Timeline::appendLocked(const nlohmann::json& event) {
  buffer_ += eventsInFile_ == 0 ? "\n" : "\n,";
  buffer_ += event.dump();
  ++eventsInFile_;
}

void Timeline::flushLocked() {
  if (file_ == nullptr || buffer_.empty()) return;
  std::fwrite(buffer_.data(), 1, buffer_.size(), file_);
  std::fflush(file_);
  buffer_.clear();
}

void Timeline::rotateLocked() {
  buffer_ += "\n]\n";
  flushLocked();
  std::fclose(file_);
  file_ = nullptr;
  std::rename(options_.path.c_str(), rotatedTimelinePath(options_.path).c_str());
  openLocked();
}

void Timeline::nameProcess(std::string_view name) {
  nlohmann::json m = {{"name", "process_name"}, {"ph", "M"}, {"pid", options_.pid}, {"tid", 0},
                      {"args", {{"name", name}}}};
  std::lock_guard lock(mutex_);
  if (file_ == nullptr) return;
  metadata_.push_back(m);
  appendLocked(m);
}

void Timeline::nameThread(int tid, std::string_view name) {
  nlohmann::json m = {{"name", "thread_name"}, {"ph", "M"}, {"pid", options_.pid}, {"tid", tid},
                      {"args", {{"name", name}}}};
  std::lock_guard lock(mutex_);
  if (file_ == nullptr) return;
  metadata_.push_back(m);
  appendLocked(m);
}

void Timeline::labelProcess(const RunInfo& info) {
  nlohmann::json args = toJson(info);
  args["labels"] = info.command + " (" + info.hostname + ", " + info.date + ")";
  nlohmann::json m = {{"name", "process_labels"}, {"ph", "M"}, {"pid", options_.pid}, {"tid", 0}, {"args", args}};
  std::lock_guard lock(mutex_);
  if (file_ == nullptr) return;
  metadata_.push_back(m);
  appendLocked(m);
}

void Timeline::appendEvent(const nlohmann::json& event) {
  std::lock_guard lock(mutex_);
  if (file_ == nullptr) return;
  if (eventsInFile_ >= options_.maxEvents / 2 + metadata_.size()) rotateLocked();
  appendLocked(event);
  ++totalEvents_;
  if (buffer_.size() >= options_.flushBytes) flushLocked();
}

void Timeline::complete(std::string_view name, std::string_view category, int tid, double startUs, double durationUs,
                        nlohmann::json args) {
  nlohmann::json e = {{"name", name}, {"cat", category}, {"ph", "X"}, {"pid", options_.pid}, {"tid", tid},
                      {"ts", startUs}, {"dur", durationUs < 0 ? 0.0 : durationUs}};
  if (!args.is_null()) e["args"] = std::move(args);
  appendEvent(e);
}

void Timeline::counter(std::string_view name, double tsUs, nlohmann::json values) {
  nlohmann::json e = {{"name", name}, {"ph", "C"}, {"pid", options_.pid}, {"ts", tsUs}, {"args", std::move(values)}};
  appendEvent(e);
}

void Timeline::flush() {
  std::lock_guard lock(mutex_);
  flushLocked();
}

void Timeline::close() {
  std::lock_guard lock(mutex_);
  if (file_ == nullptr) return;
  buffer_ += "\n]\n";
  flushLocked();
  std::fclose(file_);
  file_ = nullptr;
}

TraceFile readTrace(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  BC_INVALID(in.good(), -1, "readTrace: cannot open '" << path << "'");
  std::stringstream text;
  text << in.rdbuf();
  const std::string all = text.str();
  TraceFile out;
  // Line by line: "[" first, then one event per line (the comma before it),
  // then "]". A parse failure is only forgiven on the last line, where an
  // interrupted write leaves a partial event.
  std::size_t lineStart = 0;
  std::size_t lineNo = 0;
  bool opened = false;
  while (lineStart < all.size()) {
    std::size_t lineEnd = all.find('\n', lineStart);
    const bool last = lineEnd == std::string::npos;
    if (last) lineEnd = all.size();
    std::string_view line(all.data() + lineStart, lineEnd - lineStart);
    ++lineNo;
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.remove_suffix(1);
    if (!opened) {
      BC_INVALID(!line.empty() && line.front() == '[', -1,
                 "readTrace: '" << path << "' line " << lineNo << " does not open a JSON array");
      line.remove_prefix(1);
      opened = true;
    }
    if (!line.empty() && line.front() == ',') line.remove_prefix(1);
    if (line == "]") {
      out.complete = true;
    } else if (!line.empty()) {
      nlohmann::json event = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
      const bool bad = event.is_discarded() || !event.is_object();
      if (bad && (last || all.find_first_not_of(" \r\n", lineEnd) == std::string::npos)) {
        out.droppedBytes = line.size();
      } else {
        BC_INVALID(!bad, -1, "readTrace: '" << path << "' line " << lineNo << " is not a trace event");
        out.events.push_back(std::move(event));
      }
    }
    lineStart = lineEnd + 1;
  }
  BC_INVALID(opened, -1, "readTrace: '" << path << "' is empty");
  return out;
}

void mergeTraces(const std::vector<std::string>& inputs, const std::string& output) {
  BC_INVALID(!inputs.empty(), -1, "mergeTraces: no input files");
  std::ofstream out(output, std::ios::binary | std::ios::trunc);
  BC_INVALID(out.good(), -1, "mergeTraces: cannot open '" << output << "' for writing");
  out << "[";
  bool first = true;
  for (const std::string& input : inputs) {
    for (const nlohmann::json& event : readTrace(input).events) {
      out << (first ? "\n" : "\n,") << event.dump();
      first = false;
    }
  }
  out << "\n]\n";
  BC_INVALID(out.good(), -1, "mergeTraces: write to '" << output << "' failed");
}

}  // namespace boostcomm::telemetry
