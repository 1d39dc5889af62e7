// Priorities and deletes: weights that would overflow, asynchronous updates
// in order and their refusals, bad priorities, stale and unknown keys.
#include "capi/capi_fixture.hpp"

namespace engram::test {
namespace {

// Each weight is finite, but three of 5e307 sum to infinity: the insert
// that would overflow the table's total is refused, and the probabilities
// reported for the rest stay exact.
TEST_F(CApi, PrioritiesWhoseWeightsWouldSumPastADoubleAreRefused) {
  ASSERT_EQ(create("prio", 100, ENGRAM_PRIORITIZED), ENGRAM_OK);
  engram_table* t = open("prio");
  engram_writer* w = writer(cols_, 2);
  for (int i = 0; i < 3; ++i) {
    append(w, static_cast<uint8_t>(i));
    ASSERT_EQ(engram_writer_create_item(w, t, 1, 5e307), ENGRAM_OK) << last();
  }
  EXPECT_EQ(engram_writer_flush(w, 5000), ENGRAM_E_PRIORITY) << "the inserts past the limit";
  EXPECT_NE(last().find("total weight"), std::string::npos) << last();
  engram_table_info i;
  engram_table_info_init(&i);
  ASSERT_EQ(engram_table_info_get(c_, "prio", &i), ENGRAM_OK);
  ASSERT_EQ(i.size, 1u);
  append(w, 9);
  ASSERT_EQ(engram_writer_create_item(w, t, 1, 1.0), ENGRAM_OK) << last();
  ASSERT_EQ(engram_writer_flush(w, 5000), ENGRAM_OK) << last();
  std::vector<uint64_t> keys(8);
  size_t nk = 0;
  ASSERT_EQ(engram_writer_take_keys(w, keys.data(), keys.size(), &nk), ENGRAM_OK);
  ASSERT_EQ(nk, 2u);
  double big = 5e307;
  int32_t result = 0;
  EXPECT_EQ(engram_update_priorities(t, &keys[1], &big, 1, &result), ENGRAM_E_PRIORITY) << "an update past the limit";
  uint8_t obs[64 * 20];
  float rew[64];
  void* bufs[2] = {obs, rew};
  std::vector<engram_sample_info> info;
  sample_full_batch(t, batch_options(64, 1), bufs, &info);
  int small = 0;
  for (const engram_sample_info& si : info) {
    EXPECT_GT(si.probability, 0.0);
    if (si.key == keys[1]) {
      ++small;
      EXPECT_DOUBLE_EQ(si.probability, 1.0 / (5e307 + 1.0));
    } else {
      EXPECT_DOUBLE_EQ(si.probability, 1.0);
    }
  }
  EXPECT_LE(small, 1);
  engram_writer_close(w);
  engram_table_close(t);
}

// engram_table_info reports the largest and smallest priority held,
// following inserts, updates, deletes and evictions (the table model in
// test_table.cpp checks them over random operations).
TEST_F(CApi, TableInfoReportsTheLargestAndSmallestPriorityHeld) {
  ASSERT_EQ(create("ext", 4, ENGRAM_PRIORITIZED), ENGRAM_OK);
  engram_table* t = open("ext");
  engram_writer* w = writer(cols_, 2);
  auto extremes = [this] {
    engram_table_info i;
    engram_table_info_init(&i);
    EXPECT_EQ(engram_table_info_get(c_, "ext", &i), ENGRAM_OK) << last();
    return std::pair<double, double>{i.max_priority, i.min_priority};
  };
  EXPECT_EQ(extremes(), (std::pair<double, double>{0, 0})) << "an empty table";
  std::vector<uint64_t> keys = insert_items(w, t, 3);  // priority 1 each
  EXPECT_EQ(extremes(), (std::pair<double, double>{1, 1}));
  double p[3] = {4.5, 0.25, 2};
  ASSERT_EQ(engram_update_priorities(t, keys.data(), p, 3, nullptr), ENGRAM_OK) << last();
  EXPECT_EQ(extremes(), (std::pair<double, double>{4.5, 0.25}));
  ASSERT_EQ(engram_delete_items(t, &keys[0], 1, nullptr), ENGRAM_OK) << last();
  EXPECT_EQ(extremes(), (std::pair<double, double>{2, 0.25})) << "the largest went";
  for (int i = 0; i < 3; ++i) {  // fills the table (4) and evicts the oldest, 0.25
    append(w, 9);
    ASSERT_EQ(engram_writer_create_item(w, t, 1, 3.0), ENGRAM_OK) << last();
  }
  ASSERT_EQ(engram_writer_flush(w, 5000), ENGRAM_OK) << last();
  EXPECT_EQ(extremes(), (std::pair<double, double>{3, 2})) << "the smallest was evicted";
  engram_writer_close(w);
  engram_table_close(t);
}

// engram_writer_create_item_at_max: the server gives the item the largest
// priority held when it applies the insert (1 in an empty table), so a
// later change of the maximum does not move it.
TEST_F(CApi, AnItemAtTheMaximumGetsTheLargestPriorityAtItsTime) {
  ASSERT_EQ(create("atmax", 100, ENGRAM_PRIORITIZED), ENGRAM_OK);
  engram_table* t = open("atmax");
  engram_writer* w = writer(cols_, 2);
  // The priority of the one item with weight: every draw picks it.
  auto drawn_priority = [&](uint64_t key) {
    uint8_t obs[8 * 20];
    float rew[8];
    void* bufs[2] = {obs, rew};
    std::vector<engram_sample_info> info;
    sample_full_batch(t, batch_options(8, 1), bufs, &info);
    for (const engram_sample_info& si : info) EXPECT_EQ(si.key, key);
    return info.empty() ? -1.0 : info[0].priority;
  };
  auto take_keys = [&](size_t n) {
    std::vector<uint64_t> keys(8);
    size_t got = 0;
    EXPECT_EQ(engram_writer_take_keys(w, keys.data(), keys.size(), &got), ENGRAM_OK);
    EXPECT_EQ(got, n);
    keys.resize(got);
    return keys;
  };
  append(w, 1);
  ASSERT_EQ(engram_writer_create_item_at_max(w, t, 1), ENGRAM_OK) << last();
  ASSERT_EQ(engram_writer_flush(w, 5000), ENGRAM_OK) << last();
  const uint64_t first = take_keys(1).at(0);
  EXPECT_EQ(drawn_priority(first), 1.0) << "an empty table's item at the maximum gets 1";
  append(w, 2);
  ASSERT_EQ(engram_writer_create_item(w, t, 1, 6.5), ENGRAM_OK) << last();
  append(w, 3);
  ASSERT_EQ(engram_writer_create_item(w, t, 1, 0.5), ENGRAM_OK) << last();
  append(w, 4);
  ASSERT_EQ(engram_writer_create_item_at_max(w, t, 1), ENGRAM_OK) << last();
  ASSERT_EQ(engram_writer_flush(w, 5000), ENGRAM_OK) << last();
  const std::vector<uint64_t> k = take_keys(3);
  // The others lose their weight: the item at the maximum keeps what it got.
  uint64_t others[3] = {first, k.at(0), k.at(1)};
  double zero[3] = {0, 0, 0};
  ASSERT_EQ(engram_update_priorities(t, others, zero, 3, nullptr), ENGRAM_OK) << last();
  EXPECT_EQ(drawn_priority(k.at(2)), 6.5) << "the largest when it was applied";
  engram_table_info i;
  engram_table_info_init(&i);
  ASSERT_EQ(engram_table_info_get(c_, "atmax", &i), ENGRAM_OK);
  EXPECT_EQ(i.max_priority, 6.5);
  EXPECT_EQ(engram_writer_create_item_at_max(nullptr, t, 1), ENGRAM_E_INVALID);
  EXPECT_EQ(engram_writer_create_item_at_max(w, t, 0), ENGRAM_E_RANGE) << "the checks of create_item";
  engram_writer_close(w);
  engram_table_close(t);
}

// engram_update_priorities_async returns before the owner answers; the
// owner applies a handle's requests in order, so the next sample on the
// handle sees the update. Far more calls than the response ring holds
// must neither fail nor be lost (the call waits for credit instead).
TEST_F(CApi, AsyncPriorityUpdatesApplyInOrderAndNoneIsLost) {
  ASSERT_EQ(create("prio", 100, ENGRAM_PRIORITIZED), ENGRAM_OK);
  engram_table* t = open("prio");
  engram_writer* w = writer(cols_, 2);
  std::vector<uint64_t> keys = insert_items(w, t, 2);
  ASSERT_EQ(keys.size(), 2u);

  uint64_t zero_first[2] = {keys[0], 777777};  // the second key was never issued: skipped
  double zero[2] = {0.0, 5.0};
  ASSERT_EQ(engram_update_priorities_async(t, zero_first, zero, 2), ENGRAM_OK) << last();
  uint8_t obs[64 * 20];
  float rew[64];
  void* bufs[2] = {obs, rew};
  std::vector<engram_sample_info> info;
  sample_full_batch(t, batch_options(64, 1), bufs, &info);
  for (const engram_sample_info& si : info) EXPECT_EQ(si.key, keys[1]) << "a zero-priority item was sampled";

  const int kCalls = 5000;  // the response ring holds far fewer
  for (int i = 1; i <= kCalls; ++i) {
    double p[2] = {1.0, static_cast<double>(i)};
    ASSERT_EQ(engram_update_priorities_async(t, keys.data(), p, 2), ENGRAM_OK) << "call " << i << ": " << last();
  }
  ASSERT_EQ(engram_update_priorities(t, nullptr, nullptr, 0, nullptr), ENGRAM_OK) << last();
  // Another client (its own channel, no ordering with t's) sees them all
  // applied once that call returned.
  engram_client* c2 = connect_c(socket_);
  ASSERT_NE(c2, nullptr);
  engram_table* other = nullptr;
  ASSERT_EQ(engram_table_open(c2, "prio", &other), ENGRAM_OK) << last();
  sample_full_batch(other, batch_options(64, 1), bufs, &info);
  engram_disconnect(c2);
  for (const engram_sample_info& si : info) {
    EXPECT_EQ(si.priority, si.key == keys[0] ? 1.0 : double{kCalls});
    EXPECT_DOUBLE_EQ(si.probability, si.key == keys[0] ? 1.0 / (kCalls + 1) : double{kCalls} / (kCalls + 1));
  }

  double nan[1] = {std::nan("")};
  EXPECT_EQ(engram_update_priorities_async(t, keys.data(), nan, 1), ENGRAM_E_PRIORITY);
  EXPECT_NE(last().find("nothing sent"), std::string::npos) << last();
  EXPECT_EQ(engram_update_priorities_async(nullptr, keys.data(), zero, 1), ENGRAM_E_INVALID);
  EXPECT_EQ(engram_update_priorities_async(t, nullptr, zero, 1), ENGRAM_E_INVALID);
  EXPECT_EQ(engram_update_priorities_async(t, nullptr, nullptr, 0), ENGRAM_OK);
  engram_writer_close(w);
  engram_table_close(t);
}

// engram_update_priorities(t, NULL, NULL, 0, NULL) waits for the owner's
// answer to every async update, even one queued behind an insert that a
// rate limiter holds: it returns only after the sample that frees that
// insert, and another client then sees the update applied.
TEST_F(CApi, WaitingForAsyncUpdatesWaitsBehindAHeldInsert) {
  engram_table_options o = two_columns("q", 100);
  o.sampler = ENGRAM_PRIORITIZED;
  ASSERT_EQ(engram_rate_limiter_queue(&o.rate_limiter, 1), ENGRAM_OK);
  ASSERT_EQ(engram_table_create(c_, &o), ENGRAM_OK) << last();
  engram_table* t = open("q");
  engram_writer* w = writer(cols_, 2);
  append(w, 1);
  ASSERT_EQ(engram_writer_create_item(w, t, 1, 1.0), ENGRAM_OK) << last();
  ASSERT_EQ(engram_writer_flush(w, 5000), ENGRAM_OK) << last();
  uint64_t key = 0;
  size_t nk = 0;
  ASSERT_EQ(engram_writer_take_keys(w, &key, 1, &nk), ENGRAM_OK);
  ASSERT_EQ(nk, 1u);
  append(w, 2);
  ASSERT_EQ(engram_writer_create_item(w, t, 1, 1.0), ENGRAM_OK) << last();
  EXPECT_EQ(engram_writer_flush(w, 100), ENGRAM_E_TIMEOUT) << "a queue of one holds the second insert";
  double seven = 7.0;
  ASSERT_EQ(engram_update_priorities_async(t, &key, &seven, 1), ENGRAM_OK) << last();

  engram_client* c2 = connect_c(socket_);
  ASSERT_NE(c2, nullptr);
  engram_table* other = nullptr;
  ASSERT_EQ(engram_table_open(c2, "q", &other), ENGRAM_OK) << last();
  uint8_t obs[20];
  float rew[1];
  void* bufs[2] = {obs, rew};
  engram_sample_info si{};
  const engram_sample_options one = batch_options(1, 1);
  std::atomic<bool> sampled{false};
  std::thread freer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    sampled = true;  // before the sample, which lets the insert through
    uint32_t n = 0;
    EXPECT_EQ(engram_sample(other, &one, bufs, &si, &n), ENGRAM_OK);
  });
  EXPECT_EQ(engram_update_priorities(t, nullptr, nullptr, 0, nullptr), ENGRAM_OK) << last();
  EXPECT_TRUE(sampled.load()) << "returned while the update still waited behind the held insert";
  freer.join();
  EXPECT_EQ(si.key, key) << "the first item, sampled before the update was applied";
  EXPECT_EQ(si.priority, 1.0);
  // Now two items, priorities 7 and 1: look at 64 draws.
  engram_rate_limiter free;
  ASSERT_EQ(engram_rate_limiter_min_size(&free, 1), ENGRAM_OK);
  ASSERT_EQ(engram_table_set_rate_limiter(c2, "q", &free), ENGRAM_OK) << last();
  uint8_t obs64[64 * 20];
  float rew64[64];
  void* bufs64[2] = {obs64, rew64};
  std::vector<engram_sample_info> info;
  sample_full_batch(other, batch_options(64, 1), bufs64, &info);
  int seen = 0;
  for (const engram_sample_info& i : info)
    if (i.key == key) {
      ++seen;
      EXPECT_EQ(i.priority, 7.0) << "the async update, applied once the insert went in";
    }
  EXPECT_GT(seen, 0);
  engram_disconnect(c2);
  engram_writer_close(w);
  engram_table_close(t);
}

// The owner refuses an update whose weights would sum past half the
// largest double; nobody waits for an async update's answer, so the
// refusal is reported once, by the next priority call on the handle.
TEST_F(CApi, AnAsyncUpdateTheServerRefusesIsReportedByTheNextPriorityCall) {
  ASSERT_EQ(create("prio", 100, ENGRAM_PRIORITIZED), ENGRAM_OK);
  engram_table* t = open("prio");
  engram_writer* w = writer(cols_, 2);
  std::vector<uint64_t> keys = insert_items(w, t, 3);
  ASSERT_EQ(keys.size(), 3u);
  double huge[3] = {5e307, 5e307, 5e307};

  // Reported by the call that waits for every answer.
  ASSERT_EQ(engram_update_priorities_async(t, keys.data(), huge, 3), ENGRAM_OK) << last();
  EXPECT_EQ(engram_update_priorities(t, nullptr, nullptr, 0, nullptr), ENGRAM_E_PRIORITY);
  EXPECT_NE(last().find("engram_update_priorities_async"), std::string::npos) << last();
  EXPECT_NE(last().find("total weight"), std::string::npos) << last();
  EXPECT_EQ(engram_update_priorities(t, nullptr, nullptr, 0, nullptr), ENGRAM_OK) << "reported once: " << last();

  // Reported by the next async call, once a sample has seen the answer
  // (it follows the refusal on the handle's ring); that call sends nothing.
  double ones[3] = {1.0, 1.0, 1.0};
  ASSERT_EQ(engram_update_priorities(t, keys.data(), ones, 3, nullptr), ENGRAM_OK) << last();
  ASSERT_EQ(engram_update_priorities_async(t, keys.data(), huge, 3), ENGRAM_OK) << last();
  uint8_t obs[64 * 20];
  float rew[64];
  void* bufs[2] = {obs, rew};
  std::vector<engram_sample_info> info;
  sample_full_batch(t, batch_options(1, 1), bufs, &info);
  double two[1] = {2.0};
  EXPECT_EQ(engram_update_priorities_async(t, &keys[2], two, 1), ENGRAM_E_PRIORITY);
  EXPECT_NE(last().find("engram_update_priorities_async"), std::string::npos) << last();
  ASSERT_EQ(engram_update_priorities(t, nullptr, nullptr, 0, nullptr), ENGRAM_OK) << last();
  // The refused call sent nothing: keys[2] keeps priority 1.
  ASSERT_EQ(engram_update_priorities(t, keys.data(), ones, 2, nullptr), ENGRAM_OK) << last();
  sample_full_batch(t, batch_options(64, 1), bufs, &info);
  bool seen = false;
  for (const engram_sample_info& si : info)
    if (si.key == keys[2]) {
      seen = true;
      EXPECT_EQ(si.priority, 1.0);
    }
  EXPECT_TRUE(seen);
  engram_writer_close(w);
  engram_table_close(t);
}

TEST_F(CApi, BadPrioritiesAreRefusedAndNothingIsApplied) {
  ASSERT_EQ(create("replay"), ENGRAM_OK);
  engram_table* t = open("replay");
  engram_writer* w = writer(cols_, 2);
  append(w, 1);
  for (double p : {std::nan(""), -1.0, std::numeric_limits<double>::infinity()}) {
    EXPECT_EQ(engram_writer_create_item(w, t, 1, p), ENGRAM_E_PRIORITY) << p;
    EXPECT_NE(last().find("priorit"), std::string::npos) << last();
  }
  ASSERT_EQ(engram_writer_create_item(w, t, 1, 1.0), ENGRAM_OK);
  ASSERT_EQ(engram_writer_flush(w, 5000), ENGRAM_OK) << last();
  uint64_t key = 0;
  size_t n = 0;
  ASSERT_EQ(engram_writer_take_keys(w, &key, 1, &n), ENGRAM_OK);
  ASSERT_EQ(n, 1u);
  uint64_t keys[2] = {key, key};
  double prios[2] = {5.0, std::nan("")};
  EXPECT_EQ(engram_update_priorities(t, keys, prios, 2, nullptr), ENGRAM_E_PRIORITY);
  engram_sample_options so;
  engram_sample_options_init(&so);
  uint8_t obs[20];
  float r;
  void* bufs[2] = {obs, &r};
  engram_sample_info info;
  uint32_t got = 0;
  ASSERT_EQ(engram_sample(t, &so, bufs, &info, &got), ENGRAM_OK) << last();
  EXPECT_EQ(info.priority, 1.0) << "the valid first update must not have been applied either";
}

TEST_F(CApi, StaleAndUnknownKeysAreReportedNotApplied) {
  ASSERT_EQ(create("replay", 2), ENGRAM_OK);
  engram_table* t = open("replay");
  engram_writer* w = writer(cols_, 2);
  for (uint8_t i = 0; i < 3; ++i) {
    append(w, i);
    ASSERT_EQ(engram_writer_create_item(w, t, 1, 1.0), ENGRAM_OK);
  }
  ASSERT_EQ(engram_writer_flush(w, 5000), ENGRAM_OK);
  uint64_t keys[4];
  size_t n = 0;
  ASSERT_EQ(engram_writer_take_keys(w, keys, 3, &n), ENGRAM_OK);
  ASSERT_EQ(n, 3u);
  keys[3] = 12345;  // slot 12345 of a 2-item table: never issued
  double prios[4] = {2, 2, 2, 2};
  int32_t res[4];
  ASSERT_EQ(engram_update_priorities(t, keys, prios, 4, res), ENGRAM_OK);
  EXPECT_EQ(res[0], ENGRAM_E_STALE_KEY) << "evicted by the FIFO remover";
  EXPECT_EQ(res[1], ENGRAM_OK);
  EXPECT_EQ(res[2], ENGRAM_OK);
  EXPECT_EQ(res[3], ENGRAM_E_UNKNOWN_KEY);
  ASSERT_EQ(engram_delete_items(t, keys + 1, 1, res), ENGRAM_OK);
  EXPECT_EQ(res[0], ENGRAM_OK);
  ASSERT_EQ(engram_delete_items(t, keys + 1, 1, res), ENGRAM_OK);
  EXPECT_EQ(res[0], ENGRAM_E_STALE_KEY);
  engram_table_info i;
  engram_table_info_init(&i);
  ASSERT_EQ(engram_table_info_get(c_, "replay", &i), ENGRAM_OK);
  EXPECT_EQ(i.size, 1u);
  EXPECT_EQ(i.inserts, 3u);
  EXPECT_EQ(i.deletes, 2u);
  EXPECT_EQ(i.evictions, 1u);
  EXPECT_EQ(i.updates, 2u);
  EXPECT_STREQ(i.name, "replay");
}

}  // namespace
}  // namespace engram::test
