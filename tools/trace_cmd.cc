// `boostcomm trace analyze DIR`: reads the flight-recorder dumps of every rank
// (rank-N.json, written to BOOSTCOMM_TRACE_DIR at a stall, mismatch or
// deadline; schema in docs/RELIABILITY.md) and names the first collective
// where the ranks diverge — different calls at one sequence number, or a
// call some ranks never started (the missing ranks) — with each rank's
// Python stack of that call where it was made from Python.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "cli_util.h"
#include "extra_commands.h"

namespace boostcomm::tools {

namespace {

struct Call {
  std::string call;       // "allreduce float32 x1000 sum"
  std::string algorithm;  // "ring" (older dumps: empty)
  std::string state;      // "completed" / "in flight"
  std::uint64_t startNs = 0;
  std::uint64_t endNs = 0;
  std::vector<std::string> pythonStack;  // innermost first ("file.py:12 in step"); empty: not from Python
};

struct RankDump {
  std::uint64_t started = 0;    // sequence + 1 of the last call started
  std::uint64_t completed = 0;  // sequence + 1 of the last call completed
  std::uint64_t dumpedNs = 0;   // wall clock of the dump (0: unknown)
  std::string reason;
  std::map<std::uint64_t, Call> calls;
};

// " via ring, in flight for 12.3 s" from the entry's fields (as known).
std::string timing(const RankDump& d, const Call& c) {
  std::string out;
  if (!c.algorithm.empty()) out += " via " + c.algorithm;
  if (c.startNs == 0) return out;
  char buf[96];
  if (c.endNs != 0) {
    std::snprintf(buf, sizeof buf, ", took %.3f s", static_cast<double>(c.endNs - c.startNs) / 1e9);
    out += buf;
  } else if (d.dumpedNs >= c.startNs) {
    std::snprintf(buf, sizeof buf, ", in flight for %.1f s at the dump", static_cast<double>(d.dumpedNs - c.startNs) / 1e9);
    out += buf;
  }
  return out;
}

std::string lastCall(const RankDump& d, std::uint64_t seqPlusOne) {
  if (seqPlusOne == 0) return "none";
  auto it = d.calls.find(seqPlusOne - 1);
  return "seq " + std::to_string(seqPlusOne - 1) +
         (it == d.calls.end() ? "" : " (" + it->second.call + timing(d, it->second) + ")");
}

int analyze(const std::string& dir) {
  std::map<int, RankDump> ranks;
  std::map<int, nlohmann::json> peers;  // what dumping ranks saw of their node's peers
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("rank-", 0) != 0 || entry.path().extension() != ".json") continue;
    std::ifstream in(entry.path());
    nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.contains("rank")) {
      std::fprintf(stderr, "boostcomm: warning: %s is not a flight record; skipped\n", entry.path().c_str());
      continue;
    }
    for (const auto& p : j.value("peers", nlohmann::json::array())) peers[p["rank"].get<int>()] = p;
    RankDump& d = ranks[j["rank"].get<int>()];
    d.started = j.value("started", 0ULL);
    d.completed = j.value("completed", 0ULL);
    d.dumpedNs = j.value("dumped_ns", 0ULL);
    d.reason = j.value("reason", std::string());
    for (const auto& e : j["entries"]) {
      Call& c = d.calls[e["seq"].get<std::uint64_t>()];
      c.call = e["call"].get<std::string>();
      c.algorithm = e.value("algorithm", std::string());
      c.state = e.value("state", std::string());
      c.startNs = e.value("start_ns", 0ULL);
      c.endNs = e.value("end_ns", 0ULL);
      for (const auto& frame : e.value("python_stack", nlohmann::json::array()))
        c.pythonStack.push_back(frame.get<std::string>());
    }
  }
  if (ranks.empty()) throw UsageError("no flight records (rank-N.json) in " + dir);
  // Ranks without a dump of their own, as their node's peers saw them.
  std::set<int> undumped;
  for (const auto& [rank, p] : peers) {
    if (ranks.count(rank) != 0) continue;
    undumped.insert(rank);
    RankDump& d = ranks[rank];
    d.started = p.value("started", 0ULL);
    d.completed = p.value("completed", 0ULL);
  }
  for (int r : undumped)
    std::printf("rank %d wrote no flight record (stopped, killed or still waiting); its counters as other ranks saw "
                "them (node peers, control-channel answers) are used\n", r);
  std::printf("flight records of %zu rank(s) in %s\n", ranks.size(), dir.c_str());
  for (const auto& [rank, d] : ranks) {
    std::printf("  rank %d%s%s%s: last started %s, last completed %s\n", rank, d.reason.empty() ? "" : " (dumped at ",
                d.reason.c_str(), d.reason.empty() ? "" : ")", lastCall(d, d.started).c_str(),
                lastCall(d, d.completed).c_str());
  }
  // Sequence numbers every dump still holds or should hold.
  std::uint64_t from = UINT64_MAX;
  std::uint64_t to = 0;
  for (const auto& [rank, d] : ranks) {
    if (!d.calls.empty()) from = std::min(from, d.calls.begin()->first);
    to = std::max(to, d.started);
  }
  // Each rank's view of one sequence number: state, algorithm, timing.
  auto printEntries = [&](std::uint64_t seq) {
    for (const auto& [rank, d] : ranks) {
      auto it = d.calls.find(seq);
      if (it == d.calls.end()) continue;
      const bool timed = it->second.startNs != 0;  // timing() then says completed or in flight
      std::printf("  rank %d: %s%s%s%s\n", rank, it->second.call.c_str(), timed || it->second.state.empty() ? "" : ", ",
                  timed ? "" : it->second.state.c_str(), timing(d, it->second).c_str());
      if (!it->second.pythonStack.empty()) std::printf("    python stack (innermost first):\n");
      for (const std::string& frame : it->second.pythonStack) std::printf("      %s\n", frame.c_str());
    }
  };
  for (std::uint64_t seq = from; seq < to; ++seq) {
    std::map<std::string, std::set<int>> byCall;
    std::set<int> missing;
    for (const auto& [rank, d] : ranks) {
      auto it = d.calls.find(seq);
      if (it != d.calls.end()) {
        byCall[it->second.call].insert(rank);
      } else if (d.started <= seq) {
        missing.insert(rank);
      }
    }
    auto list = [](const std::set<int>& s) {
      std::string out;
      for (int r : s) out += (out.empty() ? "" : ", ") + std::to_string(r);
      return "{" + out + "}";
    };
    if (byCall.size() > 1) {
      std::printf("first divergent collective: seq %llu\n", static_cast<unsigned long long>(seq));
      for (const auto& [call, who] : byCall) std::printf("  ranks %s: %s\n", list(who).c_str(), call.c_str());
      printEntries(seq);
      return 0;
    }
    if (!missing.empty()) {
      std::printf("first collective not reached by every rank: seq %llu (%s)\n  missing ranks: %s\n",
                  static_cast<unsigned long long>(seq), byCall.empty() ? "?" : byCall.begin()->first.c_str(),
                  list(missing).c_str());
      printEntries(seq);
      return 0;
    }
  }
  std::printf("no divergence: every rank started the same collectives\n");
  return 0;
}

}  // namespace

ExtraCommand addTraceCommand(CLI::App& app) {
  auto dir = std::make_shared<std::string>();
  ExtraCommand c;
  c.app = app.add_subcommand("trace", "Flight records: `trace analyze DIR` names the first divergent collective");
  CLI::App* analyzeCmd = c.app->add_subcommand("analyze", "Compare the rank-N.json dumps in DIR");
  analyzeCmd->add_option("dir", *dir, "BOOSTCOMM_TRACE_DIR of the job")->required();
  c.app->require_subcommand(1);
  c.needsMpi = false;
  c.run = [dir](Communicator*) { return analyze(*dir); };
  return c;
}

}  // namespace boostcomm::tools
