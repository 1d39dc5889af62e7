#include "core/ring_record.hpp"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <string>

namespace engram {

const char* request_op_name(uint32_t op) noexcept {
  switch (static_cast<RequestOp>(op)) {
    case RequestOp::insert: return "insert";
    case RequestOp::sample: return "sample";
    case RequestOp::release: return "release";
    case RequestOp::drop: return "drop";
    case RequestOp::update: return "update";
    case RequestOp::remove: return "remove";
    case RequestOp::sample_packed: return "sample_packed";
    case RequestOp::insert_items: return "insert_items";
    case RequestOp::shard: return "shard";
  }
  return "unknown";
}

size_t request_bytes(const RequestRecord& r) noexcept {
  size_t head = offsetof(RequestRecord, payload), n = std::min(r.count, kRecordKeys);
  switch (static_cast<RequestOp>(r.op)) {
    case RequestOp::insert:
      return offsetof(RequestRecord, payload.insert.refs) + sizeof(ChunkRef) * std::min(r.count, kRecordRefs);
    case RequestOp::sample: return offsetof(RequestRecord, payload.sample) + sizeof r.payload.sample;
    case RequestOp::release: return head;
    case RequestOp::drop: return head + sizeof(BlockRef) * n;
    case RequestOp::update: return head + sizeof(KeyPriority) * std::min(r.count, kRecordUpdates);
    case RequestOp::remove: return head + sizeof(uint64_t) * n;
    case RequestOp::insert_items:
      return offsetof(RequestRecord, payload.items.items) + sizeof(ItemEntry) * std::min(r.count, kRecordItems);
    case RequestOp::shard: return offsetof(RequestRecord, payload.shard) + sizeof r.payload.shard;
    case RequestOp::sample_packed: break;  // a response, never a request
  }
  return sizeof r;
}

size_t response_bytes(const ResponseRecord& r) noexcept {
  size_t head = offsetof(ResponseRecord, payload);
  if (r.status != 0) return head + strnlen(r.payload.message, sizeof r.payload.message - 1) + 1;
  switch (static_cast<RequestOp>(r.op)) {
    case RequestOp::insert: return head + sizeof(InsertAck) * std::min(r.count, kRecordAcks);
    case RequestOp::sample:
      if (r.count == 0) return head;
      return offsetof(ResponseRecord, payload.item.refs) + sizeof(ChunkRef) * std::min(r.payload.item.num_refs, kRecordRefs);
    case RequestOp::sample_packed:
      return offsetof(ResponseRecord, payload.packed.items) +
             sizeof(PackedItemWire) * std::min(r.payload.packed.n, kPackedItems);
    case RequestOp::update:
    case RequestOp::remove: return head + sizeof r.payload.keys;
    case RequestOp::shard:
      return offsetof(ResponseRecord, payload.shard.updates) + sizeof(KeyPriority) * std::min(r.count, kRecordUpdates);
    default: break;
  }
  return sizeof r;
}

Status check_request(const RequestRecord& r, uint32_t max_batch) noexcept {
  auto count_in = [&](uint32_t lo, uint32_t hi) -> Status {
    if (r.count >= lo && r.count <= hi) return Status::Ok();
    return {Errc::invalid_argument, std::string(request_op_name(r.op)) + " request with count " +
                                        std::to_string(r.count) + ", allowed " + std::to_string(lo) + ".." +
                                        std::to_string(hi)};
  };
  const uint32_t allowed = r.op == static_cast<uint32_t>(RequestOp::sample)   ? kSampleSequences | kSampleNewest | kSampleDistinct
                           : r.op == static_cast<uint32_t>(RequestOp::insert) ? kInsertAtMax | kInsertDraw
                                                                               : 0;
  if (r.flags & ~allowed)
    return {Errc::invalid_argument, std::string(request_op_name(r.op)) + " request with flags " + std::to_string(r.flags) +
                                        "; a sample may have kSampleSequences, kSampleNewest and kSampleDistinct, "
                                        "an insert kInsertAtMax or kInsertDraw, other requests none"};
  if (r.op == static_cast<uint32_t>(RequestOp::insert) && (r.flags & kInsertAtMax) && (r.flags & kInsertDraw))
    return {Errc::invalid_argument, "a shard's draw (kInsertDraw) has the priority the shard gave it: drop kInsertAtMax"};
  const bool look = r.op == static_cast<uint32_t>(RequestOp::sample) && (r.flags & kSampleNewest);
  if (look && (r.flags & kSampleDistinct))
    return {Errc::invalid_argument, "a look at the newest items (kSampleNewest) is distinct already: drop kSampleDistinct"};
  if (look && r.deadline_ns != 0)
    return {Errc::invalid_argument, "a look at the newest items (kSampleNewest) never waits: its deadline must be 0"};
  switch (static_cast<RequestOp>(r.op)) {
    case RequestOp::insert: return count_in(1, kRecordRefs);
    case RequestOp::sample: return count_in(1, max_batch);
    case RequestOp::release: return count_in(0, 0);
    case RequestOp::drop: return count_in(1, kRecordKeys);
    case RequestOp::update: return count_in(1, kRecordUpdates);
    case RequestOp::remove: return count_in(1, kRecordKeys);
    case RequestOp::insert_items: return count_in(1, kRecordItems);
    case RequestOp::shard:
      if (r.payload.shard.state != kShardPresent && r.payload.shard.state != kShardAway)
        return {Errc::invalid_argument, "shard request with state " + std::to_string(r.payload.shard.state) +
                                            "; a shard is present (1) or away (0)"};
      return count_in(0, kRecordUpdates);
    case RequestOp::sample_packed: break;  // a response, never a request
  }
  return {Errc::invalid_argument, "unknown request op " + std::to_string(r.op)};
}

ResponseRecord error_response(const RequestRecord& r, const Status& s) noexcept {
  ResponseRecord out{};
  out.op = r.op;
  out.id = r.id;
  out.status = static_cast<int16_t>(s.code());
  size_t n = std::min(s.message().size(), sizeof out.payload.message - 1);
  std::memcpy(out.payload.message, s.message().data(), n);
  out.payload.message[n] = '\0';
  return out;
}

Status response_status(const ResponseRecord& r) {
  if (r.status == 0) return Status::Ok();
  return {static_cast<Errc>(r.status), std::string(r.payload.message, strnlen(r.payload.message, sizeof r.payload.message))};
}

}  // namespace engram
