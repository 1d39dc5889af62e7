#include "core/table.hpp"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <limits>
#include <random>
#include <set>
#include <vector>

#include "core/priority.hpp"
#include "core/shm.hpp"
#include "reference_model.hpp"
#include "test_util.hpp"

namespace engram {
namespace {

using test::AlignedBuffer;

TableOptions options(SelectorOptions sampler, SelectorOptions remover, uint32_t cap, uint32_t max_times = 0) {
  TableOptions o;
  o.name = "replay";
  o.capacity = cap;
  o.sampler = sampler;
  o.remover = remover;
  o.max_times_sampled = max_times;
  o.signature = {make_column("obs", DType::u8, {84, 84}), make_column("reward", DType::f32, {})};
  o.max_refs_per_item = 2;
  return o;
}

struct OwnedTable {
  explicit OwnedTable(const TableOptions& o, uint64_t seed = 1) : buf(Table::bytes_needed(test::checked(o))) {
    auto r = Table::format(buf.data(), buf.size, test::checked(o), seed);
    EXPECT_TRUE(r.ok()) << r.status().to_string();
    table = r.value();
    table.set_remove_hook([this](const ItemSlot& it, const ChunkRef* refs) {
      removed.push_back(it.key);
      removed_ref0.push_back(refs[0].block);
    });
  }
  AlignedBuffer buf;
  Table table;
  std::vector<uint64_t> removed;
  std::vector<uint32_t> removed_ref0;
};

ChunkRef ref_for(uint64_t n) { return ChunkRef{static_cast<uint32_t>(n), 1, 0, 1}; }

// Reference model of a table: a vector and linear scans.
struct TableModel {
  struct Item {
    uint64_t key;
    double priority;
    uint32_t times_sampled;
    uint64_t inserted, touched;
    uint32_t ref0;
  };
  std::vector<Item> items;
  uint64_t clock = 0;

  Item* find(uint64_t key) {
    for (auto& i : items)
      if (i.key == key) return &i;
    return nullptr;
  }
  void erase(uint64_t key) {
    items.erase(std::find_if(items.begin(), items.end(), [key](const Item& i) { return i.key == key; }));
  }
  // Which items a selector of kind k may pick now (one for deterministic kinds).
  std::vector<uint64_t> candidates(SelectorOptions s) const {
    std::vector<uint64_t> out;
    if (s.kind == SelectorKind::uniform || s.kind == SelectorKind::prioritized) {
      double total = 0;
      for (const auto& i : items) total += priority_weight(i.priority, s.exponent);
      for (const auto& i : items)
        if (s.kind == SelectorKind::uniform || total == 0 || priority_weight(i.priority, s.exponent) > 0) out.push_back(i.key);
      return out;
    }
    out.push_back(test::deterministic_pick(s.kind, items.begin(), items.end())->key);
    return out;
  }
  double probability(SelectorOptions s, uint64_t key) const {
    if (s.kind == SelectorKind::uniform) return 1.0 / items.size();
    if (s.kind != SelectorKind::prioritized) return 1.0;
    double total = 0, w = 0;
    for (const auto& i : items) {
      total += priority_weight(i.priority, s.exponent);
      if (i.key == key) w = priority_weight(i.priority, s.exponent);
    }
    return total > 0 ? w / total : 1.0 / items.size();
  }
};

bool contains(const std::vector<uint64_t>& v, uint64_t x) { return std::find(v.begin(), v.end(), x) != v.end(); }

struct ModelCase {
  SelectorOptions sampler, remover;
  uint32_t max_times;
};

class TableModelTest : public ::testing::TestWithParam<ModelCase> {};

TEST_P(TableModelTest, RandomOperationsMatchReferenceModel) {
  const ModelCase mc = GetParam();
  const uint32_t cap = 64;
  for (uint64_t seed : {1, 2, 3}) {
    OwnedTable o(options(mc.sampler, mc.remover, cap, mc.max_times), seed);
    Table& t = o.table;
    TableModel model;
    std::vector<uint64_t> issued;
    std::mt19937_64 rng(seed * 7919);
    uint64_t next_ref = 0;
    const uint64_t ops = test::scaled(100'000, 4);
    for (uint64_t step = 0; step < ops; ++step) {
      o.removed.clear();
      o.removed_ref0.clear();
      const uint64_t op = rng() % 7;
      switch (op) {
        case 0:
        case 1:
        case 6: {  // insert, evicting with the remover when full; case 6 at the current maximum
          double p = static_cast<double>(rng() % 5);
          if (op == 6) {  // then the largest held before any eviction, or 1 in an empty table
            double hi = kAtMaxWhenEmpty;
            for (size_t i = 0; i < model.items.size(); ++i) hi = i ? std::max(hi, model.items[i].priority) : model.items[i].priority;
            ASSERT_EQ(t.at_max_priority(), hi) << "step " << step;
            p = t.at_max_priority();
          }
          std::vector<uint64_t> victims;
          if (model.items.size() == cap) victims = model.candidates(mc.remover);
          ChunkRef r[2] = {ref_for(next_ref), ref_for(next_ref + 1)};
          auto key = t.insert(p, r, 1 + rng() % 2);
          ASSERT_TRUE(key.ok()) << key.status().to_string();
          if (!victims.empty()) {
            ASSERT_EQ(o.removed.size(), 1u);
            ASSERT_TRUE(contains(victims, o.removed[0])) << "remover evicted the wrong item at step " << step;
            ASSERT_EQ(o.removed_ref0[0], model.find(o.removed[0])->ref0);
            model.erase(o.removed[0]);
          } else {
            ASSERT_TRUE(o.removed.empty());
          }
          model.items.push_back({*key, p, 0, model.clock, model.clock, static_cast<uint32_t>(next_ref)});
          ++model.clock;
          next_ref += 2;
          issued.push_back(*key);
          break;
        }
        case 2: {  // sample a small batch
          uint32_t n = 1 + rng() % 3;
          SampleBatch b;
          Status s = t.sample(n, &b);
          if (model.items.empty()) {
            ASSERT_EQ(s.code(), Errc::rate_limited);
            break;
          }
          ASSERT_TRUE(s.ok()) << s.to_string();
          ASSERT_GE(b.items.size(), 1u);
          size_t removed_seen = 0;
          for (const SampledItem& si : b.items) {
            ASSERT_FALSE(model.items.empty()) << "sampled from an empty table at step " << step;
            ASSERT_TRUE(contains(model.candidates(mc.sampler), si.key)) << "sampler picked the wrong item at step " << step;
            ASSERT_NEAR(si.probability, model.probability(mc.sampler, si.key), 1e-9);
            ASSERT_EQ(si.table_size, model.items.size());
            TableModel::Item* it = model.find(si.key);
            ASSERT_EQ(si.priority, it->priority);
            ASSERT_EQ(b.refs[si.first_ref].block, it->ref0);
            ASSERT_EQ(si.times_sampled, ++it->times_sampled);
            if (mc.max_times && it->times_sampled >= mc.max_times) {
              ASSERT_LT(removed_seen, o.removed.size());
              ASSERT_EQ(o.removed[removed_seen++], si.key);
              model.erase(si.key);
            }
          }
          ASSERT_EQ(removed_seen, o.removed.size());
          if (!model.items.empty()) {
            ASSERT_EQ(b.items.size(), n) << "a short batch only when the table ran dry";
          }
          break;
        }
        case 3:
        case 4: {  // update a random issued key, live or stale
          if (issued.empty()) break;
          uint64_t key = issued[rng() % issued.size()];
          double p = static_cast<double>(rng() % 5);
          Status s = t.update(key, p);
          if (TableModel::Item* it = model.find(key)) {
            ASSERT_TRUE(s.ok()) << s.to_string();
            it->priority = p;
            it->touched = model.clock++;
          } else {
            ASSERT_EQ(s.code(), Errc::stale_key);
          }
          break;
        }
        case 5: {  // delete a random issued key, live or stale
          if (issued.empty()) break;
          uint64_t key = issued[rng() % issued.size()];
          Status s = t.remove(key);
          if (model.find(key)) {
            ASSERT_TRUE(s.ok());
            ASSERT_EQ(o.removed, std::vector<uint64_t>{key});
            model.erase(key);
          } else {
            ASSERT_EQ(s.code(), Errc::stale_key);
            ASSERT_TRUE(o.removed.empty());
          }
          break;
        }
      }
      ASSERT_EQ(t.size(), model.items.size()) << "step " << step;
      double hi = 0, lo = 0;
      for (size_t i = 0; i < model.items.size(); ++i) {
        hi = i ? std::max(hi, model.items[i].priority) : model.items[i].priority;
        lo = i ? std::min(lo, model.items[i].priority) : model.items[i].priority;
      }
      ASSERT_EQ(t.info().max_priority, hi) << "step " << step;
      ASSERT_EQ(t.info().min_priority, lo) << "step " << step;
      const auto& c = t.limiter().counters();
      ASSERT_EQ(c.inserts - c.deletes, static_cast<int64_t>(model.items.size()));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Kinds, TableModelTest,
    ::testing::Values(ModelCase{{SelectorKind::uniform, 1}, {SelectorKind::fifo, 1}, 0},
                      ModelCase{{SelectorKind::prioritized, 0.6}, {SelectorKind::fifo, 1}, 0},
                      ModelCase{{SelectorKind::prioritized, 1.0}, {SelectorKind::min_heap, 1}, 3},
                      ModelCase{{SelectorKind::fifo, 1}, {SelectorKind::fifo, 1}, 1},
                      ModelCase{{SelectorKind::lifo, 1}, {SelectorKind::uniform, 1}, 2},
                      ModelCase{{SelectorKind::max_heap, 1}, {SelectorKind::lifo, 1}, 0},
                      ModelCase{{SelectorKind::min_heap, 1}, {SelectorKind::prioritized, 1}, 5}),
    [](const auto& info) {
      std::string name = selector_kind_name(info.param.sampler.kind);
      name += "_sampler_";
      name += selector_kind_name(info.param.remover.kind);
      name += "_remover_max_times_";
      name += std::to_string(info.param.max_times);
      return name;
    });

TEST(Table, NextVictimNamesWhatTheNextInsertEvicts) {
  for (SelectorKind remover : {SelectorKind::fifo, SelectorKind::lifo, SelectorKind::min_heap, SelectorKind::uniform}) {
    OwnedTable o(options({SelectorKind::uniform, 1}, {remover, 1}, 3));
    Table& t = o.table;
    const ChunkRef* refs = nullptr;
    for (uint64_t n = 1; n <= 3; ++n) {
      EXPECT_EQ(t.next_victim(&refs), 0u) << "not full: nothing is evicted";
      ChunkRef r = ref_for(n);
      ASSERT_TRUE(t.insert(double(10 - n), &r, 1).ok());
    }
    for (uint64_t n = 4; n <= 8; ++n) {
      uint32_t k = t.next_victim(&refs);
      uint32_t predicted = k ? refs[0].block : 0;
      ChunkRef r = ref_for(n);
      ASSERT_TRUE(t.insert(double(10 - n), &r, 1).ok());
      if (remover == SelectorKind::uniform) {
        EXPECT_EQ(k, 0u) << "a remover that draws at random names nothing";
      } else {
        ASSERT_EQ(k, 1u) << "remover " << int(remover);
        EXPECT_EQ(predicted, o.removed_ref0.back()) << "remover " << int(remover) << ", insert " << n;
      }
    }
  }
}

// An item's plain_steps (its one plain chunk's capacity) comes back with
// every sample, through both sampling loops; items of several chunks carry
// 0, so that samplers read their chunks' headers, and so do restored items
// unless the restore is told their chunk's capacity.
TEST(Table, PlainStepsComeBackForOneChunkItemsOnly) {
  for (uint32_t max_times : {0u, 100u}) {  // independent draws, and the loop
    TableOptions opt = options({SelectorKind::uniform, 1}, {SelectorKind::fifo, 1}, 4, max_times);
    OwnedTable o(opt);
    Table& t = o.table;
    ChunkRef one = ref_for(1), two[2] = {ref_for(2), ref_for(3)};
    auto k1 = t.insert(1.0, &one, 1, 16);
    auto k2 = t.insert(1.0, two, 2, 16);
    ASSERT_TRUE(k1.ok() && k2.ok());
    SampleBatch b;
    ASSERT_TRUE(t.sample(64, &b).ok());
    std::set<uint64_t> seen;
    for (const SampledItem& it : b.items) {
      EXPECT_EQ(it.plain_steps, it.key == *k1 ? 16u : 0u) << "item of " << it.num_refs << " chunks";
      seen.insert(it.key);
    }
    EXPECT_EQ(seen.size(), 2u);
    OwnedTable restored(opt);
    ASSERT_TRUE(restored.table.restore(t.snapshot()).ok());
    b = {};
    ASSERT_TRUE(restored.table.sample(16, &b).ok());
    for (const SampledItem& it : b.items) EXPECT_EQ(it.plain_steps, 0u) << "a restored item's chunk is not known";
    // Told by the caller, who checked the restored chunk: one-chunk items only.
    OwnedTable told(opt);
    uint32_t asked = 0;
    ASSERT_TRUE(told.table
                    .restore(t.snapshot(),
                             [&](const ChunkRef& r) {
                               ++asked;
                               EXPECT_EQ(r.block, one.block);
                               return 12u;
                             })
                    .ok());
    EXPECT_EQ(asked, 1u);
    b = {};
    ASSERT_TRUE(told.table.sample(64, &b).ok());
    seen.clear();
    for (const SampledItem& it : b.items) {
      EXPECT_EQ(it.plain_steps, it.key == *k1 ? 12u : 0u) << "restored item of " << it.num_refs << " chunks";
      seen.insert(it.key);
    }
    EXPECT_EQ(seen.size(), 2u);
  }
}

TEST(Table, StaleAndUnknownKeysChangeNothing) {
  OwnedTable o(options({SelectorKind::max_heap, 1}, {SelectorKind::fifo, 1}, 2));
  Table& t = o.table;
  ChunkRef r = ref_for(1);
  uint64_t a = *t.insert(1.0, &r, 1);
  uint64_t b = *t.insert(2.0, &r, 1);
  uint64_t c = *t.insert(3.0, &r, 1);  // evicts a (FIFO)
  EXPECT_EQ(o.removed, std::vector<uint64_t>{a});
  EXPECT_EQ(Table::key_slot(a), Table::key_slot(c)) << "c reuses a's slot";
  Status s = t.update(a, 100.0);
  EXPECT_EQ(s.code(), Errc::stale_key);
  EXPECT_NE(s.message().find("nothing was changed"), std::string::npos);
  EXPECT_EQ(t.find(c)->priority, 3.0) << "a stale update must not touch the newcomer";
  EXPECT_EQ(t.remove(a).code(), Errc::stale_key);
  EXPECT_EQ(t.size(), 2u);
  EXPECT_EQ(t.update(0, 1.0).code(), Errc::unknown_key);
  EXPECT_EQ(t.update((uint64_t{5} << 32) | 1, 1.0).code(), Errc::unknown_key) << "generation never issued";
  EXPECT_EQ(t.update((uint64_t{1} << 32) | 99, 1.0).code(), Errc::unknown_key) << "slot beyond capacity";
  EXPECT_TRUE(t.update(b, 5.0).ok());
  EXPECT_EQ(t.info().stats.stale, 2u);
}

TEST(Table, InvalidInputIsRefusedWithoutChanges) {
  OwnedTable o(options({SelectorKind::prioritized, 2.0}, {SelectorKind::fifo, 1}, 4));
  Table& t = o.table;
  ChunkRef r = ref_for(1);
  EXPECT_EQ(t.insert(std::nan(""), &r, 1).status().code(), Errc::invalid_priority);
  EXPECT_EQ(t.insert(-1.0, &r, 1).status().code(), Errc::invalid_priority);
  EXPECT_EQ(t.insert(INFINITY, &r, 1).status().code(), Errc::invalid_priority);
  EXPECT_EQ(t.insert(1e200, &r, 1).status().code(), Errc::invalid_priority);  // 1e400 overflows
  EXPECT_EQ(t.insert(1.0, &r, 0).status().code(), Errc::invalid_argument);
  EXPECT_EQ(t.insert(1.0, &r, 3).status().code(), Errc::invalid_argument);
  EXPECT_EQ(t.size(), 0u);
  uint64_t k = *t.insert(1.0, &r, 1);
  EXPECT_EQ(t.update(k, std::nan("")).code(), Errc::invalid_priority);
  EXPECT_EQ(t.find(k)->priority, 1.0);
  SampleBatch b;
  EXPECT_EQ(t.sample(0, &b).code(), Errc::invalid_argument);
  EXPECT_EQ(t.info().stats.inserts, 1u);
}

TEST(Table, OptionValidation) {
  auto base = options({SelectorKind::uniform, 1}, {SelectorKind::fifo, 1}, 10);
  auto with = [&](auto f) {
    TableOptions o = base;
    f(o);
    return Table::check(o).status();
  };
  EXPECT_TRUE(Table::check(base).ok());
  EXPECT_EQ(with([](TableOptions& o) { o.capacity = 0; }).code(), Errc::invalid_capacity);
  EXPECT_EQ(with([](TableOptions& o) { o.name = ""; }).code(), Errc::invalid_argument);
  EXPECT_EQ(with([](TableOptions& o) { o.name = std::string(100, 'x'); }).code(), Errc::invalid_argument);
  EXPECT_EQ(with([](TableOptions& o) { o.sampler = {SelectorKind::prioritized, NAN}; }).code(), Errc::invalid_exponent);
  EXPECT_EQ(with([](TableOptions& o) { o.rate_limiter.samples_per_insert = 0; }).code(), Errc::invalid_rate_limiter);
  EXPECT_EQ(with([](TableOptions& o) { o.signature.clear(); }).code(), Errc::invalid_argument);
  EXPECT_EQ(with([](TableOptions& o) { o.signature.push_back(make_column("obs", DType::u8, {1})); }).code(),
            Errc::invalid_argument);
  EXPECT_EQ(with([](TableOptions& o) { o.signature.push_back(make_column("z", DType::u8, {0})); }).code(),
            Errc::invalid_argument);
  EXPECT_EQ(with([](TableOptions& o) { o.signature.push_back(make_column(std::string(40, 'n'), DType::u8, {})); }).code(),
            Errc::invalid_argument);
  EXPECT_EQ(with([](TableOptions& o) { o.signature.push_back(make_column("d", static_cast<DType>(77), {})); }).code(),
            Errc::invalid_argument);
  Status s = with([](TableOptions& o) { o.capacity = 0; });
  EXPECT_NE(s.message().find("replay"), std::string::npos) << "message names the table: " << s.message();
  // The bounds engram.h, engramd.toml(5) and the config parser state, here
  // too: a checkpoint's tables come through this check alone. On 2a36a7f it
  // let a capacity up to 2^31 and 4096 chunks per item through.
  EXPECT_TRUE(with([](TableOptions& o) { o.capacity = 1u << 30; }).ok());
  EXPECT_EQ(with([](TableOptions& o) { o.capacity = (1u << 30) + 1; }).code(), Errc::invalid_capacity);
  EXPECT_TRUE(with([](TableOptions& o) { o.max_refs_per_item = 8; }).ok());
  EXPECT_EQ(with([](TableOptions& o) { o.max_refs_per_item = 9; }).code(), Errc::invalid_argument);
}

// A limiter that cannot do what it promises on a table of this capacity
// is refused where tables are made (check; a restore's options come
// through it too) and at run time (set_rate_limiter, which keeps the old
// one): a queue larger than the table, a min_size above it.
TEST(Table, LimitersThatCannotHoldOnTheirTableAreRefused) {
  auto base = options({SelectorKind::fifo, 1}, {SelectorKind::fifo, 1}, 10, 1);
  auto with = [&](RateLimiterConfig c) {
    TableOptions o = base;
    o.rate_limiter = c;
    return Table::check(o).status();
  };
  EXPECT_TRUE(with(RateLimiterConfig::queue(10).value()).ok()) << "a queue as large as the table holds writers";
  Status s = with(RateLimiterConfig::queue(11).value());
  EXPECT_EQ(s.code(), Errc::invalid_argument);
  EXPECT_NE(s.message().find("a queue of size 11 on a table of max_size 10"), std::string::npos) << s.message();
  EXPECT_TRUE(with(RateLimiterConfig::min_size(10).value()).ok());
  s = with(RateLimiterConfig::min_size(11).value());
  EXPECT_EQ(s.code(), Errc::invalid_argument);
  EXPECT_NE(s.message().find("min_size 11 is more than max_size 10"), std::string::npos) << s.message();
  EXPECT_EQ(with(RateLimiterConfig::sample_to_insert_ratio(2.0, 11, 4.0).value()).code(), Errc::invalid_argument);
  RateLimiterConfig endless = RateLimiterConfig::queue(10).value();
  endless.max_diff = std::numeric_limits<double>::max();  // fuzz_manifest: the message's cast was UB
  s = with(endless);
  EXPECT_NE(s.message().find("a queue of size 1.79769e+308"), std::string::npos) << s.message();
  EXPECT_TRUE(with(RateLimiterConfig::sample_to_insert_ratio(1.0, 1, 20.0).value()).ok())
      << "a replay's ratio limiter may let writers run past the table: it evicts by design";

  OwnedTable f(base);
  ASSERT_TRUE(f.table.set_rate_limiter(RateLimiterConfig::queue(10).value()).ok());
  s = f.table.set_rate_limiter(RateLimiterConfig::queue(100).value());
  EXPECT_EQ(s.code(), Errc::invalid_argument);
  EXPECT_NE(s.message().find("table 'replay': rate_limiter: a queue of size 100"), std::string::npos) << s.message();
  EXPECT_EQ(f.table.limiter().config().max_diff, 10.0) << "the old limiter stays";
  EXPECT_EQ(f.table.set_rate_limiter(RateLimiterConfig::min_size(11).value()).code(), Errc::invalid_argument);
  EXPECT_EQ(f.table.limiter().config().min_size_to_sample, 1);
}

TEST(Table, QueueDeliversEachItemOnceAndRateLimits) {
  auto o = options({SelectorKind::fifo, 1}, {SelectorKind::fifo, 1}, 10, 1);
  o.rate_limiter = RateLimiterConfig::queue(3).value();
  OwnedTable ot(o);
  Table& t = ot.table;
  ChunkRef r = ref_for(0);
  std::vector<uint64_t> keys;
  for (int i = 0; i < 3; ++i) keys.push_back(*t.insert(1.0, &r, 1));
  EXPECT_EQ(t.insert(1.0, &r, 1).status().code(), Errc::rate_limited);
  EXPECT_EQ(t.size(), 3u) << "a refused insert changes nothing";
  SampleBatch b;
  ASSERT_TRUE(t.sample(2, &b).ok());
  ASSERT_EQ(b.items.size(), 2u);
  EXPECT_EQ(b.items[0].key, keys[0]);
  EXPECT_EQ(b.items[1].key, keys[1]);
  EXPECT_EQ(t.sample(2, &b).code(), Errc::rate_limited) << "only one item waits";
  ASSERT_TRUE(t.sample(1, &b).ok());
  EXPECT_EQ(b.items[2].key, keys[2]);
  EXPECT_EQ(t.size(), 0u);
  EXPECT_EQ(t.info().stats.expirations, 3u);
  EXPECT_EQ(t.info().stats.rate_limited, 2u);
  EXPECT_EQ(t.sample(1, &b).code(), Errc::rate_limited);
}

TEST(Table, ResetEmptiesAndOldKeysStayStale) {
  OwnedTable o(options({SelectorKind::uniform, 1}, {SelectorKind::fifo, 1}, 4));
  Table& t = o.table;
  ChunkRef r = ref_for(0);
  uint64_t k = *t.insert(1.0, &r, 1);
  t.reset();
  EXPECT_EQ(o.removed, std::vector<uint64_t>{k}) << "reset reports every item so chunk references are released";
  EXPECT_EQ(t.size(), 0u);
  EXPECT_EQ(t.limiter().counters().inserts, 0);
  uint64_t k2 = *t.insert(1.0, &r, 1);
  EXPECT_NE(k, k2);
  EXPECT_EQ(t.update(k, 2.0).code(), Errc::stale_key);
}

// Delivery marks: each (producer, sequence) is applied once, in growing
// order per producer; a refused delivery changes nothing; the marks survive
// a reset and travel with the snapshot, so a restored table refuses exactly
// what it holds.
TEST(Table, DeliveriesAreAppliedOncePerProducerAndSequence) {
  OwnedTable o(options({SelectorKind::fifo, 1}, {SelectorKind::fifo, 1}, 8));
  Table& t = o.table;
  ChunkRef r = ref_for(0);
  ASSERT_TRUE(t.insert(1.0, &r, 1, 0, {7, 1}).ok());
  ASSERT_TRUE(t.insert(1.0, &r, 1, 0, {7, 5}).ok());  // gaps are allowed: refused items leave them
  ASSERT_TRUE(t.insert(1.0, &r, 1, 0, {9, 1}).ok());  // another producer counts on its own
  for (uint64_t again : {1, 4, 5}) {
    auto dup = t.insert(1.0, &r, 1, 0, {7, again});
    EXPECT_EQ(dup.status().code(), Errc::already_exists) << again;
    EXPECT_NE(dup.status().message().find("producer 7's item " + std::to_string(again) + " was applied before"),
              std::string::npos)
        << dup.status().message();
  }
  EXPECT_EQ(t.size(), 3u);
  EXPECT_EQ(t.limiter().counters().inserts, 3);
  EXPECT_EQ(t.check_delivery({7, 6}).code(), Errc::ok);
  EXPECT_EQ(t.check_delivery({7, 0}).code(), Errc::invalid_argument);
  EXPECT_TRUE(t.insert(1.0, &r, 1).ok()) << "no producer: no mark, as for every local writer";
  EXPECT_TRUE(t.insert(1.0, &r, 1).ok());

  OwnedTable copy(options({SelectorKind::fifo, 1}, {SelectorKind::fifo, 1}, 8));
  ASSERT_TRUE(copy.table.restore(t.snapshot()).ok());
  EXPECT_EQ(copy.table.insert(1.0, &r, 1, 0, {7, 5}).status().code(), Errc::already_exists);
  EXPECT_EQ(copy.table.insert(1.0, &r, 1, 0, {9, 1}).status().code(), Errc::already_exists);
  EXPECT_TRUE(copy.table.insert(1.0, &r, 1, 0, {7, 6}).ok());

  t.reset();
  EXPECT_EQ(t.insert(1.0, &r, 1, 0, {7, 5}).status().code(), Errc::already_exists) << "a reset keeps the marks";

  TableState bad = t.snapshot();
  bad.marks = {{3, 1}, {3, 2}};
  OwnedTable refused(options({SelectorKind::fifo, 1}, {SelectorKind::fifo, 1}, 8));
  EXPECT_EQ(refused.table.restore(bad).code(), Errc::corrupt);
}

// The extremes follow the items through a restore, a refused restore and
// a reset (the random model above covers inserts, updates and removals).
TEST(Table, PriorityExtremesSurviveARestoreAndGoWithAReset) {
  auto opt = options({SelectorKind::prioritized, 0.6}, {SelectorKind::fifo, 1}, 8);
  OwnedTable o(opt);
  Table& t = o.table;
  EXPECT_EQ(t.info().max_priority, 0.0);
  EXPECT_EQ(t.info().min_priority, 0.0);
  ChunkRef r = ref_for(0);
  for (double p : {3.0, 0.5, 7.0}) ASSERT_TRUE(t.insert(p, &r, 1).ok());
  OwnedTable copy(opt);
  ASSERT_TRUE(copy.table.restore(t.snapshot()).ok());
  EXPECT_EQ(copy.table.info().max_priority, 7.0);
  EXPECT_EQ(copy.table.info().min_priority, 0.5);
  TableState bad = t.snapshot();
  bad.items.back().priority = -1;
  OwnedTable refused(opt);
  EXPECT_EQ(refused.table.restore(bad).code(), Errc::corrupt);
  EXPECT_EQ(refused.table.info().max_priority, 0.0) << "a refused restore leaves the table empty";
  t.reset();
  EXPECT_EQ(t.info().max_priority, 0.0);
  EXPECT_EQ(t.info().min_priority, 0.0);
  ASSERT_TRUE(t.insert(2.0, &r, 1).ok());
  EXPECT_EQ(t.info().max_priority, 2.0);
  EXPECT_EQ(t.info().min_priority, 2.0);
}

TEST(Table, ANewProducerPastTheBoundIsRefused) {
  OwnedTable o(options({SelectorKind::fifo, 1}, {SelectorKind::fifo, 1}, 4));
  Table& t = o.table;
  ChunkRef r = ref_for(0);
  for (uint64_t p = 1; p <= kMaxProducers; ++p) ASSERT_TRUE(t.insert(1.0, &r, 1, 0, {p, 1}).ok()) << p;
  auto past = t.insert(1.0, &r, 1, 0, {kMaxProducers + 1, 1});
  EXPECT_EQ(past.status().code(), Errc::limit);
  EXPECT_NE(past.status().message().find("the most it remembers"), std::string::npos) << past.status().message();
  EXPECT_TRUE(t.insert(1.0, &r, 1, 0, {1, 2}).ok()) << "known producers carry on";
}

// A look at the newest items (a mirror's) against a model: the newest n
// from `from` on, oldest of them first, through evictions, samples that
// expire items and removals; and it counts for nothing.
TEST(Table, NewestLooksAtTheNewestItemsAndCountsNothing) {
  OwnedTable t(options({SelectorKind::uniform}, {SelectorKind::fifo}, 50, 3));
  std::mt19937_64 rng(11);
  std::vector<std::pair<uint64_t, uint64_t>> live;  // (inserted_seq, key), in insertion order
  const uint64_t first = t.table.snapshot().next_seq;  // first_sequence: the clock
  uint64_t seq = first;
  for (int step = 0; step < 4000; ++step) {
    int op = static_cast<int>(rng() % 10);
    if (op < 5) {
      ChunkRef r = ref_for(seq);
      auto k = t.table.insert(1.0, &r, 1);
      ASSERT_TRUE(k.ok()) << k.status().to_string();
      live.push_back({seq++, *k});
    } else if (op < 7 && t.table.size() > 0) {
      SampleBatch b;
      ASSERT_TRUE(t.table.sample(2, &b).ok());
    } else if (op < 8 && !live.empty()) {
      (void)t.table.remove(live[rng() % live.size()].second);
    }
    live.erase(std::remove_if(live.begin(), live.end(), [&](auto& e) { return t.table.find(e.second) == nullptr; }),
               live.end());
    uint32_t n = 1 + static_cast<uint32_t>(rng() % 5);
    uint64_t from = rng() % 8 == 0 ? rng() % (first + 1) : first + rng() % (seq - first + 2);
    std::vector<uint64_t> want;
    for (auto& [s, key] : live)
      if (s >= from) want.push_back(key);
    if (want.size() > n) want.erase(want.begin(), want.end() - n);
    TableInfo before = t.table.info();
    std::vector<uint32_t> times;
    for (uint64_t key : want) times.push_back(t.table.find(key)->times_sampled);
    SampleBatch got;
    ASSERT_TRUE(t.table.newest(n, from, &got).ok());
    std::vector<uint64_t> keys;
    for (const SampledItem& it : got.items) keys.push_back(it.key);
    ASSERT_EQ(keys, want) << "step " << step << " from " << from;
    TableInfo now = t.table.info();
    EXPECT_EQ(now.stats.samples, before.stats.samples);
    EXPECT_EQ(now.counters.samples, before.counters.samples);
    for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(t.table.find(want[i])->times_sampled, times[i]);
  }
  OwnedTable big(options({SelectorKind::uniform}, {SelectorKind::fifo}, kMaxLookCapacity + 1));
  SampleBatch none;
  Status refused = big.table.newest(1, 0, &none);
  EXPECT_EQ(refused.code(), Errc::invalid_argument);
  EXPECT_NE(refused.message().find("4096"), std::string::npos) << refused.message();
}

TEST(Table, RateLimiterChangesAtRunTimeAndInfoReportsIt) {
  auto o = options({SelectorKind::uniform, 1}, {SelectorKind::fifo, 1}, 100);
  o.rate_limiter = RateLimiterConfig::min_size(5).value();
  OwnedTable ot(o);
  Table& t = ot.table;
  ChunkRef r = ref_for(0);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(t.insert(1.0, &r, 1).ok());
  SampleBatch b;
  EXPECT_EQ(t.sample(1, &b).code(), Errc::rate_limited);
  EXPECT_FALSE(t.info().can_sample);
  ASSERT_TRUE(t.set_rate_limiter(RateLimiterConfig::min_size(2).value()).ok());
  EXPECT_TRUE(t.sample(1, &b).ok());
  TableInfo info = t.info();
  EXPECT_EQ(info.size, 3u);
  EXPECT_EQ(info.counters.inserts, 3);
  EXPECT_EQ(info.counters.samples, 1);
  EXPECT_EQ(info.limiter.min_size_to_sample, 2);
  RateLimiterConfig bad;
  bad.min_size_to_sample = 0;
  EXPECT_EQ(t.set_rate_limiter(bad).code(), Errc::invalid_rate_limiter);
  // The table survives a re-attach with the same contents (the daemon restarts its view).
  auto again = Table::attach(ot.buf.data(), ot.buf.size);
  ASSERT_TRUE(again.ok()) << again.status().to_string();
  EXPECT_EQ(again->size(), 3u);
  EXPECT_EQ(again->limiter().counters().samples, 1);
  EXPECT_EQ(again->limiter().config().min_size_to_sample, 2);
}

TEST(Table, AttachRefusesOtherLayoutsAndCorruptHeaders) {
  auto o = options({SelectorKind::prioritized, 1}, {SelectorKind::fifo, 1}, 10);
  OwnedTable ot(o);
  ASSERT_TRUE(Table::attach(ot.buf.data(), ot.buf.size).ok());
  auto* h = static_cast<TableHeader*>(ot.buf.data());
  h->segment.layout_hash ^= 1;
  Status s = Table::attach(ot.buf.data(), ot.buf.size).status();
  EXPECT_EQ(s.code(), Errc::layout_mismatch) << s.to_string();
  h->segment.layout_hash ^= 1;
  h->off_refs += 64;
  EXPECT_EQ(Table::attach(ot.buf.data(), ot.buf.size).status().code(), Errc::corrupt);
  h->off_refs -= 64;
  h->size = 11;
  EXPECT_EQ(Table::attach(ot.buf.data(), ot.buf.size).status().code(), Errc::corrupt);
}

// Position independence: a table (with its sum tree and heap) formatted and
// driven by a forked owner process through one mapping is read correctly
// through a second mapping of the same segment at another address.
TEST(Table, WorksFromAnotherProcessAndAnotherAddress) {
  auto o = options({SelectorKind::prioritized, 0.6}, {SelectorKind::min_heap, 1}, 100);
  const std::string name = "engram-test-table-" + std::to_string(getpid());
  ShmSegment::remove(name);
  auto seg = ShmSegment::create(name, Table::bytes_needed(test::checked(o)), 0600);
  ASSERT_TRUE(seg.ok()) << seg.status().to_string();
  pid_t pid = fork();
  if (pid == 0) {  // the owner: fill the table, sample, update
    auto t = Table::format(seg->data(), seg->size(), test::checked(o), 5);
    if (!t.ok()) _exit(2);
    for (int i = 0; i < 150; ++i) {
      ChunkRef r = ref_for(i);
      if (!t->insert(1.0 + i % 7, &r, 1).ok()) _exit(3);
    }
    SampleBatch b;
    if (!t->sample(10, &b).ok()) _exit(4);
    if (!t->update(b.items[0].key, 0.0).ok()) _exit(5);
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  auto other = ShmSegment::open(name, ShmSegment::Access::read_write);
  ASSERT_TRUE(other.ok());
  ASSERT_NE(other->data(), seg->data());
  ShmSegment::remove(name);
  auto t = Table::attach(other->data(), other->size());
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  EXPECT_EQ(t->size(), 100u);
  EXPECT_EQ(t->info().stats.evictions, 50u);
  EXPECT_EQ(t->limiter().counters().samples, 10);
  EXPECT_EQ(t->sampler().size(), 100u);
  // The min-heap remover evicts the lowest priority next; the sampler never
  // picks the zero-priority item.
  SampleBatch b;
  ASSERT_TRUE(t->sample(200, &b).ok());
  for (const auto& it : b.items) EXPECT_GT(it.priority, 0.0);
}

// A listing's piece: the items of a run of slots, stopping at max_items
// or after max_scan slots looked at, and saying where to go on from.
TEST(Table, ListGivesRunsOfSlotsAndWhereToGoOn) {
  OwnedTable o(options({SelectorKind::uniform, 1}, {SelectorKind::fifo, 1}, 10));
  Table& t = o.table;
  std::vector<uint64_t> keys;
  for (uint32_t i = 0; i < 8; ++i) {
    ChunkRef r[2] = {ref_for(i), ref_for(i + 100)};
    keys.push_back(t.insert(1.0 + i, r, i % 2 ? 2 : 1).value());
  }
  ASSERT_TRUE(t.remove(keys[3]).ok());
  std::vector<ListedItem> out;
  uint32_t next = t.list(0, 100, 100, &out);
  EXPECT_EQ(next, 10u) << "every slot looked at";
  ASSERT_EQ(out.size(), 7u);
  for (const ListedItem& l : out) {
    const ItemSlot* it = t.find(l.key);
    ASSERT_NE(it, nullptr);
    EXPECT_EQ(l.priority, it->priority);
    EXPECT_EQ(l.inserted_seq, it->inserted_seq);
    EXPECT_EQ(l.num_steps, it->num_refs) << "each slice of ref_for is one step";
  }
  out.clear();
  next = t.list(0, 2, 100, &out);  // stops at two items
  EXPECT_EQ(out.size(), 2u);
  uint32_t after_two = next;
  next = t.list(next, 100, 3, &out);  // stops after three slots looked at
  EXPECT_EQ(next, after_two + 3);
  std::vector<ListedItem> rest;
  while (next < 10) next = t.list(next, 1, 1, &rest);
  out.insert(out.end(), rest.begin(), rest.end());
  std::set<uint64_t> seen;
  for (const ListedItem& l : out) EXPECT_TRUE(seen.insert(l.key).second);
  EXPECT_EQ(seen.size(), 7u) << "the pieces together: every item once";
  EXPECT_EQ(t.list(10, 5, 5, &out), 10u) << "from the end: nothing more";
  EXPECT_EQ(t.list(99, 5, 5, &out), 10u);
}

// A view over shards takes the draws its shards made (Table::take): they
// count as samples, go at max_times_sampled, and a refused take changes
// nothing.
TEST(Table, TakeCountsTheKeysItIsGivenAndRefusesWithoutChanges) {
  OwnedTable o(options({SelectorKind::fifo, 1}, {SelectorKind::fifo, 1}, 8, /*max_times=*/1));
  Table& t = o.table;
  std::vector<uint64_t> keys;
  for (uint64_t i = 1; i <= 4; ++i) {
    ChunkRef r{static_cast<uint32_t>(i), 1, 0, static_cast<uint32_t>(i)};  // item i has i steps
    keys.push_back(*t.insert(double(i), &r, 1));
  }
  SampleBatch batch;
  const double p[2] = {0.25, 0.5};
  uint64_t twice[2] = {keys[0], keys[0]};
  EXPECT_EQ(t.take(twice, p, 2, &batch).code(), Errc::invalid_argument);
  uint64_t wrong[2] = {keys[1], keys[2]};
  EXPECT_EQ(t.take(wrong, p, 2, &batch, /*num_steps=*/2).code(), Errc::invalid_capacity) << "item 3 has 3 steps";
  uint64_t gone[2] = {keys[1], keys[0] + (uint64_t{1} << 32)};
  EXPECT_EQ(t.take(gone, p, 2, &batch).code(), Errc::unknown_key);
  EXPECT_TRUE(batch.items.empty());
  EXPECT_EQ(t.size(), 4u);
  EXPECT_EQ(t.info().stats.samples, 0u) << "a refused take counts nothing";
  EXPECT_EQ(t.find(keys[1])->times_sampled, 0u);

  uint64_t two[2] = {keys[3], keys[1]};
  ASSERT_TRUE(t.take(two, p, 2, &batch).ok());
  ASSERT_EQ(batch.items.size(), 2u);
  EXPECT_EQ(batch.items[0].key, keys[3]);
  EXPECT_EQ(batch.items[0].probability, 0.25);
  EXPECT_EQ(batch.items[1].key, keys[1]);
  EXPECT_EQ(batch.items[1].probability, 0.5);
  EXPECT_EQ(batch.items[1].times_sampled, 1u);
  EXPECT_EQ(batch.refs.size(), 2u);
  EXPECT_EQ(batch.refs[1].length, 2u);
  EXPECT_EQ(t.size(), 2u) << "both expired (max_times_sampled 1)";
  EXPECT_EQ(t.info().stats.samples, 2u);
  EXPECT_EQ(t.info().stats.expirations, 2u);
  EXPECT_EQ((std::set<uint64_t>(o.removed.begin(), o.removed.end())), (std::set<uint64_t>{keys[1], keys[3]}));
  EXPECT_EQ(t.take(two, p, 1, &batch).code(), Errc::stale_key);
}

}  // namespace
}  // namespace engram
