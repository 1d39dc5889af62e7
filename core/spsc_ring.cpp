#include "core/spsc_ring.hpp"

#include <algorithm>
#include <string>

#include "core/prefetch.hpp"

namespace engram {

size_t SpscRing::bytes_needed(uint32_t capacity, uint32_t record_size) {
  return sizeof(RingHeader) + align_up(size_t{capacity} * record_size, kCacheLine);
}

Result<SpscRing> SpscRing::format(void* mem, size_t size, uint32_t capacity, uint32_t record_size) {
  if (capacity < 2 || (capacity & (capacity - 1)) != 0)
    return Status{Errc::invalid_capacity, "ring capacity must be a power of two >= 2, got " + std::to_string(capacity)};
  if (record_size < 8 || record_size % 8 != 0)
    return Status{Errc::invalid_argument, "ring record size must be a multiple of 8 bytes, got " + std::to_string(record_size)};
  size_t need = bytes_needed(capacity, record_size);
  if (size < need)
    return Status{Errc::invalid_argument, "ring needs " + std::to_string(need) + " bytes, got " + std::to_string(size)};
  if (reinterpret_cast<uintptr_t>(mem) % kCacheLine != 0)
    return Status{Errc::invalid_argument, "ring memory must be 64-byte aligned"};
  auto* h = static_cast<RingHeader*>(mem);
  segment_begin_format(&h->segment, SegmentKind::ring, kRingLayoutHash, need);
  h->capacity = capacity;
  h->record_size = record_size;
  h->region_size = need;
  h->tail.store(0, std::memory_order_relaxed);
  h->head.store(0, std::memory_order_relaxed);
  h->space.seq.store(0, std::memory_order_relaxed);
  h->space.sleepers.store(0, std::memory_order_relaxed);
  h->data.seq.store(0, std::memory_order_relaxed);
  h->data.sleepers.store(0, std::memory_order_relaxed);
  segment_publish(&h->segment);
  return SpscRing(h, capacity, record_size);
}

Result<SpscRing> SpscRing::attach(void* mem, size_t size) {
  auto* h = static_cast<RingHeader*>(mem);
  if (Status s = segment_check(&h->segment, SegmentKind::ring, kRingLayoutHash, size); !s.ok()) return s;
  uint32_t cap = h->capacity, rs = h->record_size;
  if (cap < 2 || (cap & (cap - 1)) != 0 || rs < 8 || rs % 8 != 0 || h->region_size != bytes_needed(cap, rs) ||
      h->region_size > size)
    return Status{Errc::corrupt, "ring header has an invalid capacity or record size"};
  return SpscRing(h, cap, rs);
}

Result<uint64_t> SpscRing::readable() const noexcept {
  uint64_t tail = h_->tail.load(std::memory_order_acquire);
  uint64_t head = h_->head.load(std::memory_order_relaxed);
  if (tail - head > capacity_)
    return Status{Errc::corrupt, "ring producer position is " + std::to_string(tail) + " with consumer at " +
                                     std::to_string(head) + " and capacity " + std::to_string(capacity_)};
  return tail - head;
}

Status SpscRing::try_push(const void* record, size_t bytes, bool ring_bell) noexcept {
  uint64_t tail = h_->tail.load(std::memory_order_relaxed);
  if (tail - seen_head_ >= capacity_) {
    seen_head_ = h_->head.load(std::memory_order_acquire);
    if (tail - seen_head_ >= capacity_) return {Errc::full, {}};
  }
  std::memcpy(slot(tail), record, std::min<size_t>(bytes, record_size_));
  if (uint64_t ahead = tail + write_ahead(); ahead - seen_head_ < capacity_) prefetch_for_write(slot(ahead));
  h_->tail.store(tail + 1, std::memory_order_release);
  if (ring_bell) h_->data.ring();
  return Status::Ok();
}

Status SpscRing::push(const void* record, int64_t timeout_ns) noexcept {
  for (;;) {
    Status s = try_push(record);
    if (s.code() != Errc::full) return s;
    bool room = h_->space.wait(
        [this] {
          return h_->tail.load(std::memory_order_relaxed) - h_->head.load(std::memory_order_acquire) < capacity_;
        },
        timeout_ns);
    if (!room) return {Errc::timeout, "ring stayed full for the whole timeout"};
  }
}

Status SpscRing::try_pop(void* record, bool ring_bell) noexcept {
  uint64_t head = h_->head.load(std::memory_order_relaxed);
  if (head == seen_tail_) {
    auto n = readable();
    if (!n.ok()) return n.status();
    if (*n == 0) return {Errc::empty, {}};
    seen_tail_ = head + *n;
  } else if (seen_tail_ - head > capacity_) {  // the producer moved head, which only we store
    return {Errc::corrupt, "ring consumer position " + std::to_string(head) + " is not within " +
                               std::to_string(capacity_) + " records of the producer's " + std::to_string(seen_tail_)};
  }
  std::memcpy(record, slot(head), record_size_);
  h_->head.store(head + 1, std::memory_order_release);
  if (ring_bell) h_->space.ring();
  return Status::Ok();
}

Status SpscRing::pop(void* record, int64_t timeout_ns) noexcept {
  for (;;) {
    Status s = try_pop(record);
    if (s.code() != Errc::empty) return s;
    bool any = h_->data.wait(
        [this] { return h_->tail.load(std::memory_order_acquire) != h_->head.load(std::memory_order_relaxed); },
        timeout_ns);
    if (!any) return {Errc::timeout, "ring stayed empty for the whole timeout"};
  }
}

}  // namespace engram
