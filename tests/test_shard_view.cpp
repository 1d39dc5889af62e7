// A sharded table's learner side (core/shard_view): draws sent ahead by
// the shards, handed out in batches that sample as one table would, held
// while a shard's draws are short, routed back for updates.
#include "core/shard_view.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "test_util.hpp"

namespace engram::test {
namespace {

// A shard's table: its items' weights, drawn by them (its sum tree).
struct Shard {
  std::vector<double> weights;
  double mass() const { return std::accumulate(weights.begin(), weights.end(), 0.0); }
};

// Keys of the view's table: shard in the high bits, a draw's number below;
// remote keys: the item's index in its shard, plus one.
uint64_t view_key(uint32_t shard, uint64_t n) { return (uint64_t{shard} << 40) | n; }

TEST(ShardView, BatchesOfDrawsSentAheadSampleAsOneTable) {
  std::vector<Shard> shards(3);
  for (int i = 0; i < 120; ++i) shards[i % 3].weights.push_back(1.0 + i);
  shards[2].weights.resize(15);
  double total = 0;
  size_t items = 0;
  for (const Shard& s : shards) total += s.mass(), items += s.weights.size();
  ShardView view(3, 1 << 16);
  for (uint32_t i = 0; i < 3; ++i) ASSERT_TRUE(view.report(i, shards[i].mass(), shards[i].weights.size()).ok());
  std::mt19937_64 rng(11), shard_rng(5);
  std::vector<std::discrete_distribution<size_t>> own;
  for (const Shard& s : shards) own.emplace_back(s.weights.begin(), s.weights.end());
  std::vector<uint64_t> next(3, 0);
  std::vector<std::unordered_map<uint64_t, size_t>> drawn(3);  // view key -> item index
  // Each shard answers a request of `ahead` draws when its FIFO falls
  // below it or below what a held batch needs (as a shard link does), one
  // tick late: batches are often held, with their counts.
  constexpr uint32_t kBatch = 24, kAhead = 16;
  auto refill = [&](uint32_t i, uint32_t need) {
    if (view.counters(i).waiting >= std::max(kAhead, need)) return;
    for (uint32_t k = 0; k < kAhead; ++k) {
      size_t j = own[i](shard_rng);
      uint64_t key = view_key(i, ++next[i]);
      drawn[i][key] = j;
      ASSERT_TRUE(view.add(i, key, j + 1, shards[i].weights[j] / shards[i].mass(), shards[i].mass()).ok());
    }
  };
  std::vector<std::vector<uint64_t>> seen(3);
  for (uint32_t i = 0; i < 3; ++i) seen[i].assign(shards[i].weights.size(), 0);
  std::vector<uint32_t> counts;
  std::vector<ViewPick> picks;
  int held = 0;
  for (int batch = 0; batch < 6000;) {
    if (counts.empty()) {
      ASSERT_TRUE(view.split(kBatch, rng, &counts).ok());
    }
    bool gone = true;
    if (!view.ready(counts, &gone)) {
      ASSERT_FALSE(gone);
      ++held;
      for (uint32_t i = 0; i < 3; ++i) refill(i, counts[i]);
      continue;
    }
    picks.clear();
    uint64_t size = 0;
    ASSERT_TRUE(view.take(counts, &picks, &size).ok());
    ASSERT_EQ(picks.size(), kBatch);
    EXPECT_EQ(size, items);
    for (const ViewPick& p : picks) {
      size_t j = drawn[p.shard].at(p.key);
      ++seen[p.shard][j];
      ASSERT_NEAR(p.probability, shards[p.shard].weights[j] / total, 1e-12);
    }
    counts.clear();
    ++batch;
  }
  EXPECT_GT(held, 100) << "the test meant batches to wait for their shards' draws";
  double chi2 = 0;
  const double n = 6000.0 * kBatch;
  for (uint32_t i = 0; i < 3; ++i)
    for (size_t j = 0; j < shards[i].weights.size(); ++j) {
      double want = n * shards[i].weights[j] / total;
      chi2 += (seen[i][j] - want) * (seen[i][j] - want) / want;
    }
  EXPECT_GT(chi_square_p(chi2, double(items - 1)), 1e-4) << "chi2 " << chi2;
}

TEST(ShardView, AHeldBatchTakesTheCountsItWasSplitInto) {
  ShardView view(2, 64);
  ASSERT_TRUE(view.report(0, 1.0, 10).ok());
  ASSERT_TRUE(view.report(1, 1.0, 10).ok());
  std::mt19937_64 rng(2);
  std::vector<uint32_t> counts;
  do ASSERT_TRUE(view.split(8, rng, &counts).ok());
  while (counts[0] == 0 || counts[1] == 0);
  bool gone = true;
  EXPECT_FALSE(view.ready(counts, &gone)) << "no draws are here yet";
  EXPECT_FALSE(gone);
  for (uint64_t k = 1; k <= 8; ++k) ASSERT_TRUE(view.add(1, 100 + k, k, 0.1, 1.0).ok());
  EXPECT_FALSE(view.ready(counts, &gone)) << "shard 0's draws are still short";
  for (uint64_t k = 1; k <= counts[0]; ++k) ASSERT_TRUE(view.add(0, k, k, 0.1, 1.0).ok());
  ASSERT_TRUE(view.ready(counts, &gone));
  std::vector<ViewPick> picks;
  uint64_t size = 0;
  ASSERT_TRUE(view.take(counts, &picks, &size).ok());
  uint32_t got[2] = {0, 0};
  for (const ViewPick& p : picks) ++got[p.shard];
  EXPECT_EQ(got[0], counts[0]);
  EXPECT_EQ(got[1], counts[1]);
  EXPECT_EQ(view.counters(1).waiting, 8u - counts[1]) << "the oldest of shard 1's draws went, the rest wait";
  EXPECT_EQ(picks.back().key, 100 + counts[1]) << "each shard's oldest draws first";
}

TEST(ShardView, AShardAwayIsLeftOutAndItsDrawsGo) {
  ShardView view(2, 64);
  ASSERT_TRUE(view.report(0, 3.0, 3).ok());
  ASSERT_TRUE(view.report(1, 1.0, 1).ok());
  for (uint64_t k = 1; k <= 4; ++k) ASSERT_TRUE(view.add(0, k, k, 1.0 / 3, 3.0).ok());
  std::mt19937_64 rng(4);
  std::vector<uint32_t> counts;
  do ASSERT_TRUE(view.split(4, rng, &counts).ok());
  while (counts[0] == 0);
  std::vector<uint64_t> dropped;
  view.away(0, &dropped);
  EXPECT_EQ(dropped, (std::vector<uint64_t>{1, 2, 3, 4}));
  EXPECT_EQ(view.counters(0).waiting, 0u);
  bool gone = false;
  EXPECT_FALSE(view.ready(counts, &gone));
  EXPECT_TRUE(gone) << "a batch counted on a shard that went away is split again";
  for (int b = 0; b < 50; ++b) {
    ASSERT_TRUE(view.split(4, rng, &counts).ok());
    EXPECT_EQ(counts[0], 0u);
    EXPECT_EQ(counts[1], 4u);
  }
  EXPECT_FALSE(view.add(0, 9, 9, 0.5, 3.0).ok()) << "a draw of a shard away, before it reports again";
  std::vector<ViewPick> picks;
  uint64_t size = 0;
  for (uint64_t k = 1; k <= 4; ++k) ASSERT_TRUE(view.add(1, 10 + k, k, 1.0, 1.0).ok());
  ASSERT_TRUE(view.take(counts, &picks, &size).ok());
  EXPECT_EQ(size, 1u) << "the one table's size is the present shards'";
  EXPECT_DOUBLE_EQ(picks[0].probability, 1.0) << "and so is its mass";
  view.away(1, &dropped);
  EXPECT_EQ(view.split(4, rng, &counts).code(), Errc::empty);
}

TEST(ShardView, UpdatesGoToTheirShardInOrderAndOldKeysAreCounted) {
  ShardView view(2, 3);
  ASSERT_TRUE(view.report(0, 2.0, 2).ok());
  ASSERT_TRUE(view.report(1, 2.0, 2).ok());
  for (uint64_t k = 1; k <= 3; ++k) ASSERT_TRUE(view.add(0, k, 1000 + k, 0.5, 2.0).ok());
  for (uint64_t k = 4; k <= 5; ++k) ASSERT_TRUE(view.add(1, k, 2000 + k, 0.5, 2.0).ok());
  std::vector<ViewPick> picks;
  uint64_t size = 0;
  ASSERT_TRUE(view.take({3, 2}, &picks, &size).ok());
  EXPECT_FALSE(view.route(1, 9.0)) << "the oldest of five handed-out keys is past a window of three";
  EXPECT_FALSE(view.route(77, 9.0)) << "a key never handed out";
  EXPECT_EQ(view.unrouted(), 2u);
  EXPECT_TRUE(view.route(5, 1.5));
  EXPECT_TRUE(view.route(3, 2.5));
  EXPECT_TRUE(view.route(4, 3.5));
  EXPECT_TRUE(view.route(3, 4.5));
  std::vector<RemoteUpdate> out;
  view.take_updates(0, 10, &out);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].key, 1003u);
  EXPECT_EQ(out[0].priority, 2.5);
  EXPECT_EQ(out[1].priority, 4.5) << "in the order they came";
  out.clear();
  view.take_updates(1, 1, &out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].key, 2005u);
  EXPECT_EQ(view.counters(1).outbox, 1u) << "one of two taken";
}

TEST(ShardView, ForgottenDrawsAreNotHandedOut) {
  ShardView view(1, 8);
  ASSERT_TRUE(view.report(0, 1.0, 1).ok());
  for (uint64_t k = 1; k <= 4; ++k) ASSERT_TRUE(view.add(0, k, k, 1.0, 1.0).ok());
  view.forget(1);
  view.forget(3);
  view.forget(99);  // not waiting: nothing
  EXPECT_EQ(view.counters(0).waiting, 2u);
  bool gone = false;
  EXPECT_FALSE(view.ready({3}, &gone));
  std::vector<ViewPick> picks;
  uint64_t size = 0;
  ASSERT_TRUE(view.take({2}, &picks, &size).ok());
  ASSERT_EQ(picks.size(), 2u);
  EXPECT_EQ(picks[0].key, 2u);
  EXPECT_EQ(picks[1].key, 4u);
}

TEST(ShardView, BadReportsAndDrawsAreRefused) {
  ShardView view(2, 8);
  EXPECT_EQ(view.report(2, 1.0, 1).code(), Errc::invalid_argument) << "no shard 2";
  EXPECT_EQ(view.report(0, std::nan(""), 1).code(), Errc::invalid_argument);
  EXPECT_EQ(view.report(0, -1.0, 1).code(), Errc::invalid_argument);
  EXPECT_EQ(view.report(0, 1.0, 0).code(), Errc::invalid_argument) << "mass without items";
  EXPECT_FALSE(view.counters(0).present) << "a refused report changes nothing";
  EXPECT_EQ(view.add(0, 1, 1, 0.5, 1.0).code(), Errc::invalid_argument) << "a shard that never reported";
  ASSERT_TRUE(view.report(0, 1.0, 2).ok());
  EXPECT_EQ(view.add(0, 1, 1, 1.5, 1.0).code(), Errc::invalid_argument);
  EXPECT_EQ(view.add(0, 1, 1, 0.5, std::nan("")).code(), Errc::invalid_argument);
  ASSERT_TRUE(view.add(0, 1, 1, 0.5, 1.0).ok());
  EXPECT_EQ(view.add(0, 1, 2, 0.5, 1.0).code(), Errc::already_exists);
  EXPECT_EQ(view.counters(0).waiting, 1u);
}

TEST(ShardView, AShardsOutboxIsBounded) {
  ShardView view(1, 4);
  ASSERT_TRUE(view.report(0, 1.0, 1).ok());
  ASSERT_TRUE(view.add(0, 1, 7, 1.0, 1.0).ok());
  std::vector<ViewPick> picks;
  uint64_t size = 0;
  ASSERT_TRUE(view.take({1}, &picks, &size).ok());
  for (size_t i = 0; i < kMaxShardOutbox + 5; ++i) ASSERT_TRUE(view.route(1, double(i)));
  EXPECT_EQ(view.counters(0).outbox, kMaxShardOutbox);
  EXPECT_EQ(view.counters(0).outbox_dropped, 5u);
  std::vector<RemoteUpdate> out;
  view.take_updates(0, 1, &out);
  EXPECT_EQ(out[0].priority, 5.0) << "the oldest went";
}

}  // namespace
}  // namespace engram::test
