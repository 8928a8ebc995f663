// The tunables registry: every knob is declared once in tunables.def with its
// environment variable, default and documentation (after NCCL_PARAM). Values
// are read from the environment on first use; tests may override them.
#pragma once

#include <cstdint>
#include <span>
#include <string>

namespace boostcomm::core {

enum class TunableType { kInt, kString };

struct TunableInfo {
  const char* id;
  const char* env;
  TunableType type;
  const char* defaultValue;
  const char* doc;
};

std::span<const TunableInfo> allTunables();

// Current value as text: the override if set, else the environment, else the default.
std::string tunableValue(const char* env);
std::int64_t tunableInt(const char* env);
// Whether the user chose the value (an override or the environment variable
// is set), as opposed to the registry default being in force.
bool tunableIsSet(const char* env);

// Test hook: force a value (empty optional semantics via clearTunableOverride).
void setTunableOverride(const char* env, const std::string& value);
void clearTunableOverride(const char* env);

#define BC_TUNABLE(Id, Env, Type, Default, Doc) inline constexpr const char* kTunable##Id = Env;
#include "core/tunables.def"
#undef BC_TUNABLE

}  // namespace boostcomm::core
