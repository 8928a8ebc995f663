// The tunables registry: every knob is declared once in tunables.def with its
// environment variable, kind (integer range, boolean, enum, free text),
// default and documentation (after NCCL_PARAM). A value is read and parsed on
// first use and cached, so a read on a hot path is one atomic load; a bad value
// is Error{kInvalidArgument} naming the variable, the text and what is
// accepted. Readers never clamp: the registry's range is the contract.
//
// The environment is read once per tunable; tests change values with
// setTunableOverride / clearTunableOverride, which invalidate the cache (the
// next read also sees a changed environment).
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace boostcomm::core {

enum class TunableType { kInt, kBool, kEnum, kString };

// Range limits used in tunables.def; the reasons are at the top of that file.
inline constexpr std::int64_t kTunableMaxBytes = std::int64_t{1} << 40;
inline constexpr std::int64_t kTunableMaxShmBytes = std::int64_t{1} << 30;
inline constexpr std::int64_t kTunableMaxInt32 = std::numeric_limits<std::int32_t>::max();

struct TunableInfo {
  const char* id;
  const char* env;
  TunableType type;
  const char* defaultValue;
  std::int64_t minValue;  // kInt (and kBool: 0..1): inclusive range
  std::int64_t maxValue;
  const char* words;  // kEnum (and kBool): accepted words, '|'-separated
  const char* doc;
};

// A tunable's handle: its place in the registry, so that a read needs no name
// lookup. Converts to the environment name for messages.
struct TunableKey {
  std::size_t index;
  const char* env;
  constexpr operator const char*() const { return env; }  // NOLINT(google-explicit-constructor)
};

namespace detail {
enum TunableIndex : std::size_t {
#define BC_TUNABLE(Id, Env, Type, Default, Min, Max, Words, Doc) kIndex##Id,
#include "core/tunables.def"
#undef BC_TUNABLE
};
}  // namespace detail

#define BC_TUNABLE(Id, Env, Type, Default, Min, Max, Words, Doc) \
  inline constexpr TunableKey kTunable##Id{detail::kIndex##Id, Env};
#include "core/tunables.def"
#undef BC_TUNABLE

std::span<const TunableInfo> allTunables();

// Typed reads; each throws Error{kInvalidArgument} for a value outside the
// tunable's rule, and Error{kInternal} when read as the wrong kind.
std::int64_t tunableInt(TunableKey key);
// An integer tunable whose range starts at 0 or above, as a byte count.
std::size_t tunableBytes(TunableKey key);
bool tunableBool(TunableKey key);
// One of the enum's words; the view points into the registry (never dangles).
std::string_view tunableEnum(TunableKey key);
std::string tunableString(TunableKey key);

// Checks text against the tunable's rule: throws as the typed reads do.
void validateTunable(const TunableInfo& info, std::string_view text);
// The rule in words for messages and docs: "an integer in [1, 1099511627776]",
// "0 or 1", "one of: pingpong, single", "text".
std::string tunableRule(const TunableInfo& info);

// Current value as raw text, unvalidated: the override if set, else the
// environment, else the default (for listing; readers use the typed reads).
std::string tunableValue(const char* env);
// Whether the user chose the value (an override or the environment variable
// is set), as opposed to the registry default being in force.
bool tunableIsSet(const char* env);

// Environment names. A BOOSTCOMM_* variable that is not a tunable is either a
// retired name (renamed: silently ignoring it would run with the default) or
// a typo. environmentNameWarnings scans `env` (NAME=value entries, null
// terminated, like environ): a retired name throws Error{kInvalidArgument}
// naming its replacement; it returns one warning line per other BOOSTCOMM_*
// name that is neither a tunable nor a known non-tunable (test and build
// variables, listed in tunables.cc).
std::vector<std::string> environmentNameWarnings(const char* const* env);
// environmentNameWarnings(environ), each warning printed on stderr once per
// process. Called by every communicator at creation.
void checkEnvironmentNames();

// Test hook: force a value until clearTunableOverride. Both invalidate every
// cached value.
void setTunableOverride(const char* env, const std::string& value);
void clearTunableOverride(const char* env);

}  // namespace boostcomm::core
