#include "core/table.hpp"

#include <cstdio>

#include <algorithm>
#include <cstring>
#include <ctime>

#include "core/name.hpp"
#include "core/priority.hpp"

namespace engram {

namespace {

// Fills every field of *h except the segment header; returns the region size.
size_t plan(const CheckedTableOptions& checked, TableHeader* h) {
  const TableOptions& o = *checked;
  const uint32_t capacity = checked.capacity();
  char* body = reinterpret_cast<char*>(h) + sizeof(SegmentHeader);
  std::memset(body, 0, sizeof(TableHeader) - sizeof(SegmentHeader));
  std::strncpy(h->name, o.name.c_str(), kMaxTableName - 1);
  h->capacity = capacity;
  h->max_times_sampled = o.max_times_sampled;
  h->max_refs_per_item = o.max_refs_per_item;
  h->num_columns = static_cast<uint32_t>(o.signature.size());
  for (size_t i = 0; i < o.signature.size() && i < kMaxColumns; ++i) h->columns[i] = o.signature[i];
  h->limiter_config = o.rate_limiter;
  size_t off = sizeof(TableHeader);
  auto take = [&off](size_t bytes) {
    size_t at = off;
    off = align_up(off + bytes, kCacheLine);
    return at;
  };
  h->off_items = take(sizeof(ItemSlot) * capacity);
  h->off_refs = take(sizeof(ChunkRef) * capacity * size_t{o.max_refs_per_item});
  h->off_free = take(sizeof(uint32_t) * capacity);
  h->sampler_size = Selector::bytes_needed(o.sampler, capacity);
  h->off_sampler = take(h->sampler_size);
  h->remover_size = Selector::bytes_needed(o.remover, capacity);
  h->off_remover = take(h->remover_size);
  h->range_size = PriorityRange::bytes_needed(capacity);
  h->off_range = take(h->range_size);
  h->region_size = off;
  return off;
}

}  // namespace

Result<CheckedTableOptions> Table::check(TableOptions o) {
  if (Status s = validate_name(o.name, kMaxTableName - 1, "table name"); !s.ok()) return s;
  std::string t = "table '" + o.name + "': ";
  if (o.capacity == 0) return Status{Errc::invalid_capacity, t + "capacity (max_size) must be at least 1"};
  if (o.capacity > kMaxTableCapacity)
    return Status{Errc::invalid_capacity,
                  t + "capacity (max_size) " + std::to_string(o.capacity) + " is more than 2^30 (1073741824)"};
  if (o.max_refs_per_item == 0 || o.max_refs_per_item > kMaxItemChunks)
    return Status{Errc::invalid_argument, t + "max_chunks_per_item " + std::to_string(o.max_refs_per_item) +
                                              " is not in 1.." + std::to_string(kMaxItemChunks)};
  if (Status s = Selector::validate(o.sampler); !s.ok()) return Status{s.code(), t + "sampler: " + s.message()};
  if (Status s = Selector::validate(o.remover); !s.ok()) return Status{s.code(), t + "remover: " + s.message()};
  if (Status s = o.rate_limiter.validate(); !s.ok()) return Status{s.code(), t + s.message()};
  if (Status s = check_limiter_fits(o.rate_limiter, o.capacity); !s.ok()) return Status{s.code(), t + s.message()};
  if (Status s = validate_signature(o.signature.data(), o.signature.size()); !s.ok())
    return Status{s.code(), t + "signature: " + s.message()};
  return CheckedTableOptions(std::move(o));
}

size_t Table::bytes_needed(const CheckedTableOptions& o) {
  TableHeader h;
  return plan(o, &h);
}

Result<Table> Table::format(void* mem, size_t size, const CheckedTableOptions& checked, uint64_t seed) {
  const TableOptions& o = *checked;
  if (reinterpret_cast<uintptr_t>(mem) % kCacheLine != 0)
    return Status{Errc::invalid_argument, "table memory must be 64-byte aligned"};
  auto* h = static_cast<TableHeader*>(mem);
  size_t need = bytes_needed(checked);
  if (size < need)
    return Status{Errc::invalid_argument, "table '" + o.name + "' needs " + std::to_string(need) + " bytes, got " + std::to_string(size)};
  segment_begin_format(&h->segment, SegmentKind::table, kTableLayoutHash, need);
  plan(checked, h);
  char* base = static_cast<char*>(mem);
  std::memset(base + h->off_items, 0, sizeof(ItemSlot) * checked.capacity());
  if (auto s = Selector::format(base + h->off_sampler, h->sampler_size, o.sampler, checked.capacity()); !s.ok()) return s.status();
  if (auto s = Selector::format(base + h->off_remover, h->remover_size, o.remover, checked.capacity()); !s.ok()) return s.status();
  if (auto r = PriorityRange::format(base + h->off_range, h->range_size, checked.capacity()); !r.ok()) return r.status();
  Table t(h, seed);
  t.reset();
  h->next_seq = first_sequence(0);
  segment_publish(&h->segment);
  return t;
}

// The options a header holds; the selectors' kinds come from their regions.
// The caller has checked num_columns <= kMaxColumns.
static TableOptions header_options(const TableHeader* h, SelectorOptions sampler, SelectorOptions remover) {
  TableOptions o;
  o.name.assign(h->name, strnlen(h->name, kMaxTableName - 1));
  o.capacity = h->capacity;
  o.sampler = sampler;
  o.remover = remover;
  o.max_times_sampled = h->max_times_sampled;
  o.max_refs_per_item = h->max_refs_per_item;
  o.rate_limiter = h->limiter_config;
  o.signature.assign(h->columns, h->columns + h->num_columns);
  return o;
}

Result<Table> Table::attach(void* mem, size_t size, uint64_t seed) {
  auto* h = static_cast<TableHeader*>(mem);
  if (size < sizeof(TableHeader)) return Status{Errc::corrupt, "table region is smaller than its header"};
  if (Status s = segment_check(&h->segment, SegmentKind::table, kTableLayoutHash, size); !s.ok()) return s;
  if (h->num_columns > kMaxColumns) return Status{Errc::corrupt, "table header has too many columns"};
  char* base = static_cast<char*>(mem);
  if (h->off_sampler >= size || h->off_remover >= size) return Status{Errc::corrupt, "table header offsets are out of range"};
  auto sampler = Selector::attach(base + h->off_sampler, size - h->off_sampler);
  auto remover = Selector::attach(base + h->off_remover, size - h->off_remover);
  if (!sampler.ok()) return sampler.status();
  if (!remover.ok()) return remover.status();
  TableOptions o = header_options(h, {sampler->kind(), sampler->exponent()}, {remover->kind(), remover->exponent()});
  auto checked = check(std::move(o));
  if (!checked.ok()) return Status{Errc::corrupt, "table header is invalid: " + checked.status().message()};
  TableHeader expect;
  size_t need = plan(*checked, &expect);
  if (need > size || need != h->region_size || expect.off_items != h->off_items || expect.off_refs != h->off_refs ||
      expect.off_free != h->off_free || expect.off_sampler != h->off_sampler || expect.off_remover != h->off_remover ||
      expect.off_range != h->off_range || expect.range_size != h->range_size ||
      h->size > h->capacity || h->free_count > h->capacity || h->size + h->free_count != h->capacity)
    return Status{Errc::corrupt, "table header is inconsistent with its options"};
  if (auto r = PriorityRange::attach(base + h->off_range, h->range_size); !r.ok()) return r.status();
  return Table(h, seed);
}

uint64_t first_sequence(uint64_t saved) {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  uint64_t now = static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
  return now > saved ? now : saved + kRestoreSequenceGap;
}

Table::Table(TableHeader* h, uint64_t seed) : h_(h), rng_(seed) {
  char* base = reinterpret_cast<char*>(h);
  items_ = reinterpret_cast<ItemSlot*>(base + h->off_items);
  refs_ = reinterpret_cast<ChunkRef*>(base + h->off_refs);
  free_ = reinterpret_cast<uint32_t*>(base + h->off_free);
  sampler_ = Selector::attach(base + h->off_sampler, h->sampler_size).value();
  remover_ = Selector::attach(base + h->off_remover, h->remover_size).value();
  range_ = PriorityRange::attach(base + h->off_range, h->range_size).value();
  limiter_ = RateLimiter(h->limiter_config);
  limiter_.restore(h->limiter_counters);
}

// Validates up front so that both selectors accept the priority: a refusal
// must leave the table unchanged.
Status Table::check_weight(double priority, uint32_t slot) const {
  for (const Selector* sel : {&sampler_, &remover_})
    if (Status s = sel->check_weight(slot, priority); !s.ok())
      return {s.code(), "table '" + std::string(h_->name) + "': " + s.message()};
  return Status::Ok();
}

Status Table::check_key(uint64_t key, const char* op) const {
  uint32_t slot = key_slot(key);
  uint32_t gen = key_generation(key);
  // Generation 0 is never issued; a generation above the slot's was never
  // issued yet; one below it (or the slot's own, now freed) is stale.
  if (slot >= h_->capacity || gen == 0 || gen > items_[slot].generation)
    return {Errc::unknown_key, std::string(op) + ": key " + std::to_string(key) + " was never issued by table '" + h_->name + "'"};
  if (items_[slot].key != key)
    return {Errc::stale_key, std::string(op) + ": key " + std::to_string(key) + " names an item that has left table '" +
                                 h_->name + "' (evicted, expired or deleted); nothing was changed"};
  return Status::Ok();
}

const ItemSlot* Table::find(uint64_t key) const noexcept {
  uint32_t slot = key_slot(key);
  if (slot >= h_->capacity || items_[slot].key != key || key == 0) return nullptr;
  return &items_[slot];
}

void Table::erase_slot(uint32_t slot) {
  ItemSlot& it = items_[slot];
  if (on_remove_) on_remove_(it, refs(slot));
  sampler_.remove(slot);
  remover_.remove(slot);
  range_.clear(slot);
  it.key = 0;
  free_[h_->free_count++] = slot;
  --h_->size;
  limiter_.on_delete();
  sync_limiter();
}

uint32_t Table::next_victim(const ChunkRef** out) const noexcept {
  if (h_->size < h_->capacity || remover_.draws()) return 0;
  auto victim = remover_.sample(0.0);
  if (!victim.ok()) return 0;
  *out = refs(victim->slot);
  return items_[victim->slot].num_refs;
}

Status Table::check_delivery(const Delivery& d) const {
  if (d.producer == 0) return Status::Ok();
  if (d.sequence == 0)
    return {Errc::invalid_argument, "table '" + std::string(h_->name) + "': an insert from producer " +
                                        std::to_string(d.producer) + " has sequence 0; sequences start at 1"};
  auto it = marks_.find(d.producer);
  if (it != marks_.end() && d.sequence <= it->second)
    return {Errc::already_exists, "table '" + std::string(h_->name) + "': producer " + std::to_string(d.producer) +
                                      "'s item " + std::to_string(d.sequence) + " was applied before (its mark is " +
                                      std::to_string(it->second) + ")"};
  if (it == marks_.end() && marks_.size() >= kMaxProducers)
    return {Errc::limit, "table '" + std::string(h_->name) + "' already has items from " +
                             std::to_string(kMaxProducers) + " producers, the most it remembers"};
  return Status::Ok();
}

Result<uint64_t> Table::insert(double priority, const ChunkRef* refs, uint32_t num_refs, uint32_t plain_steps,
                               const Delivery& from) {
  if (Status s = check_delivery(from); !s.ok()) return s;
  if (num_refs == 0 || num_refs > h_->max_refs_per_item)
    return Status{Errc::invalid_argument, "table '" + std::string(h_->name) + "': an item needs 1 to " +
                                              std::to_string(h_->max_refs_per_item) + " chunk references, got " + std::to_string(num_refs)};
  // As a new member: an eviction could only lower the total.
  if (Status s = check_weight(priority, Selector::kNone); !s.ok()) return s;
  if (!limiter_.can_insert(1)) {
    ++h_->stats.rate_limited;
    return Status{Errc::rate_limited, "table '" + std::string(h_->name) + "': the rate limiter does not allow an insert now"};
  }
  if (h_->size == h_->capacity) {
    auto victim = remover_.sample(draw_for(remover_));
    if (!victim.ok()) return victim.status();
    erase_slot(victim->slot);
    ++h_->stats.evictions;
  }
  uint32_t slot = free_[--h_->free_count];
  ItemSlot& it = items_[slot];
  ++it.generation;
  if (it.generation == 0) it.generation = 1;  // 0 marks "never issued"
  it.key = (uint64_t{it.generation} << 32) | slot;
  it.priority = priority;
  it.inserted_seq = h_->next_seq++;
  it.times_sampled = 0;
  it.num_refs = num_refs;
  it.plain_steps = num_refs == 1 ? plain_steps : 0;
  std::memcpy(refs_ + size_t{slot} * h_->max_refs_per_item, refs, sizeof(ChunkRef) * num_refs);
  // Cannot fail: priority validated, slot free in both selectors.
  (void)sampler_.insert(slot, priority);
  (void)remover_.insert(slot, priority);
  range_.set(slot, priority);
  ++h_->size;
  ++h_->stats.inserts;
  limiter_.on_insert();
  sync_limiter();
  if (from.producer != 0) marks_[from.producer] = from.sequence;
  return it.key;
}

Status Table::sample(uint32_t n, SampleBatch* out, bool distinct, uint32_t num_steps) {
  if (n == 0) return {Errc::invalid_argument, "sample batch size must be at least 1"};
  if (!limiter_.can_sample(n)) {
    ++h_->stats.rate_limited;
    return {Errc::rate_limited, "table '" + std::string(h_->name) + "': the rate limiter does not allow sampling " +
                                    std::to_string(n) + " items now"};
  }
  if (distinct) return sample_distinct(n, out, num_steps);
  if (h_->max_times_sampled == 0 && h_->size > 0) return sample_independent(n, out, num_steps);
  return sample_expiring(n, out, num_steps);
}

Status Table::check_steps(uint32_t slot, uint32_t num_steps) const {
  if (num_steps == 0) return Status::Ok();
  const ItemSlot& it = items_[slot];
  const ChunkRef* r = refs(slot);
  uint64_t steps = 0;
  for (uint32_t k = 0; k < it.num_refs; ++k) steps += r[k].length;
  if (steps == num_steps) return Status::Ok();
  return {Errc::invalid_capacity, "item " + std::to_string(it.key) + " has " + std::to_string(steps) +
                                      " steps; the sample options ask for num_steps " + std::to_string(num_steps) +
                                      " (nothing was sampled)"};
}

Status Table::check_picks(const Sampled* picks, uint32_t n, uint32_t num_steps) const {
  if (num_steps == 0) return Status::Ok();
  for (uint32_t i = 0; i < n; ++i)
    if (Status s = check_steps(picks[i].slot, num_steps); !s.ok()) return s;
  return Status::Ok();
}

// With max_times_sampled, an item that reaches it leaves before the next
// draw, so the draws are made one at a time. They are made in two passes
// so that an item of the wrong length, found at any draw, leaves the
// table as it was: the first takes each spent item out of the sampler
// alone (so that it is not drawn again), and a refusal puts them back in
// reverse order (Selector::put_back, exact); the second counts the
// batch and removes the spent items from the rest of the table.
Status Table::sample_expiring(uint32_t n, SampleBatch* out, uint32_t num_steps) {
  static thread_local std::vector<uint32_t> picked, spent;
  static thread_local std::vector<uint64_t> spent_seq;
  picked.clear();
  spent.clear();
  spent_seq.clear();
  const size_t first_item = out->items.size(), first_ref = out->refs.size();
  const uint64_t seq_counter = sampler_.seq_counter();
  Status refused = Status::Ok();
  for (uint32_t i = 0; i < n && h_->size > spent.size(); ++i) {
    auto s = sampler_.sample(draw_for(sampler_));
    if (!s.ok()) {
      refused = s.status();
      break;
    }
    uint32_t slot = s->slot;
    if (refused = check_steps(slot, num_steps); !refused.ok()) break;
    ItemSlot& it = items_[slot];
    ++it.times_sampled;
    picked.push_back(slot);
    out->items.push_back({it.key, it.priority, s->probability, it.times_sampled,
                          h_->size - static_cast<uint32_t>(spent.size()), static_cast<uint32_t>(out->refs.size()),
                          it.num_refs, it.plain_steps, it.inserted_seq});
    const ChunkRef* r = refs(slot);
    out->refs.insert(out->refs.end(), r, r + it.num_refs);
    if (it.times_sampled >= h_->max_times_sampled) {
      spent.push_back(slot);
      spent_seq.push_back(sampler_.tie_seq(slot));
      sampler_.remove(slot);
    }
  }
  if (!refused.ok()) {
    for (size_t k = spent.size(); k-- > 0;) (void)sampler_.put_back(spent[k], items_[spent[k]].priority, spent_seq[k]);
    sampler_.set_seq_counter(seq_counter);
    for (uint32_t slot : picked) --items_[slot].times_sampled;
    out->items.resize(first_item);
    out->refs.resize(first_ref);
    return refused;
  }
  h_->stats.samples += picked.size();
  limiter_.on_sample(static_cast<uint32_t>(picked.size()));
  for (uint32_t slot : spent) {
    erase_slot(slot);
    ++h_->stats.expirations;
  }
  sync_limiter();
  return Status::Ok();
}

Status Table::newest(uint32_t n, uint64_t from, SampleBatch* out) const {
  if (h_->capacity > kMaxLookCapacity)
    return {Errc::invalid_argument, "table '" + std::string(h_->name) + "' has room for " +
                                        std::to_string(h_->capacity) + " items; only tables of up to " +
                                        std::to_string(kMaxLookCapacity) + " can be looked into (followed)"};
  if (n == 0 || h_->size == 0 || h_->next_seq <= from) return Status::Ok();
  std::vector<uint32_t> slots;
  for (uint32_t slot = 0; slot < h_->capacity; ++slot)
    if (items_[slot].key != 0 && items_[slot].inserted_seq >= from) slots.push_back(slot);
  auto newer = [&](uint32_t a, uint32_t b) { return items_[a].inserted_seq > items_[b].inserted_seq; };
  if (slots.size() > n) {
    std::nth_element(slots.begin(), slots.begin() + n, slots.end(), newer);
    slots.resize(n);
  }
  std::sort(slots.begin(), slots.end(), [&](uint32_t a, uint32_t b) { return newer(b, a); });
  for (uint32_t slot : slots) {
    const ItemSlot& it = items_[slot];
    out->items.push_back({it.key, it.priority, 0.0, it.times_sampled, h_->size, static_cast<uint32_t>(out->refs.size()),
                          it.num_refs, it.plain_steps, it.inserted_seq});
    out->refs.insert(out->refs.end(), refs(slot), refs(slot) + it.num_refs);
  }
  return Status::Ok();
}

// Without max_times_sampled nothing leaves the table mid-batch, so the n
// draws are independent: draw the same u's as the loop in sample() would,
// pick all slots at once, then account for them in order.
Status Table::sample_independent(uint32_t n, SampleBatch* out, uint32_t num_steps) {
  static thread_local SumTreeScratch scratch;
  static thread_local std::vector<double> u;
  static thread_local std::vector<Sampled> picks;
  u.resize(n);
  picks.resize(n);
  for (uint32_t i = 0; i < n; ++i) u[i] = draw_for(sampler_);
  if (Status s = sampler_.sample_batch(u.data(), picks.data(), n, scratch); !s.ok()) return s;
  if (Status s = check_picks(picks.data(), n, num_steps); !s.ok()) return s;
  take_picks(picks.data(), n, out);
  sync_limiter();
  return Status::Ok();
}

Status Table::take(const uint64_t* keys, const double* probabilities, uint32_t n, SampleBatch* out,
                   uint32_t num_steps) {
  static thread_local std::vector<Sampled> picks;
  picks.clear();
  for (uint32_t i = 0; i < n; ++i) {
    if (Status s = check_key(keys[i], "take"); !s.ok()) return s;
    picks.push_back({key_slot(keys[i]), probabilities[i]});
  }
  // A key twice would count one item twice and erase its slot twice.
  static thread_local std::vector<uint32_t> slots;
  slots.clear();
  for (const Sampled& p : picks) slots.push_back(p.slot);
  std::sort(slots.begin(), slots.end());
  if (std::adjacent_find(slots.begin(), slots.end()) != slots.end())
    return {Errc::invalid_argument, "take: a key twice in one batch"};
  return take_distinct(picks.data(), n, out, num_steps);
}

Status Table::take_distinct(const Sampled* picks, uint32_t n, SampleBatch* out, uint32_t num_steps) {
  if (Status s = check_picks(picks, n, num_steps); !s.ok()) return s;
  take_picks(picks, n, out);
  // Items that reached max_times_sampled leave after the whole batch is
  // drawn: each is in it once, and the batch saw the table as it was.
  if (h_->max_times_sampled != 0)
    for (uint32_t i = 0; i < n; ++i)
      if (items_[picks[i].slot].times_sampled >= h_->max_times_sampled) {
        erase_slot(picks[i].slot);
        ++h_->stats.expirations;
      }
  sync_limiter();
  return Status::Ok();
}

void Table::take_picks(const Sampled* picks, uint32_t n, SampleBatch* out) {
  auto prefetch = [&](uint32_t i) {
    __builtin_prefetch(&items_[picks[i].slot], 1);
    __builtin_prefetch(refs(picks[i].slot));
  };
  for (uint32_t i = 0; i < n && i < kPrefetchAhead; ++i) prefetch(i);
  out->items.reserve(out->items.size() + n);
  for (uint32_t i = 0; i < n; ++i) {
    if (i + kPrefetchAhead < n) prefetch(i + kPrefetchAhead);
    uint32_t slot = picks[i].slot;
    ItemSlot& it = items_[slot];
    ++it.times_sampled;
    out->items.push_back({it.key, it.priority, picks[i].probability, it.times_sampled, h_->size,
                          static_cast<uint32_t>(out->refs.size()), it.num_refs, it.plain_steps, it.inserted_seq});
    const ChunkRef* r = refs(slot);
    out->refs.insert(out->refs.end(), r, r + it.num_refs);
  }
  h_->stats.samples += n;
  limiter_.on_sample(n);
}

Status Table::update(uint64_t key, double priority) {
  if (Status s = check_key(key, "update"); !s.ok()) {
    if (s.code() == Errc::stale_key) ++h_->stats.stale;
    return s;
  }
  uint32_t slot = key_slot(key);
  if (Status s = check_weight(priority, slot); !s.ok()) return s;
  (void)sampler_.update(slot, priority);
  (void)remover_.update(slot, priority);
  range_.set(slot, priority);
  items_[slot].priority = priority;
  ++h_->stats.updates;
  return Status::Ok();
}

Status Table::remove(uint64_t key) {
  if (Status s = check_key(key, "delete"); !s.ok()) {
    if (s.code() == Errc::stale_key) ++h_->stats.stale;
    return s;
  }
  erase_slot(key_slot(key));
  ++h_->stats.deletes;
  return Status::Ok();
}

void Table::reset() {
  for (uint32_t s = 0; s < h_->capacity; ++s)
    if (items_[s].key != 0 && on_remove_) on_remove_(items_[s], refs(s));
  for (uint32_t s = 0; s < h_->capacity; ++s) {
    items_[s].key = 0;
    free_[s] = h_->capacity - 1 - s;  // pop order 0, 1, 2, ...
  }
  h_->free_count = h_->capacity;
  h_->size = 0;
  h_->stats = {};
  sampler_.clear();
  remover_.clear();
  range_.clear_all();
  limiter_.reset();
  sync_limiter();
}

// The header was checked when the table was formatted or attached.
CheckedTableOptions Table::options() const {
  return CheckedTableOptions(header_options(h_, {sampler_.kind(), sampler_.exponent()}, {remover_.kind(), remover_.exponent()}));
}

TableState Table::snapshot() const {
  TableState s;
  s.options = *options();
  s.counters = limiter_.counters();
  s.stats = h_->stats;
  s.next_seq = h_->next_seq;
  s.sampler_seq = sampler_.seq_counter();
  s.remover_seq = remover_.seq_counter();
  s.generations.resize(h_->capacity);
  s.free_stack.assign(free_, free_ + h_->free_count);
  s.items.reserve(h_->size);
  for (uint32_t slot = 0; slot < h_->capacity; ++slot) {
    const ItemSlot& it = items_[slot];
    s.generations[slot] = it.generation;
    if (it.key == 0) continue;
    s.items.push_back({it.key, it.priority, it.inserted_seq, it.times_sampled, static_cast<uint32_t>(s.refs.size()),
                       it.num_refs, sampler_.tie_seq(slot), remover_.tie_seq(slot)});
    s.refs.insert(s.refs.end(), refs(slot), refs(slot) + it.num_refs);
  }
  std::sort(s.items.begin(), s.items.end(),
            [](const ItemState& a, const ItemState& b) { return a.inserted_seq < b.inserted_seq; });
  for (const auto& [producer, sequence] : marks_) s.marks.push_back({producer, sequence});
  std::sort(s.marks.begin(), s.marks.end(),
            [](const DeliveryMark& a, const DeliveryMark& b) { return a.producer < b.producer; });
  return s;
}

Status Table::restore(const TableState& s, const std::function<uint32_t(const ChunkRef&)>& plain_steps_of) {
  auto bad = [&](const std::string& why) {
    RemoveHook hook = std::move(on_remove_);
    on_remove_ = nullptr;  // the refs were never the table's to release
    reset();
    on_remove_ = std::move(hook);
    return Status{Errc::corrupt, "table '" + std::string(h_->name) + "': the saved state " + why};
  };
  if (h_->size != 0) return {Errc::invalid_argument, "restore needs an empty table"};
  uint32_t cap = h_->capacity;
  if (s.generations.size() != cap || s.items.size() > cap || s.free_stack.size() != cap - s.items.size())
    return bad("does not match the table's capacity of " + std::to_string(cap));
  for (uint32_t slot = 0; slot < cap; ++slot) items_[slot].generation = s.generations[slot];
  uint64_t prev_seq = 0;
  for (const ItemState& st : s.items) {
    uint32_t slot = key_slot(st.key);
    if (slot >= cap || items_[slot].key != 0 || key_generation(st.key) == 0 ||
        key_generation(st.key) != s.generations[slot])
      return bad("has an item key " + std::to_string(st.key) + " that names no free slot of its generation");
    if (st.num_refs == 0 || st.num_refs > h_->max_refs_per_item || st.first_ref > s.refs.size() ||
        st.num_refs > s.refs.size() - st.first_ref)
      return bad("has an item with bad chunk references");
    if (st.inserted_seq < prev_seq || st.inserted_seq >= s.next_seq)
      return bad("has items out of insertion order");
    // Checked as it goes in: the totals grow item by item.
    if (Status c = check_weight(st.priority, Selector::kNone); !c.ok()) return bad("has a bad priority: " + c.message());
    prev_seq = st.inserted_seq;
    ItemSlot& it = items_[slot];
    it.key = st.key;
    it.priority = st.priority;
    it.inserted_seq = st.inserted_seq;
    it.times_sampled = st.times_sampled;
    it.num_refs = st.num_refs;
    std::memcpy(refs_ + size_t{slot} * h_->max_refs_per_item, &s.refs[st.first_ref], sizeof(ChunkRef) * st.num_refs);
    it.plain_steps = st.num_refs == 1 && plain_steps_of ? plain_steps_of(s.refs[st.first_ref]) : 0;
    (void)sampler_.insert_with_seq(slot, st.priority, st.sampler_seq);
    (void)remover_.insert_with_seq(slot, st.priority, st.remover_seq);
    range_.set(slot, st.priority);
  }
  std::vector<bool> listed(cap);
  for (uint32_t i = 0; i < s.free_stack.size(); ++i) {
    uint32_t slot = s.free_stack[i];
    if (slot >= cap || items_[slot].key != 0 || listed[slot])
      return bad("has a free slot that is taken, listed twice or out of range");
    listed[slot] = true;
    free_[i] = slot;
  }
  h_->free_count = static_cast<uint32_t>(s.free_stack.size());
  h_->size = static_cast<uint32_t>(s.items.size());
  if (s.counters.inserts < 0 || s.counters.samples < 0 || s.counters.deletes < 0 ||
      s.counters.deletes > s.counters.inserts)
    return bad("has negative counters, or more deletes than inserts");
  if (s.counters.inserts - s.counters.deletes != int64_t{h_->size})
    return bad("says inserts - deletes = " + std::to_string(s.counters.inserts - s.counters.deletes) + " but holds " +
               std::to_string(h_->size) + " items");
  if (s.marks.size() > kMaxProducers) return bad("has more than " + std::to_string(kMaxProducers) + " producers");
  for (size_t i = 0; i < s.marks.size(); ++i)
    if (s.marks[i].producer == 0 || s.marks[i].sequence == 0 || (i > 0 && s.marks[i].producer <= s.marks[i - 1].producer))
      return bad("has a delivery mark of producer 0 or sequence 0, or producers out of order");
  marks_.clear();
  for (const DeliveryMark& m : s.marks) marks_[m.producer] = m.sequence;
  if (s.next_seq > UINT64_MAX - kRestoreSequenceGap) return bad("has an insertion counter too close to its end");
  h_->next_seq = first_sequence(s.next_seq);
  h_->stats = s.stats;
  sampler_.set_seq_counter(s.sampler_seq);
  remover_.set_seq_counter(s.remover_seq);
  limiter_.restore(s.counters);
  sync_limiter();
  return Status::Ok();
}

// A limiter's bound as people write it: an integer while it is one, else
// %g (max_diff may be any finite double, up to DBL_MAX).
static std::string limit_text(double v) {
  if (v >= 0 && v < 9007199254740992.0 && v == static_cast<double>(static_cast<uint64_t>(v)))
    return std::to_string(static_cast<uint64_t>(v));
  char b[32];
  std::snprintf(b, sizeof b, "%g", v);
  return b;
}

Status Table::check_limiter_fits(const RateLimiterConfig& c, uint64_t capacity) {
  if (c.min_size_to_sample > 0 && static_cast<uint64_t>(c.min_size_to_sample) > capacity)
    return {Errc::invalid_argument, "rate_limiter min_size " + std::to_string(c.min_size_to_sample) +
                                        " is more than max_size " + std::to_string(capacity) +
                                        ": the table can never hold that many items, so every sample would wait for "
                                        "ever; make min_size at most max_size, or max_size at least min_size"};
  // A queue (the preset's shape: spi 1, min_size 1, min_diff 0) holds its
  // writers once max_diff items wait unsampled; past max_size the table
  // evicts them first, and the writers are never held.
  const bool queue = c.samples_per_insert == 1.0 && c.min_size_to_sample == 1 && c.min_diff == 0.0;
  if (queue && c.max_diff > static_cast<double>(capacity))
    return {Errc::invalid_argument, "rate_limiter: a queue of size " + limit_text(c.max_diff) +
                                        " on a table of max_size " + std::to_string(capacity) +
                                        " would evict items nobody sampled instead of holding the writers when "
                                        "full; make the queue's size at most max_size, or max_size at least the size"};
  return Status::Ok();
}

Status Table::set_rate_limiter(const RateLimiterConfig& c) {
  Status s = c.validate();
  if (s.ok()) s = check_limiter_fits(c, h_->capacity);
  if (s.ok()) s = limiter_.reconfigure(c);
  if (!s.ok()) return {s.code(), "table '" + std::string(h_->name) + "': " + s.message()};
  h_->limiter_config = c;
  return Status::Ok();
}

TableInfo Table::info() const {
  PriorityExtremes e = range_.empty() ? PriorityExtremes{0, 0} : range_.extremes();
  return TableInfo{h_->name,        h_->capacity,          h_->size,           h_->max_times_sampled,
                   sampler_.kind(), remover_.kind(),       limiter_.config(),  limiter_.counters(),
                   h_->stats,       limiter_.can_sample(1), limiter_.can_insert(1), e.max, e.min};
}

}  // namespace engram
