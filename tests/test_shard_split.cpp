// A batch split over shards has the distribution of one table (issue 60,
// test 1's arithmetic): shards that each draw by their own weights, with
// counts from ShardSplit, sample every item as often as one table holding
// all of them would, and report its probability in that table.
#include "core/shard_split.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "test_util.hpp"

namespace engram::test {
namespace {

// A shard's table, drawn by its own weights (what its sum tree does).
struct Shard {
  std::vector<double> weights;
  double mass() const { return std::accumulate(weights.begin(), weights.end(), 0.0); }
  ShardShare share() const { return {mass(), weights.size()}; }
};

std::vector<Shard> three_shards_of_fifty() {
  std::vector<Shard> shards(3);
  for (int i = 0; i < 150; ++i) shards[i % 3].weights.push_back(1.0 + i);  // distinct, and unequal masses
  shards[2].weights.resize(20);                                           // and sizes
  return shards;
}

TEST(ShardSplit, BatchesHaveTheDistributionOfOneTable) {
  std::vector<Shard> shards = three_shards_of_fifty();
  std::vector<ShardShare> shares;
  double total = 0;
  size_t items = 0;
  for (const Shard& s : shards) {
    shares.push_back(s.share());
    total += s.mass();
    items += s.weights.size();
  }
  auto split = ShardSplit::of(shares);
  ASSERT_TRUE(split.ok()) << split.status().message();
  EXPECT_EQ(split->size(), items);
  std::mt19937_64 rng(7);
  std::vector<std::vector<uint64_t>> seen(3);
  for (size_t i = 0; i < 3; ++i) seen[i].assign(shards[i].weights.size(), 0);
  constexpr uint32_t kBatch = 32;
  constexpr int kBatches = 4000;
  uint32_t counts[3];
  for (int b = 0; b < kBatches; ++b) {
    split->draw(kBatch, rng, counts);
    ASSERT_EQ(counts[0] + counts[1] + counts[2], kBatch);
    for (size_t i = 0; i < 3; ++i) {
      std::discrete_distribution<size_t> own(shards[i].weights.begin(), shards[i].weights.end());
      for (uint32_t k = 0; k < counts[i]; ++k) {
        size_t j = own(rng);
        ++seen[i][j];
        // The shard reports w_j / W_i; the split turns it into w_j / W.
        double local = shards[i].weights[j] / shards[i].mass();
        ASSERT_NEAR(split->probability(static_cast<uint32_t>(i), local), shards[i].weights[j] / total, 1e-12);
      }
    }
  }
  double chi2 = 0;
  const double draws = double(kBatch) * kBatches;
  for (size_t i = 0; i < 3; ++i)
    for (size_t j = 0; j < shards[i].weights.size(); ++j) {
      double want = draws * shards[i].weights[j] / total;
      chi2 += (seen[i][j] - want) * (seen[i][j] - want) / want;
    }
  double p = chi_square_p(chi2, double(items - 1));
  EXPECT_GT(p, 1e-4) << "chi2 " << chi2 << " over " << items - 1 << " degrees of freedom";
}

// The test above can fail: splitting by sizes instead of masses (what
// round-robin or size-weighted clients do) is far from one table.
TEST(ShardSplit, SplittingBySizeIsNotOneTable) {
  std::vector<Shard> shards = three_shards_of_fifty();
  std::vector<ShardShare> by_size;
  for (const Shard& s : shards) by_size.push_back({double(s.weights.size()), s.weights.size()});
  auto wrong = ShardSplit::of(by_size);
  ASSERT_TRUE(wrong.ok());
  std::mt19937_64 rng(7);
  double total = 0;
  for (const Shard& s : shards) total += s.mass();
  uint64_t per_shard[3] = {0, 0, 0};
  uint32_t counts[3];
  for (int b = 0; b < 4000; ++b) {
    wrong->draw(32, rng, counts);
    for (int i = 0; i < 3; ++i) per_shard[i] += counts[i];
  }
  double chi2 = 0;
  for (int i = 0; i < 3; ++i) {
    double want = 32.0 * 4000 * shards[i].mass() / total;
    chi2 += (per_shard[i] - want) * (per_shard[i] - want) / want;
  }
  EXPECT_LT(chi_square_p(chi2, 2), 1e-9) << "a split by sizes passed for one by masses";
}

TEST(ShardSplit, AllZeroMassesSampleUniformlyByItems) {
  auto split = ShardSplit::of({{0, 10}, {0, 30}});
  ASSERT_TRUE(split.ok()) << split.status().message();
  std::mt19937_64 rng(3);
  uint64_t got[2] = {0, 0};
  uint32_t counts[2];
  for (int b = 0; b < 2000; ++b) {
    split->draw(40, rng, counts);
    got[0] += counts[0];
    got[1] += counts[1];
  }
  EXPECT_NEAR(double(got[0]) / (got[0] + got[1]), 0.25, 0.01);
  // A shard that draws uniformly reports 1 / its size; in one table that is 1 / 40.
  EXPECT_DOUBLE_EQ(split->probability(0, 1.0 / 10), 1.0 / 40);
  EXPECT_DOUBLE_EQ(split->probability(1, 1.0 / 30), 1.0 / 40);
}

TEST(ShardSplit, ShardsAwayOrWithoutWeightGetNoDraws) {
  // Shard 0 is away (size 0), shard 2's items all weigh 0 beside shard 1's.
  auto split = ShardSplit::of({{0, 0}, {5.0, 4}, {0, 7}});
  ASSERT_TRUE(split.ok()) << split.status().message();
  EXPECT_EQ(split->size(), 11u) << "the one table's size counts the items of shards that answered";
  std::mt19937_64 rng(1);
  uint32_t counts[3];
  for (int b = 0; b < 100; ++b) {
    split->draw(16, rng, counts);
    EXPECT_EQ(counts[0], 0u);
    EXPECT_EQ(counts[1], 16u);
    EXPECT_EQ(counts[2], 0u);
  }
}

TEST(ShardSplit, BadReportsAreRefusedByShard) {
  const double inf = std::numeric_limits<double>::infinity();
  struct Case {
    std::vector<ShardShare> shares;
    const char* says;
  } cases[] = {
      {{}, "1..64 shards"},
      {std::vector<ShardShare>(kMaxShards + 1, ShardShare{1, 1}), "1..64 shards"},
      {{{1, 1}, {std::nan(""), 3}}, "shard 1 reported a mass that is not a finite number"},
      {{{-1, 2}}, "shard 0 reported a mass that is not a finite number"},
      {{{inf, 2}}, "shard 0 reported a mass that is not a finite number"},
      {{{2, 0}}, "shard 0 reported mass without items"},
      {{{kMaxTotalWeight, 1}, {kMaxTotalWeight, 1}}, "shard 1's mass takes the shards' total weight above"},
  };
  for (const Case& c : cases) {
    auto s = ShardSplit::of(c.shares);
    ASSERT_FALSE(s.ok()) << c.says;
    EXPECT_EQ(s.status().code(), Errc::invalid_argument);
    EXPECT_NE(s.status().message().find(c.says), std::string::npos) << s.status().message();
  }
  auto none = ShardSplit::of({{0, 0}, {0, 0}});
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), Errc::empty);
}

}  // namespace
}  // namespace engram::test
