// How one batch is drawn from a table sharded over several servers so
// that it has the distribution of one table holding every shard's items
// (docs/ARCHITECTURE.md, "Shards"; issue 60).
//
// One table draws each of a batch's b items independently: item j with
// probability w_j / W, W the sum of all weights (priority^exponent for a
// prioritized table, 1 for a uniform one). Group the items by shard: a
// draw lands in shard i with probability W_i / W (W_i: that shard's own
// total, its "mass"), and, given that, picks item j of shard i with
// probability w_j / W_i, which is what shard i's own sum tree draws. So
// the b draws are: counts (n_1..n_N) ~ Multinomial(b, W_1/W..W_N/W), then
// n_i independent draws by shard i's selector; and item j's probability
// in the one table is its shard's probability times W_i / W. A uniform
// table is the case w = 1: masses are sizes.
//
// One table whose every weight is 0 samples uniformly (Selector::sample);
// the sharded table does the same when every shard's mass is 0: shares by
// size, probability 1 / (all items). A shard of mass 0 beside others of
// mass > 0 gets no draws, as its items would not be drawn in one table.
//
// The masses are those the shards reported last: a batch split by masses
// that have moved since is drawn from the table as it was then (the cost
// of staleness, for engram(7) to state). A shard that is away is left out by
// the caller (reported as size 0), and its mass with it.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "core/status.hpp"

namespace engram {

// The shards one server splits a table's batches over, at most.
inline constexpr uint32_t kMaxShards = 64;

// What a shard reported of its table: its total weight and its items.
struct ShardShare {
  double mass = 0;    // the sum of its items' weights (its sum tree's root); its size for a uniform table
  uint64_t size = 0;  // items held; 0 for a shard that is away
};

class ShardSplit {
 public:
  // Checks the reports (untrusted: they come from peers): 1..kMaxShards
  // shares, each mass finite, >= 0, 0 where size is 0, and their sum at
  // most kMaxTotalWeight; at least one item in all. Errc::invalid_argument
  // naming the shard otherwise, or Errc::empty when no shard holds an item.
  static Result<ShardSplit> of(const std::vector<ShardShare>& shares);

  // counts[i] (for each shard) of a batch of `batch` draws: a multinomial
  // over the shards' masses (over their sizes when every mass is 0).
  void draw(uint32_t batch, std::mt19937_64& rng, uint32_t* counts) const;
  // The probability, in the one table, of an item that shard `shard` drew
  // with probability `local` (its SampleInfo probability there).
  double probability(uint32_t shard, double local) const noexcept { return local * factor_[shard]; }
  // The probability, in the one table, of an item of weight w (its
  // shard's probability at the draw times the mass the shard had then):
  // w over the total, or 1 / size() when every mass is 0. For a draw made
  // ahead of the split whose masses it is weighed by (core/shard_view.hpp).
  double weight_probability(double w) const noexcept {
    return by_size_ ? 1.0 / static_cast<double>(size_) : w / total_;
  }
  // Items in all shards that answered: the one table's size (the N of
  // importance weights).
  uint64_t size() const noexcept { return size_; }
  uint32_t shards() const noexcept { return static_cast<uint32_t>(share_.size()); }

 private:
  std::vector<double> share_;   // each shard's weight in the multinomial, summing to total_
  std::vector<double> factor_;  // W_i / W (or size_i / N when every mass is 0)
  double total_ = 0;
  uint64_t size_ = 0;
  bool by_size_ = false;  // every mass 0
};

}  // namespace engram
