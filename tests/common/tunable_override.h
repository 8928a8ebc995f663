// TunableOverride: sets a tunable (core::setTunableOverride) for one scope, so
// a failing test leaves no override behind. Communicators read most knobs when
// they are created: create groups inside the scope.
#pragma once

#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "core/tunables.h"

namespace boostcomm::testing {

class TunableOverride {
 public:
  TunableOverride(const char* env, const std::string& value) : env_(env) { core::setTunableOverride(env, value); }
  ~TunableOverride() { core::clearTunableOverride(env_); }
  TunableOverride(const TunableOverride&) = delete;
  TunableOverride& operator=(const TunableOverride&) = delete;

 private:
  const char* env_;
};

// Several tunables for one scope: {{core::kTunableNodeLayout, "2,2"}, ...}.
class Tunables {
 public:
  Tunables(std::initializer_list<std::pair<const char*, std::string>> values) {
    for (const auto& [name, value] : values) {
      core::setTunableOverride(name, value);
      names_.push_back(name);
    }
  }
  ~Tunables() {
    for (const char* name : names_) core::clearTunableOverride(name);
  }
  Tunables(const Tunables&) = delete;
  Tunables& operator=(const Tunables&) = delete;

 private:
  std::vector<const char*> names_;
};

}  // namespace boostcomm::testing
