// TunableOverride: sets a tunable (core::setTunableOverride) for one scope, so
// a failing test leaves no override behind. Communicators read most knobs when
// they are created: create groups inside the scope.
#pragma once

#include <string>

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

}  // namespace boostcomm::testing
