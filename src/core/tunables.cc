#include "core/tunables.h"

#include <charconv>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string_view>

#include "core/check.h"

namespace boostcomm::core {
namespace {

constexpr TunableInfo kTunables[] = {
#define BC_TUNABLE(Id, Env, Type, Default, Doc) {#Id, Env, TunableType::k##Type, Default, Doc},
#include "core/tunables.def"
#undef BC_TUNABLE
};

struct Overrides {
  std::mutex mutex;
  std::map<std::string, std::string, std::less<>> values;
};

Overrides& overrides() {
  static Overrides o;
  return o;
}

const TunableInfo& find(std::string_view env) {
  for (const auto& t : kTunables) {
    if (env == t.env) return t;
  }
  raise(ErrorCategory::kInternal, -1, "unknown tunable " + std::string(env));
}

}  // namespace

std::span<const TunableInfo> allTunables() { return kTunables; }

std::string tunableValue(const char* env) {
  const TunableInfo& info = find(env);
  {
    auto& o = overrides();
    std::lock_guard lock(o.mutex);
    if (auto it = o.values.find(env); it != o.values.end()) return it->second;
  }
  if (const char* v = std::getenv(env); v != nullptr) return v;
  return info.defaultValue;
}

std::int64_t tunableInt(const char* env) {
  const std::string text = tunableValue(env);
  std::int64_t value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  BC_INVALID(ec == std::errc() && ptr == text.data() + text.size(), -1,
             env << "='" << text << "' is not an integer");
  return value;
}

bool tunableIsSet(const char* env) {
  (void)find(env);
  {
    auto& o = overrides();
    std::lock_guard lock(o.mutex);
    if (o.values.find(env) != o.values.end()) return true;
  }
  return std::getenv(env) != nullptr;
}

void setTunableOverride(const char* env, const std::string& value) {
  (void)find(env);
  auto& o = overrides();
  std::lock_guard lock(o.mutex);
  o.values[env] = value;
}

void clearTunableOverride(const char* env) {
  auto& o = overrides();
  std::lock_guard lock(o.mutex);
  o.values.erase(std::string(env));
}

}  // namespace boostcomm::core
