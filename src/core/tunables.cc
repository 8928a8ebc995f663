// Registry, parsing and the per-tunable cache.
//
// Cache: a global generation counter starts at 1 and moves on with every
// override change. Each tunable has a slot holding the value parsed at some
// generation; a read whose slot is current is two atomic loads. Otherwise the
// slot is refilled under its own mutex: read the generation first, then the
// override / environment / default, so an override that lands in between
// leaves the slot stale and the next read parses again. A bad value is not
// cached: every read of it throws, on every rank.
//
// Rejected: a std::call_once per tunable (cannot be invalidated by the test
// overrides), parsing into a map keyed by name (a scan and a lock per read).
#include "core/tunables.h"

#include <atomic>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <map>
#include <mutex>
#include <optional>
#include <set>

extern char** environ;  // POSIX; declared by <unistd.h> only with _GNU_SOURCE

#include "core/check.h"

namespace boostcomm::core {
namespace {

constexpr TunableInfo kTunables[] = {
#define BC_TUNABLE(Id, Env, Type, Default, Min, Max, Words, Doc) \
  {#Id, Env, TunableType::k##Type, Default, Min, Max, Words, Doc},
#include "core/tunables.def"
#undef BC_TUNABLE
};
constexpr std::size_t kCount = std::size(kTunables);

// A value's text and where it came from (for messages).
struct RawValue {
  std::string text;
  const char* source;
  bool userSet;  // an override or the environment, not the registry default
};

struct Overrides {
  std::mutex mutex;
  std::map<std::string, std::string, std::less<>> values;
};

Overrides& overrides() {
  static Overrides o;
  return o;
}

std::atomic<std::uint64_t>& generation() {
  static std::atomic<std::uint64_t> g{1};
  return g;
}

// `number` is an int's value, a bool's 0/1, or an enum word packed as
// (offset << 32 | length) into TunableInfo::words, so that tunableEnum can
// return a view without searching. `text` is a string tunable's value, read
// under `mutex` (strings are read when objects are built, not per call).
struct Slot {
  std::atomic<std::uint64_t> parsedAt{0};  // generation of the value; 0: never parsed
  std::atomic<std::int64_t> number{0};
  std::mutex mutex;
  std::string text;
};

Slot& slotOf(std::size_t index) {
  static Slot slots[kCount];
  return slots[index];
}

const TunableInfo& find(std::string_view env) {
  for (const auto& t : kTunables) {
    if (env == t.env) return t;
  }
  raise(ErrorCategory::kInternal, -1, "unknown tunable " + std::string(env));
}

const char* typeName(TunableType type) {
  switch (type) {
    case TunableType::kInt: return "int";
    case TunableType::kBool: return "bool";
    case TunableType::kEnum: return "enum";
    case TunableType::kString: return "string";
  }
  return "?";
}

const TunableInfo& infoOf(TunableKey key, TunableType type) {
  BC_INTERNAL(key.index < kCount, "tunable index " << key.index << " out of the registry");
  const TunableInfo& info = kTunables[key.index];
  BC_INTERNAL(info.type == type, info.env << " is a " << typeName(info.type) << " tunable, read as "
                                          << typeName(type));
  return info;
}

RawValue rawValue(const TunableInfo& info) {
  {
    auto& o = overrides();
    std::lock_guard lock(o.mutex);
    if (auto it = o.values.find(info.env); it != o.values.end()) return {it->second, "a test override", true};
  }
  if (const char* v = std::getenv(info.env); v != nullptr) return {v, "the environment", true};
  return {info.defaultValue, "the registry default", false};
}

// The text as a message shows it: control characters escaped, and cut short,
// because an environment variable can hold megabytes.
std::string shown(std::string_view text) {
  constexpr std::size_t kMaxShown = 64;
  std::string out;
  for (char c : text.substr(0, kMaxShown)) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) {
      char esc[8];
      std::snprintf(esc, sizeof esc, "\\x%02x", u);
      out += esc;
    } else {
      out += c;
    }
  }
  if (text.size() > kMaxShown) out += "... (" + std::to_string(text.size()) + " bytes)";
  return out;
}

[[noreturn, gnu::cold]] void rejectValue(const TunableInfo& info, std::string_view text, const char* source,
                                         const char* problem) {
  std::string message = std::string(info.env) + "='" + shown(text) + "'";
  if (source != nullptr) message += std::string(" (from ") + source + ")";
  message += std::string(" ") + problem + "; expected " + tunableRule(info);
  raise(ErrorCategory::kInvalidArgument, -1, message);
}

// Position of text among the '|'-separated words, packed as offset << 32 | length.
std::optional<std::int64_t> findWord(const char* words, std::string_view text) {
  const std::string_view all(words);
  std::size_t begin = 0;
  while (begin <= all.size()) {
    std::size_t end = all.find('|', begin);
    if (end == std::string_view::npos) end = all.size();
    if (all.substr(begin, end - begin) == text) {
      return static_cast<std::int64_t>(begin) << 32 | static_cast<std::int64_t>(end - begin);
    }
    begin = end + 1;
  }
  return std::nullopt;
}

// The parsed value as a Slot stores it; throws for a value outside the rule.
std::int64_t parseNumber(const TunableInfo& info, std::string_view text, const char* source) {
  if (info.type == TunableType::kInt) {
    // from_chars takes exactly an optional '-' and decimal digits: no spaces,
    // no '+', no exponent, no suffix, and reports overflow instead of wrapping.
    std::int64_t value = 0;
    const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec == std::errc::result_out_of_range) rejectValue(info, text, source, "is out of range");
    if (ec != std::errc() || ptr != text.data() + text.size()) rejectValue(info, text, source, "is not an integer");
    if (value < info.minValue || value > info.maxValue) rejectValue(info, text, source, "is out of range");
    return value;
  }
  const std::optional<std::int64_t> word = findWord(info.words, text);
  if (!word) {
    rejectValue(info, text, source, info.type == TunableType::kBool ? "is not a boolean" : "is not an accepted word");
  }
  if (info.type == TunableType::kBool) return text == "1" ? 1 : 0;
  return *word;
}

[[gnu::noinline]] std::int64_t refillNumber(const TunableInfo& info, Slot& slot, std::uint64_t gen) {
  std::lock_guard lock(slot.mutex);
  const RawValue raw = rawValue(info);
  const std::int64_t value = parseNumber(info, raw.text, raw.source);
  slot.number.store(value, std::memory_order_relaxed);
  slot.parsedAt.store(gen, std::memory_order_release);
  return value;
}

std::int64_t cachedNumber(TunableKey key, TunableType type) {
  const TunableInfo& info = infoOf(key, type);
  Slot& slot = slotOf(key.index);
  const std::uint64_t gen = generation().load(std::memory_order_acquire);
  if (slot.parsedAt.load(std::memory_order_acquire) == gen) return slot.number.load(std::memory_order_relaxed);
  return refillNumber(info, slot, gen);
}

void invalidateAll() { generation().fetch_add(1, std::memory_order_acq_rel); }

// Names renamed by issue 13 (one name per concept); the values kept their syntax.
struct RetiredName {
  const char* name;
  const char* replacement;
};
constexpr RetiredName kRetiredNames[] = {
    {"BOOSTCOMM_FUSION_BUCKET_BYTES", "BOOSTCOMM_BUCKET_BYTES"},
    {"BOOSTCOMM_OVERLAP_BUCKET_BYTES", "BOOSTCOMM_BUCKET_BYTES"},
    {"BOOSTCOMM_HIER_INTRA", "BOOSTCOMM_HIER_INTRA_ALGO"},
    {"BOOSTCOMM_HIER_INTER", "BOOSTCOMM_HIER_INTER_ALGO"},
};

// BOOSTCOMM_* variables that are legitimately set but are not tunables of the
// library (so a process started with them gets no warning):
// - BOOSTCOMM_TEST_LARGE: tests/mpi/test_mpi_transport.cc, opts into a 2^31-byte message;
// - BOOSTCOMM_CLI: the Makefile's path to the CLI, exported to recipes when
//   given on make's command line (make bench BOOSTCOMM_CLI=...).
constexpr const char* kNonTunableNames[] = {"BOOSTCOMM_TEST_LARGE", "BOOSTCOMM_CLI"};

bool isTunableName(std::string_view name) {
  for (const auto& t : kTunables) {
    if (name == t.env) return true;
  }
  return false;
}

}  // namespace

std::span<const TunableInfo> allTunables() { return kTunables; }

std::int64_t tunableInt(TunableKey key) { return cachedNumber(key, TunableType::kInt); }

std::size_t tunableBytes(TunableKey key) {
  BC_INTERNAL(key.index < kCount && kTunables[key.index].minValue >= 0,
              key.env << " can be negative; it is not a byte count");
  return static_cast<std::size_t>(cachedNumber(key, TunableType::kInt));
}

bool tunableBool(TunableKey key) { return cachedNumber(key, TunableType::kBool) != 0; }

std::string_view tunableEnum(TunableKey key) {
  const std::int64_t packed = cachedNumber(key, TunableType::kEnum);
  const std::string_view words(kTunables[key.index].words);
  return words.substr(static_cast<std::size_t>(packed >> 32), static_cast<std::size_t>(packed & 0xffffffff));
}

std::string tunableString(TunableKey key) {
  const TunableInfo& info = infoOf(key, TunableType::kString);
  Slot& slot = slotOf(key.index);
  const std::uint64_t gen = generation().load(std::memory_order_acquire);
  std::lock_guard lock(slot.mutex);
  if (slot.parsedAt.load(std::memory_order_relaxed) != gen) {
    slot.text = rawValue(info).text;
    slot.parsedAt.store(gen, std::memory_order_relaxed);
  }
  return slot.text;
}

void validateTunable(const TunableInfo& info, std::string_view text) {
  if (info.type != TunableType::kString) (void)parseNumber(info, text, nullptr);
}

std::string tunableRule(const TunableInfo& info) {
  switch (info.type) {
    case TunableType::kInt:
      return "an integer in [" + std::to_string(info.minValue) + ", " + std::to_string(info.maxValue) + "]";
    case TunableType::kBool: return "0 or 1";
    case TunableType::kEnum: {
      std::string out = "one of: ";
      for (const char* c = info.words; *c != '\0'; ++c) out += *c == '|' ? std::string(", ") : std::string(1, *c);
      return out;
    }
    case TunableType::kString: return "any text";
  }
  return "?";
}

std::string tunableValue(const char* env) { return rawValue(find(env)).text; }

bool tunableIsSet(const char* env) { return rawValue(find(env)).userSet; }

std::vector<std::string> environmentNameWarnings(const char* const* env) {
  constexpr std::string_view kPrefix = "BOOSTCOMM_";
  std::vector<std::string> warnings;
  for (; env != nullptr && *env != nullptr; ++env) {
    const std::string_view entry(*env);
    const std::string_view name = entry.substr(0, entry.find('='));
    if (name.substr(0, kPrefix.size()) != kPrefix || isTunableName(name)) continue;
    for (const RetiredName& r : kRetiredNames) {
      if (name == r.name) {
        raise(ErrorCategory::kInvalidArgument, -1,
              std::string(r.name) + " was renamed to " + r.replacement + " (same values)");
      }
    }
    bool known = false;
    for (const char* allowed : kNonTunableNames) known = known || name == allowed;
    if (!known) {
      warnings.push_back("boostcomm: warning: " + shown(name) +
                         " is not a boostcomm variable (see `boostcomm tunables`)");
    }
  }
  return warnings;
}

void checkEnvironmentNames() {
  static std::mutex mutex;
  static std::set<std::string> printed;
  const std::vector<std::string> warnings = environmentNameWarnings(environ);
  std::lock_guard lock(mutex);
  for (const std::string& w : warnings) {
    if (printed.insert(w).second) std::fprintf(stderr, "%s\n", w.c_str());
  }
}

void setTunableOverride(const char* env, const std::string& value) {
  (void)find(env);
  {
    auto& o = overrides();
    std::lock_guard lock(o.mutex);
    o.values[env] = value;
  }
  invalidateAll();
}

void clearTunableOverride(const char* env) {
  {
    auto& o = overrides();
    std::lock_guard lock(o.mutex);
    o.values.erase(std::string(env));
  }
  invalidateAll();
}

}  // namespace boostcomm::core
