// FNV-1a, 64-bit: the one non-cryptographic fingerprint of the project
// (layout hashes, signature hashes, segment-name prefixes). Not for
// anything an adversary chooses to collide.
#pragma once

#include <cstddef>
#include <cstdint>

namespace engram {

inline constexpr uint64_t kFnvOffset = 1469598103934665603ULL;
inline constexpr uint64_t kFnvPrime = 1099511628211ULL;

// Folds the 8 bytes of v, least significant first (constexpr: layout hashes).
constexpr uint64_t fnv1a_u64(uint64_t h, uint64_t v) {
  for (int i = 0; i < 8; ++i) h = (h ^ ((v >> (8 * i)) & 0xff)) * kFnvPrime;
  return h;
}

inline uint64_t fnv1a(uint64_t h, const void* p, size_t n) noexcept {
  const auto* b = static_cast<const unsigned char*>(p);
  for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * kFnvPrime;
  return h;
}

}  // namespace engram
