// What produced a results file: the command line, the host and the time.
// Written into the tools' JSON ("meta") and into timelines (a process_labels
// event), so a chart drawn from the file later (python3 -m boostcomm.plot)
// can say where its numbers came from without the reader's memory.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace boostcomm::telemetry {

struct RunInfo {
  std::string command;   // this process's argv, shell-quoted where needed; "" when unknown
  std::string hostname;  // "unknown" when gethostname fails
  std::string date;      // now, ISO 8601 UTC ("2025-01-31T12:00:00Z")
};

// Read now: the command from /proc/self/cmdline (Linux; the same argv main()
// saw, so every program that links boostcomm gets it without passing argv).
RunInfo currentRunInfo();

// {"command": ..., "hostname": ..., "date": ...}
nlohmann::json toJson(const RunInfo& info);

// "a b 'c d'": an argument with characters a shell would split or expand is
// single-quoted, so the command can be pasted back.
std::string shellJoin(const std::vector<std::string>& args);

}  // namespace boostcomm::telemetry
