// A table channel: the shared segment that connects one client to one table's
// owner thread. The daemon creates it when the client opens the table; the
// client writes requests into one ring and reads responses from the other.
//
// Layout: ChannelHeader | request ring (client -> owner) | response ring (owner -> client)
//
// The owner sleeps on its table's doorbell, not on any one channel: a client
// pushes a request, then rings the table's bell in the bell segment (one
// Doorbell per table id, each on its own cache line).
#pragma once

#include <atomic>
#include <cstdint>

#include "core/futex.hpp"
#include "core/ring_record.hpp"
#include "core/segment_header.hpp"
#include "core/spsc_ring.hpp"

namespace engram {

inline constexpr uint32_t kMaxTables = 64;

// Why a channel stopped; set by the daemon, read by the client while it waits.
enum class ChannelClosed : uint32_t { open = 0, table_dropped = 1, daemon_stopping = 2, protocol_error = 3 };

// Written once by the daemon before the version is published, except
// `closed`, which only the daemon stores (0 -> a reason, never back) and the
// client polls while it waits, and `sample_gate` (below). The client can
// scribble on all of it; the daemon keeps its own Channel view (ring
// geometry copied at format) and never reads the offsets back.
//
// sample_gate decides, for a sample with a deadline, whether the owner
// applies it or its caller gives up on it: whoever moves the gate past the
// request's id first wins, in one CAS each, so both sides always agree.
//   owner, about to apply sample `id`: CAS gate -> id, unless the gate says
//     "cancelled through >= id" (kGateCancelled | id2, id2 >= id): then the
//     request is answered with a timeout and not applied;
//   client, at its deadline or interrupted (engram_client_interrupt): CAS
//     gate -> kGateCancelled | id, unless the gate already holds id
//     (claimed): then the answer is on its way, and the client waits for it;
//   owner, revisiting a sample that waits for the rate limiter: if the gate
//     says "cancelled through >= id", answers it with a timeout at once,
//     so that the channel's later requests go on. The client rings the bell
//     after an interrupt for that. (Samples that wait "for ever" carry a
//     deadline a year away, so that they too are gated.)
// A client's samples on one channel are answered in order and one at a
// time (each call waits for its own, and engram_sample_begin refuses a
// second while one is begun), so "through" cancels only samples their
// callers gave up on. A client that scribbles on the gate can only
// lose its own samples.
inline constexpr uint64_t kGateCancelled = uint64_t{1} << 63;
struct alignas(kCacheLine) ChannelHeader {
  SegmentHeader segment;              // kind channel; version written last
  std::atomic<uint32_t> closed;       // ChannelClosed
  uint32_t table_id;
  uint64_t request_offset, request_size;
  uint64_t response_offset, response_size;
  std::atomic<uint64_t> sample_gate;  // see above; 0 at format
};
static_assert(sizeof(ChannelHeader) == 2 * kCacheLine);

// Doorbell of table id i: clients ring it after pushing a request, the
// table's owner waits on it. One per cache line, so that tables do not
// share lines. A client that scribbles on it can only cause spurious or
// late wake-ups (owners wait with deadlines where one is pending).
struct alignas(kCacheLine) BellSlot {
  Doorbell bell;
};
static_assert(sizeof(BellSlot) == kCacheLine);

struct alignas(kCacheLine) BellsHeader {
  SegmentHeader segment;  // kind bells
  BellSlot slots[kMaxTables];
};
static_assert(sizeof(BellsHeader) == (1 + kMaxTables) * kCacheLine);

inline constexpr uint64_t kChannelLayoutHash =
    layout_hash(static_cast<uint64_t>(SegmentKind::channel),
                {layout_of<ChannelHeader>(), layout_of<RingHeader>(), layout_of<RequestRecord>(),
                 layout_of<ResponseRecord>(), {kRecordRefs, kRecordKeys}, {kRecordAcks, 0}});
inline constexpr uint64_t kBellsLayoutHash =
    layout_hash(static_cast<uint64_t>(SegmentKind::bells), {layout_of<BellsHeader>(), {kMaxTables, 0}});

struct Channel {
  ChannelHeader* header = nullptr;
  SpscRing requests;
  SpscRing responses;

  static size_t bytes_needed(uint32_t records);
  static Result<Channel> format(void* mem, size_t size, uint32_t table_id, uint32_t records);
  static Result<Channel> attach(void* mem, size_t size);
};

}  // namespace engram
