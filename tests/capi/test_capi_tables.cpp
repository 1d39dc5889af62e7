// Tables: their options checked, signatures matched, handles closed with a
// dropped table, and a reset table's blocks given back in order.
#include "capi/capi_fixture.hpp"

namespace engram::test {
namespace {

TEST_F(CApi, TableOptionsAreChecked) {
  std::string long_name(64, 'x');
  EXPECT_EQ(create(long_name.c_str()), ENGRAM_E_RANGE);
  EXPECT_NE(last().find("63"), std::string::npos) << last();
  EXPECT_EQ(create("zero", 0), ENGRAM_E_RANGE);
  EXPECT_EQ(create("dup"), ENGRAM_OK);
  EXPECT_EQ(create("dup"), ENGRAM_E_EXISTS);
  cols_[1].dtype = 99;
  EXPECT_EQ(create("baddtype"), ENGRAM_E_INVALID);
  EXPECT_NE(last().find("dtype"), std::string::npos) << last();
  cols_[1].dtype = ENGRAM_FLOAT32;
  engram_rate_limiter r;
  EXPECT_EQ(engram_rate_limiter_sample_to_insert_ratio(&r, 1.0, 1, 0.1), ENGRAM_E_INVALID);
  EXPECT_EQ(engram_rate_limiter_queue(&r, 0), ENGRAM_E_INVALID);
  // The config file refuses these for any sampler; so does the API now
  // (a uniform table took a NaN exponent, and engramctl printed it as nan).
  engram_table_options o;
  engram_table_options_init(&o);
  o.max_size = 10;
  o.columns = cols_;
  o.num_columns = 2;
  for (double e : {std::nan(""), -1.0, double(INFINITY)}) {
    o.name = "uniform_exponent";
    o.priority_exponent = e;
    EXPECT_EQ(engram_table_create(c_, &o), ENGRAM_E_INVALID) << e;
    EXPECT_NE(last().find("exponent"), std::string::npos) << last();
  }
  // Messages show doubles as %g: not DBL_MAX's 309 digits, nor -0.000000.
  o.priority_exponent = 1.0;
  o.rate_limiter.min_diff = 1e300;
  o.rate_limiter.max_diff = -1e300;
  EXPECT_EQ(engram_table_create(c_, &o), ENGRAM_E_INVALID);
  EXPECT_NE(last().find("min_diff (1e+300) must be <= max_diff (-1e+300)"), std::string::npos) << last();
}

TEST_F(CApi, SignatureMismatchesAreRefused) {
  ASSERT_EQ(create("replay"), ENGRAM_OK);
  engram_table* t = open("replay");
  engram_column one[1] = {cols_[0]};
  engram_writer* w = writer(one, 1);
  uint8_t obs[20] = {};
  const void* p[1] = {obs};
  ASSERT_EQ(engram_writer_append(w, p), ENGRAM_OK);
  EXPECT_EQ(engram_writer_create_item(w, t, 1, 1.0), ENGRAM_E_SIGNATURE) << "column count";
  engram_column dtype[2] = {cols_[0], cols_[1]};
  dtype[1].dtype = ENGRAM_FLOAT64;
  engram_writer* w2 = writer(dtype, 2);
  double r = 0;
  const void* p2[2] = {obs, &r};
  ASSERT_EQ(engram_writer_append(w2, p2), ENGRAM_OK);
  EXPECT_EQ(engram_writer_create_item(w2, t, 1, 1.0), ENGRAM_E_SIGNATURE) << "dtype";
  engram_column shape[2] = {cols_[0], cols_[1]};
  shape[0].shape[1] = 6;
  engram_writer* w3 = writer(shape, 2);
  uint8_t big[24] = {};
  float rf = 0;
  const void* p3[2] = {big, &rf};
  ASSERT_EQ(engram_writer_append(w3, p3), ENGRAM_OK);
  EXPECT_EQ(engram_writer_create_item(w3, t, 1, 1.0), ENGRAM_E_SIGNATURE) << "size";
  EXPECT_NE(last().find("replay"), std::string::npos);
}

TEST_F(CApi, DroppedTableClosesOpenHandles) {
  ASSERT_EQ(create("replay"), ENGRAM_OK);
  engram_table* t = open("replay");
  ASSERT_EQ(engram_table_drop(c_, "replay"), ENGRAM_OK);
  engram_sample_options so;
  engram_sample_options_init(&so);
  uint8_t obs[20];
  float r;
  void* bufs[2] = {obs, &r};
  uint32_t got;
  EXPECT_EQ(engram_sample(t, &so, bufs, nullptr, &got), ENGRAM_E_CLOSED);
  EXPECT_EQ(create("replay"), ENGRAM_OK) << "the name is free again";
}

// A table's reset frees all of its blocks at once, and the free list is a
// stack: they are listed highest first, so that the next writers take them
// in the order of memory (order_for_freeing), the order in which copies run
// fastest. Here the table's blocks went round once through evictions first.
TEST_F(CApi, AResetTablesBlocksComeBackLowestFirst) {
  ASSERT_EQ(create("replay", /*max_size=*/100), ENGRAM_OK);
  engram_table* t = open("replay");
  engram_writer* w = writer(cols_, 2);
  for (int v = 0; v < 250; ++v) {
    append(w, static_cast<uint8_t>(v));
    ASSERT_EQ(engram_writer_create_item(w, t, 1, 1.0), ENGRAM_OK) << last();
  }
  ASSERT_EQ(engram_writer_flush(w, 5000), ENGRAM_OK) << last();
  ASSERT_EQ(engram_table_reset(c_, "replay"), ENGRAM_OK) << last();

  RawClient raw(socket_, "replay");
  auto taken = raw.ctl.grant(0, 90);  // the reset's blocks are on top of the list
  ASSERT_TRUE(taken.ok()) << taken.status().message();
  ASSERT_EQ(taken->size(), 90u);
  for (size_t i = 1; i < taken->size(); ++i)
    EXPECT_LT((*taken)[i - 1].index, (*taken)[i].index) << "allocation " << i;
  EXPECT_TRUE(raw.ctl.give_back(*taken).ok());
  engram_writer_close(w);
  engram_table_close(t);
}

// Listing while a writer of another client inserts and evicts: every item
// the table held throughout is listed exactly once, none twice, none that
// was never inserted; the pages, of an odd size, come in insertion order.
TEST_F(CApi, ListingShowsEveryItemOnceWhileWritersInsertAndEvict) {
  const uint32_t capacity = 20'000;
  engram_table_options o = two_columns("replay", capacity);
  o.sampler = ENGRAM_PRIORITIZED;
  ASSERT_EQ(engram_table_create(c_, &o), ENGRAM_OK) << last();
  engram_table* t = open("replay");
  // Full: every later insert evicts the oldest.
  auto fill = [&](engram_writer* w, engram_table* into, uint32_t n, uint32_t first) {
    std::vector<uint8_t> obs(size_t{n} * 20);
    std::vector<float> reward(n);
    std::vector<double> prio(n);
    for (uint32_t i = 0; i < n; ++i) prio[i] = 1.0 + (first + i) % 97;
    const void* cols[2] = {obs.data(), reward.data()};
    return engram_writer_append_items(w, cols, n, into, 1, prio.data());
  };
  engram_writer* w = writer(cols_, 2, /*chunk_length=*/100);  // items share chunks: the arena holds them
  ASSERT_EQ(fill(w, t, capacity, 0), ENGRAM_OK) << last();
  ASSERT_EQ(engram_writer_flush(w, 10000), ENGRAM_OK) << last();
  std::vector<uint64_t> before(capacity);
  size_t got = 0;
  ASSERT_EQ(engram_writer_take_keys(w, before.data(), before.size(), &got), ENGRAM_OK);
  ASSERT_EQ(got, size_t{capacity});

  // Another client writes on while this one lists, until told to stop.
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> written{0};
  std::atomic<bool> writer_done{false};
  std::vector<uint64_t> later;
  std::thread other([&] {
    struct Done {
      std::atomic<bool>& d;
      ~Done() { d = true; }  // also when an ASSERT returns early
    } done{writer_done};
    engram_client* c2 = connect_c(socket_);
    engram_table* t2 = nullptr;
    ASSERT_EQ(engram_table_open(c2, "replay", &t2), ENGRAM_OK);
    engram_writer_options wo;
    engram_writer_options_init(&wo);
    wo.columns = cols_;
    wo.num_columns = 2;
    wo.keep_keys = 1;
    wo.chunk_length = 50;
    wo.insert_timeout_ms = 10000;
    engram_writer* w2 = nullptr;
    ASSERT_EQ(engram_writer_open(c2, &wo, &w2), ENGRAM_OK);
    // At most capacity / 2 items: the check of items held throughout needs
    // the first before[] to outlive what this writer evicts.
    for (uint32_t round = 0; !stop.load() && round < capacity / 2 / 50; ++round) {
      ASSERT_EQ(fill(w2, t2, 50, round * 50), ENGRAM_OK);
      ASSERT_EQ(engram_writer_flush(w2, 10000), ENGRAM_OK);
      std::vector<uint64_t> keys(50);
      size_t n = 0;
      ASSERT_EQ(engram_writer_take_keys(w2, keys.data(), keys.size(), &n), ENGRAM_OK);
      later.insert(later.end(), keys.begin(), keys.begin() + n);
      written += n;
    }
    engram_writer_close(w2);
    engram_table_close(t2);
    engram_disconnect(c2);
  });
  while (written.load() < 200 && !writer_done.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  // A listing takes about a millisecond; on a busy machine the writer may
  // not get a flush in meanwhile, and such a listing tests nothing: list
  // again until one overlaps the writer's inserts.
  engram_items* list = nullptr;
  uint64_t written_during = 0;
  for (int attempt = 0; attempt < 200 && written_during == 0 && !writer_done.load(); ++attempt) {
    engram_items_close(list);
    uint64_t written_before = written.load();
    ASSERT_EQ(engram_items_open(c_, "replay", ENGRAM_BY_INSERTION, &list), ENGRAM_OK) << last();
    written_during = written.load() - written_before;
  }
  stop = true;
  other.join();

  std::vector<engram_item> items;
  for (;;) {
    engram_item page[7];
    uint32_t n = 0;
    ASSERT_EQ(engram_items_next(list, page, 7, &n), ENGRAM_OK);
    if (n == 0) break;
    items.insert(items.end(), page, page + n);
  }
  EXPECT_EQ(items.size(), engram_items_count(list));
  engram_items_close(list);

  std::set<uint64_t> inserted(before.begin(), before.end());
  inserted.insert(later.begin(), later.end());
  std::set<uint64_t> listed;
  uint64_t twice = 0, invented = 0, disordered = 0, wrong_steps = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    twice += !listed.insert(items[i].key).second;
    invented += !inserted.count(items[i].key);
    disordered += i > 0 && items[i].inserted <= items[i - 1].inserted;
    wrong_steps += items[i].num_steps != 1;
  }
  EXPECT_EQ(twice, 0u);
  EXPECT_EQ(invented, 0u);
  EXPECT_EQ(disordered, 0u) << "not in insertion order";
  EXPECT_EQ(wrong_steps, 0u);
  // Held throughout: the first items not evicted by everything the other
  // writer wrote (FIFO eviction, one per insert).
  uint64_t evicted = written.load();
  ASSERT_LT(evicted, capacity);
  uint64_t missing = 0;
  for (size_t i = evicted; i < before.size(); ++i) missing += !listed.count(before[i]);
  EXPECT_EQ(missing, 0u) << "items held throughout but not listed";
  EXPECT_GT(written_during, 0u) << "the writer wrote nothing while the listing ran: nothing was tested";

  // By priority: highest first, equal priorities oldest first.
  ASSERT_EQ(engram_items_open(c_, "replay", ENGRAM_BY_PRIORITY, &list), ENGRAM_OK) << last();
  std::vector<engram_item> by(engram_items_count(list));
  uint32_t n = 0;
  ASSERT_EQ(engram_items_next(list, by.data(), static_cast<uint32_t>(by.size()), &n), ENGRAM_OK);
  ASSERT_EQ(n, by.size());
  EXPECT_EQ(by.size(), capacity);
  for (size_t i = 1; i < by.size(); ++i)
    ASSERT_TRUE(by[i].priority < by[i - 1].priority ||
                (by[i].priority == by[i - 1].priority && by[i].inserted > by[i - 1].inserted))
        << "at " << i;
  ASSERT_EQ(engram_items_next(list, by.data(), 1, &n), ENGRAM_OK);
  EXPECT_EQ(n, 0u) << "all handed out";
  engram_items_close(list);

  EXPECT_EQ(engram_items_open(c_, "replay", 2, &list), ENGRAM_E_INVALID);
  EXPECT_NE(last().find("ENGRAM_BY_PRIORITY"), std::string::npos) << last();
  EXPECT_EQ(engram_items_open(c_, "nothing", ENGRAM_BY_INSERTION, &list), ENGRAM_E_NOT_FOUND);
  EXPECT_EQ(list, nullptr);
  EXPECT_EQ(engram_items_next(nullptr, by.data(), 1, &n), ENGRAM_E_INVALID);
  EXPECT_EQ(engram_items_count(nullptr), 0u);
  engram_items_close(nullptr);
  engram_writer_close(w);
  engram_table_close(t);
}

}  // namespace
}  // namespace engram::test
