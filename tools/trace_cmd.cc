// `boostcomm trace analyze DIR`: reads the flight-recorder dumps of every rank
// (rank-N.json and rank-N.K.json, written to BOOSTCOMM_TRACE_DIR at a stall,
// mismatch, deadline, peer exit or signal; schema in docs/RELIABILITY.md)
// and names the first collective where the ranks diverge — different calls
// at one sequence number, or a call some ranks never started (the missing
// ranks) — with each rank's Python stack of that call where it was made
// from Python.
//
// Several dumps per rank. A rank may dump several times in one failure, and
// the later dumps are often less telling: rank 0 dumps at the stall while
// rank 1 is stopped before call 200, then again when rank 1, resumed, starts
// call 200 and exits ("peer exited": by then both ranks have started it).
// So the question "which ranks had not reached the call?" is asked at one
// moment, the moment of a fault dump (any reason but an on-demand "signal"):
//   - different calls at one sequence number are a divergence whenever they
//     were seen: every dump's entries of a rank are merged;
//   - a missing rank is judged at the first fault dump whose waiting call
//     never completed afterwards (the dumper's later dumps and entries say
//     whether it did): earlier ones were late ranks that caught up (a
//     transient stall), later ones saw the aftermath. At that moment each
//     rank's counters are the dumper's own, or for another rank the most
//     that any record at or before the moment shows (what the dumper saw of
//     it, other ranks' views, its own earlier dumps; counters only grow),
//     raised by what its first own dump after the moment reads back through
//     its entries' start times (the calls it had started by then).
//   - With no fault dump (only on-demand ones), each rank's latest dump.
// The files are read in any order and sorted by dump time, so the verdict
// does not depend on the order the dumps came in. Dumps of another process
// with the same rank (a directory reused across jobs) are skipped: per
// rank only the process that dumped last counts (its pid and its
// communicator's creation time: pids repeat across containers).
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
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
  std::uint64_t dumpedNs = 0;             // of the dump this entry was read from
  std::vector<std::string> pythonStack;  // innermost first ("file.py:12 in step"); empty: not from Python
};

struct Counters {
  std::uint64_t started = 0;    // sequence + 1 of the last call started
  std::uint64_t completed = 0;  // sequence + 1 of the last call completed
};

struct Dump {
  int rank = 0;
  std::string file;
  std::string reason;         // "stall", "peer exited", "signal", ...; empty: unknown
  std::uint64_t pid = 0;
  std::uint64_t createdNs = 0;  // when its communicator was created (0: older dumps)
  std::uint64_t number = 0;   // "dump": the process's k-th dump of this communicator (0: older dumps)
  std::uint64_t dumpedNs = 0;  // wall clock of the dump (0: unknown)
  Counters own;
  std::map<int, Counters> peers;  // as this rank saw them at the dump
  std::map<std::uint64_t, Call> calls;
  // "messages": the transport messages not complete at the dump, oldest
  // first, in words (absent in older dumps and in MPI-only jobs).
  std::vector<std::string> messages;
};

// A rank's dumps (one process's, oldest first) and every entry they hold.
struct RankHistory {
  std::vector<Dump> dumps;
  std::map<std::uint64_t, Call> calls;  // per sequence number, from the latest dump holding it
};

bool isFault(const Dump& d) { return !d.reason.empty() && d.reason != "signal"; }

bool earlier(const Dump& a, const Dump& b) {
  return a.dumpedNs != b.dumpedNs ? a.dumpedNs < b.dumpedNs : a.number < b.number;
}

// " via ring, in flight for 12.3 s" from the entry's fields (as known).
std::string timing(const Call& c) {
  std::string out;
  if (!c.algorithm.empty()) out += " via " + c.algorithm;
  if (c.startNs == 0) return out;
  char buf[96];
  if (c.endNs != 0) {
    std::snprintf(buf, sizeof buf, ", took %.3f s", static_cast<double>(c.endNs - c.startNs) / 1e9);
    out += buf;
  } else if (c.dumpedNs >= c.startNs) {
    std::snprintf(buf, sizeof buf, ", in flight for %.1f s at the dump",
                  static_cast<double>(c.dumpedNs - c.startNs) / 1e9);
    out += buf;
  }
  return out;
}

std::string lastCall(const std::map<std::uint64_t, Call>& calls, std::uint64_t seqPlusOne) {
  if (seqPlusOne == 0) return "none";
  auto it = calls.find(seqPlusOne - 1);
  std::string out = "seq " + std::to_string(seqPlusOne - 1);
  if (it != calls.end()) out += " (" + it->second.call + timing(it->second) + ")";
  return out;
}

std::string list(const std::set<int>& s) {
  std::string out;
  for (int r : s) out += (out.empty() ? "" : ", ") + std::to_string(r);
  return "{" + out + "}";
}

std::optional<Dump> readDump(const std::filesystem::path& path) {
  std::ifstream in(path);
  nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.contains("rank")) {
    std::fprintf(stderr, "boostcomm: warning: %s is not a flight record; skipped\n", path.c_str());
    return std::nullopt;
  }
  Dump d;
  d.rank = j["rank"].get<int>();
  d.file = path.filename().string();
  d.reason = j.value("reason", std::string());
  d.pid = j.value("pid", 0ULL);
  d.createdNs = j.value("created_ns", 0ULL);
  d.number = j.value("dump", 0ULL);
  d.dumpedNs = j.value("dumped_ns", 0ULL);
  d.own = {j.value("started", 0ULL), j.value("completed", 0ULL)};
  for (const auto& p : j.value("peers", nlohmann::json::array()))
    d.peers[p["rank"].get<int>()] = {p.value("started", 0ULL), p.value("completed", 0ULL)};
  for (const auto& m : j.value("messages", nlohmann::json::array())) {
    const int peer = m.value("peer", -1);
    d.messages.push_back(m.value("kind", std::string("?")) + (m.value("kind", std::string()) == "send" ? " to " : " from ") +
                         (peer < 0 ? std::string("any rank") : "rank " + std::to_string(peer)) + " tag " +
                         std::to_string(m.value("tag", 0)) + " (" + std::to_string(m.value("bytes", 0ULL)) + " B, " +
                         m.value("state", std::string("?")) + ", posted " + std::to_string(m.value("age_ms", 0LL)) +
                         " ms before the dump; " + m.value("transport", std::string("?")) + ")");
  }
  for (const auto& e : j.value("entries", nlohmann::json::array())) {
    Call& c = d.calls[e["seq"].get<std::uint64_t>()];
    c.call = e["call"].get<std::string>();
    c.algorithm = e.value("algorithm", std::string());
    c.state = e.value("state", std::string());
    c.startNs = e.value("start_ns", 0ULL);
    c.endNs = e.value("end_ns", 0ULL);
    c.dumpedNs = d.dumpedNs;
    for (const auto& frame : e.value("python_stack", nlohmann::json::array()))
      c.pythonStack.push_back(frame.get<std::string>());
  }
  return d;
}

// Every rank's dumps in `dir`, of one communicator per rank: the one that
// dumped last (a process: pid and creation time).
std::map<int, RankHistory> readDumps(const std::string& dir) {
  std::map<int, std::vector<Dump>> all;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("rank-", 0) != 0 || entry.path().extension() != ".json") continue;
    if (std::optional<Dump> d = readDump(entry.path())) all[d->rank].push_back(std::move(*d));
  }
  std::map<int, RankHistory> ranks;
  for (auto& [rank, dumps] : all) {
    std::sort(dumps.begin(), dumps.end(), earlier);
    const std::uint64_t pid = dumps.back().pid;
    const std::uint64_t createdNs = dumps.back().createdNs;
    RankHistory& h = ranks[rank];
    std::size_t skipped = 0;
    for (Dump& d : dumps) {
      if (d.pid != pid || d.createdNs != createdNs) {
        ++skipped;
        continue;
      }
      for (const auto& [seq, call] : d.calls) h.calls[seq] = call;
      h.dumps.push_back(std::move(d));
    }
    if (skipped != 0)
      std::printf("rank %d: %zu dump(s) of another process skipped (an earlier job in the same directory?); those "
                  "of pid %llu, which dumped last, are used\n",
                  rank, skipped, static_cast<unsigned long long>(pid));
  }
  return ranks;
}

Counters atLeast(const Counters& x, const Counters& y) {
  return {std::max(x.started, y.started), std::max(x.completed, y.completed)};
}

// What rank r's dump `after`, taken after wall time t, says r had started
// and completed by t: its entries' start and end times. Calls older than the
// ring's first entry started before that entry did: by t at most. Nothing
// for dumps without times (older formats).
std::optional<Counters> readBack(const Dump& after, std::uint64_t t) {
  if (after.calls.empty() ||
      std::any_of(after.calls.begin(), after.calls.end(), [](const auto& e) { return e.second.startNs == 0; }))
    return std::nullopt;
  Counters c{after.calls.begin()->first, 0};
  for (const auto& [seq, call] : after.calls) {
    if (call.startNs <= t) c.started = seq + 1;
    if (call.endNs != 0 && call.endNs <= t) c.completed = seq + 1;
  }
  c.started = std::min(c.started, after.own.started);
  c.completed = std::min({c.completed, after.own.completed, c.started});
  return c;
}

// Every known rank's counters at one moment.
using Snapshot = std::map<int, Counters>;

// At fault dump `d` of rank `a` (wall time t): a's own counters; for every
// other rank the most that any record at or before t shows (what a saw of
// it at t, what other ranks saw of it earlier, its own earlier dumps: each
// a lower bound, counters only grow), raised by what its first own dump
// after t reads back through its entries' times. A rank known only from
// records after t gets the earliest of them.
Snapshot snapshotAt(const std::map<int, RankHistory>& ranks, const std::set<int>& known, int a, const Dump& d) {
  const std::uint64_t t = d.dumpedNs;
  Snapshot s;
  for (int r : known) {
    if (r == a) {
      s[r] = d.own;
      continue;
    }
    std::optional<Counters> seen;
    auto raise = [&seen](const Counters& c) { seen = seen ? atLeast(*seen, c) : c; };
    const Dump* firstAfter = nullptr;   // the earliest record of r after t
    const Dump* ownAfter = nullptr;     // r's own first dump after t
    for (const auto& [rank, h] : ranks) {
      for (const Dump& e : h.dumps) {
        const bool own = rank == r;
        if (!own && e.peers.count(r) == 0) continue;
        if (e.dumpedNs <= t) {
          raise(own ? e.own : e.peers.at(r));
        } else {
          if (firstAfter == nullptr || e.dumpedNs < firstAfter->dumpedNs) firstAfter = &e;
          if (own && ownAfter == nullptr) ownAfter = &e;
        }
      }
    }
    if (ownAfter != nullptr) {
      if (std::optional<Counters> back = readBack(*ownAfter, t)) raise(*back);
    }
    if (!seen && firstAfter != nullptr) raise(firstAfter->peers.count(r) ? firstAfter->peers.at(r) : firstAfter->own);
    if (seen) s[r] = *seen;
  }
  return s;
}

// Each rank's latest dump (peers' latest views for ranks that did not dump).
Snapshot latestSnapshot(const std::map<int, RankHistory>& ranks) {
  Snapshot s;
  std::map<int, std::uint64_t> seenAt;
  for (const auto& [rank, h] : ranks) {
    s[rank] = h.dumps.back().own;
    for (const Dump& d : h.dumps) {
      for (const auto& [r, c] : d.peers) {
        if (ranks.count(r) != 0 || (seenAt.count(r) != 0 && seenAt[r] > d.dumpedNs)) continue;
        s[r] = c;
        seenAt[r] = d.dumpedNs;
      }
    }
  }
  return s;
}

struct Missing {
  std::uint64_t seq = 0;
  std::set<int> ranks;
};

// The first call not every rank had started, and who had not.
std::optional<Missing> missingIn(const Snapshot& s) {
  std::uint64_t lo = UINT64_MAX;
  std::uint64_t hi = 0;
  for (const auto& [r, c] : s) {
    lo = std::min(lo, c.started);
    hi = std::max(hi, c.started);
  }
  if (s.empty() || lo >= hi) return std::nullopt;
  Missing m{lo, {}};
  for (const auto& [r, c] : s) {
    if (c.started == lo) m.ranks.insert(r);
  }
  return m;
}

// Did the call rank `a` waited in at dump `d` complete later?
bool waitEnded(const RankHistory& h, const Dump& d) {
  if (d.own.started <= d.own.completed) return false;  // not waiting: nothing to end
  const std::uint64_t waiting = d.own.completed;       // its sequence number
  for (const Dump& later : h.dumps) {
    if (later.own.completed > waiting) return true;
  }
  auto it = h.calls.find(waiting);
  return it != h.calls.end() && it->second.endNs != 0;
}

// "rank 0's stall dump (rank-0.json)"
std::string describeDump(const Dump& d) {
  return "rank " + std::to_string(d.rank) + "'s " + d.reason + " dump (" + d.file + ")";
}

// Every rank a record names (its own or a peer's view), with a line per rank
// that wrote none and one per rank that did.
std::set<int> printRanks(const std::map<int, RankHistory>& ranks, const std::string& dir) {
  std::set<int> known;
  for (const auto& [rank, h] : ranks) {
    known.insert(rank);
    for (const Dump& d : h.dumps) {
      for (const auto& [r, c] : d.peers) known.insert(r);
    }
  }
  for (int r : known) {
    if (ranks.count(r) == 0)
      std::printf("rank %d wrote no flight record (stopped, killed or still waiting); its counters as other ranks saw "
                  "them (node peers, control-channel answers) are used\n", r);
  }
  std::printf("flight records of %zu rank(s) in %s\n", known.size(), dir.c_str());
  for (const auto& [rank, h] : ranks) {
    std::string reasons;
    for (const Dump& d : h.dumps) reasons += (reasons.empty() ? "" : ", ") + (d.reason.empty() ? "?" : d.reason);
    std::printf("  rank %d (dumped at %s): last started %s, last completed %s\n", rank, reasons.c_str(),
                lastCall(h.calls, h.dumps.back().own.started).c_str(),
                lastCall(h.calls, h.dumps.back().own.completed).c_str());
  }
  return known;
}

// The moment the ranks are judged at, and who was missing then.
struct Judgement {
  std::optional<Missing> missing;
  std::string moment;
  Snapshot snapshot;
};

Judgement judge(const std::map<int, RankHistory>& ranks, const std::set<int>& known) {
  // The moment a missing rank is judged at (see the top of the file).
  std::vector<std::pair<int, const Dump*>> faults;
  for (const auto& [rank, h] : ranks) {
    for (const Dump& d : h.dumps) {
      if (isFault(d)) faults.emplace_back(rank, &d);
    }
  }
  std::sort(faults.begin(), faults.end(), [](const auto& x, const auto& y) {
    return earlier(*x.second, *y.second) || (!earlier(*y.second, *x.second) && x.first < y.first);
  });
  Judgement j;
  for (const auto& [rank, d] : faults) {
    const Snapshot s = snapshotAt(ranks, known, rank, *d);
    std::optional<Missing> m = missingIn(s);
    if (!m) continue;
    if (waitEnded(ranks.at(rank), *d)) {
      std::printf("at %s, rank(s) %s had not started seq %llu; rank %d's call completed later (late, not the "
                  "failure)\n", describeDump(*d).c_str(), list(m->ranks).c_str(),
                  static_cast<unsigned long long>(m->seq), rank);
      continue;
    }
    j.missing = m;
    j.snapshot = s;
    j.moment = "at " + describeDump(*d) + ", the first fault dump whose waiting call never completed";
    break;
  }
  if (faults.empty()) {
    j.snapshot = latestSnapshot(ranks);
    j.missing = missingIn(j.snapshot);
    j.moment = "at each rank's latest dump (no fault dumps: on-demand ones only)";
  }
  return j;
}

// Each rank's view of one sequence number: state, algorithm, timing
// (`late`: ranks that started it only after the moment judged at).
void printEntries(const std::map<int, RankHistory>& ranks, std::uint64_t seq, const std::set<int>& late) {
  for (const auto& [rank, h] : ranks) {
    auto it = h.calls.find(seq);
    if (it == h.calls.end()) continue;
    const bool timed = it->second.startNs != 0;  // timing() then says completed or in flight
    std::printf("  rank %d: %s%s%s%s%s\n", rank, it->second.call.c_str(),
                timed || it->second.state.empty() ? "" : ", ", timed ? "" : it->second.state.c_str(),
                timing(it->second).c_str(), late.count(rank) != 0 ? " (started after that dump)" : "");
    if (!it->second.pythonStack.empty()) std::printf("    python stack (innermost first):\n");
    for (const std::string& frame : it->second.pythonStack) std::printf("      %s\n", frame.c_str());
  }
}

// The first sequence number where two ranks' calls differ, whenever seen
// (up to the missing one, which comes first); false when none does.
bool printFirstDivergence(const std::map<int, RankHistory>& ranks, const std::optional<Missing>& missing) {
  std::set<std::uint64_t> seqs;
  for (const auto& [rank, h] : ranks) {
    for (const auto& [seq, call] : h.calls) seqs.insert(seq);
  }
  for (std::uint64_t seq : seqs) {
    if (missing && seq > missing->seq) break;  // the missing rank comes first
    std::map<std::string, std::set<int>> byCall;
    for (const auto& [rank, h] : ranks) {
      if (auto it = h.calls.find(seq); it != h.calls.end()) byCall[it->second.call].insert(rank);
    }
    if (byCall.size() > 1) {
      std::printf("first divergent collective: seq %llu\n", static_cast<unsigned long long>(seq));
      for (const auto& [call, who] : byCall) std::printf("  ranks %s: %s\n", list(who).c_str(), call.c_str());
      printEntries(ranks, seq, {});
      return true;
    }
  }
  return false;
}

void printMissing(const std::map<int, RankHistory>& ranks, const Judgement& j) {
  // Each rank's entries, merged over its dumps (ranks that did not dump have none).
  static const std::map<std::uint64_t, Call> kNoCalls;
  auto callsOf = [&](int r) -> const std::map<std::uint64_t, Call>& {
    auto it = ranks.find(r);
    return it == ranks.end() ? kNoCalls : it->second.calls;
  };
  std::printf("%s:\n", j.moment.c_str());
  for (const auto& [r, c] : j.snapshot) {
    std::printf("  rank %d: last started %s, last completed %s\n", r, lastCall(callsOf(r), c.started).c_str(),
                lastCall(callsOf(r), c.completed).c_str());
  }
  std::string call = "?";
  for (const auto& [rank, h] : ranks) {
    if (auto it = h.calls.find(j.missing->seq); it != h.calls.end()) {
      call = it->second.call;
      break;
    }
  }
  std::printf("first collective not reached by every rank: seq %llu (%s)\n  missing ranks: %s\n",
              static_cast<unsigned long long>(j.missing->seq), call.c_str(), list(j.missing->ranks).c_str());
  printEntries(ranks, j.missing->seq, j.missing->ranks);
}

// What each rank's latest dump says its transports still waited on: a hang
// where every rank made the same calls is decided below the calls.
void printMessages(const std::map<int, RankHistory>& ranks) {
  constexpr std::size_t kShown = 3;
  bool header = false;
  for (const auto& [rank, h] : ranks) {
    if (h.dumps.empty() || h.dumps.back().messages.empty()) continue;
    const Dump& d = h.dumps.back();
    if (!header) std::printf("transport messages not complete at each rank's latest dump (oldest first):\n");
    header = true;
    std::printf("  rank %d (%s): %zu\n", rank, d.file.c_str(), d.messages.size());
    for (std::size_t i = 0; i < d.messages.size() && i < kShown; ++i) std::printf("    %s\n", d.messages[i].c_str());
    if (d.messages.size() > kShown) std::printf("    ... %zu more\n", d.messages.size() - kShown);
  }
}

int analyze(const std::string& dir) {
  const std::map<int, RankHistory> ranks = readDumps(dir);
  if (ranks.empty()) throw UsageError("no flight records (rank-N.json) in " + dir);
  const std::set<int> known = printRanks(ranks, dir);
  const Judgement j = judge(ranks, known);
  if (printFirstDivergence(ranks, j.missing)) {
    printMessages(ranks);
    return 0;
  }
  if (j.missing) {
    printMissing(ranks, j);
  } else {
    std::printf("no divergence: every rank started the same collectives\n");
  }
  printMessages(ranks);
  return 0;
}

}  // namespace

ExtraCommand addTraceCommand(CLI::App& app) {
  auto dir = std::make_shared<std::string>();
  ExtraCommand c;
  c.app = app.add_subcommand("trace", "Flight records: `trace analyze DIR` names the first divergent collective");
  CLI::App* analyzeCmd = c.app->add_subcommand("analyze", "Compare the rank-N.json / rank-N.K.json dumps in DIR");
  analyzeCmd->add_option("dir", *dir, "BOOSTCOMM_TRACE_DIR of the job")->required();
  c.app->require_subcommand(1);
  c.needsMpi = false;
  c.run = [dir](Communicator*) { return analyze(*dir); };
  return c;
}

}  // namespace boostcomm::tools
