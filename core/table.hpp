// A replay table: items (key, priority, times_sampled, insertion order, chunk
// references) in a fixed number of slots, a sampler and a remover selector, a
// rate limiter, and a signature. It is a view over one region of (shared)
// memory, driven by exactly one owner thread; it needs no locks.
//
// Region layout (offsets from its start, each 64-aligned):
//   TableHeader (starting with a SegmentHeader) | ItemSlot[capacity] | ChunkRef[capacity * max_refs_per_item]
//   | free slot stack u32[capacity] | sampler region | remover region
//   | priority range region (core/priority_range.hpp)
//
// Invariants:
//  - an item's key is (generation << 32 | slot); a slot's generation grows by
//    one each time the slot is filled, so a key whose generation no longer
//    matches is stale, and updates/deletes with it are reported, not applied;
//  - an occupied slot is a member of both the sampler and the remover and
//    holds its priority in the priority range; a free slot is a member of
//    neither, is empty in the range, and is on the free stack;
//  - rate-limiter deletes count every removal (eviction, max_times_sampled,
//    explicit delete), so size() == inserts - deletes.
#pragma once

#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/priority_range.hpp"
#include "core/rate_limiter.hpp"
#include "core/segment_header.hpp"
#include "core/selector.hpp"
#include "core/signature.hpp"
#include "core/status.hpp"

namespace engram {

inline constexpr size_t kMaxTableName = 64;  // bytes, including the NUL

// A slice of a sealed chunk: steps [offset, offset + length) of block
// `block` as of generation `generation`.
struct ChunkRef {
  uint32_t block;
  uint32_t generation;
  uint32_t offset;
  uint32_t length;
};
static_assert(sizeof(ChunkRef) == 16);

struct ItemSlot {
  uint64_t key;            // 0 when the slot is free
  double priority;
  uint64_t inserted_seq;   // insertion order across the table's life
  uint32_t times_sampled;
  uint32_t num_refs;
  uint32_t generation;     // of the current or last occupant
  // The capacity in steps of the item's one chunk if it is plain
  // (uncompressed), as its header was checked at insert or restore; 0 if
  // the item spans several chunks, its chunk is packed, or a restore was
  // not told it (Table::restore's plain_steps_of). Sent
  // with samples (PackedItemsWire) so that samplers need not read the
  // chunk's header.
  uint32_t plain_steps;
};
static_assert(sizeof(ItemSlot) == 40);

// A table's bounds: their only home. Table::check holds them against the
// options of every table made (the C API and engramctl through the control
// protocol, engramd.toml, a restored checkpoint); nothing before it narrows
// or bounds a field, so that each refusal has one message.
inline constexpr uint32_t kMaxTableCapacity = 1u << 30;  // items (max_size)
inline constexpr uint32_t kMaxItemChunks = 8;            // chunk slices per item: what one insert record carries

// A table's options as they arrive, not yet checked.
struct TableOptions {
  std::string name;
  uint64_t capacity = 0;  // max_size; 64 bits wide so that it is bounded by check, not by a cast
  SelectorOptions sampler{SelectorKind::uniform, 1.0};
  SelectorOptions remover{SelectorKind::fifo, 1.0};
  uint32_t max_times_sampled = 0;  // 0 = unlimited
  RateLimiterConfig rate_limiter{};
  std::vector<Column> signature;
  uint32_t max_refs_per_item = 8;
};

// Per-operation counts since creation or reset.
struct TableStats {
  uint64_t inserts, samples, updates, deletes;
  uint64_t evictions;   // removed by the remover to make room
  uint64_t expirations; // removed on reaching max_times_sampled
  uint64_t stale;       // updates / deletes with stale keys (not applied)
  uint64_t rate_limited;// insert / sample attempts refused by the limiter
  uint64_t bytes_raw;   // chunk steps under inserted items, each chunk once per channel, uncompressed
  uint64_t bytes_stored;// the same as stored (compressed)
};

struct alignas(kCacheLine) TableHeader {
  SegmentHeader segment;  // kind table; version written last, after the whole region
  char name[kMaxTableName];
  uint32_t capacity;
  uint32_t max_times_sampled;
  uint32_t max_refs_per_item;
  uint32_t num_columns;
  uint32_t size;
  uint32_t free_count;
  uint64_t next_seq;
  uint64_t region_size;
  RateLimiterConfig limiter_config;
  RateLimiterCounters limiter_counters;
  TableStats stats;
  uint64_t off_items, off_refs, off_free, off_sampler, off_remover, off_range;
  uint64_t sampler_size, remover_size, range_size;
  Column columns[kMaxColumns];
};

// Everything a table region holds, selectors and sum tree included.
inline constexpr uint64_t kTableLayoutHash = layout_hash(
    static_cast<uint64_t>(SegmentKind::table),
    {layout_of<TableHeader>(), layout_of<ItemSlot>(), layout_of<ChunkRef>(), layout_of<Column>(),
     layout_of<RateLimiterConfig>(), layout_of<RateLimiterCounters>(), layout_of<TableStats>(),
     layout_of<SelectorHeader>(), layout_of<SumTreeHeader>(), {kPrioritizedArity, 0},
     layout_of<PriorityRangeHeader>(), layout_of<PriorityExtremes>(), {kPriorityRangeArity, 0}});

struct TableInfo {
  std::string name;
  uint32_t capacity;
  uint32_t size;
  uint32_t max_times_sampled;
  SelectorKind sampler, remover;
  RateLimiterConfig limiter;
  RateLimiterCounters counters;
  TableStats stats;
  bool can_sample, can_insert;
  // The largest and smallest priority of the items held now; 0 when the
  // table is empty.
  double max_priority, min_priority;
};

// What an insert "at the current maximum" gets in an empty table: Schaul
// et al.'s first priority.
inline constexpr double kAtMaxWhenEmpty = 1.0;

// The largest table newest() looks into: it scans every slot when
// something is newer, so only small tables (parameters) are looked into
// so, and a look costs about what a sample of a few items costs.
inline constexpr uint32_t kMaxLookCapacity = 4096;

// One sampled item; its chunk references are batch.refs[first_ref, first_ref + num_refs).
struct SampledItem {
  uint64_t key;
  double priority;
  double probability;
  uint32_t times_sampled;  // including this sample
  uint32_t table_size;     // size when it was drawn
  uint32_t first_ref;
  uint32_t num_refs;
  uint32_t plain_steps;  // ItemSlot::plain_steps
  uint64_t inserted_seq;  // ItemSlot::inserted_seq
};

// One item as a listing shows it (Table::list): plain data of fixed
// layout, also the control protocol's (ItemsReply).
struct ListedItem {
  uint64_t key;
  double priority;
  uint64_t inserted_seq;  // ItemSlot::inserted_seq: its place in insertion order
  uint32_t times_sampled;
  uint32_t num_steps;     // over all its chunk slices
};
static_assert(sizeof(ListedItem) == 32);

struct SampleBatch {
  std::vector<SampledItem> items;
  std::vector<ChunkRef> refs;
  void clear() {
    items.clear();
    refs.clear();
  }
};

// Who sent an insert, for inserts that must be applied at most once: a
// producer (nonzero; one sender's stream into this table) and a sequence
// number that grows with each of its items (nonzero). The table keeps each
// producer's highest sequence applied, its delivery mark, refuses an insert
// at or below it (Errc::already_exists, nothing changed), and saves the
// marks with its items, so that a restored table refuses exactly the items
// it holds. Peers' deliveries use it (remote/): an item sent again after a
// broken link or a restart is dropped, not doubled. Producer 0: no mark,
// as for every local writer's insert.
struct Delivery {
  uint64_t producer = 0;
  uint64_t sequence = 0;
};
// Producers one table remembers; a new one past it is refused (Errc::limit):
// a mark forgotten would let that producer's resent items in twice.
inline constexpr size_t kMaxProducers = 4096;

// Where a table's insertion numbers (inserted_seq) start: at the realtime
// clock in nanoseconds, when the table is made and again when it is
// restored. A table hands out at most one number per nanosecond, so its
// numbers never pass the clock, and a table that starts again, restored
// from a checkpoint or made anew, never hands out a number it handed out
// before: peers rely on it (an upstream table sends inserted_seq as the
// delivery's sequence, and the receiver applies each producer's items
// once, by number). Starting at 0 on every start, a sender that started
// without its checkpoint had its new items answered as duplicates.
// `saved`: a restored table's counter (0 for a new table); if the clock
// is behind it (it was set back), the numbers go on kRestoreSequenceGap
// above it: past what was handed out after the checkpoint, up to three
// days of inserts at 4M/s.
uint64_t first_sequence(uint64_t saved);
inline constexpr uint64_t kRestoreSequenceGap = uint64_t{1} << 40;

struct DeliveryMark {
  uint64_t producer;
  uint64_t sequence;  // the highest applied
};

// Everything a table holds, as plain values: what a checkpoint saves and a
// restore puts back. Items are in insertion order; their chunk references
// are refs[first_ref, first_ref + num_refs).
struct ItemState {
  uint64_t key;
  double priority;
  uint64_t inserted_seq;
  uint32_t times_sampled;
  uint32_t first_ref;
  uint32_t num_refs;
  uint64_t sampler_seq, remover_seq;  // heap tie-break ages (0 for other kinds)
};

// Options that Table::check accepted. Only Table makes one, so a function
// that takes this type (Table::format, the daemon's registry) knows the
// options were checked, once, where they entered.
class CheckedTableOptions {
 public:
  const TableOptions& operator*() const noexcept { return o_; }
  const TableOptions* operator->() const noexcept { return &o_; }
  uint32_t capacity() const noexcept { return static_cast<uint32_t>(o_.capacity); }  // <= kMaxTableCapacity

 private:
  friend class Table;
  template <typename T>
  friend class Result;                      // holds an empty one beside a refusal
  CheckedTableOptions() = default;
  explicit CheckedTableOptions(TableOptions o) : o_(std::move(o)) {}
  TableOptions o_;
};

struct TableState {
  TableOptions options;  // as saved: checked again when restored
  RateLimiterCounters counters{};
  TableStats stats{};
  uint64_t next_seq = 0;
  uint64_t sampler_seq = 0, remover_seq = 0;  // the selectors' tie-break counters
  std::vector<uint32_t> generations;         // per slot, so old keys stay stale, not unknown
  std::vector<uint32_t> free_stack;          // free slots, bottom first (pop order reversed)
  std::vector<ItemState> items;
  std::vector<ChunkRef> refs;
  std::vector<DeliveryMark> marks;  // by producer, ascending
};

class Table {
 public:
  // Called for every item leaving the table (eviction, expiry, delete, reset),
  // before its slot is reused, so the owner can release chunk references.
  using RemoveHook = std::function<void(const ItemSlot&, const ChunkRef* refs)>;

  Table() = default;

  // The one check of a table's options, against the bounds above; the
  // message names the table and the field.
  static Result<CheckedTableOptions> check(TableOptions o);
  static size_t bytes_needed(const CheckedTableOptions& o);
  static Result<Table> format(void* mem, size_t size, const CheckedTableOptions& o, uint64_t seed = 1);
  static Result<Table> attach(void* mem, size_t size, uint64_t seed = 1);

  void set_remove_hook(RemoveHook hook) { on_remove_ = std::move(hook); }

  // Inserts one item referencing `refs`; evicts with the remover when full.
  // Errc::rate_limited when the limiter does not allow it now (nothing
  // changes); with a producer, what check_delivery refuses first.
  Result<uint64_t> insert(double priority, const ChunkRef* refs, uint32_t num_refs, uint32_t plain_steps = 0,
                          const Delivery& from = {});
  // Whether an insert from `d` may be applied (see Delivery): ok without
  // a producer; Errc::already_exists at or below its mark; Errc::limit for
  // a new producer past kMaxProducers; Errc::invalid_argument for sequence 0.
  Status check_delivery(const Delivery& d) const;
  // The priority of an item inserted "at the current maximum" now
  // (Schaul et al.'s default for new experience): the largest priority
  // held, or kAtMaxWhenEmpty when the table is empty. An owner asks it
  // just before insert(), so the item gets the maximum at its time
  // (before an eviction that insert may make).
  double at_max_priority() const noexcept { return range_.empty() ? kAtMaxWhenEmpty : range_.extremes().max; }
  // Samples up to n items (Errc::rate_limited if the limiter refuses n now).
  // Fewer than n come back only when max_times_sampled empties the table
  // mid-batch. Each sample counts; items reaching max_times_sampled go.
  // Appends to *out. `distinct`: n items, none twice (core/sample_distinct.cpp
  // says how each sampler draws them and what their probabilities mean);
  // Errc::invalid_capacity when the table holds fewer than n that can be
  // drawn. Items reaching max_times_sampled then go after the batch.
  // `num_steps`: every item's steps over its slices, or 0 for any; a draw
  // of an item of another length refuses the whole sample
  // (Errc::invalid_capacity, naming the item) and changes nothing: no
  // count, no expiry, the limiter as it was. So a caller who asked for the
  // wrong length loses no item.
  Status sample(uint32_t n, SampleBatch* out, bool distinct = false, uint32_t num_steps = 0);
  // Takes the n items that keys name (live, distinct) as a draw of them
  // would: each counts as sampled (times_sampled, statistics, the limiter,
  // which is not asked), is appended with probabilities[i], and goes at
  // max_times_sampled, after the batch. For a table whose sampler is
  // elsewhere: a view over shards (core/shard_view.hpp). Refused, with
  // nothing changed, as sample() refuses num_steps (Errc::invalid_capacity),
  // for a key that is not live (check_key's codes), and for a key twice
  // (Errc::invalid_argument).
  Status take(const uint64_t* keys, const double* probabilities, uint32_t n, SampleBatch* out, uint32_t num_steps = 0);
  // Looks, without drawing: appends up to n of the newest items whose
  // inserted_seq is `from` or later, oldest of them first, with probability
  // 0. Nothing counts: times_sampled, the rate limiter and
  // max_times_sampled stay. O(1) when nothing is newer, else O(capacity):
  // Errc::invalid_argument for a table of more than kMaxLookCapacity.
  Status newest(uint32_t n, uint64_t from, SampleBatch* out) const;
  // Appends the items of slots [from, ...) to *out, in slot order, until
  // it has appended max_items or looked at max_scan slots, and returns
  // the slot to go on from (capacity() when every slot was looked at).
  // Items never move between slots, so a listing that visits every slot
  // once shows each item present throughout exactly once (core/item_listing.hpp).
  uint32_t list(uint32_t from, uint32_t max_items, uint32_t max_scan, std::vector<ListedItem>* out) const;
  // Errc::stale_key for a key whose item is gone (nothing is changed),
  // Errc::unknown_key for one that never named a slot of this table.
  Status update(uint64_t key, double priority);
  Status remove(uint64_t key);
  // Empties the table and its counters; keys issued before stay stale, and
  // delivery marks stay (a producer's items sent again after a reset are
  // still the ones it sent before).
  void reset();
  // Errc::invalid_argument (nothing changed) for a config that
  // check_limiter_fits refuses on this table, as Table::check would.
  Status set_rate_limiter(const RateLimiterConfig& c);
  // Whether a valid limiter can do what it promises on a table of this
  // capacity: min_size at most the capacity (else every sample waits for
  // ever), and a queue no larger (else the table evicts what the queue
  // should hold its writers back for). Table::check's and
  // set_rate_limiter's; the message names the keys to change.
  static Status check_limiter_fits(const RateLimiterConfig& c, uint64_t capacity);
  // Adds a newly referenced chunk's sizes to the statistics.
  void count_chunk(uint64_t raw, uint64_t stored) noexcept {
    h_->stats.bytes_raw += raw;
    h_->stats.bytes_stored += stored;
  }

  TableInfo info() const;
  // The options this table was formatted with (rate limiter as now).
  CheckedTableOptions options() const;
  // A copy of everything, for a checkpoint; O(capacity).
  TableState snapshot() const;
  // Puts a snapshot back into this table, which must be empty and formatted
  // with the same options; refs are taken as given (the caller has mapped
  // them to its chunks). Errc::corrupt if the state does not add up (slots,
  // keys, counts); the table is then left empty. plain_steps_of(ref), if
  // given, is asked for the ItemSlot::plain_steps of each item of one chunk
  // (checkpoints do not store it: the caller checks the restored chunk);
  // without it, or where it returns 0, samplers read the chunk's header.
  Status restore(const TableState& s, const std::function<uint32_t(const ChunkRef&)>& plain_steps_of = {});
  uint32_t size() const noexcept { return h_->size; }
  uint32_t capacity() const noexcept { return h_->capacity; }
  std::string name() const { return h_->name; }
  const Column* columns() const noexcept { return h_->columns; }
  uint32_t num_columns() const noexcept { return h_->num_columns; }
  uint32_t refs_per_item() const noexcept { return h_->max_refs_per_item; }
  const RateLimiter& limiter() const noexcept { return limiter_; }
  // The item a live key names, or nullptr.
  const ItemSlot* find(uint64_t key) const noexcept;
  const ChunkRef* refs(uint32_t slot) const noexcept { return refs_ + size_t{slot} * h_->max_refs_per_item; }
  // The references of the item the next insert will evict, when the table
  // is full and its remover picks without chance (FIFO, LIFO, a heap); 0
  // references otherwise. For prefetching what that eviction will touch.
  uint32_t next_victim(const ChunkRef** out) const noexcept;
  const Selector& sampler() const noexcept { return sampler_; }
  const Selector& remover() const noexcept { return remover_; }

  static uint32_t key_slot(uint64_t key) noexcept { return static_cast<uint32_t>(key); }
  static uint32_t key_generation(uint64_t key) noexcept { return static_cast<uint32_t>(key >> 32); }

 private:
  explicit Table(TableHeader* h, uint64_t seed);
  // The priority is valid, and its weight keeps both selectors' totals in
  // range with `slot` (a member, or Selector::kNone for a new item) given it.
  Status check_weight(double priority, uint32_t slot) const;
  Status sample_independent(uint32_t n, SampleBatch* out, uint32_t num_steps);
  Status sample_expiring(uint32_t n, SampleBatch* out, uint32_t num_steps);  // with max_times_sampled
  Status sample_distinct(uint32_t n, SampleBatch* out, uint32_t num_steps);  // core/sample_distinct.cpp
  // Whether the item in `slot` (or each pick's) has num_steps steps over
  // its slices (any, for 0): the one home of Table::sample's length check.
  Status check_steps(uint32_t slot, uint32_t num_steps) const;
  Status check_picks(const Sampled* picks, uint32_t n, uint32_t num_steps) const;
  // Counts n drawn slots as sampled (times_sampled, statistics, limiter)
  // and appends them to *out; the caller syncs the limiter.
  void take_picks(const Sampled* picks, uint32_t n, SampleBatch* out);
  // n picks, none twice: checked (check_picks), taken (take_picks), and
  // those that reached max_times_sampled gone after the batch.
  Status take_distinct(const Sampled* picks, uint32_t n, SampleBatch* out, uint32_t num_steps);
  Status check_key(uint64_t key, const char* op) const;
  void erase_slot(uint32_t slot);
  void sync_limiter() noexcept { h_->limiter_counters = limiter_.counters(); }
  double uniform() noexcept { return std::uniform_real_distribution<double>(0.0, 1.0)(rng_); }
  // The u for s.sample(u): a draw where s uses one, else 0 (no draw).
  double draw_for(const Selector& s) noexcept { return s.draws() ? uniform() : 0.0; }

  TableHeader* h_ = nullptr;
  ItemSlot* items_ = nullptr;
  ChunkRef* refs_ = nullptr;
  uint32_t* free_ = nullptr;
  Selector sampler_, remover_;
  PriorityRange range_;
  RateLimiter limiter_;  // mirrored into the header after each change
  std::mt19937_64 rng_;
  RemoveHook on_remove_;
  // Delivery marks: the owner thread's alone, like the rest, but in its
  // private memory (no client reads them).
  std::unordered_map<uint64_t, uint64_t> marks_;
};

}  // namespace engram
