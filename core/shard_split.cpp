#include "core/shard_split.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/selector.hpp"

namespace engram {

Result<ShardSplit> ShardSplit::of(const std::vector<ShardShare>& shares) {
  if (shares.empty() || shares.size() > kMaxShards)
    return Status{Errc::invalid_argument, "a sharded table has 1.." + std::to_string(kMaxShards) + " shards, not " +
                                              std::to_string(shares.size())};
  ShardSplit s;
  double mass = 0;
  for (size_t i = 0; i < shares.size(); ++i) {
    const ShardShare& x = shares[i];
    const std::string who = "shard " + std::to_string(i);
    if (!std::isfinite(x.mass) || x.mass < 0)
      return Status{Errc::invalid_argument, who + " reported a mass that is not a finite number >= 0"};
    if (x.size == 0 && x.mass != 0) return Status{Errc::invalid_argument, who + " reported mass without items"};
    if (x.mass > kMaxTotalWeight - mass)
      return Status{Errc::invalid_argument, who + "'s mass takes the shards' total weight above what one table holds"};
    mass += x.mass;
    s.size_ += x.size;
  }
  if (s.size_ == 0) return Status{Errc::empty, "no shard holds an item"};
  // Every weight 0: uniformly over all items, as one table would.
  const bool by_size = !(mass > 0);
  s.by_size_ = by_size;
  for (const ShardShare& x : shares) s.share_.push_back(by_size ? static_cast<double>(x.size) : x.mass);
  s.total_ = by_size ? static_cast<double>(s.size_) : mass;
  for (double w : s.share_) s.factor_.push_back(w / s.total_);
  return s;
}

// Sequential binomials: shard i takes Binomial(left, w_i / (w_i + ... +
// w_N)) of the draws the shards before it left, which makes the counts
// one multinomial. The last shard with weight takes what is left, so that
// rounding in the running rest never loses a draw.
void ShardSplit::draw(uint32_t batch, std::mt19937_64& rng, uint32_t* counts) const {
  size_t last = 0;
  for (size_t i = 0; i < share_.size(); ++i)
    if (share_[i] > 0) last = i;
  uint32_t left = batch;
  double rest = total_;
  for (size_t i = 0; i < share_.size(); ++i) {
    if (i == last) {
      counts[i] = left;
      left = 0;
      continue;
    }
    if (left == 0 || share_[i] <= 0) {
      counts[i] = 0;
      continue;
    }
    double p = std::clamp(share_[i] / rest, 0.0, 1.0);
    counts[i] = std::binomial_distribution<uint32_t>(left, p)(rng);
    left -= counts[i];
    rest -= share_[i];
  }
}

}  // namespace engram
