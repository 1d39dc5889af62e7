// A writer's items and its C API: items created over the last steps, sent
// once their chunks are finalized (several one-chunk items to a record),
// acknowledged, flushed; the chunks under them are writer_chunks.cpp's.
#include "capi/writer.hpp"

#include <algorithm>
#include <cstring>

#include "core/priority.hpp"
#include "core/stream_copy.hpp"

using namespace engram;

namespace engram {
void writers_send_pending(engram_client* c, engram_table* t) {
  for (engram_writer* w : c->writers)
    if (std::any_of(w->pending.begin(), w->pending.end(), [t](const auto& p) { return p.table == t; }))
      (void)w->send_pending(true);
}

void writer_on_ack(engram_writer* w, engram_table* t, const Status& s, uint64_t key, const Owed& o) {
  if (w) w->on_ack(t, s, key, o);
}
}  // namespace engram

Status engram_writer::signature_difference(const engram_table* t) const {
  std::string why = "table " + t->name + " has other columns than this writer: ";
  if (t->spec.num_columns != columns.size())
    return {Errc::signature_mismatch, why + std::to_string(t->spec.num_columns) + " columns vs " +
                                          std::to_string(columns.size())};
  for (size_t i = 0; i < columns.size(); ++i)
    if (!same_signature(&columns[i], 1, &t->spec.columns[i], 1)) {
      const Column &a = t->spec.columns[i], &b = columns[i];
      if (a.codec != b.codec || a.level != b.level)
        return {Errc::signature_mismatch, why + "column " + std::to_string(i) + " is " + column_codec_text(a) +
                                              " in the table and " + column_codec_text(b) +
                                              " in the writer; open the writer with the table's compression "
                                              "(engram_table_compression)"};
      return {Errc::signature_mismatch, why + "column " + std::to_string(i) + " differs in name, dtype or shape"};
    }
  return {Errc::signature_mismatch, why + "they differ"};
}

Status engram_writer::create_item(engram_table* t, uint32_t num_steps, double priority, bool at_max) {
  // A table known dropped (or a server known gone) refuses the item now,
  // not at the flush that would have sent it: one load of the channel's word.
  if (Status s = t->usable(); !s.ok()) return s;
  if (at_max) priority = 0;  // the owner's to choose
  if (Status s = validate_priority(priority); !s.ok()) return s;
  // Chunk headers carry the signature's hash and the owner accepts a chunk
  // on that alone, so equal hashes mean the same signature here too; it is
  // cheaper per item than comparing the columns.
  if (sig_hash != t->sig_hash) return signature_difference(t);
  if (num_steps == 0) return {Errc::invalid_capacity, "an item needs at least one step"};
  if (num_steps > history_steps)
    return {Errc::invalid_capacity, "an item of " + std::to_string(num_steps) + " steps, but the writer holds " +
                                        std::to_string(history_steps) + " steps of this episode (max_item_steps " +
                                        std::to_string(max_item_steps) + ")"};
  PendingItem p{t, priority, 0, {}, {}, {}, {}, at_max};
  uint32_t max_refs = std::min<uint32_t>(kRecordRefs, t->spec.max_refs_per_item);
  // Walk back from the newest chunk until num_steps are covered; they are
  // all in the history because num_steps <= history_steps.
  uint32_t n = 0;
  uint64_t oldest = next_seq;
  for (uint32_t covered = 0; covered < num_steps; covered += at(oldest).steps) {
    if (n == max_refs)
      return {Errc::invalid_capacity, "an item of " + std::to_string(num_steps) + " steps spans more than " +
                                          std::to_string(max_refs) + " chunks; raise chunk_length"};
    --oldest;
    ++n;
  }
  // References oldest first: the oldest chunk contributes its last steps,
  // the others all of theirs (so far: the open chunk may grow later, but
  // these steps keep their offsets).
  uint32_t placed = 0;
  for (uint32_t i = n; i-- > 0;) {
    Chunk& c = at(oldest + i);
    uint32_t take = std::min(num_steps - placed, c.steps);
    p.seq[i] = oldest + i;
    p.offset[i] = c.steps - take;
    p.length[i] = take;
    placed += take;
  }
  p.num_refs = n;
  // Counted from now on, so that the history keeps these chunks.
  for (uint32_t i = 0; i < n; ++i) ++at(p.seq[i]).unacked;
  ++unacked;
  // Only the newest chunk can be open: if it is final, the item can leave
  // now, and with nothing queued before it, it goes without the queue.
  if (pending.empty() && at(p.seq[n - 1]).final) return send_items(&p, 1);
  pending.push_back(p);
  return send_pending(false);
}

Status engram_writer::send_pending(bool force) {
  // Items of one chunk slice each, for one table, leave up to
  // kRecordItems to a record (insert_items): a chunk's worth of an Ape-X
  // actor's transitions is three records, not sixteen.
  auto sendable = [&](const PendingItem& p) {
    for (uint32_t i = 0; i < p.num_refs; ++i)
      if (!at(p.seq[i]).final) {
        if (!force) return false;
        finalize(at(p.seq[i]));
      }
    return true;
  };
  PendingItem batch[kRecordItems];
  while (!pending.empty() && sendable(pending.front())) {
    uint32_t n = 0;
    batch[n++] = pending.front();
    pending.pop_front();
    // A record of items carries one chunk_steps, no deliveries and no
    // flags (an item at the maximum goes alone).
    auto packable = [](const PendingItem& p) {
      return p.num_refs == 1 && p.from.producer == 0 && !p.at_max && !p.draw;
    };
    auto joins = [&](const PendingItem& p) {
      return packable(p) && p.table == batch[0].table && at(p.seq[0]).capacity == at(batch[0].seq[0]).capacity &&
             sendable(p);
    };
    while (packable(batch[0]) && n < kRecordItems && !pending.empty() && joins(pending.front())) {
      batch[n++] = pending.front();
      pending.pop_front();
    }
    if (Status s = send_items(batch, n); !s.ok()) return s;
  }
  return Status::Ok();
}

Status engram_writer::send_items(const PendingItem* ps, uint32_t n) {
  engram_table* t = ps[0].table;
  RequestRecord r{};
  r.id = client->next_id;
  client->next_id += n;
  // 0: no wait; the owner refuses it now or applies it (a deadline of
  // "now" would have expired by the time it arrives).
  r.deadline_ns = insert_timeout_ms == 0 ? 0 : deadline_after_ms(insert_timeout_ms);
  Owed o[kRecordItems];
  for (uint32_t k = 0; k < n; ++k) {
    const PendingItem& p = ps[k];
    o[k] = Owed{RequestOp::insert, r.id + k, 1, this};
    o[k].want_spare = client->wants_spare(client->arena.class_of(at(p.seq[p.num_refs - 1]).block.index), spares_coming);
    if (o[k].want_spare) ++spares_coming;
    for (uint32_t i = 0; i < p.num_refs; ++i) o[k].chunks[i] = p.seq[i];
    o[k].num_chunks = p.num_refs;
  }
  auto ref = [&](const PendingItem& p, uint32_t i) -> ChunkRef {
    const Chunk& c = at(p.seq[i]);
    return {c.block.index, c.block.generation, p.offset[i], p.length[i]};
  };
  if (n == 1) {  // any number of chunk slices
    r.op = static_cast<uint32_t>(RequestOp::insert);
    r.flags = ps[0].at_max ? kInsertAtMax : ps[0].draw ? kInsertDraw : 0;
    r.count = ps[0].num_refs;
    r.payload.insert.priority = ps[0].priority;
    r.payload.insert.chunk_steps = at(ps[0].seq[0]).capacity;
    r.payload.insert.want_spare = o[0].want_spare;
    r.payload.insert.producer = ps[0].from.producer;
    r.payload.insert.sequence = ps[0].from.sequence;
    for (uint32_t i = 0; i < ps[0].num_refs; ++i) r.payload.insert.refs[i] = ref(ps[0], i);
  } else {  // one slice each (send_pending)
    r.op = static_cast<uint32_t>(RequestOp::insert_items);
    r.count = n;
    r.payload.items.chunk_steps = at(ps[0].seq[0]).capacity;
    for (uint32_t k = 0; k < n; ++k) {
      r.payload.items.items[k] = {ps[k].priority, ref(ps[k], 0)};
      if (o[k].want_spare) r.payload.items.want_spare |= 1u << k;
    }
  }
  auto refused = [&](const Status& s) {
    for (uint32_t k = 0; k < n; ++k) on_ack(t, s, 0, o[k]);
  };
  // Take the acks that are ready now, not a ring's worth at once when
  // credit runs out: each may bring the block for the next chunk. With
  // streamed steps unfenced, take them before the fence: the streamed
  // lines drain to memory meanwhile, and these reads need not wait for
  // them. The fence must come before the request names the chunk.
  ResponseRecord unused;
  bool acks_taken = unfenced_by != nullptr;
  if (unfenced_by) {
    if (Status s = t->pump(0, &unused, nullptr, -1); !s.ok()) {
      refused(s);
      return s;
    }
    if (unfenced_by == this_thread_token()) stream_fence();
    else fence_all_threads();
    unfenced_by = nullptr;
  }
  // Credit waits may deliver acks that give chunks back; these cannot go,
  // as these items still count on them. A refused send is acked here, as
  // the server would have: that gives the items' counts back.
  if (Status s = t->send(r, o, n, r.deadline_ns); !s.ok()) {
    // Interrupted before it was sent: the caller hears it now, and no later
    // call reports it again.
    bool now = s.code() == Errc::disconnected || s.code() == Errc::interrupted;
    refused(s.code() == Errc::interrupted ? Status{Errc::interrupted, ""} : s);
    return now ? s : Status::Ok();
  }
  return acks_taken ? Status::Ok() : t->pump(0, &unused, nullptr, -1);
}

void engram_writer::on_ack(engram_table* t, const Status& s, uint64_t key, const Owed& o) {
  --unacked;
  if (o.want_spare) --spares_coming;
  if (relay) {
    // The table's answers are final and counted in order. An item that
    // never reached it (the server went away, an interrupt) is no answer:
    // the relay is broken from there on, and its sender sends it again.
    Errc e = s.code();
    if (e == Errc::disconnected || e == Errc::interrupted || e == Errc::closed || e == Errc::timeout) {
      if (first_error.ok()) first_error = s;
    } else if (first_error.ok()) {
      ++answered;
      if (e == Errc::already_exists) ++duplicates;
      else if (!s.ok() && ++refused == 1) first_refusal = s.message();
    }
  } else if (s.ok()) {
    if (keep_keys) keys.push_back(key);
  } else if (first_error.ok() && s.code() != Errc::interrupted) {  // interrupted: reported at once
    first_error = Status{s.code(), "item in table " + t->name + ": " + s.message()};
  }
  for (uint32_t i = 0; i < o.num_chunks; ++i) {
    uint64_t seq = o.chunks[i];
    if (seq < first_seq) continue;
    Chunk& c = at(seq);
    --c.unacked;
    if (s.ok()) c.held_by |= uint64_t{1} << t->id;
    retire(seq);
  }
}

Status engram_writer::end_episode() {
  for (uint64_t seq = history_begin; seq < next_seq; ++seq) finalize(at(seq));
  Status sent = send_pending(false);
  uint64_t old_begin = history_begin;
  history_begin = next_seq;
  history_steps = 0;
  ++episode;
  for (uint64_t seq = old_begin; seq < next_seq; ++seq) retire(seq);
  return sent;
}

Status engram_writer::flush(int64_t deadline_ns) {
  if (Status s = send_pending(true); !s.ok()) return s;
  while (unacked > 0) {
    engram_table* waiting = nullptr;
    for (engram_table* t : client->tables)
      for (const Owed& o : t->owed)
        if (o.writer == this && !waiting) waiting = t;
    if (!waiting) break;
    ResponseRecord unused;
    Status s = waiting->pump(0, &unused, [&] {
      return std::none_of(waiting->owed.begin(), waiting->owed.end(), [&](const Owed& o) { return o.writer == this; });
    }, deadline_ns);
    if (!s.ok()) return s;
  }
  for (engram_table* t : client->tables)
    if (Status s = t->flush_drops(); !s.ok()) return s;
  if (Status s = client->flush_returns(); !s.ok()) return s;
  Status e = first_error;
  first_error = Status::Ok();
  return e;
}

void engram_writer::close() {
  (void)end_episode();
  (void)flush(deadline_after_ms(insert_timeout_ms < 0 ? 10000 : insert_timeout_ms));
  // Whatever is still owed is forgotten: the acks find no writer.
  for (engram_table* t : client->tables)
    for (Owed& o : t->owed)
      if (o.writer == this) o.writer = nullptr;
  for (Chunk& c : chunks)
    if (!c.given_back && c.held_by == 0 && c.unacked == 0) client->return_block(c.block);
  chunks.clear();
  (void)client->flush_returns();
}

extern "C" {

void engram_writer_options_init(engram_writer_options* o) {
  if (!o) return;
  std::memset(o, 0, sizeof *o);
  o->struct_size = sizeof *o;
  o->chunk_length = 1;
  o->insert_timeout_ms = -1;
}

int engram_writer_open(engram_client* c, const engram_writer_options* o, engram_writer** out) {
  ENGRAM_GUARD_BEGIN
  if (!c || !o || !out) return fail(Errc::invalid_argument, "client, options or out is NULL");
  *out = nullptr;
  if (Status s = check_struct_size(o->struct_size, ENGRAM_END_OF(engram_writer_options, keep_keys), "engram_writer_options");
      !s.ok())
    return set_error(s);
  if (c->disconnected) return fail(Errc::disconnected, "the server went away; disconnect and connect again");
  auto w = std::make_unique<engram_writer>();
  w->client = c;
  const engram_compression* comp = ENGRAM_HAS_FIELD(o, engram_writer_options, compression) ? o->compression : nullptr;
  if (Status s = columns_from_c(o->columns, o->num_columns, comp, &w->columns); !s.ok()) return set_error(s);
  if (Status s = validate_signature(w->columns.data(), w->columns.size()); !s.ok()) return set_error(s);
  if (o->chunk_length == 0 || o->chunk_length > kMaxChunkSteps)
    return fail(Errc::invalid_capacity, "chunk_length is " + std::to_string(o->chunk_length) + "; allowed 1.." +
                                            std::to_string(kMaxChunkSteps));
  w->chunk_length = o->chunk_length;
  w->max_item_steps = o->max_item_steps ? o->max_item_steps : o->chunk_length;
  w->insert_timeout_ms = o->insert_timeout_ms;
  w->keep_keys = o->keep_keys != 0;
  w->sig_hash = signature_hash(w->columns.data(), w->columns.size());
  for (uint32_t i = 0; i < w->columns.size(); ++i) {
    w->step_bytes.push_back(column_step_bytes(w->columns[i]));
    w->column_offset.push_back(chunk_column_offset(w->columns.data(), i, w->chunk_length));
  }
  size_t bytes = chunk_bytes(w->columns.data(), static_cast<uint32_t>(w->columns.size()), w->chunk_length);
  w->packed = signature_compressed(w->columns.data(), w->columns.size());
  if (w->packed) {
    w->staging.resize(chunk_column_offset(w->columns.data(), static_cast<uint32_t>(w->columns.size()), w->chunk_length));
    w->encoder = std::make_unique<Encoder>();
  }
  auto k = c->arena.class_for(bytes);
  if (!k.ok()) {
    const uint64_t largest = c->arena.size_class(c->arena.num_classes() - 1).block_size;
    uint32_t fits = 0;  // the longest chunk that fits, found by halving
    for (uint32_t lo = 1, hi = w->chunk_length - 1; lo <= hi;) {
      const uint32_t mid = lo + (hi - lo) / 2;
      if (chunk_bytes(w->columns.data(), static_cast<uint32_t>(w->columns.size()), mid) <= largest) {
        fits = mid;
        lo = mid + 1;
      } else {
        hi = mid - 1;
      }
    }
    std::string fix = fits > 0 ? "lower chunk_length to " + std::to_string(fits) + " or less, or give the server"
                               : "no chunk of one step fits either: give the server";
    return fail(Errc::invalid_capacity,
                "a chunk of " + std::to_string(w->chunk_length) + " steps needs " + std::to_string(bytes) +
                    " bytes, more than the arena's largest block (" + std::to_string(largest) + " bytes); " + fix +
                    " a larger size class ([arena] classes, engramd.toml(5))");
  }
  w->size_class = *k;
  for (size_t i = 0; i < w->columns.size(); ++i) w->streaming = w->streaming || w->streams(i);
  w->fence_late = w->streaming && can_fence_all_threads();
  if (c->class_streamed.size() < c->arena.num_classes()) c->class_streamed.resize(c->arena.num_classes());
  if (w->streaming) c->class_streamed[*k] = true;
  // A writer cycles through every block of its size class: the client's
  // first writer of the class maps the class's pages for this process now
  // (load_pages; bench/NOTES.md, "A fresh process's first moments").
  // Samplers touch only what they sample.
  if (c->class_pages_loaded.size() < c->arena.num_classes()) c->class_pages_loaded.resize(c->arena.num_classes());
  if (!c->class_pages_loaded[*k]) {
    const SizeClass& sc = c->arena.size_class(*k);
    load_pages(c->arena.data({sc.first_block, 0}), sc.block_size * std::min(c->hello.committed[*k], sc.count));
    c->class_pages_loaded[*k] = true;
  }
  // Blocks for the first chunks now, while the server is surely answering:
  // the writer then runs on spares, and on the blocks its inserts' acks
  // bring, and asks again only when they run out. A refusal here (no block
  // free yet) is not an error: the first chunk waits for one.
  if (Status g = c->grant(*k); !g.ok() && g.code() == Errc::disconnected) return set_error(g);
  c->writers.push_back(w.get());
  *out = w.release();
  return ENGRAM_OK;
  ENGRAM_GUARD_END
}

int engram_writer_append(engram_writer* w, const void* const* columns) {
  ENGRAM_GUARD_BEGIN
  if (!w || !columns) return fail(Errc::invalid_argument, "writer or columns is NULL");
  return set_error(w->append(columns, 1, 0));
  ENGRAM_GUARD_END
}

int engram_writer_append_batch(engram_writer* w, const void* const* columns, uint32_t n) {
  ENGRAM_GUARD_BEGIN
  if (!w || !columns) return fail(Errc::invalid_argument, "writer or columns is NULL");
  if (n == 0) return fail(Errc::invalid_capacity, "append_batch of 0 steps");
  return set_error(w->append(columns, n, 1));
  ENGRAM_GUARD_END
}

int engram_writer_create_item(engram_writer* w, engram_table* t, uint32_t num_steps, double priority) {
  ENGRAM_GUARD_BEGIN
  if (!w || !t) return fail(Errc::invalid_argument, "writer or table is NULL");
  if (t->client != w->client) return fail(Errc::invalid_argument, "the table handle belongs to another client");
  return set_error(w->create_item(t, num_steps, priority));
  ENGRAM_GUARD_END
}

int engram_writer_create_item_at_max(engram_writer* w, engram_table* t, uint32_t num_steps) {
  ENGRAM_GUARD_BEGIN
  if (!w || !t) return fail(Errc::invalid_argument, "writer or table is NULL");
  if (t->client != w->client) return fail(Errc::invalid_argument, "the table handle belongs to another client");
  return set_error(w->create_item(t, num_steps, 0, true));
  ENGRAM_GUARD_END
}

int engram_writer_append_items(engram_writer* w, const void* const* columns, uint32_t n, engram_table* t,
                               uint32_t num_steps, const double* priorities) {
  ENGRAM_GUARD_BEGIN
  if (!w || !columns || !t) return fail(Errc::invalid_argument, "writer, columns or table is NULL");
  if (n == 0) return fail(Errc::invalid_capacity, "append_items of 0 steps");
  if (t->client != w->client) return fail(Errc::invalid_argument, "the table handle belongs to another client");
  if (num_steps == 0 || num_steps > w->max_item_steps)
    return fail(Errc::invalid_capacity, "items of " + std::to_string(num_steps) + " steps; this writer's are 1.." +
                                            std::to_string(w->max_item_steps) + " (max_item_steps)");
  if (w->sig_hash != t->sig_hash) return set_error(w->signature_difference(t));
  if (priorities)
    for (uint32_t k = 0; k < n; ++k)
      if (Status s = validate_priority(priorities[k]); !s.ok())
        return fail(s.code(), "priorities[" + std::to_string(k) + "]: " + s.message() + " (nothing appended)");
  std::vector<const void*> step(w->columns.size());
  for (uint32_t k = 0; k < n; ++k) {
    for (size_t i = 0; i < step.size(); ++i)
      step[i] = columns[i] ? static_cast<const char*>(columns[i]) + size_t{k} * w->step_bytes[i] : nullptr;
    if (Status s = w->append(step.data(), 1, 0); !s.ok()) return set_error(s);
    if (w->history_steps < num_steps) continue;  // the episode's first steps
    if (Status s = w->create_item(t, num_steps, priorities ? priorities[k] : 1.0); !s.ok()) return set_error(s);
  }
  return ENGRAM_OK;
  ENGRAM_GUARD_END
}

int engram_writer_end_episode(engram_writer* w) {
  ENGRAM_GUARD_BEGIN
  if (!w) return fail(Errc::invalid_argument, "writer is NULL");
  return set_error(w->end_episode());
  ENGRAM_GUARD_END
}

int engram_writer_flush(engram_writer* w, int32_t timeout_ms) {
  ENGRAM_GUARD_BEGIN
  if (!w) return fail(Errc::invalid_argument, "writer is NULL");
  return set_error(w->flush(deadline_after_ms(timeout_ms)));
  ENGRAM_GUARD_END
}

int engram_writer_take_keys(engram_writer* w, uint64_t* keys, size_t cap, size_t* count) {
  ENGRAM_GUARD_BEGIN
  if (!w || !count || (cap && !keys)) return fail(Errc::invalid_argument, "writer, keys or count is NULL");
  size_t n = std::min(cap, w->keys.size());
  std::copy(w->keys.begin(), w->keys.begin() + static_cast<long>(n), keys);
  w->keys.erase(w->keys.begin(), w->keys.begin() + static_cast<long>(n));
  *count = n;
  return ENGRAM_OK;
  ENGRAM_GUARD_END
}

void engram_writer_close(engram_writer* w) {
  if (!w) return;
  try {
    w->close();
    auto& ws = w->client->writers;
    ws.erase(std::remove(ws.begin(), ws.end(), w), ws.end());
    if (ws.empty() && !w->client->disconnected) w->client->free_spares();  // no writer left to use them
  } catch (...) {
  }
  delete w;
}

}  // extern "C"
