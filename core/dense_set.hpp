// A set of slot indices in [0, capacity) with O(1) insert, erase and pick-at:
// dense[0..count) lists the members in arbitrary order; pos[slot] is the
// member's index in dense, or kAbsent. Lives in caller-owned (shared) memory.
#pragma once

#include <algorithm>
#include <cstdint>

namespace engram {

struct DenseSet {
  static constexpr uint32_t kAbsent = UINT32_MAX;
  uint32_t* dense;
  uint32_t* pos;
  uint32_t* count;

  bool contains(uint32_t s) const noexcept { return pos[s] != kAbsent; }
  void insert(uint32_t s) noexcept {
    if (pos[s] != kAbsent) return;
    pos[s] = *count;
    dense[(*count)++] = s;
  }
  void erase(uint32_t s) noexcept {
    uint32_t p = pos[s];
    if (p == kAbsent) return;
    uint32_t last = dense[--*count];
    dense[p] = last;
    pos[last] = p;
    pos[s] = kAbsent;
  }
  // Member number floor(u * count), u in [0, 1). Requires count > 0.
  uint32_t pick(double u) const noexcept {
    uint32_t k = static_cast<uint32_t>(u * *count);
    return dense[std::min(k, *count - 1)];
  }
  void clear(uint32_t capacity) noexcept {
    std::fill(pos, pos + capacity, kAbsent);
    *count = 0;
  }
};

}  // namespace engram
