// A bounded single-producer / single-consumer ring of fixed-size records in
// shared memory: the client-to-daemon request path, and (the same type) the
// daemon-to-client response path. Wait-free on both sides; a blocked side
// sleeps on a doorbell (spin, then futex) instead of polling.
//
// Layout (one region, offsets only):
//   RingHeader (3 cache lines: config | producer line | consumer line) | records
// Invariants:
//  - head (consumer position) and tail (producer position) only grow; 0 <=
//    tail - head <= capacity; record i lives at (i & (capacity - 1));
//  - the producer writes a record, then publishes it with a release store of
//    tail; the consumer reads it, then frees it with a release store of head.
//  - Everything read from the other side is untrusted: a consumer that sees
//    tail - head > capacity reports Errc::corrupt instead of reading.
//  - Each side keeps a private copy of the other side's position and reads
//    the shared one only when the copy says full (producer) or empty
//    (consumer): the other side's cache line then moves once per batch of
//    records, not once per record. The copies are per SpscRing object, so
//    one object must serve one producer thread and one consumer thread at
//    most (each touches only its own copy).
//  - After each push the producer fetches, for writing, the first line of
//    the slot write_ahead() pushes on, if its copy of head shows that slot
//    free (the copy only lags, so a slot with an unread record is never
//    fetched):
//    the consumer's core read it a lap ago, and a store that finds another
//    core's copy stalls every store behind it (core/prefetch.hpp). Only
//    the first line: most records use one line, and the consumer copies
//    whole slots, so fetching the others would only steal them back.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>

#include "core/futex.hpp"
#include "core/segment_header.hpp"
#include "core/status.hpp"

namespace engram {

struct alignas(kCacheLine) RingHeader {
  SegmentHeader segment;  // kind ring; version written last
  uint32_t capacity;      // records, a power of two
  uint32_t record_size;   // bytes, a multiple of 8
  uint64_t region_size;
  alignas(kCacheLine) std::atomic<uint64_t> tail;  // producer's line
  Doorbell space;                                  // rung by the consumer when it frees records
  alignas(kCacheLine) std::atomic<uint64_t> head;  // consumer's line
  Doorbell data;                                   // rung by the producer when it publishes
};
static_assert(sizeof(RingHeader) == 4 * kCacheLine);
inline constexpr uint64_t kRingLayoutHash =
    layout_hash(static_cast<uint64_t>(SegmentKind::ring), {layout_of<RingHeader>(), layout_of<Doorbell>()});

class SpscRing {
 public:
  SpscRing() = default;

  static size_t bytes_needed(uint32_t capacity, uint32_t record_size);
  // capacity: a power of two >= 2; record_size: a multiple of 8, >= 8.
  static Result<SpscRing> format(void* mem, size_t size, uint32_t capacity, uint32_t record_size);
  static Result<SpscRing> attach(void* mem, size_t size);

  uint32_t capacity() const noexcept { return capacity_; }
  uint32_t record_size() const noexcept { return record_size_; }

  // Producer. Copies one record (record_size bytes); Errc::full if no room.
  // With ring_bell false the data doorbell is not rung: for a consumer that
  // sleeps on another doorbell (a table owner serving many rings).
  Status try_push(const void* record, bool ring_bell = true) noexcept { return try_push(record, record_size_, ring_bell); }
  // The same, writing only the first `bytes` (<= record_size) of the slot:
  // the rest keeps an older record's bytes, which the reader must not look
  // at. Between processes every cache line written is one the reader's core
  // must fetch, so a record that fits one line should move one line.
  Status try_push(const void* record, size_t bytes, bool ring_bell) noexcept;
  // Waits (spin, then sleep) up to timeout_ns (< 0: for ever) for room.
  Status push(const void* record, int64_t timeout_ns) noexcept;

  // Consumer. Copies the oldest record out; Errc::empty if none. With
  // ring_bell false the space doorbell is not rung; call ring_space() after
  // a batch of pops instead (one fence per batch, not per record).
  Status try_pop(void* record, bool ring_bell = true) noexcept;
  void ring_space() noexcept { h_->space.ring(); }
  Status pop(void* record, int64_t timeout_ns) noexcept;
  // Consumer: the published record k places after the next one to pop, if
  // this side already knows of it (no shared load), else nullptr. A hint
  // for prefetching only: it is the other side's memory, so act on what
  // try_pop copies out, never on this.
  const void* peek(uint32_t k) const noexcept {
    uint64_t head = h_->head.load(std::memory_order_relaxed);
    return seen_tail_ - head > k && seen_tail_ - head <= capacity_ ? slot(head + k) : nullptr;
  }
  // The doorbells, for waiting on a ring together with other conditions.
  Doorbell& data_bell() const noexcept { return h_->data; }
  Doorbell& space_bell() const noexcept { return h_->space; }

  // Number of records ready; Errc::corrupt if the producer wrote nonsense.
  Result<uint64_t> readable() const noexcept;

 private:
  SpscRing(RingHeader* h, uint32_t capacity, uint32_t record_size)
      : h_(h), records_(reinterpret_cast<char*>(h) + sizeof(RingHeader)), capacity_(capacity),
        record_size_(record_size), seen_head_(h->head.load(std::memory_order_acquire)), seen_tail_(seen_head_) {}
  char* slot(uint64_t pos) const noexcept { return records_ + (pos & (capacity_ - 1)) * record_size_; }
  // Pushes ahead whose slot a push fetches for writing: far enough for the
  // line to arrive (a push takes a few hundred ns, the round trip about
  // 600 ns in this VM; 4 and 16 ran alike in trials), near enough to stay
  // in cache; 1 to 8, at most half the ring.
  static constexpr uint32_t kWriteAhead = 8;
  uint32_t write_ahead() const noexcept { return std::min<uint32_t>(kWriteAhead, capacity_ / 2); }

  // The other side can write the header, so the geometry is copied once,
  // validated, and never read back: a scribbled capacity cannot move a slot
  // out of bounds.
  RingHeader* h_ = nullptr;
  char* records_ = nullptr;
  uint32_t capacity_ = 0;
  uint32_t record_size_ = 0;
  uint64_t seen_head_ = 0;  // producer's copy of head: head >= seen_head_
  uint64_t seen_tail_ = 0;  // consumer's copy of tail: tail >= seen_tail_; == head: look again
};

}  // namespace engram
