#include "core/selector.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <vector>

#include "core/priority.hpp"
#include "reference_model.hpp"
#include "test_util.hpp"

namespace engram {
namespace {

using test::AlignedBuffer;

struct OwnedSelector {
  OwnedSelector(SelectorOptions o, uint32_t cap) : buf(Selector::bytes_needed(o, cap)) {
    auto r = Selector::format(buf.data(), buf.size, o, cap);
    EXPECT_TRUE(r.ok()) << r.status().to_string();
    sel = r.value();
  }
  AlignedBuffer buf;
  Selector sel;
};

// The reference model: a plain vector, every question answered by a linear scan.
struct Model {
  struct Member {
    uint32_t slot;
    double priority;
    uint64_t inserted;  // insertion order
    uint64_t touched;   // order of last insert or update
  };
  std::vector<Member> members;
  uint64_t clock = 0;

  Member* find(uint32_t s) {
    for (auto& m : members)
      if (m.slot == s) return &m;
    return nullptr;
  }
  void insert(uint32_t s, double p) { members.push_back({s, p, clock, clock}), ++clock; }
  void update(uint32_t s, double p) {
    Member* m = find(s);
    m->priority = p;
    m->touched = clock++;
  }
  void remove(uint32_t s) {
    members.erase(std::find_if(members.begin(), members.end(), [s](const Member& m) { return m.slot == s; }));
  }
  // The member a deterministic selector must return.
  uint32_t expected(SelectorKind k) const { return test::deterministic_pick(k, members.begin(), members.end())->slot; }
};

void run_against_model(SelectorOptions opts, uint64_t seed, uint64_t ops) {
  const uint32_t cap = 200;
  OwnedSelector o(opts, cap);
  Selector& sel = o.sel;
  Model model;
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> U(0, 1);
  // Few distinct priorities so that heap ties happen often; some zeros.
  auto priority = [&] { return static_cast<double>(rng() % 6); };
  for (uint64_t step = 0; step < ops; ++step) {
    uint32_t slot = static_cast<uint32_t>(rng() % cap);
    bool member = model.find(slot) != nullptr;
    ASSERT_EQ(sel.contains(slot), member) << "step " << step;
    switch (rng() % 5) {
      case 0:
      case 1:
        if (!member) {
          double p = priority();
          ASSERT_TRUE(sel.insert(slot, p).ok());
          model.insert(slot, p);
        } else {
          ASSERT_EQ(sel.insert(slot, 1.0).code(), Errc::invalid_argument);
        }
        break;
      case 2:
        if (member) {
          double p = priority();
          ASSERT_TRUE(sel.update(slot, p).ok());
          model.update(slot, p);
        } else {
          ASSERT_FALSE(sel.update(slot, 1.0).ok());
        }
        break;
      case 3:
        sel.remove(slot);
        if (member) model.remove(slot);
        break;
      case 4: {
        auto r = sel.sample(U(rng));
        if (model.members.empty()) {
          ASSERT_EQ(r.status().code(), Errc::empty);
          break;
        }
        ASSERT_TRUE(r.ok());
        const Model::Member* m = model.find(r->slot);
        ASSERT_NE(m, nullptr) << "sampled a non-member at step " << step;
        if (opts.kind == SelectorKind::uniform) {
          ASSERT_DOUBLE_EQ(r->probability, 1.0 / model.members.size());
        } else if (opts.kind == SelectorKind::prioritized) {
          double total = 0;
          for (const auto& x : model.members) total += priority_weight(x.priority, opts.exponent);
          double w = priority_weight(m->priority, opts.exponent);
          if (total > 0) {
            ASSERT_GT(w, 0.0) << "sampled a zero-weight item at step " << step;
            ASSERT_NEAR(r->probability, w / total, 1e-9 * (w / total));
          } else {
            ASSERT_DOUBLE_EQ(r->probability, 1.0 / model.members.size());
          }
        } else {
          ASSERT_EQ(r->slot, model.expected(opts.kind)) << "step " << step;
          ASSERT_EQ(r->probability, 1.0);
        }
        break;
      }
    }
    ASSERT_EQ(sel.size(), model.members.size());
    if (step % 20000 == 19999) {  // exercise clear too
      sel.clear();
      model.members.clear();
    }
  }
}

class SelectorModel : public ::testing::TestWithParam<SelectorOptions> {};

TEST_P(SelectorModel, RandomOperationsMatchReferenceModel) {
  for (uint64_t seed : {1, 2, 3}) run_against_model(GetParam(), seed, test::scaled(100'000, 4));
}

INSTANTIATE_TEST_SUITE_P(AllKinds, SelectorModel,
                         ::testing::Values(SelectorOptions{SelectorKind::uniform, 1.0},
                                           SelectorOptions{SelectorKind::prioritized, 0.0},
                                           SelectorOptions{SelectorKind::prioritized, 0.6},
                                           SelectorOptions{SelectorKind::prioritized, 1.0},
                                           SelectorOptions{SelectorKind::fifo, 1.0},
                                           SelectorOptions{SelectorKind::lifo, 1.0},
                                           SelectorOptions{SelectorKind::max_heap, 1.0},
                                           SelectorOptions{SelectorKind::min_heap, 1.0}),
                         [](const auto& info) {
                           std::string n = selector_kind_name(info.param.kind);
                           if (info.param.kind == SelectorKind::prioritized)
                             n += "_e" + std::to_string(static_cast<int>(info.param.exponent * 10));
                           return n;
                         });

// Sampling frequencies of Prioritized(exponent) against p^exponent / sum:
// Pearson's chi-square over 1e6 draws, accepted at p > 0.001 (fixed seed).
// Zero-priority items must never be drawn, also for exponent 0.
class PrioritizedChiSquare : public ::testing::TestWithParam<double> {};

TEST_P(PrioritizedChiSquare, FrequenciesMatchPriorities) {
  const double exponent = GetParam();
  const uint32_t n = 100;
  OwnedSelector o({SelectorKind::prioritized, exponent}, n);
  std::mt19937_64 rng(12345);
  std::uniform_real_distribution<double> U(0, 1);
  std::vector<double> prio(n);
  for (uint32_t i = 0; i < n; ++i) {
    prio[i] = (i % 10 == 0) ? 0.0 : 0.1 + 10 * U(rng);
    ASSERT_TRUE(o.sel.insert(i, prio[i]).ok());
  }
  const uint64_t draws = 1'000'000;
  std::vector<uint64_t> count(n, 0);
  for (uint64_t d = 0; d < draws; ++d) ++count[o.sel.sample(U(rng))->slot];
  double total = 0;
  for (double p : prio) total += priority_weight(p, exponent);
  double chi2 = 0;
  int df = -1;
  for (uint32_t i = 0; i < n; ++i) {
    double w = priority_weight(prio[i], exponent);
    if (w == 0) {
      EXPECT_EQ(count[i], 0u) << "zero-priority item " << i << " was sampled";
      continue;
    }
    double expect = draws * w / total;
    chi2 += (count[i] - expect) * (count[i] - expect) / expect;
    ++df;
  }
  double p = test::chi_square_p(chi2, df);
  EXPECT_GT(p, 0.001) << "chi2=" << chi2 << " df=" << df;
}

INSTANTIATE_TEST_SUITE_P(Exponents, PrioritizedChiSquare, ::testing::Values(0.0, 0.6, 1.0),
                         [](const auto& info) {
                           std::string name = "exponent_tenths_";
                           name += std::to_string(static_cast<int>(info.param * 10));
                           return name;
                         });

TEST(ChiSquareHelper, RejectsAWrongDistribution) {
  // The statistic machinery itself must be able to fail.
  EXPECT_LT(test::chi_square_p(200.0, 50), 1e-10);
  EXPECT_NEAR(test::chi_square_p(49.33, 50), 0.5, 0.02);
}

TEST(SelectorValidation, DistinctErrorsForBadInput) {
  EXPECT_EQ(Selector::validate({SelectorKind::prioritized, std::nan("")}).code(), Errc::invalid_exponent);
  EXPECT_EQ(Selector::validate({SelectorKind::prioritized, INFINITY}).code(), Errc::invalid_exponent);
  EXPECT_EQ(Selector::validate({SelectorKind::prioritized, -1.0}).code(), Errc::invalid_exponent);
  EXPECT_EQ(Selector::validate({static_cast<SelectorKind>(99), 1.0}).code(), Errc::invalid_argument);
  // Every kind checks the exponent, though only prioritized reads it.
  for (SelectorKind k : {SelectorKind::uniform, SelectorKind::fifo, SelectorKind::lifo, SelectorKind::max_heap,
                         SelectorKind::min_heap}) {
    EXPECT_EQ(Selector::validate({k, std::nan("")}).code(), Errc::invalid_exponent);
    EXPECT_EQ(Selector::validate({k, -1.0}).code(), Errc::invalid_exponent);
    EXPECT_TRUE(Selector::validate({k, 0.0}).ok());
  }
  EXPECT_NE(Selector::validate({SelectorKind::prioritized, -1e-300}).message().find("-1e-300"), std::string::npos)
      << "a tiny negative is shown as itself, not as -0.000000";
  AlignedBuffer buf(4096);
  EXPECT_EQ(Selector::format(buf.data(), buf.size, {SelectorKind::uniform, 1.0}, 0).status().code(), Errc::invalid_capacity);
  OwnedSelector o({SelectorKind::prioritized, 1.0}, 10);
  EXPECT_EQ(o.sel.insert(1, std::nan("")).code(), Errc::invalid_priority);
  EXPECT_EQ(o.sel.insert(1, INFINITY).code(), Errc::invalid_priority);
  EXPECT_EQ(o.sel.insert(1, -0.5).code(), Errc::invalid_priority);
  EXPECT_EQ(o.sel.insert(10, 1.0).code(), Errc::invalid_argument);
  EXPECT_EQ(o.sel.size(), 0u);
  OwnedSelector big({SelectorKind::prioritized, 3.0}, 10);
  EXPECT_EQ(big.sel.insert(1, 1e200).code(), Errc::invalid_priority);  // 1e600 overflows
}

TEST(SelectorLayout, AttachValidatesHeader) {
  OwnedSelector o({SelectorKind::max_heap, 1.0}, 50);
  EXPECT_TRUE(Selector::attach(o.buf.data(), o.buf.size).ok());
  EXPECT_EQ(Selector::attach(o.buf.data(), 100).status().code(), Errc::corrupt);
  reinterpret_cast<SelectorHeader*>(o.buf.data())->off_heap_priority += 64;
  EXPECT_EQ(Selector::attach(o.buf.data(), o.buf.size).status().code(), Errc::corrupt);
}

}  // namespace
}  // namespace engram
