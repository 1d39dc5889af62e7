// Taking items for delivery (take.h): a sample with kSampleSequences whose
// pins the caller holds until the peer answered the items; and looking at
// the newest (kSampleNewest) for a mirror, pinned likewise until sent.
#include "capi/take.h"

#include <memory>

#include "capi/client.hpp"
#include "core/chunk_format.hpp"
#include "core/priority.hpp"
#include "core/selector.hpp"

using namespace engram;

struct engram_taken {
  engram_table* table = nullptr;
  uint64_t id = 0;
  bool draw = false;  // a plain sample: the items carry probabilities, not sequences
  std::vector<SampledItemWire> items;
};

namespace {

int take_or_look(engram_table* t, uint32_t max_items, int32_t timeout_ms, uint32_t flags, uint64_t from,
                 engram_taken** out) {
  if (!t || !out) return fail(Errc::invalid_argument, "table or out is NULL");
  *out = nullptr;
  if (max_items == 0 || max_items > t->client->hello.max_batch)
    return fail(Errc::invalid_capacity, "max_items " + std::to_string(max_items) + "; allowed 1.." +
                                            std::to_string(t->client->hello.max_batch));
  engram_sample_options o;
  engram_sample_options_init(&o);
  o.batch_size = max_items;
  o.timeout_ms = timeout_ms;
  o.num_steps = 0;  // items of any length: a take delivers them whole
  auto b = std::make_unique<engram_taken>();
  b->table = t;
  b->draw = (flags & kSampleSequences) == 0;
  std::vector<uint32_t> plain_steps;
  if (Status s = request_sample(t, &o, &b->id, &b->items, &plain_steps, flags, from); !s.ok()) {
    if (b->id && s.code() != Errc::disconnected && !b->items.empty()) release(t, b->id);
    return set_error(s);
  }
  *out = b.release();
  return ENGRAM_OK;
}

}  // namespace

extern "C" {

int engram_private_take(engram_table* t, uint32_t max_items, int32_t timeout_ms, engram_taken** out) {
  ENGRAM_GUARD_BEGIN
  return take_or_look(t, max_items, timeout_ms, kSampleSequences, 0, out);
  ENGRAM_GUARD_END
}

int engram_private_draw(engram_table* t, uint32_t max_items, int32_t timeout_ms, engram_taken** out) {
  ENGRAM_GUARD_BEGIN
  return take_or_look(t, max_items, timeout_ms, 0, 0, out);
  ENGRAM_GUARD_END
}

int engram_private_taken_mass(const engram_taken* b, double* mass) {
  ENGRAM_GUARD_BEGIN
  if (!b || !mass) return fail(Errc::invalid_argument, "batch or mass is NULL");
  if (!b->draw || b->items.empty()) return fail(Errc::invalid_argument, "only a draw of at least one item has a mass");
  const SampledItemWire& it = b->items.front();
  const TableSpec& spec = b->table->spec;
  switch (static_cast<SelectorKind>(spec.sampler)) {
    case SelectorKind::uniform: *mass = it.table_size; return ENGRAM_OK;
    case SelectorKind::prioritized: {
      // p = w / W at the draw (Selector::sample), so W = w / p; an item of
      // weight 0 is drawn only when every weight is 0 (then p = 1 / size).
      const double w = priority_weight(it.priority, spec.sampler_exponent);
      *mass = w > 0 && it.probability > 0 ? w / it.probability : 0.0;
      return ENGRAM_OK;
    }
    default:
      return fail(Errc::invalid_argument, std::string("table's sampler is ") +
                                              selector_kind_name(static_cast<SelectorKind>(spec.sampler)) +
                                              ": only uniform and prioritized tables have a mass to split batches by");
  }
  ENGRAM_GUARD_END
}

int engram_private_newest(engram_table* t, uint32_t max_items, uint64_t from, engram_taken** out) {
  ENGRAM_GUARD_BEGIN
  return take_or_look(t, max_items, 0, kSampleSequences | kSampleNewest, from, out);
  ENGRAM_GUARD_END
}

uint32_t engram_private_taken_count(const engram_taken* b) { return b ? static_cast<uint32_t>(b->items.size()) : 0; }

int engram_private_taken_item(const engram_taken* b, uint32_t i, engram_private_item* out) {
  ENGRAM_GUARD_BEGIN
  if (!b || !out) return fail(Errc::invalid_argument, "batch or out is NULL");
  if (i >= b->items.size())
    return fail(Errc::invalid_capacity, "item " + std::to_string(i) + " of " + std::to_string(b->items.size()));
  const SampledItemWire& it = b->items[i];
  const ArenaBlocks& arena = b->table->client->arena;
  if (it.num_refs == 0 || it.num_refs > kRecordRefs) return fail(Errc::corrupt, "a taken item with a bad slice count");
  out->sequence = b->draw ? 0 : it.sequence;
  out->key = it.key;
  out->priority = it.priority;
  out->probability = b->draw ? it.probability : 0.0;
  out->times_sampled = b->draw ? it.times_sampled : 0;
  out->table_size = it.table_size;
  out->num_slices = it.num_refs;
  for (uint32_t k = 0; k < it.num_refs; ++k) {
    const ChunkRef& r = it.refs[k];
    if (r.block >= arena.total_blocks()) return fail(Errc::corrupt, "a taken item's chunk is outside the arena");
    out->slices[k] = {arena.data({r.block, r.generation}), arena.block_size(r.block), pack_block({r.block, r.generation}),
                      r.offset, r.length};
  }
  return ENGRAM_OK;
  ENGRAM_GUARD_END
}

void engram_private_taken_free(engram_taken* b) {
  if (!b) return;
  try {
    if (!b->table->client->disconnected && !b->items.empty()) release(b->table, b->id);
  } catch (...) {
  }
  delete b;
}

const void* engram_private_table_columns(const engram_table* t, uint32_t* n) {
  if (!t || !n) return nullptr;
  *n = t->spec.num_columns;
  return t->spec.columns;
}

}  // extern "C"
