// Sampling: copy-out batches, samples begun now and collected later, and
// zero-copy views. Priority updates and deletes are priorities.cpp's.
#include <algorithm>
#include <cstring>
#include <utility>

#include "capi/client.hpp"
#include "core/chunk_format.hpp"

using namespace engram;

struct engram_batch {
  engram_table* table = nullptr;
  uint64_t id = 0;
  std::vector<SampledItemWire> items;
  // The checked header of each reference: items[i].refs[k] -> headers[first_header[i] + k]. Packed by
  // the items' reference counts, so a batch of 1-chunk items needs one
  // header each (a batch sized for 8 each would pass malloc's mmap threshold
  // and fault its pages in on every sample).
  std::vector<ChunkHeader> headers;
  std::vector<uint32_t> first_header;
};

namespace engram {
const engram_table* engram_batch_table(const engram_batch* b) noexcept { return b->table; }

Status take_sample_record(const ResponseRecord& rsp, std::vector<SampledItemWire>* items,
                          std::vector<uint32_t>* plain_steps, bool* complete) {
  *complete = true;
  if (Status s = response_status(rsp); !s.ok()) return s;
  if (rsp.count == 0) return Status::Ok();
  uint32_t n = sample_items(rsp);
  if (rsp.index != items->size() || n == 0 || n > kPackedItems || n > rsp.count - rsp.index)
    return {Errc::corrupt, "sample response out of order or with a bad item count"};
  if (rsp.op == static_cast<uint32_t>(RequestOp::sample_packed)) {
    for (uint32_t k = 0; k < n; ++k) {
      const PackedItemWire& p = rsp.payload.packed.items[k];
      items->push_back({p.key, p.priority, {p.probability}, p.times_sampled, p.table_size, 1, 0, {p.ref}});
      plain_steps->push_back(rsp.payload.packed.plain_steps[k]);
    }
  } else {
    if (rsp.payload.item.num_refs == 0 || rsp.payload.item.num_refs > kRecordRefs)
      return {Errc::corrupt, "sample response with a bad reference count"};
    items->push_back(rsp.payload.item);
    plain_steps->push_back(0);
  }
  *complete = rsp.index + n == rsp.count;
  return Status::Ok();
}

// A decoded column is kept per column index, so items that share a chunk
// decode it once.
Status copy_steps(engram_table* t, const ChunkRef& ref, const ChunkHeader& h, uint32_t c, char* dst) {
  const TableSpec& spec = t->spec;
  const ArenaBlocks& arena = t->client->arena;
  const char* block = static_cast<const char*>(arena.data({ref.block, ref.generation}));
  size_t step = column_step_bytes(spec.columns[c]);
  ColumnSpan span;
  if (Status s = chunk_column_span(block, arena.block_size(ref.block), h, spec.columns, c, &span); !s.ok()) return s;
  const char* src = block + span.offset;
  if (span.encoding != Encoding::raw) {
    engram_table::Decoded& d = t->decoded[c];
    uint64_t id = pack_block({ref.block, ref.generation});
    if (d.block != id) {
      d.block = 0;
      d.bytes.resize(size_t{h.num_steps} * step);
      if (!t->decoder) t->decoder = std::make_unique<Decoder>();
      if (Status s = t->decoder->decode_column(span.encoding, src, span.bytes, step, h.num_steps, d.bytes.data());
          !s.ok())
        return {Errc::corrupt, "column " + std::string(spec.columns[c].name) + " of a sampled chunk: " + s.message()};
      d.block = id;
    }
    src = d.bytes.data();
  }
  std::memcpy(dst, src + size_t{ref.offset} * step, size_t{ref.length} * step);
  return Status::Ok();
}

}  // namespace engram

namespace {

Status check_options(const engram_table* t, const engram_sample_options* o) {
  if (Status s = check_struct_size(o->struct_size, ENGRAM_END_OF(engram_sample_options, timeout_ms), "engram_sample_options");
      !s.ok())
    return s;
  uint32_t max = t->client->hello.max_batch;
  if (o->batch_size == 0 || o->batch_size > max)
    return {Errc::invalid_capacity, "batch_size " + std::to_string(o->batch_size) + " is out of range; allowed 1.." +
                                        std::to_string(max) + " (the server's client.ring_records)"};
  if (o->num_steps == 0) return {Errc::invalid_capacity, "num_steps must be >= 1"};
  if (ENGRAM_HAS_FIELD(o, engram_sample_options, flags) && (o->flags & ~ENGRAM_SAMPLE_NO_REPEATS))
    return {Errc::invalid_argument, "engram_sample_options.flags " + std::to_string(o->flags) +
                                        " has unknown bits; the one flag is ENGRAM_SAMPLE_NO_REPEATS"};
  return Status::Ok();
}

constexpr int64_t kForeverNs = 365LL * 24 * 3600 * 1'000'000'000;

// Whether the owner sent all an item needs to find its columns
// (PackedItemsWire::plain_steps), so that its chunk's header is not read.
bool layout_sent(const SampledItemWire& it, uint32_t plain_steps) { return plain_steps != 0 && it.num_refs == 1; }

// Starts loading the first line (the header) of every chunk of a batch, so
// that the checks wait for one round of cache misses, not one per item.
// All at once, unlike the owner's loops (kPrefetchAhead): from 4 KB up
// every chunk is on a page of its own, and the page walks of the whole
// batch under way at once measured faster than 8 at a time. With
// plain_steps, items whose header check_item does not read are skipped:
// for views, where nothing else of the chunk is read. A copy-out passes
// nullptr: it reads every chunk anyway, and starting all the walks early
// still pays (4 KB copy-outs skipping them ran at 0.80-0.98x, medians of 4
// alternating rounds).
void prefetch_headers(const engram_table* t, const std::vector<SampledItemWire>& items,
                      const std::vector<uint32_t>* plain_steps) {
  for (size_t i = 0; i < items.size(); ++i) {
    const SampledItemWire& it = items[i];
    if (plain_steps && layout_sent(it, (*plain_steps)[i])) continue;
    for (uint32_t k = 0; k < it.num_refs && k < kRecordRefs; ++k)
      if (it.refs[k].block < t->client->arena.total_blocks())
        __builtin_prefetch(t->client->arena.data({it.refs[k].block, it.refs[k].generation}));
  }
}

// Starts loading the chunks of the item kPrefetchAhead places ahead of the
// one being copied out (small chunks whole), so that the copies overlap
// their cache misses. The references are the server's, unchecked: a hint.
void prefetch_item_data(const engram_table* t, const std::vector<SampledItemWire>& items, size_t i) {
  if (i + kPrefetchAhead >= items.size()) return;
  const SampledItemWire& ahead = items[i + kPrefetchAhead];
  for (uint32_t k = 0; k < ahead.num_refs && k < kRecordRefs; ++k)
    if (ahead.refs[k].block < t->client->arena.total_blocks())
      t->client->arena.prefetch_block(ahead.refs[k].block, /*for_write=*/false);
}

// Checks every chunk an item references against the table and num_steps,
// filling headers[k] with what the spans of ref k need. An item of one
// plain chunk whose capacity the owner sent (plain_steps) needs no read of
// the chunk: the owner checked its header at insert, and the layout is
// checked here against the block's size. Otherwise the header is read and
// checked (a writer may rewrite it after the insert).
Status check_item(const engram_table* t, const SampledItemWire& it, uint32_t plain_steps, uint32_t num_steps,
                  ChunkHeader* headers) {
  const ArenaBlocks& arena = t->client->arena;
  bool sent = layout_sent(it, plain_steps);
  uint64_t steps = 0;
  for (uint32_t k = 0; k < it.num_refs; ++k) {
    const ChunkRef& ref = it.refs[k];
    if (ref.block >= arena.total_blocks()) return {Errc::corrupt, "sampled chunk index out of range"};
    size_t size = arena.block_size(ref.block);
    Status s = sent ? plain_chunk_header(size, t->spec.columns, t->spec.num_columns, t->sig_hash, plain_steps, ref.offset,
                                         ref.length, &headers[k])
                    : check_chunk(arena.data({ref.block, ref.generation}), size, t->spec.columns, t->spec.num_columns,
                                  t->sig_hash, ref.offset, ref.length, &headers[k]);
    if (!s.ok()) return sent ? Status{s.code(), "the server's layout of a sampled chunk: " + s.message()} : s;
    steps += ref.length;
  }
  if (steps != num_steps)
    return {Errc::invalid_capacity, "item " + std::to_string(it.key) + " has " + std::to_string(steps) +
                                        " steps; the sample options ask for num_steps " + std::to_string(num_steps)};
  return Status::Ok();
}

// Copies out item i of a batch if it is of one plain chunk whose capacity
// the owner sent (layout_sent): most items, and the copy-out's fast path,
// with the layout worked out once per capacity (*layout keeps the last one)
// instead of per item and column. Checks what check_item would, against the
// block, without building a header; false, having copied nothing, when the
// item is of another kind or a check fails: check_item then says why.
bool copy_plain_item(const engram_table* t, const SampledItemWire& it, uint32_t plain_steps, uint32_t num_steps,
                     PlainLayout* layout, void* const* buffers, uint32_t i) {
  if (!layout_sent(it, plain_steps)) return false;
  const ChunkRef& ref = it.refs[0];
  const ArenaBlocks& arena = t->client->arena;
  if (ref.block >= arena.total_blocks() || ref.length != num_steps) return false;
  if (layout->capacity_steps != plain_steps) plain_layout(t->spec.columns, t->spec.num_columns, plain_steps, layout);
  if (!check_plain_slice(*layout, arena.block_size(ref.block), ref.offset, ref.length).ok()) return false;
  const char* block = static_cast<const char*>(arena.data({ref.block, ref.generation}));
  for (uint32_t c = 0; c < layout->num_columns; ++c) {
    size_t step = layout->step[c];
    std::memcpy(static_cast<char*>(buffers[c]) + size_t{i} * num_steps * step,
                block + layout->offset[c] + size_t{ref.offset} * step, size_t{ref.length} * step);
  }
  return true;
}

engram_sample_info info_of(const SampledItemWire& w) {
  return {w.key, w.priority, w.probability, w.times_sampled, w.table_size};
}

// Refuses a second sample on a handle while one begun is not collected:
// its answer comes first on the channel, and the gate (ChannelHeader::
// sample_gate) cancels "through" an id, so a caller that gave up on the
// later one would cancel the begun one too.
Status not_begun(const engram_table* t) {
  if (t->begun.id == 0) return Status::Ok();
  return {Errc::invalid_argument, "a sample begun on table " + t->name +
                                      " is not collected yet: call engram_sample_end first (one sample at a time per "
                                      "table handle; another connection has a handle of its own)"};
}

Status check_buffers(const engram_table* t, void* const* buffers) {
  for (uint32_t c = 0; c < t->spec.num_columns; ++c)
    if (!buffers[c])
      return {Errc::invalid_argument, "buffers[" + std::to_string(c) + "] (column " + t->column_names[c] +
                                          ") is NULL; pass one buffer per column of the table"};
  return Status::Ok();
}

// Starts loading the lines of an item of one plain chunk whose layout is
// `layout` (that copy_plain_item worked out): its steps of each column
// alone, where prefetch_item_data would load the whole chunk (16 lines of
// a 1 KB chunk for the 5 an Ape-X CartPole transition spans) or only its
// header (a chunk over kPrefetchWholeBlock). False, having done nothing,
// for another kind of item, or one of more than kPrefetchWholeBlock bytes
// (prefetch_item_data then does as before). A hint: nothing is trusted.
bool prefetch_plain_item(const engram_table* t, const SampledItemWire& it, uint32_t plain_steps, const PlainLayout& layout) {
  if (!layout_sent(it, plain_steps) || plain_steps != layout.capacity_steps) return false;
  const ChunkRef& ref = it.refs[0];
  const ArenaBlocks& arena = t->client->arena;
  if (ref.block >= arena.total_blocks() || layout.bytes > arena.block_size(ref.block)) return false;
  size_t item_bytes = 0;
  for (uint32_t c = 0; c < layout.num_columns; ++c) item_bytes += size_t{ref.length} * layout.step[c];
  if (item_bytes > kPrefetchWholeBlock) return false;
  const char* block = static_cast<const char*>(arena.data({ref.block, ref.generation}));
  for (uint32_t c = 0; c < layout.num_columns; ++c) {
    size_t from = layout.offset[c] + size_t{ref.offset} * layout.step[c];
    size_t to = std::min(layout.bytes, from + size_t{ref.length} * layout.step[c]);
    for (size_t at = from & ~(kCacheLine - 1); at < to; at += kCacheLine) __builtin_prefetch(block + at);
  }
  return true;
}

// Checks and copies the items of a sample into the caller's buffers.
Status copy_out(engram_table* t, const std::vector<SampledItemWire>& items, const std::vector<uint32_t>& plain_steps,
                uint32_t num_steps, void* const* buffers, engram_sample_info* infos) {
  const TableSpec& spec = t->spec;
  prefetch_headers(t, items, nullptr);
  ChunkHeader headers[kRecordRefs];
  PlainLayout layout;  // one writer's chunks share it
  for (uint32_t i = 0; i < items.size(); ++i) {
    const SampledItemWire& it = items[i];
    if (i + kPrefetchAhead >= items.size() ||
        !prefetch_plain_item(t, items[i + kPrefetchAhead], plain_steps[i + kPrefetchAhead], layout))
      prefetch_item_data(t, items, i);
    if (infos) infos[i] = info_of(it);
    if (copy_plain_item(t, it, plain_steps[i], num_steps, &layout, buffers, i)) continue;
    if (Status s = check_item(t, it, plain_steps[i], num_steps, headers); !s.ok()) return s;
    for (uint32_t c = 0; c < spec.num_columns; ++c) {
      size_t step = column_step_bytes(spec.columns[c]);
      char* dst = static_cast<char*>(buffers[c]) + size_t{i} * num_steps * step;
      for (uint32_t k = 0; k < it.num_refs; ++k) {
        if (Status s = copy_steps(t, it.refs[k], headers[k], c, dst); !s.ok()) return s;
        dst += size_t{it.refs[k].length} * step;
      }
    }
  }
  return Status::Ok();
}

}  // namespace

namespace engram {
// At a sample's deadline: cancels it (and true) unless the owner already
// claimed it (ChannelHeader::sample_gate). The owner answers a cancelled
// sample with a timeout, which pump() then drops as owed to nobody.
bool give_up(engram_table* t, uint64_t id) {
  std::atomic<uint64_t>& gate = t->channel.header->sample_gate;
  uint64_t g = gate.load(std::memory_order_acquire);
  for (;;) {
    if (!(g & kGateCancelled) && g >= id) return false;
    if (gate.compare_exchange_weak(g, kGateCancelled | id, std::memory_order_acq_rel, std::memory_order_acquire))
      return true;
  }
}

// Sends a sample request; its chunks stay pinned from when the owner draws
// them until release(id).
Status send_sample(engram_table* t, const engram_sample_options* o, uint64_t* id, int64_t* deadline_ns,
                   uint32_t flags, uint64_t from) {
  RequestRecord r{};
  r.op = static_cast<uint32_t>(RequestOp::sample);
  r.flags = flags;
  if (ENGRAM_HAS_FIELD(o, engram_sample_options, flags) && (o->flags & ENGRAM_SAMPLE_NO_REPEATS)) r.flags |= kSampleDistinct;
  r.payload.sample.from = from;
  r.payload.sample.num_steps = o->num_steps;
  r.count = o->batch_size;
  r.id = t->client->next_id++;
  // A sample that waits for ever still carries a deadline (a year away):
  // only a sample with one goes through the gate, and the gate is what
  // lets engram_client_interrupt cancel it without losing an item.
  r.deadline_ns = o->timeout_ms == 0  ? 0
                  : o->timeout_ms < 0 ? monotonic_ns() + kForeverNs
                                      : deadline_after_ms(o->timeout_ms);
  *id = r.id;
  *deadline_ns = r.deadline_ns;
  return t->send(r, Owed{RequestOp::sample, r.id, o->batch_size, nullptr, {}}, r.deadline_ns);
}

// Collects the item records of sample `id` (sent with deadline_ns) that
// have not arrived yet, appending to *items and *plain_steps (for each
// item its chunk's plain_steps; 0: read the header). `spin` as for pump().
Status collect_sample(engram_table* t, uint64_t id, int64_t deadline_ns, std::vector<SampledItemWire>* items,
                      std::vector<uint32_t>* plain_steps, int spin) {
  int64_t wait_until = deadline_ns <= 0 ? -1 : deadline_ns;
  struct Rearm {  // puts back an interrupt this call took but did not act on
    engram_client* c;
    bool on = false;
    ~Rearm() {
      if (on) c->interrupt_pending.store(1, std::memory_order_release);
    }
  } rearm{t->client};
  for (;;) {
    ResponseRecord rsp;
    Status s = t->pump(id, &rsp, nullptr, wait_until, spin);
    // At the deadline, or interrupted, the owner may be applying the
    // sample right now (or be stalled just before): the gate decides, and
    // both sides agree.
    if (s.code() == Errc::interrupted && deadline_ns == 0) {
      // No gate for a sample that does not wait: the owner answers it at
      // once, so take the answer and leave the interrupt for the next wait.
      rearm.on = true;
      continue;
    }
    if ((s.code() == Errc::timeout && wait_until >= 0) || s.code() == Errc::interrupted) {
      if (give_up(t, id)) {
        // Long before its deadline: the owner drops it when rung, and the
        // requests behind it on this channel go on.
        if (s.code() == Errc::interrupted) t->bell->ring();
        return s;
      }
      wait_until = -1;  // the owner claimed it: its answer is on its way
      continue;
    }
    if (!s.ok()) return s;
    bool complete = false;
    if (Status a = take_sample_record(rsp, items, plain_steps, &complete); !a.ok() || complete) return a;
  }
}

// Sends a sample request and collects its item records.
Status request_sample(engram_table* t, const engram_sample_options* o, uint64_t* id, std::vector<SampledItemWire>* items,
                      std::vector<uint32_t>* plain_steps, uint32_t flags, uint64_t from) {
  int64_t deadline_ns = 0;
  if (Status s = send_sample(t, o, id, &deadline_ns, flags, from); !s.ok()) return s;
  items->clear();
  items->reserve(o->batch_size);
  plain_steps->clear();
  plain_steps->reserve(o->batch_size);
  return collect_sample(t, *id, deadline_ns, items, plain_steps);
}

void release(engram_table* t, uint64_t id) {
  RequestRecord r{};
  r.op = static_cast<uint32_t>(RequestOp::release);
  r.id = id;
  (void)t->send_quiet(r);  // if the server is gone, so are the pins
}

void end_begun_sample(engram_table* t) {
  engram_table::BegunSample b = std::move(t->begun);
  t->begun.clear();
  if (b.id == 0) return;
  if (t->client->disconnected || !t->usable().ok()) return;  // the pins went with the channel
  if (b.complete) {
    release(t, b.id);
    return;
  }
  // Not answered in full: cancelled if the owner has not drawn it yet (rung,
  // so that one the rate limiter holds is answered now), else its records
  // still to come are an orphan's, whose pins pump() gives back.
  if (b.deadline_ns > 0 && give_up(t, b.id)) t->bell->ring();
}
}  // namespace engram

extern "C" {

void engram_sample_options_init(engram_sample_options* o) {
  if (!o) return;
  std::memset(o, 0, sizeof *o);
  o->struct_size = sizeof *o;
  o->batch_size = 1;
  o->num_steps = 1;
  o->timeout_ms = -1;
}

int engram_sample(engram_table* t, const engram_sample_options* o, void* const* buffers, engram_sample_info* infos,
                  uint32_t* count) {
  ENGRAM_GUARD_BEGIN
  if (!t || !o || !buffers || !count) return fail(Errc::invalid_argument, "table, options, buffers or count is NULL");
  *count = 0;
  if (Status s = check_options(t, o); !s.ok()) return set_error(s);
  if (Status s = not_begun(t); !s.ok()) return set_error(s);
  // Before the request: a sample that cannot be copied out must not take items.
  if (Status s = check_buffers(t, buffers); !s.ok()) return set_error(s);
  uint64_t id = 0;
  std::vector<SampledItemWire> items;
  std::vector<uint32_t> plain_steps;
  Status s = request_sample(t, o, &id, &items, &plain_steps);
  if (s.ok()) s = copy_out(t, items, plain_steps, o->num_steps, buffers, infos);
  if (id && s.code() != Errc::disconnected) release(t, id);
  if (!s.ok()) return set_error(s);
  *count = static_cast<uint32_t>(items.size());
  return ENGRAM_OK;
  ENGRAM_GUARD_END
}

int engram_sample_begin(engram_table* t, const engram_sample_options* o) {
  ENGRAM_GUARD_BEGIN
  if (!t || !o) return fail(Errc::invalid_argument, "table or options is NULL");
  if (Status s = check_options(t, o); !s.ok()) return set_error(s);
  if (Status s = not_begun(t); !s.ok()) return set_error(s);
  engram_table::BegunSample& b = t->begun;
  b.clear();
  b.num_steps = o->num_steps;
  b.items.reserve(o->batch_size);
  b.plain_steps.reserve(o->batch_size);
  uint64_t id = 0;
  if (Status s = send_sample(t, o, &id, &b.deadline_ns); !s.ok()) return set_error(s);
  b.id = id;  // after the send, whose wait for credit may take other answers
  return ENGRAM_OK;
  ENGRAM_GUARD_END
}

int engram_sample_end(engram_table* t, void* const* buffers, engram_sample_info* infos, uint32_t* count) {
  ENGRAM_GUARD_BEGIN
  if (!t || !buffers || !count) return fail(Errc::invalid_argument, "table, buffers or count is NULL");
  *count = 0;
  if (t->begun.id == 0)
    return fail(Errc::invalid_argument, "no sample was begun on table " + t->name + ": call engram_sample_begin first");
  // Before anything is taken: the sample stays begun, for a call with buffers.
  if (Status s = check_buffers(t, buffers); !s.ok()) return set_error(s);
  engram_table::BegunSample& b = t->begun;
  Status s = b.status;
  // Not there yet, long after it was sent: the rate limiter holds it (or
  // the owner is far behind), so sleep at once; spinning for an answer
  // that is a wake-up away cost a learner more than its sleep
  // (bench/NOTES.md, "Ape-X: time in engram calls").
  if (s.ok() && !b.complete) s = collect_sample(t, b.id, b.deadline_ns, &b.items, &b.plain_steps, /*spin=*/0);
  if (s.ok()) s = copy_out(t, b.items, b.plain_steps, b.num_steps, buffers, infos);
  if (s.code() != Errc::disconnected) release(t, b.id);
  uint32_t n = static_cast<uint32_t>(b.items.size());
  b.clear();  // ended, whatever the outcome
  if (!s.ok()) return set_error(s);
  *count = n;
  return ENGRAM_OK;
  ENGRAM_GUARD_END
}

int engram_sample_view(engram_table* t, const engram_sample_options* o, engram_batch** out) {
  ENGRAM_GUARD_BEGIN
  if (!t || !o || !out) return fail(Errc::invalid_argument, "table, options or out is NULL");
  *out = nullptr;
  if (Status s = check_options(t, o); !s.ok()) return set_error(s);
  if (Status s = not_begun(t); !s.ok()) return set_error(s);
  auto b = std::make_unique<engram_batch>();
  b->table = t;
  std::vector<uint32_t> plain_steps;
  Status s = request_sample(t, o, &b->id, &b->items, &plain_steps);
  b->first_header.resize(b->items.size());
  uint32_t refs = 0;
  for (size_t i = 0; i < b->items.size(); ++i) {
    b->first_header[i] = refs;
    refs += b->items[i].num_refs;  // 1..kRecordRefs, checked by request_sample
  }
  b->headers.resize(refs);
  if (s.ok()) prefetch_headers(t, b->items, &plain_steps);
  for (size_t i = 0; i < b->items.size() && s.ok(); ++i)
    s = check_item(t, b->items[i], plain_steps[i], o->num_steps, &b->headers[b->first_header[i]]);
  if (!s.ok()) {
    if (b->id && s.code() != Errc::disconnected) release(t, b->id);
    return set_error(s);
  }
  t->client->batches.push_back(b.get());
  *out = b.release();
  return ENGRAM_OK;
  ENGRAM_GUARD_END
}

uint32_t engram_batch_size(const engram_batch* b) { return b ? static_cast<uint32_t>(b->items.size()) : 0; }

int engram_batch_info(const engram_batch* b, uint32_t item, engram_sample_info* out) {
  ENGRAM_GUARD_BEGIN
  if (!b || !out) return fail(Errc::invalid_argument, "batch or out is NULL");
  if (item >= b->items.size())
    return fail(Errc::invalid_capacity, "item " + std::to_string(item) + " of a batch of " + std::to_string(b->items.size()));
  *out = info_of(b->items[item]);
  return ENGRAM_OK;
  ENGRAM_GUARD_END
}

int engram_batch_views(const engram_batch* b, uint32_t item, uint32_t column, engram_view* out, uint32_t cap,
                       uint32_t* count) {
  ENGRAM_GUARD_BEGIN
  if (!b || !count || (cap && !out)) return fail(Errc::invalid_argument, "batch, out or count is NULL");
  if (item >= b->items.size())
    return fail(Errc::invalid_capacity, "item " + std::to_string(item) + " of a batch of " + std::to_string(b->items.size()));
  const TableSpec& spec = b->table->spec;
  if (column >= spec.num_columns)
    return fail(Errc::invalid_capacity, "column " + std::to_string(column) + " of " + std::to_string(spec.num_columns));
  if (spec.columns[column].codec != static_cast<uint32_t>(Codec::none))
    return fail(Errc::invalid_argument, "column " + column_codec_text(spec.columns[column]) +
                                            " is compressed; zero-copy views exist only for uncompressed columns: "
                                            "copy it out with engram_sample");
  const SampledItemWire& it = b->items[item];
  const ArenaBlocks& arena = b->table->client->arena;
  size_t step = column_step_bytes(spec.columns[column]);
  for (uint32_t k = 0; k < std::min(cap, it.num_refs); ++k) {
    const ChunkRef& ref = it.refs[k];
    const char* base = static_cast<const char*>(arena.data({ref.block, ref.generation}));
    ColumnSpan span;
    if (Status s = chunk_column_span(base, arena.block_size(ref.block), b->headers[b->first_header[item] + k],
                                     spec.columns, column, &span);
        !s.ok())
      return set_error(s);
    out[k].data = base + span.offset + size_t{ref.offset} * step;
    out[k].steps = ref.length;
  }
  *count = it.num_refs;
  return ENGRAM_OK;
  ENGRAM_GUARD_END
}

void engram_batch_release(engram_batch* b) {
  if (!b) return;
  try {
    auto& bs = b->table->client->batches;
    bs.erase(std::remove(bs.begin(), bs.end(), b), bs.end());
    if (!b->table->client->disconnected) release(b->table, b->id);
  } catch (...) {
  }
  delete b;
}

}  // extern "C"
