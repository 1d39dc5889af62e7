#include "core/priority_range.hpp"

#include <algorithm>

#include "core/kary_levels.hpp"

namespace engram {
namespace {

constexpr uint32_t K = kPriorityRangeArity;

PriorityExtremes of_group(const PriorityExtremes* c) noexcept {
  PriorityExtremes e = c[0];
  for (uint32_t j = 1; j < K; ++j) {
    e.max = std::max(e.max, c[j].max);
    e.min = std::min(e.min, c[j].min);
  }
  return e;
}

bool same(const PriorityExtremes& a, const PriorityExtremes& b) noexcept { return a.max == b.max && a.min == b.min; }

}  // namespace

size_t PriorityRange::plan(uint32_t capacity, PriorityRangeHeader* h) {
  uint32_t n = kary_level_lengths(std::max<uint32_t>(capacity, 1), K, h->level_length, kPriorityRangeMaxLevels);
  h->capacity = capacity;
  h->levels = n;
  size_t off = align_up(sizeof(PriorityRangeHeader), kCacheLine);
  for (uint32_t l = 0; l < n; ++l) {  // level 0 = the root
    h->level_offset[l] = off;
    off = align_up(off + h->level_length[l] * sizeof(PriorityExtremes), kCacheLine);
  }
  h->region_size = off;
  return off;
}

size_t PriorityRange::bytes_needed(uint32_t capacity) {
  PriorityRangeHeader h{};
  return plan(capacity, &h);
}

Result<PriorityRange> PriorityRange::format(void* mem, size_t size, uint32_t capacity) {
  auto* h = static_cast<PriorityRangeHeader*>(mem);
  PriorityRangeHeader planned{};
  if (plan(capacity, &planned) > size) return Status{Errc::invalid_argument, "priority range region is too small"};
  *h = planned;
  PriorityRange r(h);
  r.clear_all();
  return r;
}

Result<PriorityRange> PriorityRange::attach(void* mem, size_t size) {
  auto* h = static_cast<PriorityRangeHeader*>(mem);
  if (size < sizeof(PriorityRangeHeader)) return Status{Errc::corrupt, "priority range region is smaller than its header"};
  PriorityRangeHeader expect{};
  size_t need = plan(h->capacity, &expect);
  if (need > size || need != h->region_size || h->levels != expect.levels ||
      !std::equal(h->level_offset, h->level_offset + expect.levels, expect.level_offset) ||
      !std::equal(h->level_length, h->level_length + expect.levels, expect.level_length))
    return Status{Errc::corrupt, "priority range header is inconsistent with its capacity"};
  return PriorityRange(h);
}

void PriorityRange::clear_all() noexcept {
  for (uint32_t l = 0; l < h_->levels; ++l) std::fill_n(level(l), h_->level_length[l], kNoExtremes);
}

void PriorityRange::put(uint32_t slot, PriorityExtremes e) noexcept {
  uint32_t l = h_->levels - 1;
  uint64_t i = slot;
  if (same(level(l)[i], e)) return;
  level(l)[i] = e;
  while (l > 0) {
    uint64_t parent = i / K;
    PriorityExtremes p = of_group(level(l) + parent * K);
    PriorityExtremes& up = level(l - 1)[parent];
    if (same(up, p)) return;  // the ancestors above are as they were
    up = p;
    i = parent;
    --l;
  }
}

void PriorityRange::at_least(double p, std::vector<uint32_t>* out) const {
  if (!(root().max >= p)) return;
  const uint32_t leaves = h_->levels - 1;
  // Depth first, children in order: a stack of (level, node) whose
  // maximum reaches p, at most K per level.
  struct Node {
    uint32_t level;
    uint64_t index;
  };
  Node stack[kPriorityRangeMaxLevels * K];
  uint32_t top = 0;
  stack[top++] = {0, 0};
  while (top > 0) {
    Node n = stack[--top];
    if (n.level == leaves) {
      if (n.index < h_->capacity) out->push_back(static_cast<uint32_t>(n.index));
      continue;
    }
    const PriorityExtremes* c = level(n.level + 1) + n.index * K;
    for (uint32_t j = K; j-- > 0;)
      if (c[j].max >= p) stack[top++] = {n.level + 1, n.index * K + j};
  }
}

}  // namespace engram
