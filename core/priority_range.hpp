// The largest and the smallest priority among a table's items, kept as
// items come, change and go, for engram_table_info and for inserts "at the
// current maximum" (Schaul et al.'s default for new transitions). A K-ary
// tree over the table's slots, stored implicitly in one region of the
// table's memory (offsets only), in the manner of the sum tree: each node
// holds the (max, min) of its K children and is recomputed from them on
// every change, so nothing drifts. A change costs O(K log_K n) and stops
// climbing at the first ancestor it leaves as it was; reading is O(1).
//
// Layout (offsets from the region's start, every level 64-aligned):
//   PriorityRangeHeader | level 0 (the root, alone) | level 1 | ...
//   | leaves (one per slot, padded to a multiple of K)
// Level l+1 holds the children of level l: node i's are [i*K, i*K+K).
//
// Invariants (one writer, the table's owner):
//  - a leaf is {p, p} for an occupied slot of priority p, and kNoExtremes
//    ({-inf, +inf}) for a free slot or padding;
//  - every internal node is {max of its children's max, min of their min};
//    nodes past the last one with a real child are kNoExtremes;
//  - so the root is kNoExtremes exactly when no slot is occupied.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "core/segment_header.hpp"
#include "core/status.hpp"

namespace engram {

struct PriorityExtremes {
  double max, min;
};
static_assert(sizeof(PriorityExtremes) == 16);
inline constexpr PriorityExtremes kNoExtremes{-std::numeric_limits<double>::infinity(),
                                              std::numeric_limits<double>::infinity()};

// Eight children are 128 bytes, two cache lines: a change reads two lines
// per level. bench/NOTES.md, "Sum tree", has what a change costs.
inline constexpr uint32_t kPriorityRangeArity = 8;
inline constexpr uint32_t kPriorityRangeMaxLevels = 16;  // 8^11 > 2^30 slots; room to spare

struct alignas(kCacheLine) PriorityRangeHeader {
  uint32_t capacity;
  uint32_t levels;
  uint64_t region_size;
  uint64_t level_offset[kPriorityRangeMaxLevels];
  uint64_t level_length[kPriorityRangeMaxLevels];
};

class PriorityRange {
 public:
  PriorityRange() = default;

  static size_t bytes_needed(uint32_t capacity);
  // Formats 64-byte aligned `mem` of at least bytes_needed() bytes: no
  // slot occupied.
  static Result<PriorityRange> format(void* mem, size_t size, uint32_t capacity);
  // A region format() made; Errc::corrupt if its header does not add up.
  static Result<PriorityRange> attach(void* mem, size_t size);

  // Slot `slot` (< capacity) now holds an item of priority p (finite).
  void set(uint32_t slot, double priority) noexcept { put(slot, {priority, priority}); }
  // Slot `slot` holds no item.
  void clear(uint32_t slot) noexcept { put(slot, kNoExtremes); }
  // Every slot empty.
  void clear_all() noexcept;

  bool empty() const noexcept { return root().max < root().min; }
  // Of the occupied slots; kNoExtremes when none is.
  PriorityExtremes extremes() const noexcept { return root(); }
  uint32_t capacity() const noexcept { return h_->capacity; }
  // Appends to *out every occupied slot whose priority is p or more, in
  // slot order: O(K log_K n) per slot found, visiting only subtrees whose
  // maximum reaches p (batches without repeats find their heavy items so).
  void at_least(double p, std::vector<uint32_t>* out) const;

 private:
  explicit PriorityRange(PriorityRangeHeader* h) : h_(h) {}
  static size_t plan(uint32_t capacity, PriorityRangeHeader* h);
  PriorityExtremes* level(uint32_t l) const noexcept {
    return reinterpret_cast<PriorityExtremes*>(reinterpret_cast<char*>(h_) + h_->level_offset[l]);
  }
  const PriorityExtremes& root() const noexcept { return level(0)[0]; }
  void put(uint32_t slot, PriorityExtremes e) noexcept;

  PriorityRangeHeader* h_ = nullptr;
};

}  // namespace engram
