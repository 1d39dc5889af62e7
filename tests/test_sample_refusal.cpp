// A sample refused for an item of the wrong length (Table::sample's
// num_steps) leaves the table exactly as it was, for every sampler, every
// remover, with and without max_times_sampled and repeats: no count, no
// expiry, the limiter and every order as before. Before the check moved
// into the table, the client found the wrong length after the owner had
// counted the batch, and a max_times_sampled table lost the items.
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "core/table.hpp"
#include "test_util.hpp"

namespace engram {
namespace {

constexpr uint32_t kItems = 8;
constexpr uint32_t kBad = 3;  // the wrong item is the fourth the deterministic kinds pick

struct Case {
  SelectorKind sampler, remover;
  uint32_t max_times;
  bool distinct;
};

std::string name_of(const Case& c) {
  return std::string(selector_kind_name(c.sampler)) + "_" + selector_kind_name(c.remover) + "_max" +
         std::to_string(c.max_times) + (c.distinct ? "_distinct" : "");
}

TableOptions options_of(const Case& c) {
  TableOptions o;
  o.name = "refusal";
  o.capacity = kItems + 4;
  o.sampler = {c.sampler, 1.0};
  o.remover = {c.remover, 1.0};
  o.max_times_sampled = c.max_times;
  o.signature = {make_column("x", DType::f32, {})};
  o.max_refs_per_item = 2;
  return o;
}

struct Fixture {
  explicit Fixture(const Case& c) : checked(test::checked(options_of(c))), buf(Table::bytes_needed(checked)) {
    table = Table::format(buf.data(), buf.size, checked, 7).value();
    // The kBad-th item each deterministic sampler picks is the one of 3
    // steps (two slices): fifo picks in insertion order, lifo in reverse,
    // max_heap by priority descending, min_heap ascending.
    for (uint32_t i = 0; i < kItems; ++i) {
      uint32_t pick = c.sampler == SelectorKind::lifo ? kItems - 1 - i : i;
      double priority = c.sampler == SelectorKind::max_heap ? 1.0 + (kItems - i) : 1.0 + i;
      ChunkRef refs[2] = {{i, 1, 0, 2}, {100 + i, 1, 0, 1}};
      uint32_t num_refs = pick == kBad ? 2 : 1;
      keys.push_back(table.insert(priority, refs, num_refs).value());
    }
  }
  CheckedTableOptions checked;
  test::AlignedBuffer buf;
  Table table;
  std::vector<uint64_t> keys;
};

void expect_same(const TableState& a, const TableState& b, const std::string& what) {
  SCOPED_TRACE(what);
  ASSERT_EQ(a.items.size(), b.items.size());
  for (size_t i = 0; i < a.items.size(); ++i) {
    EXPECT_EQ(a.items[i].key, b.items[i].key);
    EXPECT_EQ(a.items[i].times_sampled, b.items[i].times_sampled) << "item " << i;
    EXPECT_EQ(a.items[i].inserted_seq, b.items[i].inserted_seq);
    EXPECT_EQ(a.items[i].sampler_seq, b.items[i].sampler_seq);
    EXPECT_EQ(a.items[i].remover_seq, b.items[i].remover_seq);
  }
  EXPECT_EQ(a.refs.size(), b.refs.size());
  EXPECT_EQ(a.counters.inserts, b.counters.inserts);
  EXPECT_EQ(a.counters.samples, b.counters.samples);
  EXPECT_EQ(a.counters.deletes, b.counters.deletes);
  EXPECT_EQ(a.stats.samples, b.stats.samples);
  EXPECT_EQ(a.stats.expirations, b.stats.expirations);
  EXPECT_EQ(a.stats.deletes, b.stats.deletes);
  EXPECT_EQ(a.sampler_seq, b.sampler_seq);
  EXPECT_EQ(a.remover_seq, b.remover_seq);
  EXPECT_EQ(a.free_stack, b.free_stack);
  EXPECT_EQ(a.generations, b.generations);
}

class SampleRefusal : public ::testing::TestWithParam<Case> {};

TEST_P(SampleRefusal, LeavesTheTableAsItWas) {
  const Case c = GetParam();
  Fixture f(c);
  Fixture twin(c);  // the same table, never refused
  TableState before = f.table.snapshot();
  double weight_before = f.table.sampler().total_weight();
  // Every item is drawn by a batch this large: the wrong one among them.
  uint32_t n = c.distinct ? kItems : (c.max_times == 0 ? 200 : kItems * c.max_times);
  SampleBatch batch;
  Status s = f.table.sample(n, &batch, c.distinct, /*num_steps=*/2);
  ASSERT_EQ(s.code(), Errc::invalid_capacity) << s.to_string();
  EXPECT_NE(s.message().find("has 3 steps; the sample options ask for num_steps 2"), std::string::npos) << s.message();
  EXPECT_TRUE(batch.items.empty());
  EXPECT_TRUE(batch.refs.empty());
  expect_same(before, f.table.snapshot(), "after the refusal");
  EXPECT_EQ(f.table.size(), kItems);
  EXPECT_EQ(f.table.sampler().size(), kItems);
  EXPECT_EQ(f.table.remover().size(), kItems);
  EXPECT_DOUBLE_EQ(f.table.sampler().total_weight(), weight_before);
  // What is drawn after it: deterministic kinds in exactly the twin's
  // order; every kind with every item drawable, each once per sample of
  // any length.
  std::vector<uint64_t> drawn, twin_drawn;
  for (uint32_t k = 0; k < kItems * (c.max_times ? c.max_times : 1); ++k) {
    SampleBatch b1, b2;
    ASSERT_TRUE(f.table.sample(1, &b1, false, 0).ok());
    ASSERT_TRUE(twin.table.sample(1, &b2, false, 0).ok());
    ASSERT_EQ(b1.items.size(), 1u);
    drawn.push_back(b1.items[0].key);
    twin_drawn.push_back(b2.items[0].key);
  }
  if (!f.table.sampler().draws()) {
    EXPECT_EQ(drawn, twin_drawn);
  }
  if (c.max_times != 0) {
    EXPECT_EQ(f.table.size(), 0u) << "every item expired after max_times_sampled draws each";
    EXPECT_EQ(f.table.info().stats.expirations, kItems);
  }
}

std::vector<Case> cases() {
  std::vector<Case> out;
  const SelectorKind kinds[] = {SelectorKind::uniform, SelectorKind::prioritized, SelectorKind::fifo,
                                SelectorKind::lifo,    SelectorKind::max_heap,    SelectorKind::min_heap};
  for (SelectorKind sampler : kinds)
    for (SelectorKind remover : {SelectorKind::fifo, SelectorKind::uniform, SelectorKind::max_heap})
      for (uint32_t max_times : {0u, 1u, 2u})
        for (bool distinct : {false, true}) {
          // A deterministic sampler drawing with repeats and without
          // max_times_sampled draws its first item only, never the wrong one.
          bool draws = sampler == SelectorKind::uniform || sampler == SelectorKind::prioritized;
          if (max_times == 0 && !distinct && !draws) continue;
          out.push_back({sampler, remover, max_times, distinct});
        }
  return out;
}

INSTANTIATE_TEST_SUITE_P(AllKinds, SampleRefusal, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case>& i) { return name_of(i.param); });

// The right length, asked for, samples as before; 0 asks for any length.
TEST(SampleRefusal, TheRightLengthOrAnySamples) {
  Fixture f({SelectorKind::fifo, SelectorKind::fifo, 1, false});
  SampleBatch b;
  ASSERT_TRUE(f.table.sample(kBad, &b, false, 2).ok());
  EXPECT_EQ(b.items.size(), kBad);
  b.clear();
  ASSERT_TRUE(f.table.sample(1, &b, false, 3).ok()) << "the fourth item has 3 steps";
  b.clear();
  ASSERT_TRUE(f.table.sample(kItems - kBad - 1, &b, false, 0).ok());
  EXPECT_EQ(f.table.size(), 0u);
}

}  // namespace
}  // namespace engram
