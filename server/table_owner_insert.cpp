// Inserts: a record of one item or of several one-chunk items, applied in
// the rate limiter's turn; the checks of each chunk slice against its
// block; and a channel's drop of the chunk holds its writer no longer
// needs. It touches the table, the arena's blocks the client holds
// reserved or its channel holds, and the channel's holds.
#include <algorithm>
#include <string>

#include "core/chunk_format.hpp"
#include "core/priority.hpp"
#include "server/table_owner.hpp"

namespace engram {

Status TableOwner::check_ref_chunk(const ChunkRef& ref, ChunkHeader* out) const {
  if (ref.block >= arena_.total_blocks())
    return {Errc::stale_reference, "block " + std::to_string(ref.block) + " does not exist"};
  return check_chunk(arena_.data({ref.block, ref.generation}), arena_.block_size(ref.block), table_.columns(),
                     table_.num_columns(), sig_hash_, ref.offset, ref.length, out);
}

Status TableOwner::check_insert_chunk(const ChunkRef& ref, uint32_t chunk_steps, ChunkHeader* out) const {
  // check_ref_chunk refuses a block outside the arena before reading it.
  if (packed_ || ref.block >= arena_.total_blocks()) return check_ref_chunk(ref, out);
  return plain_chunk_header(arena_.block_size(ref.block), table_.columns(), table_.num_columns(), sig_hash_,
                            chunk_steps, ref.offset, ref.length, out);
}

TableOwner::Outcome TableOwner::insert(ChannelState& c, const RequestRecord& r) {
  Outcome o = insert_in_turn(c, r);
  if (o == Outcome::done) leave_insert_line(c);
  else if (std::find(insert_line_.begin(), insert_line_.end(), &c) == insert_line_.end()) insert_line_.push_back(&c);
  return o;
}

TableOwner::Outcome TableOwner::insert_items(ChannelState& c, RequestRecord& r) {
  auto& in = r.payload.items;
  for (uint32_t i = 0; i < r.count; ++i) {
    if (c.broken) return Outcome::done;
    RequestRecord one{};
    one.op = static_cast<uint32_t>(RequestOp::insert);
    one.count = 1;
    one.id = r.id + i;
    one.deadline_ns = r.deadline_ns;
    one.payload.insert.priority = in.items[i].priority;
    one.payload.insert.chunk_steps = in.chunk_steps;
    one.payload.insert.want_spare = in.want_spare >> i & 1;
    one.payload.insert.refs[0] = in.items[i].ref;
    if (insert(c, one) == Outcome::done) continue;
    std::copy(in.items + i, in.items + r.count, in.items);
    in.want_spare >>= i;
    r.id += i;
    r.count -= i;
    return Outcome::deferred;
  }
  return Outcome::done;
}

void TableOwner::leave_insert_line(const ChannelState& c) {
  auto it = std::find(insert_line_.begin(), insert_line_.end(), &c);
  if (it != insert_line_.end()) insert_line_.erase(it);
}

TableOwner::Outcome TableOwner::insert_in_turn(ChannelState& c, const RequestRecord& r) {
  const auto& in = r.payload.insert;
  if (expired(c, r, "an insert")) return Outcome::done;
  if (Status s = check_draw(c, r); !s.ok()) return fail(c, r, s), Outcome::done;
  const bool at_max = r.flags & kInsertAtMax;  // other flags were refused (check_request)
  if (Status s = validate_priority(in.priority); !at_max && !s.ok()) return fail(c, r, s), Outcome::done;
  if (r.count > table_.refs_per_item())
    return fail(c, r, {Errc::invalid_argument, "item spans " + std::to_string(r.count) + " chunks; table " +
                                                   table_.name() + " allows " + std::to_string(table_.refs_per_item())}),
           Outcome::done;
  // An item delivered before is answered at once: it must not wait for
  // the rate limiter it already passed.
  // A draw's producer and sequence slots carry its shard key and
  // probability (kInsertDraw): it is applied with no delivery.
  const Delivery from = (r.flags & kInsertDraw) ? Delivery{} : Delivery{in.producer, in.sequence};
  if (Status s = table_.check_delivery(from); !s.ok()) return fail(c, r, s), Outcome::done;
  bool my_turn = insert_line_.empty() || insert_line_.front() == &c;
  if (!my_turn || !table_.limiter().can_insert(1)) return refuse(c, r, "an insert");

  // Check the chunks before taking anything: a refused insert must leave a
  // writer's blocks as they were (still reserved by it). Clients may
  // rewrite a chunk later, but only samplers read chunk bytes, and they
  // check what they read.
  ChunkHeader headers[kRecordRefs];
  for (uint32_t i = 0; i < r.count; ++i) {
    Status s = check_insert_chunk(in.refs[i], in.chunk_steps, &headers[i]);
    if (!s.ok()) return fail(c, r, {s.code(), "item reference " + std::to_string(i) + ": " + s.message()}), Outcome::done;
  }
  // Each reference takes one item reference; a chunk this channel does not
  // hold yet also takes the channel's hold, in the same CAS (sealing the
  // writer's new chunk).
  BlockRef newly[kRecordRefs];
  uint32_t newly_ref[kRecordRefs];
  uint32_t n_new = 0, n_taken = 0;
  auto undo = [&] {
    for (uint32_t i = 0; i < n_taken; ++i) (void)arena_.release(arena_id_, {in.refs[i].block, in.refs[i].generation});
    for (uint32_t i = 0; i < n_new; ++i) {
      c.holds.erase(pack_block(newly[i]));
      (void)arena_.release(arena_id_, newly[i]);
    }
  };
  for (; n_taken < r.count; ++n_taken) {
    BlockRef b{in.refs[n_taken].block, in.refs[n_taken].generation};
    bool held = c.holds.contains(pack_block(b));
    Status s = held ? arena_.acquire(b) : arena_.pin(c.client, b, 2);
    if (!s.ok()) {
      undo();
      return fail(c, r, {s.code(), "item reference " + std::to_string(n_taken) + ": " + s.message()}), Outcome::done;
    }
    if (!held) {
      c.holds.insert(pack_block(b));
      newly_ref[n_new] = n_taken;
      newly[n_new++] = b;
    }
  }
  size_t freed_before = freed_.size();  // an eviction may free blocks
  auto key = table_.insert(at_max ? table_.at_max_priority() : in.priority, in.refs, r.count,
                           plain_steps_of(headers[0]), from);
  if (!key.ok()) {
    undo();
    return fail(c, r, key.status()), Outcome::done;
  }
  if (view_) add_draw(c, r, *key);
  // The next insert's eviction drops a reference to a chunk written long
  // ago: start fetching its state word now.
  const ChunkRef* victim = nullptr;
  for (uint32_t i = 0, n = table_.next_victim(&victim); i < n; ++i)
    if (victim[i].block < arena_.total_blocks()) arena_.prefetch_state(victim[i].block);
  for (uint32_t i = 0; i < n_new; ++i) {
    uint64_t raw = 0, stored = 0;
    if (chunk_sizes(arena_.data(newly[i]), arena_.block_size(newly[i].index), headers[newly_ref[i]], table_.columns(),
                    &raw, &stored)
            .ok())
      table_.count_chunk(raw, stored);
  }
  InsertAck a{*key, kNoSpare, 0};
  // A spare for the writer, if it wants one (see InsertAck): the victim's
  // block, if this insert freed one of the class of the item's newest
  // chunk, else one from the free list.
  uint32_t want = arena_.class_of(in.refs[r.count - 1].block);
  for (size_t i = freed_before; in.want_spare && i < freed_.size(); ++i) {
    if (c.broken || arena_.class_of(freed_[i].index) != want || !arena_.hand_over(arena_id_, c.client, freed_[i]).ok()) continue;
    a.spare_block = freed_[i].index;
    a.spare_generation = freed_[i].generation;
    freed_.erase(freed_.begin() + static_cast<long>(i));
    break;
  }
  if (a.spare_block == kNoSpare && in.want_spare && !c.broken) {
    auto b = arena_.alloc(arena_id_, want);  // none free: the writer waits for evictions, or asks the server
    if (b.ok() && arena_.hand_over(arena_id_, c.client, *b).ok()) {
      a.spare_block = b->index;
      a.spare_generation = b->generation;
    } else if (b.ok()) {
      (void)arena_.free_reserved(arena_id_, *b);
    }
  }
  // Joins the ack record of the inserts just before it in this batch, if
  // there is one with room: one record (and one cache line for the client
  // to fetch) per few inserts, not per insert.
  if (c.broken) return Outcome::done;
  if (!out_.empty() && is_ack_record(out_.back()) && out_.back().count < kRecordAcks) {
    ResponseRecord& group = out_.back();
    group.payload.acks[group.count++] = a;
    return Outcome::done;
  }
  ResponseRecord rsp{};
  rsp.op = r.op;
  rsp.id = r.id;
  rsp.count = 1;
  rsp.payload.acks[0] = a;
  respond(c, rsp);
  return Outcome::done;
}

void TableOwner::drop(ChannelState& c, const RequestRecord& r) {
  for (uint32_t i = 0; i < r.count; ++i) {
    BlockRef b = r.payload.blocks[i];
    if (!c.holds.erase(pack_block(b))) continue;  // never held here: nothing to give back
    unpin(b, "dropping a writer's chunk");
  }
}

}  // namespace engram
