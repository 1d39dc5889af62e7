#include "core/selector.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>

#include "core/priority.hpp"

namespace engram {

const char* selector_kind_name(SelectorKind k) noexcept {
  switch (k) {
    case SelectorKind::uniform: return "uniform";
    case SelectorKind::prioritized: return "prioritized";
    case SelectorKind::fifo: return "fifo";
    case SelectorKind::lifo: return "lifo";
    case SelectorKind::max_heap: return "max_heap";
    case SelectorKind::min_heap: return "min_heap";
  }
  return "unknown";
}

namespace {

bool is_heap(SelectorKind k) { return k == SelectorKind::max_heap || k == SelectorKind::min_heap; }

// Lays out the kind's arrays after the header; returns the region size.
size_t plan(const SelectorOptions& o, uint32_t cap, SelectorHeader* h) {
  std::memset(h, 0, sizeof(*h));
  h->kind = static_cast<uint32_t>(o.kind);
  h->capacity = cap;
  h->exponent = o.kind == SelectorKind::prioritized ? o.exponent : 0.0;
  h->head = h->tail = Selector::kNone;
  size_t off = sizeof(SelectorHeader);
  auto take = [&off](size_t bytes) {
    size_t at = off;
    off = align_up(off + bytes, kCacheLine);
    return at;
  };
  switch (o.kind) {
    case SelectorKind::prioritized: h->off_tree = take(PrioritizedTree::bytes_needed(cap)); break;
    case SelectorKind::uniform:
    case SelectorKind::fifo:
    case SelectorKind::lifo:
      h->off_order = take(size_t{cap} * 4);
      h->off_back = take(size_t{cap} * 4);
      break;
    case SelectorKind::max_heap:
    case SelectorKind::min_heap:
      h->off_order = take(size_t{cap} * 4);
      h->off_back = take(size_t{cap} * 4);
      h->off_heap_priority = take(size_t{cap} * 8);
      h->off_heap_seq = take(size_t{cap} * 8);
      break;
  }
  h->region_size = off;
  return off;
}

}  // namespace

// Only the prioritized selector reads the exponent, but every kind checks it:
// a NaN accepted for a uniform table would come back in its table info (and
// as invalid JSON from engramctl), and the config file refuses it for any.
Status Selector::validate(const SelectorOptions& o) {
  switch (o.kind) {
    case SelectorKind::uniform:
    case SelectorKind::fifo:
    case SelectorKind::lifo:
    case SelectorKind::max_heap:
    case SelectorKind::min_heap:
    case SelectorKind::prioritized: return validate_exponent(o.exponent);
  }
  return {Errc::invalid_argument, "unknown selector kind " + std::to_string(static_cast<uint32_t>(o.kind)) +
                                      "; use uniform, prioritized, fifo, lifo, max_heap or min_heap"};
}

size_t Selector::bytes_needed(const SelectorOptions& o, uint32_t capacity) {
  if (!validate(o).ok() || capacity == 0 || capacity >= kNone) return 0;
  SelectorHeader h;
  return plan(o, capacity, &h);
}

Result<Selector> Selector::format(void* mem, size_t size, const SelectorOptions& o, uint32_t capacity) {
  if (Status s = validate(o); !s.ok()) return s;
  if (capacity == 0 || capacity >= kNone)
    return Status{Errc::invalid_capacity, "selector capacity must be between 1 and 2^32-2, got " + std::to_string(capacity)};
  if (reinterpret_cast<uintptr_t>(mem) % kCacheLine != 0)
    return Status{Errc::invalid_argument, "selector memory must be 64-byte aligned"};
  auto* h = static_cast<SelectorHeader*>(mem);
  SelectorHeader planned;
  size_t need = plan(o, capacity, &planned);
  if (size < need)
    return Status{Errc::invalid_argument, "selector needs " + std::to_string(need) + " bytes, got " + std::to_string(size)};
  *h = planned;
  if (o.kind == SelectorKind::prioritized) {
    auto t = PrioritizedTree::format(static_cast<char*>(mem) + h->off_tree, need - h->off_tree, capacity);
    if (!t.ok()) return t.status();
  }
  Selector s(h);
  s.clear();
  return s;
}

Result<Selector> Selector::attach(void* mem, size_t size) {
  auto* h = static_cast<SelectorHeader*>(mem);
  if (size < sizeof(SelectorHeader)) return Status{Errc::corrupt, "selector region is smaller than its header"};
  SelectorOptions o{static_cast<SelectorKind>(h->kind), h->exponent};
  if (!validate(o).ok() || h->capacity == 0 || h->capacity >= kNone)
    return Status{Errc::corrupt, "selector header has an invalid kind, exponent or capacity"};
  SelectorHeader expect;
  size_t need = plan(o, h->capacity, &expect);
  if (need > size || h->region_size != need || h->off_order != expect.off_order || h->off_back != expect.off_back ||
      h->off_heap_priority != expect.off_heap_priority || h->off_heap_seq != expect.off_heap_seq || h->off_tree != expect.off_tree)
    return Status{Errc::corrupt, "selector header is inconsistent with its capacity"};
  if (o.kind == SelectorKind::prioritized) {
    auto t = PrioritizedTree::attach(static_cast<char*>(mem) + h->off_tree, need - h->off_tree);
    if (!t.ok()) return t.status();
  } else if (h->count > h->capacity) {
    return Status{Errc::corrupt, "selector holds more members than its capacity"};
  }
  return Selector(h);
}

Selector::Selector(SelectorHeader* h) : h_(h) {
  char* base = reinterpret_cast<char*>(h);
  if (kind() == SelectorKind::prioritized) {
    tree_ = PrioritizedTree::attach(base + h->off_tree, h->region_size - h->off_tree).value();
    return;
  }
  order_ = reinterpret_cast<uint32_t*>(base + h->off_order);
  back_ = reinterpret_cast<uint32_t*>(base + h->off_back);
  if (is_heap(kind())) {
    prio_ = reinterpret_cast<double*>(base + h->off_heap_priority);
    seq_ = reinterpret_cast<uint64_t*>(base + h->off_heap_seq);
  }
}

DenseSet Selector::uniform_set() const noexcept { return {order_, back_, &h_->count}; }
OrderList Selector::list() const noexcept { return {order_, back_, &h_->head, &h_->tail, &h_->count}; }
PriorityHeap Selector::heap() const noexcept { return {order_, back_, prio_, seq_, &h_->count, kind() == SelectorKind::max_heap}; }

double Selector::weight_of(double priority) const noexcept { return priority_weight(priority, h_->exponent); }

uint32_t Selector::size() const noexcept {
  return kind() == SelectorKind::prioritized ? tree_.occupied() : h_->count;
}

bool Selector::contains(uint32_t slot) const noexcept {
  if (slot >= h_->capacity) return false;
  switch (kind()) {
    case SelectorKind::prioritized: return tree_.is_occupied(slot);
    case SelectorKind::uniform: return uniform_set().contains(slot);
    case SelectorKind::fifo:
    case SelectorKind::lifo: return list().contains(slot);
    case SelectorKind::max_heap:
    case SelectorKind::min_heap: return heap().contains(slot);
  }
  return false;
}

Status Selector::check_weight(uint32_t slot, double priority) const {
  if (Status s = validate_priority(priority); !s.ok()) return s;
  if (kind() != SelectorKind::prioritized) return Status::Ok();
  double w = weight_of(priority);
  if (!std::isfinite(w))
    return {Errc::invalid_priority, "priority " + number_text(priority) + " raised to exponent " +
                                        number_text(h_->exponent) + " overflows a double"};
  double old = slot < h_->capacity && tree_.is_occupied(slot) ? tree_.get(slot) : 0.0;
  if (w > kMaxTotalWeight || tree_.total() - old > kMaxTotalWeight - w) {
    char msg[256];
    std::snprintf(msg, sizeof msg,
                  "priority %g (weight %g with exponent %g) would bring the table's total weight above %g, where "
                  "sampling probabilities lose their meaning; scale the priorities down",
                  priority, w, h_->exponent, kMaxTotalWeight);
    return {Errc::invalid_priority, msg};
  }
  return Status::Ok();
}

Status Selector::insert(uint32_t slot, double priority) {
  if (slot >= h_->capacity)
    return {Errc::invalid_argument, "slot " + std::to_string(slot) + " is outside capacity " + std::to_string(h_->capacity)};
  if (contains(slot)) return {Errc::invalid_argument, "slot " + std::to_string(slot) + " is already in the selector"};
  if (Status s = check_weight(slot, priority); !s.ok()) return s;
  switch (kind()) {
    case SelectorKind::prioritized: tree_.set(slot, weight_of(priority)); break;
    case SelectorKind::uniform: uniform_set().insert(slot); break;
    case SelectorKind::fifo:
    case SelectorKind::lifo: list().push_newest(slot); break;
    case SelectorKind::max_heap:
    case SelectorKind::min_heap: heap().insert(slot, priority, h_->seq++); break;
  }
  return Status::Ok();
}

uint64_t Selector::tie_seq(uint32_t slot) const noexcept {
  return is_heap(kind()) && contains(slot) ? seq_[slot] : 0;
}

Status Selector::insert_with_seq(uint32_t slot, double priority, uint64_t seq) {
  if (Status s = insert(slot, priority); !s.ok()) return s;
  if (is_heap(kind())) heap().set(slot, priority, seq);
  return Status::Ok();
}

Status Selector::put_back(uint32_t slot, double priority, uint64_t seq) {
  if (kind() != SelectorKind::fifo) return insert_with_seq(slot, priority, seq);
  if (slot >= h_->capacity || contains(slot))
    return {Errc::invalid_argument, "slot " + std::to_string(slot) + " is outside capacity or already in the selector"};
  list().push_oldest(slot);
  return Status::Ok();
}

Status Selector::update(uint32_t slot, double priority) {
  if (!contains(slot)) return {Errc::invalid_argument, "slot " + std::to_string(slot) + " is not in the selector"};
  if (Status s = check_weight(slot, priority); !s.ok()) return s;
  switch (kind()) {
    case SelectorKind::prioritized: tree_.set(slot, weight_of(priority)); break;
    case SelectorKind::uniform:
    case SelectorKind::fifo:
    case SelectorKind::lifo: break;  // order does not depend on priority
    case SelectorKind::max_heap:
    case SelectorKind::min_heap: heap().set(slot, priority, h_->seq++); break;
  }
  return Status::Ok();
}

void Selector::remove(uint32_t slot) noexcept {
  if (!contains(slot)) return;
  switch (kind()) {
    case SelectorKind::prioritized: tree_.clear(slot); break;
    case SelectorKind::uniform: uniform_set().erase(slot); break;
    case SelectorKind::fifo:
    case SelectorKind::lifo: list().erase(slot); break;
    case SelectorKind::max_heap:
    case SelectorKind::min_heap: heap().erase(slot); break;
  }
}

Result<Sampled> Selector::sample(double u) const {
  if (size() == 0) return Status{Errc::empty, "selector has no items"};
  switch (kind()) {
    case SelectorKind::prioritized: {
      uint32_t slot = tree_.sample(u);
      double total = tree_.total();
      double p = total > 0.0 ? tree_.get(slot) / total : 1.0 / tree_.occupied();
      return Sampled{slot, p};
    }
    case SelectorKind::uniform: return Sampled{uniform_set().pick(u), 1.0 / h_->count};
    case SelectorKind::fifo: return Sampled{h_->head, 1.0};
    case SelectorKind::lifo: return Sampled{h_->tail, 1.0};
    case SelectorKind::max_heap:
    case SelectorKind::min_heap: return Sampled{heap().top(), 1.0};
  }
  return Status{Errc::corrupt, "selector kind is invalid"};
}

Status Selector::sample_batch(const double* u, Sampled* out, uint32_t n, SumTreeScratch& scratch) const {
  if (size() == 0) return {Errc::empty, "selector has no items"};
  if (kind() != SelectorKind::prioritized) {
    for (uint32_t i = 0; i < n; ++i) {
      auto s = sample(u[i]);
      if (!s.ok()) return s.status();
      out[i] = *s;
    }
    return Status::Ok();
  }
  uint32_t slots[SumTreeScratch::kMaxBatch];
  double total = tree_.total();
  for (uint32_t base = 0; base < n; base += SumTreeScratch::kMaxBatch) {
    uint32_t m = std::min<uint32_t>(n - base, SumTreeScratch::kMaxBatch);
    tree_.sample_batch(u + base, slots, m, scratch);
    for (uint32_t i = 0; i < m; ++i)
      out[base + i] = {slots[i], total > 0.0 ? tree_.get(slots[i]) / total : 1.0 / tree_.occupied()};
  }
  return Status::Ok();
}

void Selector::clear() noexcept {
  switch (kind()) {
    case SelectorKind::prioritized: tree_.clear_all(); break;
    case SelectorKind::uniform: uniform_set().clear(h_->capacity); break;
    case SelectorKind::fifo:
    case SelectorKind::lifo: list().clear(h_->capacity); break;
    case SelectorKind::max_heap:
    case SelectorKind::min_heap: heap().clear(h_->capacity); break;
  }
}

}  // namespace engram
