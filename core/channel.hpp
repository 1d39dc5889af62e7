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

struct alignas(kCacheLine) ChannelHeader {
  SegmentHeader segment;              // kind channel; version written last
  std::atomic<uint32_t> closed;       // ChannelClosed
  uint32_t table_id;
  uint64_t request_offset, request_size;
  uint64_t response_offset, response_size;
};

struct alignas(kCacheLine) BellSlot {
  Doorbell bell;
};

struct alignas(kCacheLine) BellsHeader {
  SegmentHeader segment;  // kind bells
  BellSlot slots[kMaxTables];
};

inline constexpr uint64_t kChannelLayoutHash =
    layout_hash(static_cast<uint64_t>(SegmentKind::channel),
                {layout_of<ChannelHeader>(), layout_of<RingHeader>(), layout_of<RequestRecord>(),
                 layout_of<ResponseRecord>(), {kRecordRefs, kRecordKeys}});
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
