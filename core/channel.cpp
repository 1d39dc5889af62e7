#include "core/channel.hpp"

#include <new>
#include <string>

namespace engram {

size_t Channel::bytes_needed(uint32_t records) {
  size_t ring = SpscRing::bytes_needed(records, kRecordSize);
  if (ring == 0) return 0;
  return align_up(sizeof(ChannelHeader), kCacheLine) + 2 * align_up(ring, kCacheLine);
}

Result<Channel> Channel::format(void* mem, size_t size, uint32_t table_id, uint32_t records) {
  size_t need = bytes_needed(records);
  if (need == 0 || size < need)
    return Status{Errc::invalid_argument, "channel of " + std::to_string(records) + " records needs " +
                                              std::to_string(need) + " bytes, got " + std::to_string(size)};
  auto* h = new (mem) ChannelHeader{};
  segment_begin_format(&h->segment, SegmentKind::channel, kChannelLayoutHash, size);
  size_t ring = align_up(SpscRing::bytes_needed(records, kRecordSize), kCacheLine);
  h->table_id = table_id;
  h->request_offset = align_up(sizeof(ChannelHeader), kCacheLine);
  h->request_size = ring;
  h->response_offset = h->request_offset + ring;
  h->response_size = ring;
  char* base = static_cast<char*>(mem);
  Channel c;
  c.header = h;
  auto req = SpscRing::format(base + h->request_offset, ring, records, kRecordSize);
  if (!req.ok()) return req.status();
  auto rsp = SpscRing::format(base + h->response_offset, ring, records, kRecordSize);
  if (!rsp.ok()) return rsp.status();
  c.requests = *req;
  c.responses = *rsp;
  segment_publish(&h->segment);
  return c;
}

Result<Channel> Channel::attach(void* mem, size_t size) {
  if (size < sizeof(ChannelHeader)) return Status{Errc::corrupt, "channel segment smaller than its header"};
  auto* h = static_cast<ChannelHeader*>(mem);
  if (Status s = segment_check(&h->segment, SegmentKind::channel, kChannelLayoutHash, size); !s.ok()) return s;
  uint64_t req_end = h->request_offset + h->request_size, rsp_end = h->response_offset + h->response_size;
  if (h->request_offset < sizeof(ChannelHeader) || req_end < h->request_offset || req_end > size ||
      h->response_offset < req_end || rsp_end < h->response_offset || rsp_end > size)
    return Status{Errc::corrupt, "channel ring offsets lie outside the segment"};
  char* base = static_cast<char*>(mem);
  Channel c;
  c.header = h;
  auto req = SpscRing::attach(base + h->request_offset, h->request_size);
  if (!req.ok()) return req.status();
  auto rsp = SpscRing::attach(base + h->response_offset, h->response_size);
  if (!rsp.ok()) return rsp.status();
  if (req->record_size() != kRecordSize || rsp->record_size() != kRecordSize)
    return Status{Errc::layout_mismatch, "channel rings hold records of another size than " +
                                             std::to_string(kRecordSize) + " bytes"};
  c.requests = *req;
  c.responses = *rsp;
  return c;
}

}  // namespace engram
