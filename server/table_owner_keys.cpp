// Priority updates and deletes by key: each key's generation is checked
// against its slot, so that a key of an item gone is reported, never
// applied to the slot's next item. It touches the table only.
#include <string>

#include "core/priority.hpp"
#include "server/table_owner.hpp"

namespace engram {

void TableOwner::update(ChannelState& c, const RequestRecord& r) {
  for (uint32_t i = 0; i < r.count; ++i)
    if (Status s = validate_priority(r.payload.updates[i].priority); !s.ok())
      return fail(c, r, {s.code(), "update entry " + std::to_string(i) + ": " + s.message() + " (nothing applied)"});
  if (view_) return update_view(c, r);
  ResponseRecord rsp{};
  rsp.op = r.op;
  rsp.id = r.id;
  for (uint32_t i = 0; i < r.count; ++i) {
    Status s = table_.update(r.payload.updates[i].key, r.payload.updates[i].priority);
    if (s.ok()) ++rsp.payload.keys.applied;
    else if (s.code() == Errc::stale_key) rsp.payload.keys.stale_mask |= 1u << i;
    else if (s.code() == Errc::invalid_priority)  // its weight would bring the total past the limit
      return fail(c, r, {s.code(), "update entry " + std::to_string(i) + ": " + s.message() + " (the " +
                                       std::to_string(i) + " entries before it were applied, it and the rest not)"});
    else rsp.payload.keys.unknown_mask |= 1u << i;
  }
  respond(c, rsp);
}

void TableOwner::remove(ChannelState& c, const RequestRecord& r) {
  ResponseRecord rsp{};
  rsp.op = r.op;
  rsp.id = r.id;
  for (uint32_t i = 0; i < r.count; ++i) {
    Status s = table_.remove(r.payload.keys[i]);
    if (s.ok()) ++rsp.payload.keys.applied;
    else if (s.code() == Errc::stale_key) rsp.payload.keys.stale_mask |= 1u << i;
    else rsp.payload.keys.unknown_mask |= 1u << i;
  }
  respond(c, rsp);
}

}  // namespace engram
