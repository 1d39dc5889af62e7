// A bounded single-producer / single-consumer ring of fixed-size records in
// shared memory: the client-to-daemon request path, and (the same type) the
// daemon-to-client response path. Wait-free on both sides; a blocked side
// sleeps on a doorbell (spin, then futex) instead of polling.
//
// Layout (one region, offsets only):
//   RingHeader (config | space doorbell line | head line) | records
// Invariants:
//  - Positions only grow; record i lives in slot (i & (capacity - 1)). The
//    first kRingSeqBytes of every slot are the ring's sequence word; the
//    record types leave them to the ring (a field named ring_seq_).
//  - The producer writes record i's bytes, then publishes it with a release
//    store of uint32(i + 1) into its slot's sequence word. The consumer
//    pops i only after an acquire load finds exactly that value, then frees
//    the slot with a release store of head = i + 1. So the consumer polls
//    the line it is about to read anyway, and the producer's position never
//    leaves its own core: one line moves per record instead of two (a
//    shared tail word was a second line that both cores took in turn).
//  - Each side keeps its own position privately and never reads it back:
//    the producer its tail, the consumer its head (stored for the producer
//    only). Nothing the other side writes can move a slot out of bounds; a
//    scribbled sequence word only makes a record look unpublished, and a
//    scribbled head only makes the ring look full to the producer.
//  - The producer reads head only when its copy says full: the consumer's
//    line moves once per lap, not once per record. The copies and the
//    positions are per SpscRing object, so one object must serve one
//    producer thread and one consumer thread at most.
//  - 32-bit sequence words are unambiguous: a slot that holds record i - cap
//    has uint32(i + 1 - cap) != uint32(i + 1) for any capacity < 2^32.
//  - After each push the producer fetches, for writing, the first line of
//    the slot write_ahead() pushes on, if its copy of head shows that slot
//    free (the copy only lags, so a slot with an unread record is never
//    fetched): the consumer's core read it a lap ago, and a store that finds
//    another core's copy stalls every store behind it (core/prefetch.hpp).
//    Only the first line: most records use one line, and the consumer
//    copies whole slots, so fetching the others would only steal them back.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>

#include "core/futex.hpp"
#include "core/segment_header.hpp"
#include "core/status.hpp"

namespace engram {

struct alignas(kCacheLine) RingHeader {
  SegmentHeader segment;  // kind ring; version written last
  uint32_t capacity;      // records, a power of two
  uint32_t record_size;   // bytes, a multiple of 8
  uint64_t region_size;
  alignas(kCacheLine) Doorbell space;              // rung by the consumer when it frees records
  alignas(kCacheLine) std::atomic<uint64_t> head;  // consumer's line
  Doorbell data;                                   // rung by the producer when it publishes
};
static_assert(sizeof(RingHeader) == 4 * kCacheLine);

// The leading bytes of every slot: the ring's sequence word.
inline constexpr uint32_t kRingSeqBytes = sizeof(uint32_t);
inline constexpr uint64_t kRingLayoutHash =
    layout_hash(static_cast<uint64_t>(SegmentKind::ring), {layout_of<RingHeader>(), layout_of<Doorbell>()});

class SpscRing {
 public:
  SpscRing() = default;

  static size_t bytes_needed(uint32_t capacity, uint32_t record_size);
  // capacity: a power of two >= 2; record_size: a multiple of 8, >= 8.
  static Result<SpscRing> format(void* mem, size_t size, uint32_t capacity, uint32_t record_size);
  // Either side may attach to a ring in use: the consumer resumes at head,
  // the producer after the last record published since.
  static Result<SpscRing> attach(void* mem, size_t size);

  uint32_t capacity() const noexcept { return capacity_; }
  uint32_t record_size() const noexcept { return record_size_; }

  // Producer. Copies one record (record_size bytes, less the ring's leading
  // kRingSeqBytes); Errc::full if no room. With ring_bell false the data
  // doorbell is not rung: for a consumer that sleeps on another doorbell (a
  // table owner serving many rings).
  Status try_push(const void* record, bool ring_bell = true) noexcept { return try_push(record, record_size_, ring_bell); }
  // The same, writing only the first `bytes` (<= record_size) of the slot:
  // the rest keeps an older record's bytes, which the reader must not look
  // at. Between processes every cache line written is one the reader's core
  // must fetch, so a record that fits one line should move one line.
  Status try_push(const void* record, size_t bytes, bool ring_bell) noexcept;
  // Waits (spin, then sleep) up to timeout_ns (< 0: for ever) for room.
  Status push(const void* record, int64_t timeout_ns) noexcept;
  // Producer: whether a push would find room now.
  bool has_space() const noexcept { return tail_ - h_->head.load(std::memory_order_acquire) < capacity_; }

  // Consumer. Copies the oldest record out (its first kRingSeqBytes are the
  // ring's); Errc::empty if none, the only error: nothing the producer
  // writes can make the ring unreadable. With ring_bell false the space
  // doorbell is not rung; call ring_space() after a batch of pops instead
  // (one fence per batch, not per record).
  Status try_pop(void* record, bool ring_bell = true) noexcept;
  void ring_space() noexcept { h_->space.ring(); }
  Status pop(void* record, int64_t timeout_ns) noexcept;
  // Consumer: whether the next record is published.
  bool has_data() const noexcept { return published(head_); }
  // Consumer: the record k places after the next one to pop, if published,
  // else nullptr. A hint for prefetching only: it is the other side's
  // memory, so act on what try_pop copies out, never on this.
  const void* peek(uint32_t k) const noexcept { return k < capacity_ && published(head_ + k) ? slot(head_ + k) : nullptr; }
  // The doorbells, for waiting on a ring together with other conditions.
  Doorbell& data_bell() const noexcept { return h_->data; }
  Doorbell& space_bell() const noexcept { return h_->space; }

 private:
  // Both positions start at head; attach() then moves the producer's past
  // the records already published.
  SpscRing(RingHeader* h, uint32_t capacity, uint32_t record_size)
      : h_(h), records_(reinterpret_cast<char*>(h) + sizeof(RingHeader)), capacity_(capacity), record_size_(record_size),
        head_(h->head.load(std::memory_order_acquire)), tail_(head_), seen_head_(head_) {}
  char* slot(uint64_t pos) const noexcept { return records_ + (pos & (capacity_ - 1)) * record_size_; }
  std::atomic<uint32_t>& seq(uint64_t pos) const noexcept { return *reinterpret_cast<std::atomic<uint32_t>*>(slot(pos)); }
  bool published(uint64_t pos) const noexcept {
    return seq(pos).load(std::memory_order_acquire) == static_cast<uint32_t>(pos + 1);
  }
  // Pushes ahead whose slot a push fetches for writing: far enough for the
  // line to arrive (a push takes a few hundred ns, a line's round trip
  // between cores about as long), near enough to stay in cache; at most
  // half the ring (bench/NOTES.md, "Tuned constants").
  static constexpr uint32_t kWriteAhead = 8;
  uint32_t write_ahead() const noexcept { return std::min<uint32_t>(kWriteAhead, capacity_ / 2); }

  // The other side can write the header, so the geometry is copied once,
  // validated, and never read back: a scribbled capacity cannot move a slot
  // out of bounds.
  RingHeader* h_ = nullptr;
  char* records_ = nullptr;
  uint32_t capacity_ = 0;
  uint32_t record_size_ = 0;
  uint64_t head_ = 0;       // consumer's position: the next record to pop
  uint64_t tail_ = 0;       // producer's position: the next record to push
  uint64_t seen_head_ = 0;  // producer's copy of head: head >= seen_head_
};

}  // namespace engram
