// K-ary sum tree over a fixed number of leaves, stored implicitly in one
// region of (shared) memory: position-independent, offsets only.
//
// Layout of the region (all offsets from its start, every level 64-aligned):
//   SumTreeHeader | level 0 (root, alone in its cache line) | level 1 | ...
//   | level L-1 (leaves) | dense[capacity] u32 | pos[capacity] u32
// Level l+1 holds the children of level l: children of node i are the K
// consecutive entries [i*K, i*K+K). Every level's length is a multiple of K,
// so a group of K siblings is K*8 bytes and never straddles a cache line
// (for K >= 8 each group is whole lines).
//
// Invariants (the owner is the only writer):
//  - every internal node == sum_group(its K children), recomputed from the
//    children on each update, never adjusted by deltas: the tree cannot drift;
//  - leaf weight > 0 only for occupied leaves; padding leaves are 0;
//  - dense[0..occupied) lists the occupied leaves, pos[leaf] is the leaf's
//    index in dense or kNotOccupied.
// Sampling returns only occupied leaves with non-zero weight, or, when every
// occupied leaf weighs 0, an occupied leaf uniformly at random.
#pragma once

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/dense_set.hpp"
#include "core/kary_levels.hpp"
#include "core/segment_header.hpp"
#include "core/status.hpp"

namespace engram {

inline constexpr uint32_t kSumTreeMaxLevels = 40;
inline constexpr uint32_t kNotOccupied = DenseSet::kAbsent;

struct alignas(kCacheLine) SumTreeHeader {
  uint32_t k;
  uint32_t capacity;
  uint32_t levels;
  uint32_t occupied;
  uint64_t region_size;
  uint64_t level_offset[kSumTreeMaxLevels];
  uint64_t level_length[kSumTreeMaxLevels];
  uint64_t dense_offset;
  uint64_t pos_offset;
};

// Sum of one sibling group in a fixed order. Four interleaved accumulators let
// the compiler keep several adds in flight; the order never changes, so a
// parent is a pure function of its children (no drift).
template <unsigned K>
inline double sum_group(const double* c) noexcept {
  if constexpr (K < 8) {
    double s = 0.0;
    for (unsigned j = 0; j < K; ++j) s += c[j];
    return s;
  } else {
    double a0 = 0, a1 = 0, a2 = 0, a3 = 0;
    for (unsigned j = 0; j < K; j += 4) {
      a0 += c[j];
      a1 += c[j + 1];
      a2 += c[j + 2];
      a3 += c[j + 3];
    }
    return (a0 + a1) + (a2 + a3);
  }
}

// Caller-owned working memory for the batch operations (no allocation on the
// hot path; one per owner thread). Batches larger than kMaxBatch are split.
struct SumTreeScratch {
  static constexpr size_t kMaxBatch = 256;
  static constexpr size_t kTable = 1024;  // open-addressing set, > 2 * kMaxBatch
  uint32_t nodes[kMaxBatch];
  uint32_t next[kMaxBatch];
  double target[kMaxBatch];
  uint64_t table[kTable];  // stamp << 32 | node; stale stamps count as empty
  uint32_t stamp = 0;
  SumTreeScratch() { std::fill(table, table + kTable, 0); }
};

template <unsigned K>
class SumTree {
  static_assert(K >= 2 && (K & (K - 1)) == 0, "K must be a power of two >= 2");
  static_assert(K < 8 || K % 4 == 0);

 public:
  static constexpr unsigned kArity = K;

  SumTree() = default;

  // Bytes of the region for `capacity` leaves (0 if capacity is invalid).
  static size_t bytes_needed(uint32_t capacity) {
    SumTreeHeader h{};
    return capacity == 0 ? 0 : plan(capacity, &h);
  }

  // Formats `mem` (64-byte aligned, at least bytes_needed(capacity) bytes).
  static Result<SumTree> format(void* mem, size_t size, uint32_t capacity) {
    if (capacity == 0) return Status{Errc::invalid_capacity, "sum tree capacity must be at least 1"};
    if (capacity >= kNotOccupied) return Status{Errc::invalid_capacity, "sum tree capacity must be below 2^32-1"};
    if (reinterpret_cast<uintptr_t>(mem) % kCacheLine != 0)
      return Status{Errc::invalid_argument, "sum tree memory must be 64-byte aligned"};
    auto* h = static_cast<SumTreeHeader*>(mem);
    SumTreeHeader plan_h{};
    size_t need = plan(capacity, &plan_h);
    if (size < need)
      return Status{Errc::invalid_argument, "sum tree of " + std::to_string(capacity) + " leaves needs " +
                                                std::to_string(need) + " bytes, got " + std::to_string(size)};
    *h = plan_h;
    std::memset(static_cast<char*>(mem) + sizeof(SumTreeHeader), 0, need - sizeof(SumTreeHeader));
    SumTree t(h);
    t.occupancy().clear(capacity);
    return t;
  }

  // Attaches to a formatted region; validates the header against `size`.
  static Result<SumTree> attach(void* mem, size_t size) {
    auto* h = static_cast<SumTreeHeader*>(mem);
    if (size < sizeof(SumTreeHeader) || h->k != K || h->capacity == 0 || h->capacity >= kNotOccupied)
      return Status{Errc::corrupt, "sum tree header does not match arity " + std::to_string(K)};
    SumTreeHeader expect{};
    size_t need = plan(h->capacity, &expect);
    if (need > size || h->region_size != need || h->levels != expect.levels ||
        std::memcmp(h->level_offset, expect.level_offset, sizeof(expect.level_offset)) != 0 ||
        h->dense_offset != expect.dense_offset || h->pos_offset != expect.pos_offset || h->occupied > h->capacity)
      return Status{Errc::corrupt, "sum tree header is inconsistent with its capacity"};
    return SumTree(h);
  }

  uint32_t capacity() const noexcept { return h_->capacity; }
  uint32_t occupied() const noexcept { return h_->occupied; }
  double total() const noexcept { return level_[0][0]; }
  double get(uint32_t i) const noexcept { return leaves()[i]; }
  bool is_occupied(uint32_t i) const noexcept { return occupancy().contains(i); }
  // The i-th occupied leaf (i < occupied()), in no particular order.
  uint32_t occupied_leaf(uint32_t i) const noexcept { return dense_[i]; }

  // Sets leaf i (< capacity) to weight w (finite, >= 0; the caller validates)
  // and marks it occupied. O(K log_K N).
  void set(uint32_t i, double w) noexcept {
    assert(i < h_->capacity && w >= 0 && std::isfinite(w));
    occupancy().insert(i);
    leaves()[i] = w;
    propagate(i);
  }

  // Empties leaf i: weight 0, not occupied.
  void clear(uint32_t i) noexcept {
    assert(i < h_->capacity);
    if (!occupancy().contains(i)) return;
    occupancy().erase(i);
    leaves()[i] = 0.0;
    propagate(i);
  }

  // Sets n leaves, then recomputes every touched ancestor once, level by level
  // (a parent shared by several leaves is summed once). Equivalent to n
  // calls of set(); a repeated leaf keeps its last weight.
  void set_batch(const uint32_t* idx, const double* w, size_t n, SumTreeScratch& sc) noexcept {
    for (size_t base = 0; base < n; base += SumTreeScratch::kMaxBatch) {
      size_t m = std::min(n - base, SumTreeScratch::kMaxBatch);
      double* leaf = leaves();
      for (size_t q = 0; q < m; ++q) {
        occupancy().insert(idx[base + q]);
        leaf[idx[base + q]] = w[base + q];
        sc.nodes[q] = idx[base + q];
      }
      for (uint32_t l = h_->levels - 1; l-- > 0;) {
        m = unique_parents(sc, m);
        double* parent = level_[l];
        const double* child = level_[l + 1];
        for (size_t q = 0; q < m; ++q) parent[sc.nodes[q]] = sum_group<K>(child + static_cast<size_t>(sc.nodes[q]) * K);
      }
    }
  }

  // Maps u in [0, 1) to an occupied leaf: with probability weight/total, or
  // uniformly when total() == 0. Requires occupied() > 0.
  uint32_t sample(double u) const noexcept {
    assert(h_->occupied > 0);
    double total = level_[0][0];
    if (!(total > 0.0)) return occupancy().pick(u);
    double target = u * total;
    uint32_t node = 0;
    for (uint32_t l = 1; l < h_->levels; ++l) node = descend(level_[l] + static_cast<size_t>(node) * K, node, target);
    return node;
  }

  // n independent samples; descends all of them level by level with the next
  // groups prefetched, so that their cache misses overlap instead of queueing.
  void sample_batch(const double* u, uint32_t* out, size_t n, SumTreeScratch& sc) const noexcept {
    assert(h_->occupied > 0);
    double total = level_[0][0];
    if (!(total > 0.0)) {
      for (size_t q = 0; q < n; ++q) out[q] = occupancy().pick(u[q]);
      return;
    }
    for (size_t base = 0; base < n; base += SumTreeScratch::kMaxBatch) {
      size_t m = std::min(n - base, SumTreeScratch::kMaxBatch);
      uint32_t* node = out + base;
      double* target = sc.target;
      for (size_t q = 0; q < m; ++q) {
        target[q] = u[base + q] * total;
        node[q] = 0;
      }
      for (uint32_t l = 1; l < h_->levels; ++l) {
        const double* lv = level_[l];
        for (size_t q = 0; q < m && q < kPrefetchAhead; ++q) prefetch_group(lv + static_cast<size_t>(node[q]) * K);
        for (size_t q = 0; q < m; ++q) {
          if (q + kPrefetchAhead < m) prefetch_group(lv + static_cast<size_t>(node[q + kPrefetchAhead]) * K);
          node[q] = descend(lv + static_cast<size_t>(node[q]) * K, node[q], target[q]);
        }
      }
    }
  }

  // Replaces the whole tree: leaves [0, n) get w[0..n) and are occupied, the
  // rest are emptied; every parent is computed once, bottom-up. O(N), for
  // bulk loads (restore, benchmarks).
  void assign(const double* w, uint32_t n) noexcept {
    assert(n <= h_->capacity);
    clear_all();
    for (uint32_t i = 0; i < n; ++i) occupancy().insert(i);
    std::copy(w, w + n, leaves());
    for (uint32_t l = h_->levels - 1; l-- > 0;)
      for (uint64_t node = 0; node < h_->level_length[l]; ++node)
        if (node * K < h_->level_length[l + 1]) level_[l][node] = sum_group<K>(level_[l + 1] + node * K);
  }

  // Empties every leaf.
  void clear_all() noexcept {
    for (uint32_t l = 0; l < h_->levels; ++l) std::fill(level_[l], level_[l] + h_->level_length[l], 0.0);
    occupancy().clear(h_->capacity);
  }

  // The root recomputed from the leaves alone, bottom-up in tree order, by code
  // that shares nothing with the update path except sum_group: equals total()
  // exactly when no drift happened.
  double fresh_total() const {
    uint64_t n = h_->level_length[h_->levels - 1];
    std::vector<double> cur(leaves(), leaves() + n), next;
    while (cur.size() > 1) {
      uint64_t groups = cur.size() / K;
      next.assign(groups == 1 ? 1 : align_up(groups, K), 0.0);
      for (uint64_t g = 0; g < groups; ++g) next[g] = sum_group<K>(cur.data() + g * K);
      cur.swap(next);
    }
    return cur[0];
  }

  uint32_t levels() const noexcept { return h_->levels; }

 private:
  explicit SumTree(SumTreeHeader* h) : h_(h) {
    char* base = reinterpret_cast<char*>(h);
    for (uint32_t l = 0; l < h->levels; ++l) level_[l] = reinterpret_cast<double*>(base + h->level_offset[l]);
    dense_ = reinterpret_cast<uint32_t*>(base + h->dense_offset);
    pos_ = reinterpret_cast<uint32_t*>(base + h->pos_offset);
  }

  // Computes the layout for `capacity` leaves into h; returns the region size.
  static size_t plan(uint32_t capacity, SumTreeHeader* h) {
    uint32_t n = kary_level_lengths(capacity, K, h->level_length, kSumTreeMaxLevels);
    h->k = K;
    h->capacity = capacity;
    h->levels = n;
    h->occupied = 0;
    size_t off = sizeof(SumTreeHeader);
    for (uint32_t l = 0; l < n; ++l) {  // level 0 = the root
      h->level_offset[l] = off;
      off = align_up(off + h->level_length[l] * sizeof(double), kCacheLine);  // root padded to a line
    }
    h->dense_offset = off;
    off = align_up(off + uint64_t{capacity} * 4, kCacheLine);
    h->pos_offset = off;
    off = align_up(off + uint64_t{capacity} * 4, kCacheLine);
    h->region_size = off;
    return off;
  }

  double* leaves() const noexcept { return level_[h_->levels - 1]; }

  DenseSet occupancy() const noexcept { return {dense_, pos_, &h_->occupied}; }

  void propagate(uint32_t i) noexcept {
    uint32_t node = i / K;
    for (uint32_t l = h_->levels - 1; l-- > 0;) {
      level_[l][node] = sum_group<K>(level_[l + 1] + static_cast<size_t>(node) * K);
      node /= K;
    }
  }

  // Picks the child of `node` (children at c[0..K)) that holds `target` and
  // makes target relative to it. Branch-free: the first child whose running
  // sum exceeds target is the count of running sums <= target, and it has
  // non-zero weight (its running sum grew past target). Independent descents
  // then overlap in the pipeline instead of waiting on mispredicted branches.
  // Rounding that leaves target past the last running sum clamps to the last
  // non-zero child.
  static uint32_t descend(const double* c, uint32_t node, double& target) noexcept {
    double p[K];
    double cum = 0.0;
    for (unsigned j = 0; j < K; ++j) {
      cum += c[j];
      p[j] = cum;
    }
    unsigned j = 0;
    for (unsigned i = 0; i < K; ++i) j += p[i] <= target;
    if (j == K) [[unlikely]] {
      j = K - 1;
      while (j > 0 && !(c[j] > 0.0)) --j;
      target = std::nextafter(c[j], 0.0);
      return node * K + j;
    }
    target -= j == 0 ? 0.0 : p[j - 1];
    return node * K + j;
  }

  // Replaces sc.nodes[0..m) by their parents, each once; returns the count.
  static size_t unique_parents(SumTreeScratch& sc, size_t m) noexcept {
    if (++sc.stamp == 0) {  // wrapped: forget every old entry
      std::fill(sc.table, sc.table + SumTreeScratch::kTable, 0);
      sc.stamp = 1;
    }
    const uint64_t tag = uint64_t{sc.stamp} << 32;
    size_t out = 0;
    for (size_t q = 0; q < m; ++q) {
      uint32_t parent = sc.nodes[q] / K;
      size_t h = (parent * 0x9E3779B1u) >> 22;  // top 10 bits: kTable = 1024
      for (;; h = (h + 1) & (SumTreeScratch::kTable - 1)) {
        uint64_t e = sc.table[h];
        if ((e & ~uint64_t{0xffffffff}) != tag) {  // empty for this stamp
          sc.table[h] = tag | parent;
          sc.next[out++] = parent;
          break;
        }
        if (static_cast<uint32_t>(e) == parent) break;
      }
    }
    std::copy(sc.next, sc.next + out, sc.nodes);
    return out;
  }

  static void prefetch_group(const double* g) noexcept {
    for (unsigned b = 0; b < K * sizeof(double); b += kCacheLine) __builtin_prefetch(reinterpret_cast<const char*>(g) + b);
  }

  SumTreeHeader* h_ = nullptr;
  double* level_[kSumTreeMaxLevels] = {};
  uint32_t* dense_ = nullptr;
  uint32_t* pos_ = nullptr;
};

}  // namespace engram
