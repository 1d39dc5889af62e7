// The records that travel through a table channel's two SPSC rings: requests
// from one client to the table's owner thread, responses back. Both are 192
// bytes, plain data. Requests are client-written and therefore untrusted:
// the owner copies a record out of the ring, then checks it with
// check_request before looking at anything else.
//
// Ordering: the owner answers a channel's requests in the order they were
// pushed. A request that must wait for the rate limiter holds back the ones
// behind it on the same channel until it is applied or its deadline passes;
// it is never applied after its deadline.
//
// Responses per request:
//   insert_items -> what `count` inserts of one item each would get, item
//              i answering as request id + i: the client numbers the
//              items of the record id, id + 1, ... A record the rate
//              limiter holds part-way keeps its place; the items applied
//              are answered, the rest wait in order.
//   insert  -> its share of an ack record (payload.acks: the owner groups the
//              acks of up to kRecordAcks consecutive successful inserts of a
//              batch in one record, `count` of them, `id` the first one's:
//              they answer the next `count` requests owed, all inserts), or
//              1 error record
//   sample  -> records of the `count` items (count <= n) in order, `index`
//              the first item's number: op `sample` carries one item
//              (payload.item, any number of chunk slices), op
//              `sample_packed` up to kPackedItems items of one slice each
//              (payload.packed); or 1 record with count 0 (an error, or no
//              item); the chunks behind the items stay pinned until the
//              client sends `release` with the same id
//   update, remove -> 1 record (applied / stale / unknown masks)
//   shard   -> 1 record (payload.shard: the shard's draws waiting, what
//              held batches lack, and `count` updates owed to the shard),
//              once one is owed or the deadline passes (a timeout then is
//              an answer too, status 0); or 1 error record
//   release, drop  -> none
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/arena_blocks.hpp"
#include "core/spsc_ring.hpp"
#include "core/status.hpp"
#include "core/table.hpp"

namespace engram {

inline constexpr uint32_t kRecordSize = 192;
inline constexpr uint32_t kRecordRefs = kMaxItemChunks;  // chunk slices per item
inline constexpr uint32_t kRecordUpdates = 10;   // (key, priority) per update record
inline constexpr uint32_t kRecordKeys = 20;      // keys per remove record, blocks per drop record
inline constexpr uint32_t kRecordAcks = 10;      // insert acks per response record
inline constexpr uint32_t kRecordItems = 6;      // one-chunk items per insert_items record: as many as fit
inline constexpr int64_t kNoDeadline = -1;       // wait for ever

enum class RequestOp : uint32_t {
  insert = 1,   // count = refs; payload.insert
  sample = 2,   // count = n items
  release = 3,  // unpin the chunks of sample `id`
  drop = 4,     // count = blocks; the writer no longer needs these chunks
  update = 5,   // count = entries; payload.updates
  remove = 6,   // count = keys; payload.keys
  sample_packed = 7,  // responses only: a sample's one-slice items, packed
  // count = items; payload.items: up to kRecordItems items of one chunk
  // slice each, so that a writer's burst of small items (an Ape-X actor's
  // transitions) costs a record per few items, not per item.
  insert_items = 8,
  // A view over shards (core/shard_view.hpp), from the link that fetches
  // one shard's draws: payload.shard reports the shard (binding this
  // channel to it: the draws it inserts next are that shard's, at that
  // mass) and asks, up to its deadline, for what the shard is owed; count
  // = the most updates to answer (0..kRecordUpdates). Only a view's
  // tables take it.
  shard = 9,
};
const char* request_op_name(uint32_t op) noexcept;

struct KeyPriority {
  uint64_t key;
  double priority;
};

// One item of an insert_items record: its priority and its one slice.
struct ItemEntry {
  double priority;
  ChunkRef ref;
};

// Both records start with the ring's sequence word (SpscRing,
// kRingSeqBytes): pushes ignore it, pops find the ring's value in it.
// RequestRecord::flags of a sample: answer each item's inserted_seq (its
// place in the table's insertion order, which a checkpoint keeps) in place
// of its probability. A peer's upstream link takes items so, and sends
// the sequence with each as its delivery's.
inline constexpr uint32_t kSampleSequences = 1;
// RequestRecord::flags of a sample: not a draw but a look (Table::newest):
// up to count of the newest items whose inserted_seq is payload.sample.from
// or later, oldest of them first, answered at once and none if there are
// none; nothing counts as sampled. A peer's mirror follows a table so.
// A look never waits: its deadline must be 0.
inline constexpr uint32_t kSampleNewest = 2;
// RequestRecord::flags of a sample: count distinct items, none twice
// (Table::sample's `distinct`); refused with Errc::invalid_capacity when
// the table holds fewer. Not with kSampleNewest (a look is distinct).
inline constexpr uint32_t kSampleDistinct = 4;
// RequestRecord::flags of an insert: the item's priority is the table's
// largest when the owner applies it (Table::at_max_priority), and
// payload.insert.priority is ignored. Never in insert_items records: a
// writer sends such an item alone.
inline constexpr uint32_t kInsertAtMax = 1;
// RequestRecord::flags of an insert: the item is a draw of the shard this
// channel reported last (RequestOp::shard), for a view's table: its
// producer slot holds the item's key in the shard, its sequence slot the
// bits of the probability the shard drew it with (a double), and it is
// applied with no delivery. Not with kInsertAtMax. Only a view's tables
// take it, and they take no other insert.
inline constexpr uint32_t kInsertDraw = 2;

// A shard's report: 1 while its link is up (mass and size as the shard
// answered last), 0 once it broke (its draws waiting are dropped).
inline constexpr uint32_t kShardPresent = 1;
inline constexpr uint32_t kShardAway = 0;

struct RequestRecord {
  uint32_t ring_seq_;
  uint32_t op;  // RequestOp
  uint32_t count;
  uint32_t flags;        // sample: kSampleSequences, kSampleNewest, kSampleDistinct or 0 (see each); insert: kInsertAtMax or 0;
                         // 0 for other ops
  uint64_t id;           // chosen by the client, echoed in responses
  int64_t deadline_ns;   // CLOCK_MONOTONIC; kNoDeadline, or 0 to never wait
  union {
    struct {
      double priority;
      // The capacity in steps of every chunk the item names (its writer's
      // chunk_length). A plain table's owner takes the chunks' layout from
      // it, checked against their blocks' sizes, and does not read their
      // headers: a header is a line the writer's core holds, and its
      // contents guard nothing then (samplers of one-chunk items use this
      // layout, others check the headers they read).
      uint32_t chunk_steps;
      // Nonzero: the writer took a block for a chunk since its last insert
      // and wants one back with the ack (see InsertAck).
      uint32_t want_spare;
      // Producer 0 for a writer's insert; a peer's delivery names its
      // stream and the item's number in it, and the table applies each
      // (producer, sequence) once (Delivery, core/table.hpp). Before refs:
      // a push carries a record only up to its last ref (request_bytes).
      uint64_t producer;
      uint64_t sequence;
      ChunkRef refs[kRecordRefs];
    } insert;
    struct {
      uint32_t chunk_steps;  // as insert's, for every item's chunk
      uint32_t want_spare;   // bit i: as insert's want_spare, for item i
      ItemEntry items[kRecordItems];
    } items;
    struct {
      uint64_t from;  // kSampleNewest: the first inserted_seq to look at; else 0
      // Every item's steps over all its slices, as the caller will read
      // them (engram_sample_options.num_steps), or 0 for items of any
      // length (a take for delivery, a look). The owner refuses a batch
      // with an item of another length before it counts anything
      // (Table::sample), so that a refused sample takes no item.
      uint32_t num_steps;
      uint32_t pad_;
    } sample;
    struct {
      uint32_t shard;       // its index in the view's list of shards
      uint32_t state;       // kShardPresent or kShardAway
      double mass;          // its sampler's total weight (its size, if uniform)
      uint64_t size;        // its items
      // Answer at once while fewer of the shard's draws wait than this
      // (its link wants more), else when updates are owed or a held
      // batch lacks draws of the shard, or at the deadline.
      uint32_t wait_below;
      uint32_t pad_;
    } shard;
    KeyPriority updates[kRecordUpdates];
    uint64_t keys[kRecordKeys];
    BlockRef blocks[kRecordKeys];
  } payload;
};
static_assert(sizeof(RequestRecord) == kRecordSize);
// kRecordItems is as many items as a record holds (a seventh would not
// fit), and want_spare has a bit for each.
static_assert(offsetof(RequestRecord, payload.items.items) + sizeof(ItemEntry) * (kRecordItems + 1) > kRecordSize);
static_assert(kRecordItems <= 32);
static_assert(offsetof(RequestRecord, op) == kRingSeqBytes);

struct SampledItemWire {
  uint64_t key;
  double priority;
  union {
    double probability;
    uint64_t sequence;  // for a sample with kSampleSequences
  };
  uint32_t times_sampled;
  uint32_t table_size;
  uint32_t num_refs;
  uint32_t reserved_;
  ChunkRef refs[kRecordRefs];
};

// A sampled item of one chunk slice (most items): 48 bytes instead of 168,
// so that kPackedItems of them share a record and its cache lines.
inline constexpr uint32_t kPackedItems = 3;
struct PackedItemWire {
  uint64_t key;
  double priority;
  union {
    double probability;
    uint64_t sequence;  // as SampledItemWire's
  };
  uint32_t times_sampled;
  uint32_t table_size;
  ChunkRef ref;
};
// plain_steps[i]: item i's ItemSlot::plain_steps, the capacity in steps of
// its chunk as the owner checked the header at insert, if the chunk is
// plain (uncompressed); 0 if not, or not known (an item restored from a
// checkpoint). With it a sampler finds the item's columns without reading
// the chunk's header, which from 4 KB up sits on a page of its own: a page
// walk and a miss per item.
struct PackedItemsWire {
  uint32_t n;  // 1..kPackedItems
  uint32_t plain_steps[kPackedItems];
  PackedItemWire items[kPackedItems];
};
static_assert(offsetof(PackedItemsWire, items) == 16);

// The answer to one insert. An insert that evicted an item often frees that
// item's chunk; if the block is of the class of the new item's newest chunk,
// the owner hands it to the inserting client (reserved by it) as a spare
// for its writer's next chunk, so that steady-state inserts skip the free
// list on both sides. If none was freed and the insert wants a spare (a
// queue's inserts evict nothing; a table fills before it evicts), the owner
// takes one of that class from the free list. Either way a writer gets a
// block back for each it used, without a round trip of its own: clients
// cannot take blocks themselves (ChunkArena). spare_block is kNoSpare when
// there is none.
inline constexpr uint32_t kNoSpare = UINT32_MAX;
struct InsertAck {
  uint64_t key;
  uint32_t spare_block;
  uint32_t spare_generation;
};

struct ResponseRecord {
  uint32_t ring_seq_;
  uint16_t op;      // echo of the request's op (a RequestOp, so it fits)
  int16_t status;   // Errc as int; 0 = ok
  uint64_t id;      // echo of the request's id
  uint32_t index;   // sample: item index
  uint32_t count;   // sample: items in this response
  union {
    InsertAck acks[kRecordAcks];  // insert: `count` of them
    struct {
      uint32_t applied, stale_mask, unknown_mask, reserved_;
    } keys;                 // update / remove, bit i = entry i
    SampledItemWire item;   // sample
    PackedItemsWire packed; // sample_packed
    struct {
      uint32_t waiting;  // the shard's draws waiting in the view
      uint32_t short_of; // draws of it the held batches lack beyond those
      KeyPriority updates[kRecordUpdates];  // `count` of them, oldest first
    } shard;                // shard
    char message[sizeof(SampledItemWire)];  // error: NUL-terminated
  } payload;
};
static_assert(sizeof(ResponseRecord) == kRecordSize);
static_assert(offsetof(ResponseRecord, op) == kRingSeqBytes);
static_assert(offsetof(ResponseRecord, payload) + sizeof(InsertAck) * kRecordAcks <= kRecordSize);
static_assert(offsetof(ResponseRecord, payload) + sizeof(PackedItemsWire) <= kRecordSize);

// The number of items a sample response (status 0, count > 0) carries:
// payload.packed.n for sample_packed (unchecked), else 1.
inline uint32_t sample_items(const ResponseRecord& r) noexcept {
  return r.op == static_cast<uint32_t>(RequestOp::sample_packed) ? r.payload.packed.n : 1;
}

// The leading bytes of a record that carry meaning: its header and the
// first `count` entries (refs, keys, updates; an item's refs; an error's
// message). Pushed with SpscRing::try_push(r, bytes, ...), so that the rest
// of the slot still holds an older record's bytes: readers never look past
// the entries `count` (or an item's num_refs) names.
size_t request_bytes(const RequestRecord& r) noexcept;
size_t response_bytes(const ResponseRecord& r) noexcept;

// Structural checks of a request copied out of a ring: a known op, a count
// in range for it (max_batch for samples). Semantic checks (priorities,
// chunk references) belong to the owner.
Status check_request(const RequestRecord& r, uint32_t max_batch) noexcept;

// An error response carrying `s`'s code and message (truncated to fit).
ResponseRecord error_response(const RequestRecord& r, const Status& s) noexcept;
// The inverse, for the client: the response's status and, if it is an
// error, its message (read within the record even if the NUL is missing).
Status response_status(const ResponseRecord& r);

}  // namespace engram
