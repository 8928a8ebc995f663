#include "algorithms/selection.h"

#include <charconv>
#include <sstream>

#include "algorithms/registry.h"
#include "core/check.h"

namespace boostcomm::algorithms {
namespace {

constexpr std::size_t kKiB = 1024;
constexpr std::size_t kMiB = 1024 * kKiB;

std::vector<std::string_view> split(std::string_view text, char sep) {
  std::vector<std::string_view> parts;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t end = text.find(sep, start);
    const std::string_view part = text.substr(start, end == std::string_view::npos ? text.npos : end - start);
    if (!part.empty()) parts.push_back(part);
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  return parts;
}

std::string validNames(Collective coll) {
  std::string out;
  for (const std::string& n : algorithmNames(coll)) out += (out.empty() ? "" : ", ") + n;
  return out;
}

Collective collectiveOrThrow(std::string_view name, std::string_view setting) {
  auto coll = parseCollective(name);
  BC_INVALID(coll.has_value(), -1,
             setting << ": unknown collective '" << name
                     << "' (valid: allreduce, allgather, broadcast, reduce_scatter, barrier)");
  return *coll;
}

std::size_t parseBytes(std::string_view text, std::string_view context) {
  std::size_t value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  BC_INVALID(ec == std::errc() && ptr == text.data() + text.size(), -1,
             "BOOSTCOMM_SELECTION: '" << context << "' has a bad byte count '" << text << "'");
  return value;
}

}  // namespace

SelectionTable SelectionTable::builtIn(bool sharedMemory, std::string_view transport) {
  // Measured on 2 ranks, Open MPI 4.1.4 over shared memory (docs/PERFORMANCE_HISTORY.md §1-2,
  // 2026-11-29). Without a shared segment (several nodes, BOOSTCOMM_SHM=0):
  // MPI's own allreduce is within 0.85-1.05x of ring/rhd up to 16 MiB, so it
  // keeps them; from 32 MiB it mallocs a fresh temporary per call and pays
  // first-touch page faults (0.12-1.1 s per call here) while ring's persistent
  // scratch does not (6-15x faster).
  SelectionTable t;
  t.rules_[static_cast<int>(Collective::kAllreduce)] = {{0, 32 * kMiB - 1, "native"}, {32 * kMiB, kOpenEnd, "ring"}};
  // One node with a shared segment: shm beats MPI from 4 KiB up (1.35x at
  // 4 KiB, 4.6x at 8 KiB, 1.5-1.8x at 0.5-16 MiB, 25x at 64 MiB); below, MPI's
  // ~0.3 us latency wins (shm costs ~0.5 us of flag round trips).
  if (sharedMemory) {
    t.rules_[static_cast<int>(Collective::kAllreduce)] = {{0, 4 * kKiB - 1, "native"}, {4 * kKiB, kOpenEnd, "shm"}};
  }
  t.rules_[static_cast<int>(Collective::kAllgather)] = {{0, kOpenEnd, "native"}};
  t.rules_[static_cast<int>(Collective::kBroadcast)] = {{0, kOpenEnd, "native"}};
  t.rules_[static_cast<int>(Collective::kReduceScatter)] = {{0, kOpenEnd, "native"}};
  t.rules_[static_cast<int>(Collective::kBarrier)] = {{0, kOpenEnd, "native"}};
  // One node, MPI: the engine's allgather and reduce_scatter beat MPI's from
  // 256 KiB (total payload; 1.08-1.85x and 1.28-5.1x at 2-4 ranks), its
  // broadcast from 1 MiB (1.5-2.8x); below, MPI's is as fast or faster at 3-4
  // ranks (docs/PERFORMANCE_HISTORY.md section 21, stop 30).
  if (sharedMemory) {
    t.rules_[static_cast<int>(Collective::kAllgather)] = {{0, 256 * kKiB - 1, "native"}, {256 * kKiB, kOpenEnd, "shm"}};
    t.rules_[static_cast<int>(Collective::kBroadcast)] = {{0, kMiB - 1, "native"}, {kMiB, kOpenEnd, "shm"}};
    t.rules_[static_cast<int>(Collective::kReduceScatter)] = {{0, 256 * kKiB - 1, "native"},
                                                              {256 * kKiB, kOpenEnd, "shm"}};
  }
  // The store transport's natives are Gloo's collectives over TCP loopback
  // (tens of microseconds per message, run on its worker thread): on one
  // node shm wins at every size for every collective it has
  // (docs/PERF_TORCH.md). Barrier stays Gloo's.
  if (sharedMemory && transport == "gloo") {
    for (Collective c : {Collective::kAllreduce, Collective::kAllgather, Collective::kBroadcast,
                         Collective::kReduceScatter}) {
      t.rules_[static_cast<int>(c)] = {{0, kOpenEnd, "shm"}};
    }
  }
  t.resolve();
  return t;
}

void SelectionTable::resolve() {
  for (int c = 0; c < kNumCollectives; ++c) {
    for (SelectionRule& r : rules_[c]) r.resolved = findAlgorithm(static_cast<Collective>(c), r.algorithm);
  }
}

void SelectionTable::applyOverride(std::string_view text) {
  for (std::string_view entry : split(text, '|')) {
    const std::size_t colon = entry.find(':');
    BC_INVALID(colon != entry.npos, -1,
               "BOOSTCOMM_SELECTION: '" << entry << "' lacks 'collective:' (e.g. allreduce:0-65535=native;65536-=ring)");
    const Collective coll = collectiveOrThrow(entry.substr(0, colon), "BOOSTCOMM_SELECTION");
    std::vector<SelectionRule> rules;
    for (std::string_view rule : split(entry.substr(colon + 1), ';')) {
      const std::size_t eq = rule.find('=');
      const std::size_t dash = rule.find('-');
      BC_INVALID(eq != rule.npos && dash != rule.npos && dash < eq, -1,
                 "BOOSTCOMM_SELECTION: rule '" << rule << "' is not MIN-MAX=ALGO (MAX may be empty)");
      SelectionRule r;
      r.minBytes = parseBytes(rule.substr(0, dash), rule);
      const std::string_view maxText = rule.substr(dash + 1, eq - dash - 1);
      r.maxBytes = maxText.empty() ? kOpenEnd : parseBytes(maxText, rule);
      r.algorithm = std::string(rule.substr(eq + 1));
      BC_INVALID(findAlgorithm(coll, r.algorithm) != nullptr, -1,
                 "BOOSTCOMM_SELECTION: unknown " << toString(coll) << " algorithm '" << r.algorithm
                                                 << "' (valid: " << validNames(coll) << ")");
      rules.push_back(std::move(r));
    }
    rules_[static_cast<int>(coll)] = std::move(rules);
  }
  resolve();
}

const std::vector<SelectionRule>& SelectionTable::rules(Collective coll) const {
  return rules_[static_cast<int>(coll)];
}

std::string SelectionTable::describe() const {
  std::ostringstream os;
  for (int c = 0; c < kNumCollectives; ++c) {
    os << toString(static_cast<Collective>(c)) << ":";
    for (const SelectionRule& r : rules_[c]) {
      os << " [" << r.minBytes << ", " << (r.maxBytes == kOpenEnd ? std::string("inf") : std::to_string(r.maxBytes))
         << "] " << r.algorithm << ";";
    }
    os << "\n";
  }
  return os.str();
}

std::array<std::string, kNumCollectives> parseAlgoOverride(std::string_view text) {
  std::array<std::string, kNumCollectives> out;
  for (std::string_view entry : split(text, ',')) {
    const std::size_t colon = entry.find(':');
    if (colon == entry.npos) {
      bool any = false;
      for (int c = 0; c < kNumCollectives; ++c) {
        if (findAlgorithm(static_cast<Collective>(c), entry) != nullptr) {
          out[c] = std::string(entry);
          any = true;
        }
      }
      BC_INVALID(any, -1, "BOOSTCOMM_ALGO: no collective has an algorithm named '" << entry << "'");
      continue;
    }
    const Collective coll = collectiveOrThrow(entry.substr(0, colon), "BOOSTCOMM_ALGO");
    const std::string_view name = entry.substr(colon + 1);
    BC_INVALID(findAlgorithm(coll, name) != nullptr, -1,
               "BOOSTCOMM_ALGO: unknown " << toString(coll) << " algorithm '" << name
                                          << "' (valid: " << validNames(coll) << ")");
    out[static_cast<int>(coll)] = std::string(name);
  }
  return out;
}

}  // namespace boostcomm::algorithms
