#include "core/sum_tree.hpp"

#include "core/selector.hpp"

#include <gtest/gtest.h>

#include <numeric>
#include <random>
#include <vector>

#include "test_util.hpp"

namespace engram {
namespace {

using test::AlignedBuffer;

template <unsigned K>
struct Owned {
  explicit Owned(uint32_t cap) : buf(SumTree<K>::bytes_needed(cap)) {
    auto r = SumTree<K>::format(buf.data(), buf.size, cap);
    EXPECT_TRUE(r.ok()) << r.status().to_string();
    tree = r.value();
  }
  AlignedBuffer buf;
  SumTree<K> tree;
};

template <typename T>
class SumTreeTest : public ::testing::Test {};
template <unsigned K>
struct Arity {
  static constexpr unsigned value = K;
};
using Arities = ::testing::Types<Arity<2>, Arity<4>, Arity<8>, Arity<16>, Arity<64>>;
TYPED_TEST_SUITE(SumTreeTest, Arities);

TYPED_TEST(SumTreeTest, SetGetTotalAndClear) {
  constexpr unsigned K = TypeParam::value;
  for (uint32_t cap : {1u, 2u, 3u, 7u, 64u, 65u, 1000u, 4097u}) {
    Owned<K> o(cap);
    auto& t = o.tree;
    EXPECT_EQ(t.occupied(), 0u);
    EXPECT_EQ(t.total(), 0.0);
    std::vector<double> w(cap, 0.0);
    for (uint32_t i = 0; i < cap; i += 2) {
      w[i] = i + 0.5;
      t.set(i, w[i]);
    }
    EXPECT_EQ(t.occupied(), (cap + 1) / 2);
    EXPECT_DOUBLE_EQ(t.total(), std::accumulate(w.begin(), w.end(), 0.0));
    EXPECT_EQ(t.total(), t.fresh_total());
    for (uint32_t i = 0; i < cap; ++i) {
      EXPECT_EQ(t.get(i), w[i]);
      EXPECT_EQ(t.is_occupied(i), i % 2 == 0);
    }
    t.clear(0);
    EXPECT_FALSE(t.is_occupied(0));
    EXPECT_EQ(t.get(0), 0.0);
    t.clear_all();
    EXPECT_EQ(t.occupied(), 0u);
    EXPECT_EQ(t.total(), 0.0);
  }
}

TYPED_TEST(SumTreeTest, SamplesOnlyOccupiedNonZeroLeaves) {
  constexpr unsigned K = TypeParam::value;
  Owned<K> o(300);
  auto& t = o.tree;
  for (uint32_t i = 0; i < 300; i += 3) t.set(i, (i % 2) ? 1.0 + i : 0.0);  // every other occupied leaf weighs 0
  for (int s = 0; s <= 100000; ++s) {
    double u = s / 100000.0 * 0.9999999999999999;
    uint32_t leaf = t.sample(u);
    ASSERT_LT(leaf, 300u);
    ASSERT_TRUE(t.is_occupied(leaf));
    ASSERT_GT(t.get(leaf), 0.0) << "u=" << u;
  }
  // u just below 1 must clamp to the last non-zero leaf, not run off the end.
  EXPECT_GT(t.get(t.sample(std::nextafter(1.0, 0.0))), 0.0);
}

TYPED_TEST(SumTreeTest, AllZeroSamplesUniformlyAmongOccupied) {
  constexpr unsigned K = TypeParam::value;
  Owned<K> o(100);
  auto& t = o.tree;
  for (uint32_t i : {3u, 50u, 99u}) t.set(i, 0.0);
  std::vector<int> count(100, 0);
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> U(0, 1);
  for (int s = 0; s < 30000; ++s) ++count[t.sample(U(rng))];
  for (uint32_t i = 0; i < 100; ++i) {
    if (i == 3 || i == 50 || i == 99) EXPECT_NEAR(count[i], 10000, 600) << i;
    else EXPECT_EQ(count[i], 0) << i;
  }
}

TYPED_TEST(SumTreeTest, BatchOperationsMatchSingleOnes) {
  constexpr unsigned K = TypeParam::value;
  const uint32_t cap = 5000;
  Owned<K> a(cap), b(cap);
  std::mt19937_64 rng(11);
  std::uniform_int_distribution<uint32_t> slot(0, cap - 1);
  std::uniform_real_distribution<double> U(0, 1);
  std::vector<uint32_t> idx(256), out(256);
  std::vector<double> w(256), u(256);
  SumTreeScratch sc;
  for (int round = 0; round < 200; ++round) {
    for (int q = 0; q < 256; ++q) {
      idx[q] = slot(rng);
      w[q] = U(rng) < 0.1 ? 0.0 : U(rng) * 10;
      u[q] = U(rng);
    }
    for (int q = 0; q < 256; ++q) a.tree.set(idx[q], w[q]);  // later duplicates win in both
    b.tree.set_batch(idx.data(), w.data(), 256, sc);
    ASSERT_EQ(a.tree.total(), b.tree.total());
    ASSERT_EQ(b.tree.total(), b.tree.fresh_total());
    b.tree.sample_batch(u.data(), out.data(), 256, sc);
    for (int q = 0; q < 256; ++q) ASSERT_EQ(out[q], a.tree.sample(u[q]));
  }
  ASSERT_EQ(0, std::memcmp(a.buf.data(), b.buf.data(), a.buf.size)) << "batched and single updates built different trees";
}

// The root must stay exactly the tree-order sum of the leaves after many
// random updates: parents are recomputed from children, never adjusted by
// deltas, so rounding errors cannot accumulate. fresh_total() recomputes the
// root from the leaves alone in the same order, so equality is exact; a plain
// left-to-right sum differs only by rounding of a different order.
template <unsigned K>
void check_no_drift(uint64_t updates, uint32_t cap) {
  Owned<K> o(cap);
  auto& t = o.tree;
  std::mt19937_64 rng(2024);
  std::uniform_real_distribution<double> U(0, 1);
  for (uint32_t i = 0; i < cap; ++i) t.set(i, U(rng));
  // Weights spanning 12 orders of magnitude make delta updates drift quickly.
  const uint32_t kBatch = 256;
  std::vector<uint32_t> idx(kBatch);
  std::vector<double> w(kBatch);
  SumTreeScratch sc;
  for (uint64_t n = 0; n < updates; n += kBatch) {
    for (uint32_t q = 0; q < kBatch; ++q) {
      idx[q] = static_cast<uint32_t>(rng() % cap);
      w[q] = std::ldexp(U(rng), static_cast<int>(rng() % 40) - 20);
    }
    if ((n / kBatch) % 2) t.set_batch(idx.data(), w.data(), kBatch, sc);
    else
      for (uint32_t q = 0; q < kBatch; ++q) t.set(idx[q], w[q]);
  }
  EXPECT_EQ(t.total(), t.fresh_total());
  double linear = 0;
  for (uint32_t i = 0; i < cap; ++i) linear += t.get(i);
  EXPECT_NEAR(t.total(), linear, linear * 1e-12);
}

TEST(SumTreeDrift, HundredMillionUpdatesProductionArity) {
  check_no_drift<kPrioritizedArity>(test::scaled(100'000'000), 10'000);
}
TYPED_TEST(SumTreeTest, NoDriftAnyArity) { check_no_drift<TypeParam::value>(test::scaled(2'000'000), 3'000); }

TEST(SumTreeValidation, RejectsBadCapacityAndCorruptHeaders) {
  AlignedBuffer buf(SumTree<8>::bytes_needed(100));
  EXPECT_EQ(SumTree<8>::format(buf.data(), buf.size, 0).status().code(), Errc::invalid_capacity);
  EXPECT_EQ(SumTree<8>::format(buf.data(), 64, 100).status().code(), Errc::invalid_argument);
  ASSERT_TRUE(SumTree<8>::format(buf.data(), buf.size, 100).ok());
  EXPECT_TRUE(SumTree<8>::attach(buf.data(), buf.size).ok());
  EXPECT_EQ(SumTree<16>::attach(buf.data(), buf.size).status().code(), Errc::corrupt);  // other arity
  reinterpret_cast<SumTreeHeader*>(buf.data())->level_offset[1] += 64;
  EXPECT_EQ(SumTree<8>::attach(buf.data(), buf.size).status().code(), Errc::corrupt);
}

}  // namespace
}  // namespace engram
