// Selectors decide which item a table samples (sampler) or evicts (remover).
// One interface, six kinds (Reverb's): Uniform, Prioritized(exponent), FIFO,
// LIFO, MaxHeap, MinHeap. A selector is a view over one region of (shared)
// memory holding a SelectorHeader and the kind's arrays, addressed by offsets;
// it is written only by its table's owner thread and needs no lock.
//
// Members are table slots in [0, capacity). Invariants:
//  - size() == number of slots inserted and not removed;
//  - Uniform: a DenseSet of members;
//  - Prioritized: a K-ary SumTree whose leaf weights are priority^exponent
//    (0 for priority 0);
//  - FIFO/LIFO: a doubly linked list in insertion order (update keeps order);
//  - Max/MinHeap: a binary heap ordered by (priority, seq), where seq is the
//    value of a counter at the member's last insert or update, so that ties go
//    to the least recently inserted or updated member.
//
// Cost per call, N members, K = kPrioritizedArity (Reverb's selectors
// state theirs the same way; sample is one draw, a batch is b of them, and
// a batch without repeats is sample_distinct.hpp's):
//   kind          insert         sample          update         remove
//   Uniform       O(1)           O(1)            O(1) (none)    O(1) swap with the last
//   Prioritized   O(log_K N)     O(K log_K N)    O(log_K N)     O(log_K N)
//   FIFO, LIFO    O(1)           O(1) the end    O(1) (none)    O(1) unlink
//   Max/MinHeap   O(log N)       O(1) the top    O(log N)       O(log N)
// Each kind's structure is its own file, a view over the region's arrays
// that states its invariants: dense_set.hpp (Uniform), sum_tree.hpp
// (Prioritized), order_list.hpp (FIFO, LIFO), priority_heap.hpp (heaps).
// This class lays the region out, checks what enters, turns draws into
// probabilities and dispatches each operation to its kind in one switch.
// It stays one class, not one per kind behind a vtable: the region is in
// shared memory, where a vtable pointer cannot live, and all kinds share
// one header and one region shape (two u32 arrays of capacity, then the
// kind's own), so that a table's selector region is sized, sealed,
// attached and checkpointed the same whatever its kind.
#pragma once

#include <cstdint>
#include <limits>
#include <random>

#include "core/dense_set.hpp"
#include "core/order_list.hpp"
#include "core/priority_heap.hpp"
#include "core/segment_header.hpp"
#include "core/status.hpp"
#include "core/sum_tree.hpp"

namespace engram {

enum class SelectorKind : uint32_t { uniform = 1, prioritized = 2, fifo = 3, lifo = 4, max_heap = 5, min_heap = 6 };

const char* selector_kind_name(SelectorKind k) noexcept;

struct SelectorOptions {
  SelectorKind kind = SelectorKind::uniform;
  double exponent = 1.0;  // Prioritized only
};

// Arity of the sum tree behind Prioritized, chosen by bench/sumtree.
inline constexpr unsigned kPrioritizedArity = 16;
using PrioritizedTree = SumTree<kPrioritizedArity>;

struct alignas(kCacheLine) SelectorHeader {
  uint32_t kind;
  uint32_t capacity;
  double exponent;
  uint64_t seq;          // heap tie-break counter
  uint64_t region_size;
  uint32_t count;        // members (Uniform, lists, heaps; Prioritized uses the tree's)
  uint32_t head;         // list: oldest member, or kNone
  uint32_t tail;         // list: newest member, or kNone
  uint32_t pad_;
  // Two u32 arrays of `capacity`: the members in the selector's order, and
  // from each slot back into that order.
  uint64_t off_order;          // Uniform: dense array | lists: next | heaps: heap array
  uint64_t off_back;           // Uniform: position in dense | lists: prev | heaps: position in heap
  uint64_t off_heap_priority;  // heaps: priority per slot (double)
  uint64_t off_heap_seq;       // heaps: insertion seq per slot (u64), the tie-break
  uint64_t off_tree;           // Prioritized: the SumTree region
};
static_assert(sizeof(SelectorHeader) == 2 * kCacheLine);

struct Sampled {
  uint32_t slot;
  double probability;  // chance this draw picks `slot` (1 for deterministic kinds)
};

// The largest total a prioritized selector's weights may reach. Each
// weight alone is finite, but their sum could still overflow to infinity,
// and every probability would then be 0 and every descent end in one leaf.
// Half of DBL_MAX: the tree's partial sums round differently from one
// running total, but by far less than a factor of two, so they stay
// finite too.
inline constexpr double kMaxTotalWeight = std::numeric_limits<double>::max() / 2;

class Selector {
 public:
  static constexpr uint32_t kNone = UINT32_MAX;

  Selector() = default;

  static Status validate(const SelectorOptions& o);
  static size_t bytes_needed(const SelectorOptions& o, uint32_t capacity);
  // Formats 64-byte aligned `mem` of at least bytes_needed() bytes; empty.
  static Result<Selector> format(void* mem, size_t size, const SelectorOptions& o, uint32_t capacity);
  static Result<Selector> attach(void* mem, size_t size);

  SelectorKind kind() const noexcept { return static_cast<SelectorKind>(h_->kind); }
  // Does sample(u) depend on u? Only uniform and prioritized draw; the
  // others pick by order, so a caller need not draw for them.
  bool draws() const noexcept { return kind() == SelectorKind::uniform || kind() == SelectorKind::prioritized; }
  double exponent() const noexcept { return h_->exponent; }
  uint32_t capacity() const noexcept { return h_->capacity; }
  uint32_t size() const noexcept;
  bool contains(uint32_t slot) const noexcept;

  // Would `slot` (a member or not) with this priority keep the total
  // weight finite and at most kMaxTotalWeight? Errc::invalid_priority if
  // not. Only a prioritized selector weighs: the others accept any valid
  // priority.
  Status check_weight(uint32_t slot, double priority) const;
  // Adds `slot` (< capacity, not a member). Priority and weight are checked
  // (check_weight).
  Status insert(uint32_t slot, double priority);
  // Changes a member's priority (a heap also refreshes its tie-break age).
  Status update(uint32_t slot, double priority);
  // Removes a member; no-op for a non-member.
  void remove(uint32_t slot) noexcept;
  // Picks a member using u, uniform in [0, 1); Errc::empty when there is none.
  Result<Sampled> sample(double u) const;
  // n independent picks, the same as n calls of sample(u[i]) on an unchanged
  // selector, but the prioritized descents overlap their cache misses
  // (SumTree::sample_batch). Errc::empty when there is no member.
  Status sample_batch(const double* u, Sampled* out, uint32_t n, SumTreeScratch& scratch) const;
  void clear() noexcept;

  // The weight the sampler gives member `slot`: priority^exponent for
  // prioritized (core/priority.hpp), else 1. And the members' total.
  double weight(uint32_t slot) const noexcept { return kind() == SelectorKind::prioritized ? tree_.get(slot) : 1.0; }
  double total_weight() const noexcept;
  // n distinct members, 1 <= n <= size(), for a batch without repeats
  // (core/sample_distinct.cpp, which says how each kind draws and what
  // `probability` then means). `certain` (prioritized only, else empty):
  // members that must be in the batch, found by the table because their
  // weight is at least their share; they come first in out. Errc::empty if
  // the members that can be drawn (a prioritized selector's members of
  // nonzero weight) are fewer than n; out is then unspecified. The draw
  // changes nothing it leaves behind (it zeroes the certain members'
  // weights while it descends, and restores them exactly).
  Status sample_distinct(uint32_t n, const uint32_t* certain, uint32_t num_certain, std::mt19937_64& rng,
                         Sampled* out);

  // Checkpoints: a heap member's tie-break age and the counter it came from
  // (0 for the other kinds), and an insert that keeps a saved age, so that a
  // restored heap orders exactly as before.
  uint64_t tie_seq(uint32_t slot) const noexcept;
  uint64_t seq_counter() const noexcept { return h_->seq; }
  void set_seq_counter(uint64_t seq) noexcept { h_->seq = seq; }
  Status insert_with_seq(uint32_t slot, double priority, uint64_t seq);
  // Undoes remove(slot) of a member that sample() had just picked, when
  // every member removed after it has been put back first (a table's
  // refused sample, Table::sample_expiring): a FIFO's oldest goes back to
  // the head, a LIFO's newest to the tail, a heap's member with its age
  // `seq` (tie_seq before the remove); uniform and prioritized members as
  // by insert, membership and weight being all they keep. The caller
  // restores seq_counter() after the last one.
  Status put_back(uint32_t slot, double priority, uint64_t seq);

 private:
  explicit Selector(SelectorHeader* h);
  // Each kind's own view over the region (its file says its invariants).
  DenseSet uniform_set() const noexcept;
  OrderList list() const noexcept;
  PriorityHeap heap() const noexcept;
  double weight_of(double priority) const noexcept;

  SelectorHeader* h_ = nullptr;
  uint32_t* order_ = nullptr;  // off_order: members in the selector's order
  uint32_t* back_ = nullptr;   // off_back: slot -> its place in order_ (lists: prev)
  double* prio_ = nullptr;
  uint64_t* seq_ = nullptr;
  PrioritizedTree tree_;
};

}  // namespace engram
