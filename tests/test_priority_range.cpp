#include "core/priority_range.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "test_util.hpp"

namespace engram {
namespace {

using test::AlignedBuffer;

struct OwnedRange {
  explicit OwnedRange(uint32_t capacity) : buf(PriorityRange::bytes_needed(capacity)) {
    auto r = PriorityRange::format(buf.data(), buf.size, capacity);
    EXPECT_TRUE(r.ok()) << r.status().to_string();
    range = r.value();
  }
  AlignedBuffer buf;
  PriorityRange range;
};

// The model: each slot's priority or nothing, and a linear scan.
struct RangeModel {
  std::vector<double> p;
  std::vector<bool> on;
  explicit RangeModel(uint32_t n) : p(n), on(n) {}
  bool empty() const { return std::find(on.begin(), on.end(), true) == on.end(); }
  double max() const {
    double m = -1;
    for (size_t i = 0; i < p.size(); ++i)
      if (on[i]) m = std::max(m, p[i]);
    return m;
  }
  double min() const {
    double m = 1e300;
    for (size_t i = 0; i < p.size(); ++i)
      if (on[i]) m = std::min(m, p[i]);
    return m;
  }
};

// Capacities at and around the arity's powers, where levels are added and
// groups padded; random sets and clears, the extremes checked after each.
TEST(PriorityRange, MatchesAModelOverRandomChanges) {
  for (uint32_t cap : {1u, 2u, 7u, 8u, 9u, 63u, 64u, 65u, 511u, 513u, 1000u}) {
    OwnedRange o(cap);
    PriorityRange& r = o.range;
    RangeModel m(cap);
    std::mt19937_64 rng(cap);
    EXPECT_TRUE(r.empty());
    const uint64_t ops = test::scaled(20'000, 4);
    for (uint64_t step = 0; step < ops; ++step) {
      uint32_t slot = static_cast<uint32_t>(rng() % cap);
      switch (rng() % 4) {
        case 0:
        case 1: {  // a few values repeat, so that ties and equal updates occur
          double p = (rng() % 3 == 0) ? static_cast<double>(rng() % 4) : std::ldexp(static_cast<double>(rng() % 1000), -3);
          r.set(slot, p);
          m.p[slot] = p;
          m.on[slot] = true;
          break;
        }
        case 2:
          r.clear(slot);
          m.on[slot] = false;
          break;
        case 3:
          if (rng() % 500 == 0) {
            r.clear_all();
            std::fill(m.on.begin(), m.on.end(), false);
          }
          break;
      }
      ASSERT_EQ(r.empty(), m.empty()) << "capacity " << cap << " step " << step;
      if (!m.empty()) {
        ASSERT_EQ(r.extremes().max, m.max()) << "capacity " << cap << " step " << step;
        ASSERT_EQ(r.extremes().min, m.min()) << "capacity " << cap << " step " << step;
      }
      if (step % 16 == 0) {  // every occupied slot at or above a bar, in slot order
        double bar = (rng() % 5 == 0) ? static_cast<double>(rng() % 4) : std::ldexp(static_cast<double>(rng() % 1000), -3);
        std::vector<uint32_t> got, want;
        r.at_least(bar, &got);
        for (uint32_t i = 0; i < cap; ++i)
          if (m.on[i] && m.p[i] >= bar) want.push_back(i);
        ASSERT_EQ(got, want) << "capacity " << cap << " step " << step << " bar " << bar;
      }
    }
  }
}

TEST(PriorityRange, AttachChecksTheHeader) {
  OwnedRange o(100);
  o.range.set(99, 2.5);
  auto again = PriorityRange::attach(o.buf.data(), o.buf.size);
  ASSERT_TRUE(again.ok()) << again.status().to_string();
  EXPECT_EQ(again->extremes().max, 2.5);
  auto* h = static_cast<PriorityRangeHeader*>(o.buf.data());
  h->level_offset[1] += 64;
  EXPECT_EQ(PriorityRange::attach(o.buf.data(), o.buf.size).status().code(), Errc::corrupt);
  h->level_offset[1] -= 64;
  h->capacity = 100000;
  EXPECT_EQ(PriorityRange::attach(o.buf.data(), o.buf.size).status().code(), Errc::corrupt);
  EXPECT_EQ(PriorityRange::attach(o.buf.data(), 16).status().code(), Errc::corrupt);
}

}  // namespace
}  // namespace engram
