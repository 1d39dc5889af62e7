#include "core/spsc_ring.hpp"

#include <algorithm>
#include <cstring>
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
  h->head.store(0, std::memory_order_relaxed);
  SpscRing ring(h, capacity, record_size);
  // Memory reused from an older ring may hold any sequence words; 0 is never
  // record i + 1 within the first 2^32 - 1 records, by which time every slot
  // has been written.
  for (uint32_t i = 0; i < capacity; ++i) ring.seq(i).store(0, std::memory_order_relaxed);
  h->space.seq.store(0, std::memory_order_relaxed);
  h->space.sleepers.store(0, std::memory_order_relaxed);
  h->data.seq.store(0, std::memory_order_relaxed);
  h->data.sleepers.store(0, std::memory_order_relaxed);
  segment_publish(&h->segment);
  return ring;
}

Result<SpscRing> SpscRing::attach(void* mem, size_t size) {
  auto* h = static_cast<RingHeader*>(mem);
  if (Status s = segment_check(&h->segment, SegmentKind::ring, kRingLayoutHash, size); !s.ok()) return s;
  uint32_t cap = h->capacity, rs = h->record_size;
  if (cap < 2 || (cap & (cap - 1)) != 0 || rs < 8 || rs % 8 != 0 || h->region_size != bytes_needed(cap, rs) ||
      h->region_size > size)
    return Status{Errc::corrupt, "ring header has an invalid capacity or record size"};
  SpscRing ring(h, cap, rs);
  // A producer resumes after the records published since head.
  while (ring.tail_ - ring.head_ < cap && ring.published(ring.tail_)) ++ring.tail_;
  return ring;
}

Status SpscRing::try_push(const void* record, size_t bytes, bool ring_bell) noexcept {
  uint64_t t = tail_;
  if (t - seen_head_ >= capacity_) {
    seen_head_ = h_->head.load(std::memory_order_acquire);
    if (t - seen_head_ >= capacity_) return {Errc::full, {}};
  }
  bytes = std::min<size_t>(bytes, record_size_);
  if (bytes > kRingSeqBytes)
    std::memcpy(slot(t) + kRingSeqBytes, static_cast<const char*>(record) + kRingSeqBytes, bytes - kRingSeqBytes);
  seq(t).store(static_cast<uint32_t>(t + 1), std::memory_order_release);
  tail_ = t + 1;
  if (uint64_t ahead = t + write_ahead(); ahead - seen_head_ < capacity_) prefetch_for_write(slot(ahead));
  if (ring_bell) h_->data.ring();
  return Status::Ok();
}

Status SpscRing::push(const void* record, int64_t timeout_ns) noexcept {
  for (;;) {
    Status s = try_push(record);
    if (s.code() != Errc::full) return s;
    if (!h_->space.wait([this] { return has_space(); }, timeout_ns))
      return {Errc::timeout, "ring stayed full for the whole timeout"};
  }
}

Status SpscRing::try_pop(void* record, bool ring_bell) noexcept {
  if (!published(head_)) return {Errc::empty, {}};
  std::memcpy(record, slot(head_), record_size_);
  h_->head.store(++head_, std::memory_order_release);
  if (ring_bell) h_->space.ring();
  return Status::Ok();
}

Status SpscRing::pop(void* record, int64_t timeout_ns) noexcept {
  for (;;) {
    Status s = try_pop(record);
    if (s.code() != Errc::empty) return s;
    if (!h_->data.wait([this] { return has_data(); }, timeout_ns))
      return {Errc::timeout, "ring stayed empty for the whole timeout"};
  }
}

}  // namespace engram
