#include "algorithms/selection_map.h"

#include <algorithm>
#include <sstream>

#include "core/check.h"

namespace boostcomm::algorithms {
namespace {

template <typename Ranges>  // const or not
auto rangeOf(Ranges& ranges, std::size_t bytes) {
  // Ranges tile [0, kAnyBytes] in order: the last one starting at or below bytes.
  auto it = std::upper_bound(ranges.begin(), ranges.end(), bytes,
                             [](std::size_t b, const SelectionRange& r) { return b < r.minBytes; });
  return std::prev(it);
}

// Makes `bytes` the first byte of a range (no-op when it already is).
void splitAt(std::vector<SelectionRange>& ranges, std::size_t bytes) {
  auto it = rangeOf(ranges, bytes);
  if (it->minBytes == bytes) return;
  SelectionRange upper = *it;
  upper.minBytes = bytes;
  it->maxBytes = bytes - 1;
  ranges.insert(std::next(it), upper);
}

// A forced or explicit algorithm runs as asked or the call fails.
const AlgorithmInfo& requireRunnable(const AlgorithmInfo& algo, const CollectiveSpec& spec) {
  const std::string why = algo.unsupportedReason(spec);
  BC_INVALID(why.empty(), spec.rank,
             toString(spec.collective) << ": algorithm '" << algo.name << "' cannot run this call: " << why);
  return algo;
}

}  // namespace

const char* toString(SelectionLayer layer) {
  switch (layer) {
    case SelectionLayer::kTable: return "table";
    case SelectionLayer::kModel: return "model";
    case SelectionLayer::kStrategy: return "strategy";
    case SelectionLayer::kTuned: return "tuned";
    case SelectionLayer::kSelection: return "selection";
    case SelectionLayer::kForced: return "forced";
  }
  return "unknown";
}

const AlgorithmInfo* SelectionRange::top() const {
  for (int l = kNumSelectionLayers - 1; l >= 0; --l) {
    if (byLayer[static_cast<std::size_t>(l)] != nullptr) return byLayer[static_cast<std::size_t>(l)];
  }
  return nullptr;
}

SelectionLayer SelectionRange::topLayer() const {
  for (int l = kNumSelectionLayers - 1; l >= 0; --l) {
    if (byLayer[static_cast<std::size_t>(l)] != nullptr) return static_cast<SelectionLayer>(l);
  }
  return SelectionLayer::kTable;
}

SelectionMap::SelectionMap() {
  for (auto& ranges : ranges_) ranges.assign(1, SelectionRange{});
}

void SelectionMap::set(Collective coll, SelectionLayer layer, std::size_t minBytes, std::size_t maxBytes,
                       const AlgorithmInfo* algorithm) {
  if (minBytes > maxBytes) return;
  std::vector<SelectionRange>& ranges = ranges_[static_cast<int>(coll)];
  splitAt(ranges, minBytes);
  if (maxBytes != kAnyBytes) splitAt(ranges, maxBytes + 1);
  for (SelectionRange& r : ranges) {
    if (r.minBytes >= minBytes && r.maxBytes <= maxBytes) r.byLayer[static_cast<std::size_t>(layer)] = algorithm;
  }
  // Neighbours that now agree on every layer become one range (lookups scan fewer).
  std::vector<SelectionRange> merged;
  merged.reserve(ranges.size());
  for (const SelectionRange& r : ranges) {
    if (!merged.empty() && merged.back().byLayer == r.byLayer) {
      merged.back().maxBytes = r.maxBytes;
    } else {
      merged.push_back(r);
    }
  }
  ranges = std::move(merged);
}

const SelectionRange& SelectionMap::at(Collective coll, std::size_t bytes) const {
  return *rangeOf(ranges_[static_cast<int>(coll)], bytes);
}

const AlgorithmInfo& SelectionMap::choose(const CollectiveSpec& spec) const {
  const SelectionRange& range = at(spec.collective, spec.payloadBytes());
  for (int l = kNumSelectionLayers - 1; l >= 0; --l) {
    const AlgorithmInfo* algo = range.byLayer[static_cast<std::size_t>(l)];
    if (algo == nullptr) continue;
    if (static_cast<SelectionLayer>(l) == SelectionLayer::kForced) return requireRunnable(*algo, spec);
    if (algo->unsupportedReason(spec).empty()) return *algo;
  }
  for (const AlgorithmInfo& a : allAlgorithms()) {
    if (a.collective == spec.collective && a.unsupportedReason(spec).empty()) return a;
  }
  core::raise(ErrorCategory::kInternal, spec.rank, "no algorithm can run this " + std::string(toString(spec.collective)));
}

std::size_t SelectionMap::topChoiceUpTo(const AlgorithmInfo& algorithm) const {
  return topChoiceUpTo(algorithm.collective, {&algorithm});
}

std::size_t SelectionMap::topChoiceUpTo(Collective coll, std::initializer_list<const AlgorithmInfo*> algorithms) const {
  std::size_t upTo = 0;
  for (const SelectionRange& r : ranges(coll)) {
    const AlgorithmInfo* top = r.top();
    if (top == nullptr || std::find(algorithms.begin(), algorithms.end(), top) == algorithms.end()) break;
    upTo = r.maxBytes;
  }
  return upTo;
}

std::string SelectionMap::describe() const {
  std::ostringstream os;
  for (int c = 0; c < kNumCollectives; ++c) {
    os << toString(static_cast<Collective>(c)) << ":";
    const char* sep = " ";
    for (const SelectionRange& r : ranges_[static_cast<std::size_t>(c)]) {
      os << sep << "[" << r.minBytes << ", ";
      if (r.maxBytes == kAnyBytes) os << "inf"; else os << r.maxBytes;
      os << "]";
      const char* open = " (";
      bool first = true;
      for (int l = kNumSelectionLayers - 1; l >= 0; --l) {
        const AlgorithmInfo* algo = r.byLayer[static_cast<std::size_t>(l)];
        if (algo == nullptr) continue;
        const char* layer = toString(static_cast<SelectionLayer>(l));
        if (first) os << " " << algo->name << open << layer; else os << ", " << layer << ": " << algo->name;
        first = false;
      }
      os << (first ? " (none)" : ")");
      sep = "; ";
    }
    os << "\n";
  }
  return os.str();
}

const AlgorithmInfo& explicitAlgorithm(const CollectiveSpec& spec, std::string_view name) {
  const AlgorithmInfo* algo = findAlgorithm(spec.collective, name);
  if (algo == nullptr) {
    std::string names;
    for (const std::string& n : algorithmNames(spec.collective)) names += (names.empty() ? "" : ", ") + n;
    core::raise(ErrorCategory::kInvalidArgument, spec.rank,
                std::string(toString(spec.collective)) + ": unknown algorithm '" + std::string(name) +
                    "' (valid: " + names + ")");
  }
  return requireRunnable(*algo, spec);
}

}  // namespace boostcomm::algorithms
