// A sharded table's learner side, as its owner keeps it: the draws the
// shards sent ahead, waiting in one FIFO per shard, the shards' newest
// reports, which shard each handed-out key came from, and the priority
// updates owed to each shard (docs/ARCHITECTURE.md, "Shards"; issue 60).
//
// The draws themselves are items of an ordinary table (their chunks in
// the arena, pinned as any item's); this knows them by key only. A batch
// of n is split over the present shards by ShardSplit over their newest
// reports, once, when the batch is first asked for (split()), and then
// takes the oldest waiting draws of each shard (take()): a shard whose
// FIFO is short holds the batch, with its counts kept, so that waiting
// never favours the shards that happen to have draws ready (redrawing the
// counts until they fit would). Each draw is handed out once. A shard's
// draws are independent draws by its own sampler, so which batch takes
// which of them does not matter.
//
// An item's probability in the one table is its weight at the draw (the
// shard's probability times the mass it reported with the draw) over the
// newest total of the present shards; the table size is theirs too. What
// this costs when the masses move between a draw and its batch is the
// staleness engram(7) SHARDS states: at most the prefetch depth.
//
// The owner thread's alone, in its private memory: no client reads it.
#pragma once

#include <cstdint>
#include <deque>
#include <random>
#include <unordered_map>
#include <vector>

#include "core/shard_split.hpp"
#include "core/status.hpp"

namespace engram {

// A shard's updates owed, at most; past it the oldest are dropped and
// counted (a shard away for long must not grow the owner without bound).
inline constexpr size_t kMaxShardOutbox = size_t{1} << 20;

struct ViewPick {
  uint64_t key;        // the draw's key in the view's table
  uint32_t shard;
  double probability;  // in the one table
};

struct RemoteUpdate {
  uint64_t key;  // the item's key in its shard's table
  double priority;
};

struct ShardCounters {
  bool present = false;
  double mass = 0;         // as last reported
  uint64_t size = 0;
  uint64_t waiting = 0;    // draws held, not handed out yet
  uint64_t draws = 0;      // added since the start
  uint64_t taken = 0;      // handed out
  uint64_t dropped = 0;    // waiting draws let go (the shard went away, or the table removed them)
  uint64_t updates = 0;    // routed to this shard
  uint64_t outbox = 0;     // owed now
  uint64_t outbox_dropped = 0;
};

class ShardView {
 public:
  // `routes`: handed-out keys remembered for their updates (the newest so
  // many); an update of an older key is counted, not routed.
  ShardView(uint32_t shards, size_t routes);

  uint32_t shards() const noexcept { return static_cast<uint32_t>(shards_.size()); }

  // A shard's newest mass and size (it is present from now on).
  // Errc::invalid_argument for a shard out of range or a report ShardSplit
  // would refuse (untrusted: a peer's); nothing changes then.
  Status report(uint32_t shard, double mass, uint64_t size);
  // The shard went away: it leaves the split, and its waiting draws go,
  // their keys appended to *dropped for the caller to remove from the
  // table (they are draws of a table as it was before the break).
  void away(uint32_t shard, std::vector<uint64_t>* dropped);

  // A draw of `shard`, held in the table under `key`: drawn there with
  // probability `local` from a table of mass `mass` (its weight is their
  // product). Errc::invalid_argument for a shard out of range or not
  // present, or a probability or mass that is not finite and >= 0.
  Status add(uint32_t shard, uint64_t key, uint64_t remote_key, double local, double mass);
  // The table removed a waiting draw (an eviction, a reset): it is not
  // handed out. Keys not waiting are ignored.
  void forget(uint64_t key);

  // The counts of a batch of n over the shards (counts[i] for shard i) by
  // the newest reports. Errc::empty when no present shard holds an item.
  Status split(uint32_t n, std::mt19937_64& rng, std::vector<uint32_t>* counts) const;
  // Whether counts can be taken now: every shard with a count is present
  // (false with *gone set when one went away: the caller splits again)
  // and waits with at least that many draws.
  bool ready(const std::vector<uint32_t>& counts, bool* gone) const;
  // The draws counts take (ready() first): the oldest waiting of each
  // shard, shard by shard, appended to *out with their probabilities in
  // the one table, and the one table's size in *size. Nothing changes: a
  // caller that cannot hand them out (the table refuses the batch) leaves
  // them waiting.
  Status peek(const std::vector<uint32_t>& counts, std::vector<ViewPick>* out, uint64_t* size) const;
  // Hands out what peek() listed for the same counts, with nothing changed
  // between: they wait no more, and each key is remembered for route()
  // (the newest `routes`).
  void commit(const std::vector<uint32_t>& counts);
  // peek() and commit() at once.
  Status take(const std::vector<uint32_t>& counts, std::vector<ViewPick>* out, uint64_t* size);
  // Draws that the batches held now (their counts, summed per shard)
  // need beyond those waiting: what a shard link fetches first.
  uint64_t short_of(uint32_t shard, uint64_t held) const {
    return held > shards_[shard].waiting ? held - shards_[shard].waiting : 0;
  }

  // Queues an update of a handed-out key for its shard; false for a key
  // never handed out or older than the routes remembered.
  bool route(uint64_t key, double priority);
  // Moves up to max of shard's owed updates, oldest first, to *out.
  void take_updates(uint32_t shard, size_t max, std::vector<RemoteUpdate>* out);

  const ShardCounters& counters(uint32_t shard) const { return shards_[shard]; }
  uint64_t unrouted() const noexcept { return unrouted_; }
  // Every present shard's report, and away ones as size 0 (ShardSplit's input).
  std::vector<ShardShare> shares() const;

 private:
  struct Waiting {
    uint32_t shard;
    uint64_t remote_key;
    double weight;
  };
  struct Route {
    uint32_t shard;
    uint64_t remote_key;
  };
  std::vector<ShardCounters> shards_;
  std::vector<std::deque<uint64_t>> fifo_;               // per shard, oldest first; may hold forgotten keys
  std::vector<std::deque<RemoteUpdate>> outbox_;         // per shard, oldest first
  std::unordered_map<uint64_t, Waiting> waiting_;        // key -> its draw, while it waits
  std::unordered_map<uint64_t, Route> routes_;           // key -> its shard's key, once handed out
  std::deque<uint64_t> route_order_;                     // handed-out keys, oldest first
  size_t max_routes_;
  uint64_t unrouted_ = 0;
};

}  // namespace engram
