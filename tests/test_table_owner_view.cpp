// A view over shards as its owner serves it (server/table_owner_view.cpp):
// shard links' reports and draws on channels of their own, samples by the
// shards' masses, held while draws are short, updates routed back, a shard
// away. The owner runs without its thread; each test pushes records and
// polls it, as tests/fuzz/fuzz_ring_record.cpp does.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <memory>
#include <vector>

#include "core/channel.hpp"
#include "core/chunk_arena.hpp"
#include "core/chunk_format.hpp"
#include "server/log.hpp"
#include "server/table_owner.hpp"
#include "test_util.hpp"

namespace engram::test {
namespace {

constexpr uint32_t kOwnerId = 9, kLearner = 1, kShard0 = 2, kShard1 = 3;

struct Link {
  uint32_t client;
  AlignedBuffer mem{Channel::bytes_needed(64)};
  Channel chan = *Channel::format(mem.data(), mem.size, 0, 64);
  BlockRef block{};
  uint64_t next_id = 1;
};

struct ViewHarness {
  explicit ViewHarness(bool view = true) {
    set_log_level(LogLevel::off);
    to.name = "view";
    to.capacity = 64;
    to.sampler = {SelectorKind::fifo, 1};
    to.remover = {SelectorKind::fifo, 1};
    to.max_times_sampled = 1;
    to.signature = {make_column("obs", DType::u8, {8})};
    table_mem = std::make_unique<AlignedBuffer>(Table::bytes_needed(checked(to)));
    table = *Table::format(table_mem->data(), table_mem->size, checked(to));
    owner = std::make_unique<TableOwner>(local.arena, kOwnerId, table, nullptr, 64);
    if (view) owner->make_view(2, 1024, 7);
    for (Link* l : {&learner, &shard0, &shard1}) {
      owner->attach(l->client, l->chan);
      l->block = *local.arena.alloc(l->client, 0);
    }
  }
  ~ViewHarness() {
    for (Link* l : {&learner, &shard0, &shard1}) owner->detach(l->client, ChannelClosed::protocol_error);
  }

  void push(Link& l, RequestRecord r) {
    ASSERT_TRUE(l.chan.requests.try_push(&r).ok());
    owner->poll_once();
  }
  std::vector<ResponseRecord> responses(Link& l) {
    std::vector<ResponseRecord> out;
    ResponseRecord r;
    while (l.chan.responses.try_pop(&r).ok()) out.push_back(r);
    return out;
  }
  // A shard request: report (present, mass, size), wait (a deadline ahead)
  // or not (0).
  void report(Link& l, uint32_t shard, uint32_t state, double mass, uint64_t size, int64_t deadline = 0,
              uint32_t wait_below = 0) {
    RequestRecord r{};
    r.op = static_cast<uint32_t>(RequestOp::shard);
    r.id = l.next_id++;
    r.count = kRecordUpdates;
    r.deadline_ns = deadline;
    r.payload.shard = {shard, state, mass, size, wait_below, 0};
    push(l, r);
  }
  // A draw of remote key `remote` with probability p, over step `step` of
  // the link's chunk (2 steps).
  void draw(Link& l, uint64_t remote, double p, uint32_t flags = kInsertDraw) {
    RequestRecord r{};
    r.op = static_cast<uint32_t>(RequestOp::insert);
    r.id = l.next_id++;
    r.count = 1;
    r.flags = flags;
    r.deadline_ns = 0;
    r.payload.insert.priority = 1.0;
    r.payload.insert.chunk_steps = 2;
    r.payload.insert.producer = remote;
    std::memcpy(&r.payload.insert.sequence, &p, sizeof p);
    r.payload.insert.refs[0] = {l.block.index, l.block.generation, 0, 1};
    push(l, r);
  }
  void sample(uint32_t n, int64_t deadline, uint32_t num_steps = 0, uint32_t flags = 0) {
    RequestRecord r{};
    r.op = static_cast<uint32_t>(RequestOp::sample);
    r.id = learner.next_id++;
    r.count = n;
    r.flags = flags;
    r.deadline_ns = deadline;
    r.payload.sample.num_steps = num_steps;
    push(learner, r);
  }
  // The items of the sample answers in rs, and its error (Ok if none).
  static Status items(const std::vector<ResponseRecord>& rs, std::vector<PackedItemWire>* out) {
    for (const ResponseRecord& r : rs) {
      if (r.status != 0) return response_status(r);
      if (r.op == static_cast<uint32_t>(RequestOp::sample_packed))
        for (uint32_t i = 0; i < r.payload.packed.n; ++i) out->push_back(r.payload.packed.items[i]);
      else if (r.op == static_cast<uint32_t>(RequestOp::sample) && r.count > 0)
        out->push_back({r.payload.item.key, r.payload.item.priority, {r.payload.item.probability},
                        r.payload.item.times_sampled, r.payload.item.table_size, r.payload.item.refs[0]});
    }
    return Status::Ok();
  }
  void update(const std::vector<KeyPriority>& kp) {
    RequestRecord r{};
    r.op = static_cast<uint32_t>(RequestOp::update);
    r.id = learner.next_id++;
    r.count = static_cast<uint32_t>(kp.size());
    for (size_t i = 0; i < kp.size(); ++i) r.payload.updates[i] = kp[i];
    push(learner, r);
  }

  ArenaConfig ac{{{4096, 8}}};
  LocalArena local{ac};
  TableOptions to;
  std::unique_ptr<AlignedBuffer> table_mem;
  Table table;
  std::unique_ptr<TableOwner> owner;
  Link learner{kLearner}, shard0{kShard0}, shard1{kShard1};
};

int64_t soon() { return monotonic_ns() + 10'000'000'000; }

TEST(TableOwnerView, WhatIsNoDrawOrNotAViewIsRefused) {
  ViewHarness v;
  v.draw(v.shard0, 5, 0.5, /*flags=*/0);
  auto rs = v.responses(v.shard0);
  ASSERT_EQ(rs.size(), 1u);
  EXPECT_EQ(rs[0].status, static_cast<int16_t>(Errc::invalid_argument));
  EXPECT_NE(response_status(rs[0]).message().find("is a view over 2 shards"), std::string::npos);
  v.draw(v.shard0, 5, 0.5);
  rs = v.responses(v.shard0);
  ASSERT_EQ(rs.size(), 1u);
  EXPECT_NE(response_status(rs[0]).message().find("has not reported its shard"), std::string::npos);
  v.report(v.shard0, 2, kShardPresent, 1.0, 1);
  EXPECT_NE(response_status(v.responses(v.shard0).at(0)).message().find("shard 2 of a view over 2"),
            std::string::npos);
  v.report(v.shard0, 0, kShardPresent, -1.0, 1);
  EXPECT_EQ(v.responses(v.shard0).at(0).status, static_cast<int16_t>(Errc::invalid_argument)) << "a negative mass";
  v.report(v.shard0, 0, kShardPresent, 2.0, 2);
  EXPECT_EQ(v.responses(v.shard0).at(0).status, 0);
  v.report(v.shard0, 1, kShardPresent, 2.0, 2);
  EXPECT_NE(response_status(v.responses(v.shard0).at(0)).message().find("one channel per shard"), std::string::npos);
  v.draw(v.shard0, 5, 1.5);
  EXPECT_NE(response_status(v.responses(v.shard0).at(0)).message().find("outside [0, 1]"), std::string::npos);
  EXPECT_EQ(v.table.size(), 0u) << "nothing refused went in";
  v.sample(1, 0, 0, kSampleDistinct);
  EXPECT_EQ(v.responses(v.learner).at(0).status, static_cast<int16_t>(Errc::invalid_argument));

  ViewHarness t(/*view=*/false);
  t.report(t.shard0, 0, kShardPresent, 2.0, 2);
  EXPECT_NE(response_status(t.responses(t.shard0).at(0)).message().find("is not a view"), std::string::npos);
  t.draw(t.shard0, 5, 0.5);
  EXPECT_NE(response_status(t.responses(t.shard0).at(0)).message().find("is not a view"), std::string::npos);
}

TEST(TableOwnerView, ABatchWaitsForItsDrawsThenSamplesAsOneTable) {
  ViewHarness v;
  // Shard 0 holds mass 3 in 2 items, shard 1 mass 1 in 1: the one table's
  // size is 3, and an item of weight w has probability w / 4.
  v.report(v.shard0, 0, kShardPresent, 3.0, 2);
  v.report(v.shard1, 1, kShardPresent, 1.0, 1);
  v.responses(v.shard0);
  v.responses(v.shard1);
  v.sample(6, soon());
  EXPECT_TRUE(v.responses(v.learner).empty()) << "held for its shards' draws";
  // The links ask what is owed: the held batch lacks draws of its shards.
  v.report(v.shard0, 0, kShardPresent, 3.0, 2);
  v.report(v.shard1, 1, kShardPresent, 1.0, 1);
  auto r0 = v.responses(v.shard0), r1 = v.responses(v.shard1);
  ASSERT_EQ(r0.size() + r1.size(), 2u);
  uint32_t lack0 = r0.at(0).payload.shard.short_of, lack1 = r1.at(0).payload.shard.short_of;
  EXPECT_EQ(lack0 + lack1, 6u);
  // Shard 0's draws: remote keys 100.., probability 2/3 (weight 2);
  // shard 1's: 200.., probability 1 (weight 1).
  for (uint32_t k = 0; k < lack0; ++k) v.draw(v.shard0, 100 + k, 2.0 / 3);
  for (uint32_t k = 0; k + 1 < lack1; ++k) v.draw(v.shard1, 200 + k, 1.0);
  if (lack1 > 0) {
    EXPECT_TRUE(v.responses(v.learner).empty()) << "one of shard 1's draws is still missing";
    v.draw(v.shard1, 200 + lack1 - 1, 1.0);
  }
  for (const ResponseRecord& a : v.responses(v.shard0)) EXPECT_EQ(a.status, 0) << "draws acked";
  v.responses(v.shard1);
  std::vector<PackedItemWire> got;
  ASSERT_TRUE(ViewHarness::items(v.responses(v.learner), &got).ok());
  ASSERT_EQ(got.size(), 6u);
  std::map<uint64_t, double> probability;
  for (const PackedItemWire& it : got) {
    EXPECT_EQ(it.table_size, 3u) << "the one table's size";
    probability[it.key] = it.probability;
  }
  EXPECT_EQ(probability.size(), 6u) << "each draw is handed out once";
  int of0 = 0;
  for (auto& [key, p] : probability) {
    if (p == 0.5) ++of0;
    else EXPECT_DOUBLE_EQ(p, 0.25);
  }
  EXPECT_EQ(of0, static_cast<int>(lack0));
  EXPECT_EQ(v.table.size(), 0u) << "a draw handed out leaves the view's table";
  EXPECT_EQ(v.owner->shard_counters()[0].taken, lack0);

  // Their updates go back to their shards, in order, as shard keys.
  std::vector<KeyPriority> up;
  for (const PackedItemWire& it : got) up.push_back({it.key, 7.0 + up.size()});
  up.push_back({got[0].key + 12345, 1.0});  // never handed out
  v.update(up);
  auto ur = v.responses(v.learner);
  ASSERT_EQ(ur.size(), 1u);
  EXPECT_EQ(ur[0].payload.keys.applied, 6u);
  EXPECT_EQ(ur[0].payload.keys.stale_mask, 1u << 6);
  v.report(v.shard0, 0, kShardPresent, 3.0, 2, soon(), 0);
  auto owed = v.responses(v.shard0);
  ASSERT_EQ(owed.size(), 1u) << "updates are owed: answered at once";
  ASSERT_EQ(owed[0].count, lack0);
  for (uint32_t k = 0; k < lack0; ++k) {
    EXPECT_GE(owed[0].payload.shard.updates[k].key, 100u);
    EXPECT_LT(owed[0].payload.shard.updates[k].key, 100u + lack0);
    if (k > 0) {
      EXPECT_GT(owed[0].payload.shard.updates[k].priority, owed[0].payload.shard.updates[k - 1].priority);
    }
  }
  v.report(v.shard0, 0, kShardPresent, 3.0, 2, soon(), 0);
  EXPECT_TRUE(v.responses(v.shard0).empty()) << "nothing owed now: the link's poll waits";
}

TEST(TableOwnerView, ARefusedBatchLeavesItsDrawsAndAShardAwayIsLeftOut) {
  ViewHarness v;
  v.report(v.shard0, 0, kShardPresent, 2.0, 2);
  v.report(v.shard1, 1, kShardPresent, 2.0, 2);
  for (uint64_t k = 0; k < 8; ++k) {
    v.draw(v.shard0, 100 + k, 0.5);
    v.draw(v.shard1, 200 + k, 0.5);
  }
  v.responses(v.shard0);
  v.responses(v.shard1);
  ASSERT_EQ(v.table.size(), 16u);
  v.sample(4, soon(), /*num_steps=*/2);  // the draws have 1 step
  std::vector<PackedItemWire> got;
  EXPECT_EQ(ViewHarness::items(v.responses(v.learner), &got).code(), Errc::invalid_capacity);
  EXPECT_EQ(v.table.size(), 16u) << "a refused sample takes no draw";
  EXPECT_EQ(v.owner->shard_counters()[0].waiting + v.owner->shard_counters()[1].waiting, 16u);

  // Shard 1 goes away: its draws go, and batches come from shard 0 alone.
  v.report(v.shard1, 1, kShardAway, 0, 0);
  v.responses(v.shard1);
  EXPECT_EQ(v.table.size(), 8u);
  EXPECT_FALSE(v.owner->shard_counters()[1].present);
  v.sample(8, soon(), 1);
  got.clear();
  ASSERT_TRUE(ViewHarness::items(v.responses(v.learner), &got).ok());
  ASSERT_EQ(got.size(), 8u);
  for (const PackedItemWire& it : got) {
    EXPECT_DOUBLE_EQ(it.probability, 0.5) << "over shard 0's mass alone";
    EXPECT_EQ(it.table_size, 2u);
  }
  // With no shard holding an item, a sample waits, or says so at once.
  v.report(v.shard0, 0, kShardAway, 0, 0);
  v.sample(1, 0);
  EXPECT_EQ(v.responses(v.learner).at(0).status, static_cast<int16_t>(Errc::rate_limited));
  // A draw of a shard away is refused; back, it counts again.
  v.draw(v.shard1, 300, 0.5);
  EXPECT_NE(response_status(v.responses(v.shard1).at(0)).message().find("away"), std::string::npos);
  v.report(v.shard1, 1, kShardPresent, 1.0, 1);
  v.draw(v.shard1, 300, 1.0);
  v.sample(1, soon());
  got.clear();
  ASSERT_TRUE(ViewHarness::items(v.responses(v.learner), &got).ok());
  ASSERT_EQ(got.size(), 1u);
  EXPECT_DOUBLE_EQ(got[0].probability, 1.0);
}

}  // namespace
}  // namespace engram::test
