// A set of 64-bit keys in one flat array (open addressing, linear probing,
// deletion by backward shift, so no tombstones): no allocation per insert,
// unlike std::unordered_set. Owner-thread private; the table owner keeps a
// channel's chunk holds in one, an insert and a drop per small item.
//
// Invariants: the capacity is a power of two >= 16 and at least twice the
// size; every key sits in the run of occupied slots that starts at its
// home slot (hash & mask); 0 marks an empty slot, so key 0 lives in a flag.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace engram {

class U64Set {
 public:
  size_t size() const noexcept { return size_ + (has_zero_ ? 1 : 0); }
  bool empty() const noexcept { return size() == 0; }

  bool contains(uint64_t k) const noexcept {
    if (k == 0) return has_zero_;
    if (slots_.empty()) return false;
    for (size_t i = home(k);; i = (i + 1) & mask()) {
      if (slots_[i] == k) return true;
      if (slots_[i] == 0) return false;
    }
  }

  // True if k was not there.
  bool insert(uint64_t k) {
    if (k == 0) return !has_zero_ && (has_zero_ = true);
    if (2 * (size_ + 1) > slots_.size()) grow();
    size_t i = home(k);
    for (; slots_[i] != 0; i = (i + 1) & mask())
      if (slots_[i] == k) return false;
    slots_[i] = k;
    ++size_;
    return true;
  }

  // True if k was there.
  bool erase(uint64_t k) noexcept {
    if (k == 0) return has_zero_ && !(has_zero_ = false);
    if (slots_.empty()) return false;
    size_t i = home(k);
    for (; slots_[i] != k; i = (i + 1) & mask())
      if (slots_[i] == 0) return false;
    // Backward shift: move later members of the run into the hole when
    // their home does not lie cyclically in (hole, j].
    for (size_t j = (i + 1) & mask(); slots_[j] != 0; j = (j + 1) & mask()) {
      size_t h = home(slots_[j]);
      bool stays = i <= j ? (i < h && h <= j) : (i < h || h <= j);
      if (!stays) {
        slots_[i] = slots_[j];
        i = j;
      }
    }
    slots_[i] = 0;
    --size_;
    return true;
  }

  template <typename F>
  void for_each(F f) const {
    if (has_zero_) f(uint64_t{0});
    for (uint64_t k : slots_)
      if (k != 0) f(k);
  }

  void clear() noexcept {
    slots_.assign(slots_.size(), 0);
    size_ = 0;
    has_zero_ = false;
  }

 private:
  size_t mask() const noexcept { return slots_.size() - 1; }
  // Fibonacci hashing: packed block refs differ in their low (index) bits.
  size_t home(uint64_t k) const noexcept { return static_cast<size_t>((k * 0x9E3779B97F4A7C15ull) >> 20) & mask(); }
  void grow() {
    std::vector<uint64_t> old;
    old.swap(slots_);
    slots_.assign(old.empty() ? 16 : old.size() * 2, 0);
    size_ = 0;
    for (uint64_t k : old)
      if (k != 0) insert(k);
  }

  std::vector<uint64_t> slots_;
  size_t size_ = 0;  // nonzero keys
  bool has_zero_ = false;
};

}  // namespace engram
