// A relay: a writer whose chunks were sealed by a writer elsewhere (a
// peer's, for engramd's remote/), copied whole into this client's blocks,
// and items over them inserted with their delivery. The chunks stay while
// the peer may still name them (kept) and go back like a writer's once
// forgotten and answered. See relay.h.
#include "capi/relay.h"

#include <cstring>

#include "capi/writer.hpp"
#include "core/chunk_format.hpp"
#include "core/priority.hpp"

using namespace engram;

Status engram_writer::put_sealed(const void* bytes, size_t n, int32_t timeout_ms, uint64_t* id) {
  // What a sampler or the owner will check, they check; this only makes
  // sure the copy and the items' references are sound: a header, this
  // table's signature, and a capacity the insert record can state.
  ChunkHeader h;
  if (n < sizeof h) return {Errc::corrupt, "a chunk of " + std::to_string(n) + " bytes has no room for its header"};
  std::memcpy(&h, bytes, sizeof h);
  if (h.magic != kChunkMagic || h.signature_hash != sig_hash || h.num_steps == 0 || h.num_steps > h.capacity_steps ||
      h.capacity_steps > kMaxChunkSteps)
    return {Errc::corrupt, "the chunk's header is not that of a sealed chunk of table " + relay_table->name +
                               "'s columns (magic, signature, steps)"};
  auto k = client->arena.class_for(n);
  if (!k.ok())
    return {Errc::invalid_capacity, "a chunk of " + std::to_string(n) + " bytes is larger than the arena's largest block"};
  BlockRef b;
  if (Status s = take_chunk_block(*k, timeout_ms, &b); !s.ok()) return s;
  Chunk c;
  c.block = b;
  c.data = static_cast<char*>(client->arena.data(b));
  std::memcpy(c.data, bytes, n);
  c.steps = h.num_steps;
  c.capacity = h.capacity_steps;
  c.final = true;
  c.kept = true;
  chunks.push_back(c);
  *id = next_seq++;
  history_begin = next_seq;  // a relay has no history: kept says what stays
  return Status::Ok();
}

Status engram_writer::relay_item(const uint64_t* ids, const uint32_t* offsets, const uint32_t* lengths, uint32_t n,
                                 double priority, Delivery from, bool draw) {
  engram_table* t = relay_table;
  if (Status s = validate_priority(priority); !s.ok()) return s;
  uint32_t max_refs = std::min<uint32_t>(kRecordRefs, t->spec.max_refs_per_item);
  if (n == 0 || n > max_refs)
    return {Errc::invalid_capacity, "an item over " + std::to_string(n) + " chunks; table " + t->name + " allows 1.." +
                                        std::to_string(max_refs)};
  if (!draw && from.producer != 0 && from.sequence == 0)
    return {Errc::invalid_argument, "a delivery's sequence starts at 1"};
  PendingItem p{t, priority, n, {}, {}, {}, from, false, draw};
  for (uint32_t i = 0; i < n; ++i) {
    if (ids[i] < first_seq || ids[i] >= next_seq || at(ids[i]).given_back || !at(ids[i]).kept)
      return {Errc::invalid_argument, "the item names chunk " + std::to_string(ids[i]) + ", which this relay does not hold"};
    const Chunk& c = at(ids[i]);
    if (c.capacity != at(ids[0]).capacity)
      return {Errc::invalid_argument, "the item's chunks hold " + std::to_string(at(ids[0]).capacity) + " and " +
                                          std::to_string(c.capacity) + " steps; one writer's chunks hold the same"};
    if (lengths[i] == 0 || offsets[i] > c.steps || lengths[i] > c.steps - offsets[i])
      return {Errc::invalid_argument, "the item's steps " + std::to_string(offsets[i]) + "+" +
                                          std::to_string(lengths[i]) + " are outside chunk " + std::to_string(ids[i]) +
                                          "'s " + std::to_string(c.steps)};
    p.seq[i] = ids[i];
    p.offset[i] = offsets[i];
    p.length[i] = lengths[i];
  }
  for (uint32_t i = 0; i < n; ++i) ++at(p.seq[i]).unacked;
  ++unacked;
  if (pending.empty()) return send_items(&p, 1);
  pending.push_back(p);
  return send_pending(false);
}

Status engram_writer::forget(uint64_t id) {
  if (id < first_seq || id >= next_seq || at(id).given_back || !at(id).kept)
    return {Errc::invalid_argument, "chunk " + std::to_string(id) + " is not one this relay holds"};
  at(id).kept = false;
  retire(id);
  return Status::Ok();
}

Status engram_writer::shard_poll(uint32_t shard, bool present, double mass, uint64_t size, uint32_t wait_below,
                                 int32_t timeout_ms, uint32_t* waiting, uint32_t* short_of,
                                 std::vector<KeyPriority>* updates, uint32_t max) {
  engram_table* t = relay_table;
  // The draws sent before were drawn at the mass reported before: they go
  // first (a relay's chunks are whole, so nothing waits to be finalized).
  if (Status s = send_pending(true); !s.ok()) return s;
  RequestRecord r{};
  r.op = static_cast<uint32_t>(RequestOp::shard);
  r.id = client->next_id++;
  r.count = std::min(max, kRecordUpdates);
  r.deadline_ns = timeout_ms == 0 ? 0 : deadline_after_ms(timeout_ms);
  r.payload.shard = {shard, present ? kShardPresent : kShardAway, mass, size, wait_below, 0};
  if (Status s = t->send(r, Owed{RequestOp::shard, r.id, 1, nullptr, {}}, -1); !s.ok()) return s;
  ResponseRecord rsp;
  // The owner answers by the request's deadline, or at once if it stops.
  if (Status s = t->pump(r.id, &rsp, nullptr, -1); !s.ok()) return s;
  if (Status s = response_status(rsp); !s.ok()) return s;
  *waiting = rsp.payload.shard.waiting;
  *short_of = rsp.payload.shard.short_of;
  for (uint32_t i = 0; i < rsp.count && i < r.count; ++i) updates->push_back(rsp.payload.shard.updates[i]);
  return Status::Ok();
}

extern "C" {

uint64_t engram_private_table_signature(const engram_table* t) { return t ? t->sig_hash : 0; }

int engram_private_relay_open(engram_client* c, engram_table* t, engram_writer** out) {
  ENGRAM_GUARD_BEGIN
  if (!c || !t || !out) return fail(Errc::invalid_argument, "client, table or out is NULL");
  *out = nullptr;
  if (t->client != c) return fail(Errc::invalid_argument, "the table handle belongs to another client");
  auto w = std::make_unique<engram_writer>();
  w->client = c;
  w->relay = true;
  w->relay_table = t;
  w->columns.assign(t->spec.columns, t->spec.columns + t->spec.num_columns);
  w->sig_hash = t->sig_hash;
  w->packed = signature_compressed(w->columns.data(), w->columns.size());
  c->writers.push_back(w.get());
  *out = w.release();
  return ENGRAM_OK;
  ENGRAM_GUARD_END
}

int engram_private_relay_chunk(engram_writer* w, const void* bytes, size_t n, int32_t timeout_ms, uint64_t* id) {
  ENGRAM_GUARD_BEGIN
  if (!w || !w->relay || !bytes || !id) return fail(Errc::invalid_argument, "relay, bytes or id is NULL, or not a relay");
  return set_error(w->put_sealed(bytes, n, timeout_ms, id));
  ENGRAM_GUARD_END
}

int engram_private_relay_item(engram_writer* w, const uint64_t* ids, const uint32_t* offsets, const uint32_t* lengths,
                              uint32_t n, double priority, uint64_t producer, uint64_t sequence) {
  ENGRAM_GUARD_BEGIN
  if (!w || !w->relay || !ids || !offsets || !lengths) return fail(Errc::invalid_argument, "a NULL argument, or not a relay");
  return set_error(w->relay_item(ids, offsets, lengths, n, priority, {producer, sequence}));
  ENGRAM_GUARD_END
}

int engram_private_relay_draw(engram_writer* w, const uint64_t* ids, const uint32_t* offsets, const uint32_t* lengths,
                              uint32_t n, double priority, uint64_t remote_key, double probability) {
  ENGRAM_GUARD_BEGIN
  if (!w || !w->relay || !ids || !offsets || !lengths) return fail(Errc::invalid_argument, "a NULL argument, or not a relay");
  uint64_t bits;
  static_assert(sizeof bits == sizeof probability);
  std::memcpy(&bits, &probability, sizeof bits);
  return set_error(w->relay_item(ids, offsets, lengths, n, priority, {remote_key, bits}, /*draw=*/true));
  ENGRAM_GUARD_END
}

int engram_private_shard_poll(engram_writer* w, uint32_t shard, int present, double mass, uint64_t size,
                              uint32_t wait_below, int32_t timeout_ms, uint32_t* waiting, uint32_t* short_of,
                              uint64_t* keys, double* priorities, uint32_t max, uint32_t* n) {
  ENGRAM_GUARD_BEGIN
  if (!w || !w->relay || !waiting || !short_of || !n || (max && (!keys || !priorities)))
    return fail(Errc::invalid_argument, "a NULL argument, or not a relay");
  std::vector<KeyPriority> updates;
  if (Status s = w->shard_poll(shard, present != 0, mass, size, wait_below, timeout_ms, waiting, short_of, &updates, max);
      !s.ok())
    return set_error(s);
  *n = static_cast<uint32_t>(updates.size());
  for (uint32_t i = 0; i < *n; ++i) {
    keys[i] = updates[i].key;
    priorities[i] = updates[i].priority;
  }
  return ENGRAM_OK;
  ENGRAM_GUARD_END
}

int engram_private_relay_forget(engram_writer* w, uint64_t id) {
  ENGRAM_GUARD_BEGIN
  if (!w || !w->relay) return fail(Errc::invalid_argument, "not a relay");
  return set_error(w->forget(id));
  ENGRAM_GUARD_END
}

int engram_private_relay_answered(engram_writer* w, int32_t timeout_ms, uint64_t* answered, uint64_t* duplicates,
                                  uint64_t* refused) {
  ENGRAM_GUARD_BEGIN
  if (!w || !w->relay || !answered || !duplicates || !refused)
    return fail(Errc::invalid_argument, "a NULL argument, or not a relay");
  engram_table* t = w->relay_table;
  uint64_t before = w->answered;
  ResponseRecord unused;
  Status s = t->pump(0, &unused, [&] { return w->answered > before || w->unacked == 0 || !w->first_error.ok(); },
                     timeout_ms == 0 ? monotonic_ns() : deadline_after_ms(timeout_ms));
  if (!s.ok() && s.code() != Errc::timeout) return set_error(s);
  if (!w->first_error.ok()) return set_error(w->first_error);
  if (Status d = t->flush_drops(); !d.ok()) return set_error(d);
  if (Status r = w->client->flush_returns(); !r.ok()) return set_error(r);
  *answered = w->answered;
  *duplicates = w->duplicates;
  *refused = w->refused;
  return ENGRAM_OK;
  ENGRAM_GUARD_END
}

const char* engram_private_relay_refusal(const engram_writer* w) { return w ? w->first_refusal.c_str() : ""; }

}  // extern "C"
