// The tuning cache file: readable JSON, one entry per (collective, dtype,
// size class) with every candidate's time, keyed by the job's signature.
//
//   {"format": "boostcomm-tuning-cache", "format_version": 1,
//    "signature": {"world_size": 2, "ranks_per_node": [2], "hosts_hash": "9c1d...", "version": "0.1.0"},
//    "meta": {"tool": "boostcomm tune", "command": "boostcomm tune ...", "hostname": "node1", "date": "2025-01-31T12:00:00Z"},
//    "links": {"intra": {"latency_us": 0.34, "bandwidth_GBps": 0.84, "measured": true}, "inter": {...}},
//    "cores_per_node": 2, "bucket_bytes": 4194304, "chunk_bytes": 1048576,
//    "bucket_times_us": {"1048576": 812.5, ...}, "chunk_times_us": {...},
//    "entries": [{"collective": "allreduce", "dtype": "float32", "bytes": 1048576, "winner": "shm",
//                 "default": "shm", "model_choice": "shm", "margin": 1.31,
//                 "candidates": [{"algorithm": "native", "time_us": 420.1, "predicted_us": 380.0}, ...]}]}
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <sstream>

#include "boostcomm/tuning_cache.h"
#include "boostcomm/version.h"
#include "core/atomic_file.h"
#include "core/check.h"
#include "core/hash.h"

namespace boostcomm {
namespace {

using nlohmann::json;

constexpr const char* kFormat = "boostcomm-tuning-cache";
constexpr int kFormatVersion = 1;

json linkToJson(const LinkModel& l) {
  return {{"latency_us", l.latencyUs}, {"bandwidth_GBps", l.bandwidthGBps}, {"measured", l.measured}};
}
LinkModel linkFromJson(const json& j) {
  LinkModel l;
  l.latencyUs = j.value("latency_us", 0.0);
  l.bandwidthGBps = j.value("bandwidth_GBps", 0.0);
  l.measured = j.value("measured", false);
  return l;
}

json timesToJson(const std::map<std::size_t, double>& times) {
  json out = json::object();
  for (const auto& [bytes, us] : times) out[std::to_string(bytes)] = us;
  return out;
}
std::map<std::size_t, double> timesFromJson(const json& j) {
  std::map<std::size_t, double> out;
  for (const auto& [key, value] : j.items()) out[std::stoull(key)] = value.get<double>();
  return out;
}

template <typename T>
T parseEnum(const std::optional<T>& parsed, const std::string& text, const char* what) {
  BC_INVALID(parsed.has_value(), -1, "unknown " << what << " '" << text << "'");
  return *parsed;
}

std::string hex64(std::uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

}  // namespace

const CandidateTime* TuningEntry::find(const std::string& algorithm) const {
  for (const CandidateTime& c : candidates) {
    if (c.algorithm == algorithm) return &c;
  }
  return nullptr;
}

double TuningEntry::winnerUs() const {
  const CandidateTime* w = find(winner);
  return w ? w->timeUs : 0.0;
}

double TuningEntry::speedupOverNative() const {
  const CandidateTime* n = find("native");
  return n && winnerUs() > 0 ? n->timeUs / winnerUs() : 1.0;
}

double TuningEntry::speedupOverDefault() const {
  const CandidateTime* d = find(defaultAlgorithm);
  return d && winnerUs() > 0 ? d->timeUs / winnerUs() : 1.0;
}

std::string TuningSignature::describe() const {
  std::ostringstream os;
  os << worldSize << (worldSize == 1 ? " rank, " : " ranks, ") << ranksPerNode.size()
     << (ranksPerNode.size() == 1 ? " node (" : " nodes (");
  for (std::size_t i = 0; i < ranksPerNode.size(); ++i) os << (i ? "+" : "") << ranksPerNode[i];
  os << "), hosts " << hostsHash.substr(0, 8) << ", boostcomm " << version;
  return os.str();
}

TuningSignature signatureOf(const Topology& topo) {
  TuningSignature s;
  s.worldSize = topo.worldSize;
  s.ranksPerNode = topo.ranksPerNode;
  // FNV-1a over the node hostnames in node order: a cache tuned on other
  // machines (same layout, other hardware) is not trusted.
  std::uint64_t h = core::kFnvOffset;
  for (const std::string& name : topo.hostnames) h = core::fnvBytes(core::fnvBytes(h, name), "\n");
  s.hostsHash = hex64(h);
  s.version = versionString();
  return s;
}

void TuningCache::upsert(TuningEntry entry) {
  for (TuningEntry& e : entries_) {
    if (e.collective == entry.collective && e.dtype == entry.dtype && e.bytes == entry.bytes) {
      e = std::move(entry);
      return;
    }
  }
  entries_.push_back(std::move(entry));
  std::sort(entries_.begin(), entries_.end(), [](const TuningEntry& a, const TuningEntry& b) {
    return std::tie(a.collective, a.dtype, a.bytes) < std::tie(b.collective, b.dtype, b.bytes);
  });
}

const TuningEntry* TuningCache::lookup(Collective coll, DataType dtype, std::size_t bytes) const {
  const TuningEntry* best = nullptr;
  double bestScore = 0.0;
  for (const TuningEntry& e : entries_) {
    if (e.collective != coll || e.bytes == 0 || bytes == 0) continue;
    const double distance = std::fabs(std::log2(static_cast<double>(bytes) / static_cast<double>(e.bytes)));
    if (distance > 1.0) continue;
    // Same dtype first, then the same element size, then nearest size.
    const double penalty = e.dtype == dtype ? 0.0 : dataTypeSize(e.dtype) == dataTypeSize(dtype) ? 2.0 : 4.0;
    const double score = penalty + distance;
    if (best == nullptr || score < bestScore) {
      best = &e;
      bestScore = score;
    }
  }
  return best;
}

std::string TuningCache::toJson() const {
  json j;
  j["format"] = kFormat;
  j["format_version"] = kFormatVersion;
  j["signature"] = {{"world_size", signature_.worldSize},
                    {"ranks_per_node", signature_.ranksPerNode},
                    {"hosts_hash", signature_.hostsHash},
                    {"version", signature_.version}};
  if (!meta.empty()) j["meta"] = meta;
  j["links"] = {{"intra", linkToJson(intraNode)}, {"inter", linkToJson(interNode)}};
  j["cores_per_node"] = coresPerNode;
  j["bucket_bytes"] = bucketBytes;
  j["chunk_bytes"] = chunkBytes;
  j["bucket_times_us"] = timesToJson(bucketTimesUs);
  j["chunk_times_us"] = timesToJson(chunkTimesUs);
  json entries = json::array();
  for (const TuningEntry& e : entries_) {
    json candidates = json::array();
    for (const CandidateTime& c : e.candidates) {
      candidates.push_back({{"algorithm", c.algorithm}, {"time_us", c.timeUs}, {"predicted_us", c.predictedUs}});
    }
    entries.push_back({{"collective", std::string(toString(e.collective))},
                       {"dtype", std::string(toString(e.dtype))},
                       {"bytes", e.bytes},
                       {"winner", e.winner},
                       {"default", e.defaultAlgorithm},
                       {"model_choice", e.modelChoice},
                       {"margin", e.margin},
                       {"candidates", candidates}});
  }
  j["entries"] = entries;
  return j.dump(1) + "\n";
}

TuningCache TuningCache::fromJson(const std::string& text) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    core::raise(ErrorCategory::kInvalidArgument, -1, std::string("not valid JSON: ") + e.what());
  }
  try {
    BC_INVALID(j.is_object() && j.value("format", "") == kFormat, -1,
               "not a tuning cache (\"format\" is not \"" << kFormat << "\")");
    BC_INVALID(j.value("format_version", 0) == kFormatVersion, -1,
               "format_version " << j.value("format_version", 0) << " is not " << kFormatVersion);
    TuningCache cache;
    const json& s = j.at("signature");
    cache.signature_.worldSize = s.at("world_size").get<int>();
    cache.signature_.ranksPerNode = s.at("ranks_per_node").get<std::vector<int>>();
    cache.signature_.hostsHash = s.at("hosts_hash").get<std::string>();
    cache.signature_.version = s.at("version").get<std::string>();
    if (j.contains("links")) {
      cache.intraNode = linkFromJson(j["links"].value("intra", json::object()));
      cache.interNode = linkFromJson(j["links"].value("inter", json::object()));
    }
    // Informational only: a field that is not a string is skipped, not an error.
    const json meta = j.value("meta", json::object());
    for (const auto& [key, value] : meta.items()) {
      if (value.is_string()) cache.meta[key] = value.get<std::string>();
    }
    cache.coresPerNode = j.value("cores_per_node", 0);
    cache.bucketBytes = j.value("bucket_bytes", std::size_t{0});
    cache.chunkBytes = j.value("chunk_bytes", std::size_t{0});
    cache.bucketTimesUs = timesFromJson(j.value("bucket_times_us", json::object()));
    cache.chunkTimesUs = timesFromJson(j.value("chunk_times_us", json::object()));
    for (const json& e : j.at("entries")) {
      TuningEntry entry;
      const std::string coll = e.at("collective").get<std::string>();
      const std::string dtype = e.at("dtype").get<std::string>();
      entry.collective = parseEnum(parseCollective(coll), coll, "collective");
      entry.dtype = parseEnum(parseDataType(dtype), dtype, "dtype");
      entry.bytes = e.at("bytes").get<std::size_t>();
      entry.winner = e.at("winner").get<std::string>();
      entry.defaultAlgorithm = e.value("default", "");
      entry.modelChoice = e.value("model_choice", "");
      entry.margin = e.value("margin", 1.0);
      for (const json& c : e.at("candidates")) {
        entry.candidates.push_back(
            {c.at("algorithm").get<std::string>(), c.at("time_us").get<double>(), c.value("predicted_us", 0.0)});
      }
      BC_INVALID(entry.find(entry.winner) != nullptr, -1,
                 "entry " << coll << " " << entry.bytes << " B: winner '" << entry.winner
                          << "' is not among its candidates");
      cache.upsert(std::move(entry));
    }
    return cache;
  } catch (const json::exception& e) {
    core::raise(ErrorCategory::kInvalidArgument, -1, std::string("bad field: ") + e.what());
  } catch (const std::logic_error& e) {  // std::stoull on a bad key
    core::raise(ErrorCategory::kInvalidArgument, -1, std::string("bad number: ") + e.what());
  }
}

void TuningCache::save(const std::string& path) const {
  // A reader (another job starting) never sees half a file, and two `boostcomm
  // tune` runs writing at once leave one of them whole (core/atomic_file.h).
  core::writeFileAtomically(path, toJson(), "tuning cache");
}

TuningCache::LoadResult TuningCache::parse(const std::string& text, const std::string& path,
                                           const TuningSignature& expected, TuningCache& out) {
  LoadResult result;
  TuningCache cache;
  try {
    cache = fromJson(text);
  } catch (const Error& e) {
    result.status = LoadStatus::kCorrupt;
    result.notice = "warning: tuning cache '" + path + "' is corrupt (" + e.detail() +
                    "); ignoring it, `boostcomm tune` rebuilds it";
    return result;
  }
  if (!(cache.signature() == expected)) {
    result.status = LoadStatus::kMismatch;
    result.notice = "tuning cache '" + path + "' was tuned for " + cache.signature().describe() + ", this job is " +
                    expected.describe() + ": ignored";
    return result;
  }
  out = std::move(cache);
  result.status = LoadStatus::kLoaded;
  return result;
}

TuningCache::LoadResult TuningCache::load(const std::string& path, const TuningSignature& expected,
                                          TuningCache& out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    LoadResult result;
    result.status = LoadStatus::kMissing;
    result.notice = "tuning cache '" + path + "' does not exist yet";
    return result;
  }
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return parse(text, path, expected, out);
}

}  // namespace boostcomm
