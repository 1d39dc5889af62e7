// U64Set against std::set under random operations, with keys that collide
// (a small key range), key 0, and runs that wrap around the array's end.
#include "core/u64_set.hpp"

#include <gtest/gtest.h>

#include <random>
#include <set>

namespace engram {
namespace {

void check_same(const U64Set& s, const std::set<uint64_t>& ref) {
  ASSERT_EQ(s.size(), ref.size());
  std::set<uint64_t> seen;
  s.for_each([&](uint64_t k) { EXPECT_TRUE(seen.insert(k).second) << "key " << k << " listed twice"; });
  EXPECT_EQ(seen, ref);
}

TEST(U64Set, MatchesStdSetUnderRandomOperations) {
  for (uint64_t range : {8ull, 100ull, 5000ull, 1ull << 40}) {
    std::mt19937_64 rng(range);
    U64Set s;
    std::set<uint64_t> ref;
    for (int step = 0; step < 200000; ++step) {
      uint64_t k = rng() % range;
      switch (rng() % 3) {
        case 0: EXPECT_EQ(s.insert(k), ref.insert(k).second) << "insert " << k; break;
        case 1: EXPECT_EQ(s.erase(k), ref.erase(k) == 1) << "erase " << k; break;
        default: EXPECT_EQ(s.contains(k), ref.count(k) == 1) << "contains " << k; break;
      }
      if (step % 20000 == 0) check_same(s, ref);
    }
    check_same(s, ref);
    // Every member is still found after all the backward shifts.
    for (uint64_t k : ref) EXPECT_TRUE(s.contains(k)) << k;
    s.clear();
    EXPECT_TRUE(s.empty());
    for (uint64_t k : ref) EXPECT_FALSE(s.contains(k)) << k;
  }
}

TEST(U64Set, GrowsAndShrinksBackToEmpty) {
  U64Set s;
  for (uint64_t k = 0; k < 100000; ++k) ASSERT_TRUE(s.insert(k * 0x100000000ull + 1));
  EXPECT_EQ(s.size(), 100000u);
  for (uint64_t k = 0; k < 100000; ++k) ASSERT_TRUE(s.erase(k * 0x100000000ull + 1));
  EXPECT_TRUE(s.empty());
  EXPECT_FALSE(s.erase(1));
}

}  // namespace
}  // namespace engram
