// FNV-1a, 64 bits: the one hash behind every signature ranks compare (tensor
// and request lists, bucket and fusion options, configuration values, tuning
// cache host lists). Not cryptographic: it tells honest differences apart.
#pragma once

#include <cstdint>
#include <string_view>

namespace boostcomm::core {

// Not the published FNV-1a offset basis (14695981039346656037): the project's
// first signatures used this value, and tuning caches on disk carry hashes
// made with it (hosts_hash), so it stays.
inline constexpr std::uint64_t kFnvOffset = 1469598103934665603ull;
inline constexpr std::uint64_t kFnvPrime = 1099511628211ull;

// The hash of `text` continued from `hash`.
constexpr std::uint64_t fnvBytes(std::uint64_t hash, std::string_view text) {
  for (unsigned char c : text) hash = (hash ^ c) * kFnvPrime;
  return hash;
}

// The hash of `text` alone.
constexpr std::uint64_t fnv1a(std::string_view text) { return fnvBytes(kFnvOffset, text); }

// The hash continued by the 8 bytes of `value`, least significant first.
constexpr std::uint64_t fnvWord(std::uint64_t hash, std::uint64_t value) {
  for (int i = 0; i < 8; ++i) hash = (hash ^ ((value >> (8 * i)) & 0xff)) * kFnvPrime;
  return hash;
}

}  // namespace boostcomm::core
