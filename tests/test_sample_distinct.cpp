// Batches without repeats (core/sample_distinct.cpp): no item twice, the
// draws' frequencies against the documented chances, the reported
// probabilities against a model of them, and importance weights from them
// that estimate a table's mean without bias.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <set>
#include <vector>

#include "core/priority.hpp"
#include "core/table.hpp"
#include "test_util.hpp"

namespace engram {
namespace {

using test::AlignedBuffer;

struct Fixture {
  Fixture(SelectorOptions sampler, uint32_t capacity, uint32_t max_times = 0, uint64_t seed = 7) {
    TableOptions o;
    o.name = "distinct";
    o.capacity = capacity;
    o.sampler = sampler;
    o.remover = {SelectorKind::fifo, 1.0};
    o.max_times_sampled = max_times;
    o.signature = {make_column("x", DType::f32, {})};
    o.max_refs_per_item = 1;
    buf = std::make_unique<AlignedBuffer>(Table::bytes_needed(test::checked(o)));
    table = Table::format(buf->data(), buf->size, test::checked(o), seed).value();
  }
  // Inserts an item per priority; index[key] is its place in `priorities`.
  void fill(const std::vector<double>& priorities) {
    for (double p : priorities) {
      ChunkRef r{static_cast<uint32_t>(index.size()), 1, 0, 1};
      auto key = table.insert(p, &r, 1);
      ASSERT_TRUE(key.ok()) << key.status().to_string();
      index[*key] = static_cast<uint32_t>(index.size());
    }
  }
  std::unique_ptr<AlignedBuffer> buf;
  Table table;
  std::map<uint64_t, uint32_t> index;
};

// The documented chances of a prioritized batch without repeats, computed
// apart from the code under test: members whose weight is at least their
// share of what is left are certain, again until none is; the rest have
// chance (places left) * w / (weight left).
std::vector<double> inclusion_model(const std::vector<double>& priorities, double exponent, uint32_t n) {
  std::vector<double> w(priorities.size()), chance(priorities.size(), 0.0);
  long double total = 0;
  for (size_t i = 0; i < w.size(); ++i) total += w[i] = priority_weight(priorities[i], exponent);
  std::vector<bool> certain(w.size(), false);
  uint32_t places = n;
  for (bool changed = true; changed && places > 0;) {
    changed = false;
    long double share = total / places;
    for (size_t i = 0; i < w.size(); ++i)
      if (!certain[i] && w[i] >= share) {
        certain[i] = true;
        changed = true;
      }
    for (size_t i = 0; i < w.size(); ++i)
      if (certain[i] && chance[i] == 0.0) {
        chance[i] = 1.0;
        total -= w[i];
        --places;
      }
  }
  for (size_t i = 0; i < w.size(); ++i)
    if (!certain[i]) chance[i] = static_cast<double>(places * static_cast<long double>(w[i]) / total);
  return chance;
}

// Draws `batches` batches of n, asserting no repeats, and counts each
// item's appearances; `check` sees each batch.
template <typename Check>
std::vector<uint64_t> draw(Fixture& f, uint32_t n, uint64_t batches, Check check) {
  std::vector<uint64_t> count(f.index.size(), 0);
  uint64_t repeats = 0, short_batches = 0;
  SampleBatch b;
  for (uint64_t k = 0; k < batches; ++k) {
    b.clear();
    Status s = f.table.sample(n, &b, true);
    EXPECT_TRUE(s.ok()) << s.to_string();
    if (!s.ok()) break;
    short_batches += b.items.size() != n;
    std::set<uint64_t> keys;
    for (const SampledItem& it : b.items) {
      repeats += !keys.insert(it.key).second;
      ++count[f.index.at(it.key)];
    }
    check(b);
  }
  EXPECT_EQ(repeats, 0u) << "items drawn twice in a batch";
  EXPECT_EQ(short_batches, 0u) << "batches of other than " << n << " items";
  return count;
}

// Pearson's statistic of counts against expected counts, over the items
// whose chance is below 1 (certain ones must be in every batch exactly),
// and its degrees of freedom. Each count is binomial (batches are drawn
// independently), whose variance is at most its mean: the statistic's
// expectation is at most its degrees of freedom.
std::pair<double, double> chi_square(const std::vector<uint64_t>& count, const std::vector<double>& chance,
                                     uint64_t batches) {
  double stat = 0, df = 0;
  for (size_t i = 0; i < count.size(); ++i) {
    double expect = chance[i] * static_cast<double>(batches);
    if (chance[i] >= 1.0) {
      EXPECT_EQ(count[i], batches) << "item " << i << " is certain";
      continue;
    }
    if (chance[i] == 0.0) {
      EXPECT_EQ(count[i], 0u) << "item " << i << " has chance 0";
      continue;
    }
    stat += (count[i] - expect) * (count[i] - expect) / expect;
    df += 1;
  }
  return {stat, df};
}

// A bar a correct draw exceeds with a chance far below 1e-6: df + 8
// standard deviations of a chi-square with df degrees of freedom.
double chi_bar(double df) { return df + 8 * std::sqrt(2 * df); }

std::vector<double> skewed_priorities(uint32_t count, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<double> p(count);
  for (double& x : p) x = std::uniform_real_distribution<double>(0.05, 1.0)(rng);
  // Heavy items: 30 is certain at once, 6 only after 30 has been taken out
  // (6 < the first share, 6 > the second), a zero never drawn.
  p[3] = 30;
  p[17] = 6;
  p[25] = 0;
  return p;
}

TEST(SampleDistinct, PrioritizedDrawsMatchTheDocumentedChances) {
  for (double exponent : {1.0, 0.6}) {
    const uint32_t items = 40, n = 8;
    std::vector<double> p = skewed_priorities(items, 11);
    Fixture f({SelectorKind::prioritized, exponent}, 64);
    f.fill(p);
    std::vector<double> chance = inclusion_model(p, exponent, n);
    const double total_before = f.table.sampler().total_weight();
    const uint64_t batches = test::scaled(20'000, 4);
    // The function whose mean the weights must estimate, and the truth.
    auto fn = [](uint32_t i) { return 1.0 + std::sin(static_cast<double>(i)) + (i == 3 ? 50.0 : 0.0); };
    // Over the items that can be drawn: an item of priority 0 is never
    // drawn, with repeats or without, and weights cannot see it.
    double truth = 0;
    for (uint32_t i = 0; i < items; ++i)
      if (chance[i] > 0) truth += fn(i) / items;
    std::vector<double> estimates;
    uint64_t wrong = 0;  // reported probabilities off the model
    double worst = 0;
    auto count = draw(f, n, batches, [&](const SampleBatch& b) {
      double est = 0;
      for (const SampledItem& it : b.items) {
        uint32_t i = f.index.at(it.key);
        // Reported probability: the chance to be in the batch over n.
        double off = std::abs(it.probability - chance[i] / n) / (chance[i] / n);
        worst = std::max(worst, off);
        wrong += off > 1e-12;
        est += fn(i) / (static_cast<double>(items) * it.probability) / n;
      }
      estimates.push_back(est);
    });
    EXPECT_EQ(wrong, 0u) << "exponent " << exponent << ": probabilities off the model by up to " << worst;
    EXPECT_EQ(f.table.sampler().total_weight(), total_before) << "the draw left the tree changed";
    auto [stat, df] = chi_square(count, chance, batches);
    EXPECT_LT(stat, chi_bar(df)) << "exponent " << exponent << ": chi-square " << stat << " on " << df << " df";
    EXPECT_GT(df, 30);
    // Unbiased: the estimates' mean is the truth within 5 standard errors.
    double mean = 0, var = 0;
    for (double e : estimates) mean += e / estimates.size();
    for (double e : estimates) var += (e - mean) * (e - mean) / (estimates.size() - 1);
    double se = std::sqrt(var / estimates.size());
    EXPECT_LT(std::abs(mean - truth), 5 * se + 1e-12) << "exponent " << exponent << ": mean " << mean << " truth "
                                                       << truth << " se " << se;
  }
}

TEST(SampleDistinct, UniformDrawsEverySubsetEvenly) {
  const uint32_t items = 30, n = 10;
  Fixture f({SelectorKind::uniform, 1.0}, 32);
  f.fill(std::vector<double>(items, 1.0));
  const uint64_t batches = test::scaled(20'000, 4);
  uint64_t wrong = 0;
  auto count = draw(f, n, batches, [&](const SampleBatch& b) {
    for (const SampledItem& it : b.items) wrong += it.probability != 1.0 / items;
  });
  EXPECT_EQ(wrong, 0u) << "probabilities other than 1/size";
  auto [stat, df] = chi_square(count, std::vector<double>(items, double(n) / items), batches);
  EXPECT_LT(stat, chi_bar(df)) << "chi-square " << stat << " on " << df << " df";
}

TEST(SampleDistinct, OrderedSamplersTakeTheirFirstN) {
  std::vector<double> p = {5, 1, 9, 3, 7, 2, 8, 4, 6, 0.5};
  struct Case {
    SelectorKind kind;
    std::vector<uint32_t> want;  // places in p, in the batch's order
  };
  for (const Case& c : {Case{SelectorKind::fifo, {0, 1, 2, 3}}, Case{SelectorKind::lifo, {9, 8, 7, 6}},
                        Case{SelectorKind::max_heap, {2, 6, 4, 8}}, Case{SelectorKind::min_heap, {9, 1, 5, 3}}}) {
    Fixture f({c.kind, 1.0}, 16);
    f.fill(p);
    SampleBatch b;
    ASSERT_TRUE(f.table.sample(4, &b, true).ok());
    std::vector<uint32_t> got;
    for (const SampledItem& it : b.items) {
      got.push_back(f.index.at(it.key));
      EXPECT_EQ(it.probability, 1.0);
    }
    EXPECT_EQ(got, c.want) << selector_kind_name(c.kind);
  }
}

TEST(SampleDistinct, TooFewItemsIsAClearError) {
  Fixture f({SelectorKind::uniform, 1.0}, 16);
  f.fill({1, 1, 1});
  SampleBatch b;
  Status s = f.table.sample(4, &b, true);
  EXPECT_EQ(s.code(), Errc::invalid_capacity) << s.to_string();
  EXPECT_NE(s.message().find("holds 3 items, fewer than a batch of 4"), std::string::npos) << s.message();
  EXPECT_TRUE(b.items.empty());
  EXPECT_EQ(f.table.info().stats.samples, 0u);

  // Enough items, but too few that a prioritized sampler can draw.
  Fixture g({SelectorKind::prioritized, 1.0}, 16);
  g.fill({0, 2, 0, 0, 3, 0});
  const double total = g.table.sampler().total_weight();
  s = g.table.sample(3, &b, true);
  EXPECT_EQ(s.code(), Errc::invalid_capacity) << s.to_string();
  EXPECT_NE(s.message().find("nonzero priority"), std::string::npos) << s.message();
  EXPECT_EQ(g.table.sampler().total_weight(), total) << "the refused draw left the tree changed";
  ASSERT_TRUE(g.table.sample(2, &b, true).ok());  // both that can be drawn
  std::set<uint32_t> got;
  for (const SampledItem& it : b.items) got.insert(g.index.at(it.key));
  EXPECT_EQ(got, (std::set<uint32_t>{1, 4}));
}

TEST(SampleDistinct, EveryWeightZeroDrawsUniformly) {
  Fixture f({SelectorKind::prioritized, 1.0}, 16);
  f.fill(std::vector<double>(12, 0.0));
  const uint64_t batches = test::scaled(5'000, 4);
  uint64_t wrong = 0;
  auto count = draw(f, 6, batches, [&](const SampleBatch& b) {
    for (const SampledItem& it : b.items) wrong += it.probability != 1.0 / 12;
  });
  EXPECT_EQ(wrong, 0u) << "probabilities other than 1/size";
  auto [stat, df] = chi_square(count, std::vector<double>(12, 0.5), batches);
  EXPECT_LT(stat, chi_bar(df));
}

TEST(SampleDistinct, ItemsAtMaxTimesSampledLeaveAfterTheBatch) {
  Fixture f({SelectorKind::prioritized, 1.0}, 16, /*max_times=*/1);
  f.fill({1, 2, 3, 4, 5, 6, 7, 8, 9, 10});
  SampleBatch b;
  ASSERT_TRUE(f.table.sample(4, &b, true).ok());
  ASSERT_EQ(b.items.size(), 4u);
  EXPECT_EQ(f.table.size(), 6u);
  EXPECT_EQ(f.table.info().stats.expirations, 4u);
  for (const SampledItem& it : b.items) {
    EXPECT_EQ(it.table_size, 10u);
    EXPECT_EQ(f.table.find(it.key), nullptr);
  }
  // The rest, then nothing left to draw.
  b.clear();
  ASSERT_TRUE(f.table.sample(6, &b, true).ok());
  EXPECT_EQ(f.table.size(), 0u);
}

}  // namespace
}  // namespace engram
