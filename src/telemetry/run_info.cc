// Provenance of results files; see run_info.h.
#include "telemetry/run_info.h"

#include <unistd.h>

#include <ctime>
#include <fstream>
#include <iterator>
#include <string_view>
#include <vector>

namespace boostcomm::telemetry {

namespace {

std::vector<std::string> processArgs() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  const std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> args;
  std::string current;
  for (char c : all) {
    if (c == '\0') {
      args.push_back(current);
      current.clear();
    } else {
      current += c;
    }
  }
  if (!current.empty()) args.push_back(current);
  return args;
}

bool needsQuotes(const std::string& arg) {
  if (arg.empty()) return true;
  for (char c : arg) {
    const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                       std::string_view("-_./=:,+@%").find(c) != std::string_view::npos;
    if (!plain) return true;
  }
  return false;
}

}  // namespace

std::string shellJoin(const std::vector<std::string>& args) {
  std::string out;
  for (const std::string& arg : args) {
    if (!out.empty()) out += ' ';
    if (!needsQuotes(arg)) {
      out += arg;
      continue;
    }
    out += '\'';
    for (char c : arg) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    out += '\'';
  }
  return out;
}

RunInfo currentRunInfo() {
  RunInfo info;
  info.command = shellJoin(processArgs());
  char name[256] = {};
  info.hostname = gethostname(name, sizeof name - 1) == 0 ? name : "unknown";
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
  info.date = text;
  return info;
}

nlohmann::json toJson(const RunInfo& info) {
  return {{"command", info.command}, {"hostname", info.hostname}, {"date", info.date}};
}

}  // namespace boostcomm::telemetry
