// Rate limiters: changed at run time, shared by writers in turn, a held
// writer woken in steps, and held records answered item by item.
#include "capi/capi_fixture.hpp"

namespace engram::test {
namespace {

TEST_F(CApi, RateLimiterChangesAtRunTime) {
  ASSERT_EQ(create("replay"), ENGRAM_OK);
  engram_table* t = open("replay");
  engram_writer* w = writer(cols_, 2);
  append(w, 1);
  ASSERT_EQ(engram_writer_create_item(w, t, 1, 1.0), ENGRAM_OK);
  ASSERT_EQ(engram_writer_flush(w, 5000), ENGRAM_OK);
  engram_rate_limiter r;
  ASSERT_EQ(engram_rate_limiter_min_size(&r, 2), ENGRAM_OK);
  ASSERT_EQ(engram_table_set_rate_limiter(c_, "replay", &r), ENGRAM_OK) << last();
  engram_sample_options so;
  engram_sample_options_init(&so);
  so.timeout_ms = 0;
  uint8_t obs[20];
  float rw;
  void* bufs[2] = {obs, &rw};
  uint32_t got;
  EXPECT_EQ(engram_sample(t, &so, bufs, nullptr, &got), ENGRAM_E_RATE_LIMITED);
  r.min_diff = 5;
  r.max_diff = 1;
  EXPECT_EQ(engram_table_set_rate_limiter(c_, "replay", &r), ENGRAM_E_INVALID);
}

// Two writers held by one SampleToInsertRatio limiter both get through:
// the owner used to serve its channels in a fixed order, so the first
// writer took every insert the limiter let through, and the second starved
// (an Ape-X actor in Python did 3,200 frames beside a Rust one's 400,000).
TEST_F(CApi, WritersHeldByOneRateLimiterShareIt) {
  // Up to three runs, each on a table of its own: a writer descheduled by
  // a loaded machine is not waiting and misses turns (20% and 14% seen in
  // CI under -j2), while the starvation this guards against gave one
  // writer 0-54 of 400 every time.
  for (int attempt = 0; attempt < 3; ++attempt) {
    const std::string name = "ratio" + std::to_string(attempt);
    engram_table_options o = two_columns(name.c_str(), 100000);
    ASSERT_EQ(engram_rate_limiter_sample_to_insert_ratio(&o.rate_limiter, 8, 100, 800), ENGRAM_OK);
    ASSERT_EQ(engram_table_create(c_, &o), ENGRAM_OK) << last();
    std::atomic<bool> stop{false};
    std::atomic<int> ready{0};     // writers connected, with a writer open
    std::vector<uint64_t> keys[2];  // of each writer's applied items
    auto write = [&](int k) {
      engram_client* c = connect_c(socket_);
      engram_table* t = nullptr;
      engram_writer* w = nullptr;
      engram_writer_options wo;
      engram_writer_options_init(&wo);
      wo.columns = cols_;
      wo.num_columns = 2;
      wo.insert_timeout_ms = 200;  // so that the writers end when the test does
      wo.keep_keys = 1;
      if (!c || engram_table_open(c, name.c_str(), &t) || engram_writer_open(c, &wo, &w)) {
        ADD_FAILURE() << "writer " << k << ": " << last();
        ready.fetch_add(1);
        return;
      }
      ready.fetch_add(1);
      uint8_t obs[20] = {};
      float r = static_cast<float>(k);
      const void* step[2] = {obs, &r};
      while (!stop.load()) {
        if (engram_writer_append(w, step) == ENGRAM_OK) (void)engram_writer_create_item(w, t, 1, 1.0);
      }
      (void)engram_writer_flush(w, 1000);
      uint64_t got[256];
      size_t n = 0;
      while (engram_writer_take_keys(w, got, 256, &n) == ENGRAM_OK && n > 0) keys[k].insert(keys[k].end(), got, got + n);
      engram_disconnect(c);
    };
    std::thread a(write, 0), b(write, 1);
    engram_table* t = open(name.c_str());
    // Sampling before both writers are set up would give the first the
    // limiter's every turn (under load, writer 0 once connected after the
    // last sample: 0 of 400).
    while (ready.load() < 2) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    engram_sample_options so = batch_options(16, 1);
    so.timeout_ms = 5000;
    uint8_t obs[16][20];
    float r[16];
    void* bufs[2] = {obs, r};
    int sampled = ENGRAM_OK;
    for (int i = 0; i < 400 && sampled == ENGRAM_OK; ++i) {
      uint32_t n = 0;
      sampled = engram_sample(t, &so, bufs, nullptr, &n);
      if (sampled != ENGRAM_OK) ADD_FAILURE() << "sample " << i << ": " << last();
    }
    stop.store(true);  // the writers end before any assertion can return
    a.join();
    b.join();
    ASSERT_EQ(sampled, ENGRAM_OK);
    // Keys are slots in the order of insertion here (nothing left the
    // table). The first few hundred inserts, which the limiter lets through
    // before the samples catch up (min_size and error buffer), go to
    // whoever is fastest; the last 400 were held by the limiter, and the
    // writers take turns in the order they began waiting (they alternate
    // exactly on an idle machine; under load a writer that is descheduled
    // is not waiting, and misses turns: 35% seen). Before, the channel the owner served first took
    // what the limiter let through (one writer got 56 of 6,400 sampled items
    // in a CI run, and 0-54 of the last 400 inserts here).
    std::vector<std::pair<uint64_t, int>> all;
    for (int k = 0; k < 2; ++k)
      for (uint64_t key : keys[k]) all.push_back({key & 0xffffffffu, k});
    std::sort(all.begin(), all.end());
    ASSERT_GT(all.size(), 800u) << "the limiter let too few inserts through to judge";
    int64_t by[2] = {0, 0};
    for (size_t i = all.size() - 400; i < all.size(); ++i) ++by[all[i].second];
    int64_t total = by[0] + by[1];
    std::printf("the last 400 inserts: writer 0 %lld, writer 1 %lld\n", static_cast<long long>(by[0]),
                static_cast<long long>(by[1]));
    if ((by[0] > total / 4 && by[1] > total / 4) || attempt == 2) {
      EXPECT_GT(by[0], total / 4) << "writer 0 inserted " << by[0] << " of " << total;
      EXPECT_GT(by[1], total / 4) << "writer 1 inserted " << by[1] << " of " << total;
      break;
    }
  }
}

// A writer that outruns its sampler fills its request ring and sleeps
// until the rate limiter lets inserts through. Woken at every limiter turn
// (here an insert per item sampled, eight at a time 0.2 ms apart), it
// would sleep and wake once per turn; the owner wakes it once half its
// ring was freed, or when less than a thirty-second of it is queued,
// instead (TableOwner::wake_client). This writer's records carry six items each
// (insert_items) and its response credit, a slot per item, runs out with
// about 170 records queued, so it was woken after about 40 of them were
// applied, once fewer than an eighth (128) were queued; now after about
// 140. Counted by the kernel: the writer thread's voluntary context
// switches, each a sleep. And nothing is lost: every item goes in, in
// order.
TEST_F(CApi, AWriterHeldByTheRateLimiterIsWokenInStepsNotAtEveryTurn) {
  // Up to three runs, each on a table of its own, judged on the last: a
  // machine loaded by other tests adds sleeps (a wait whose spin runs out
  // while the owner is not scheduled: 23 in one CI run under -j2 and a
  // build), never takes them away, while waking at every turn or once
  // fewer than an eighth of the ring is queued sleeps that often every time.
  for (int attempt = 0; attempt < 3; ++attempt) {
    const std::string name = "held" + std::to_string(attempt);
    engram_table_options o = two_columns(name.c_str(), 100000);
    o.sampler = ENGRAM_FIFO;
    o.max_times_sampled = 1;
    ASSERT_EQ(engram_rate_limiter_queue(&o.rate_limiter, 16), ENGRAM_OK);
    ASSERT_EQ(engram_table_create(c_, &o), ENGRAM_OK) << last();
    // Past a ring (the server's default client.ring_records, 1024) and the queue.
    const int kItems = 8192 + 16, kTurns = kItems - 1024 - 16;
    std::atomic<bool> written{false};
    long sleeps = -1;
    std::vector<uint64_t> keys;
    std::thread writer_thread([&] {
      engram_client* c = connect_c(socket_);
      engram_table* t = nullptr;
      engram_writer_options wo;
      engram_writer_options_init(&wo);
      wo.columns = cols_;
      wo.num_columns = 2;
      wo.chunk_length = 16;  // as an Ape-X actor's: a block per 16 items
      wo.keep_keys = 1;
      engram_writer* w = nullptr;
      if (!c || engram_table_open(c, name.c_str(), &t) != ENGRAM_OK || engram_writer_open(c, &wo, &w) != ENGRAM_OK) {
        ADD_FAILURE() << last();
        written = true;
        return;
      }
      rusage before{}, after{};
      getrusage(RUSAGE_THREAD, &before);
      for (int i = 0; i < kItems; ++i) {
        uint8_t obs[20];
        std::memset(obs, i & 0xff, sizeof obs);
        float r = static_cast<float>(i);
        const void* step[2] = {obs, &r};
        if (engram_writer_append(w, step) != ENGRAM_OK || engram_writer_create_item(w, t, 1, 1.0) != ENGRAM_OK) {
          ADD_FAILURE() << "item " << i << ": " << last();
          break;
        }
      }
      getrusage(RUSAGE_THREAD, &after);
      sleeps = after.ru_nvcsw - before.ru_nvcsw;
      written = true;
      EXPECT_EQ(engram_writer_flush(w, 10000), ENGRAM_OK) << last();
      keys.resize(kItems);
      size_t n = 0;
      EXPECT_EQ(engram_writer_take_keys(w, keys.data(), keys.size(), &n), ENGRAM_OK);
      keys.resize(n);
      engram_writer_close(w);
      engram_table_close(t);
      engram_disconnect(c);
    });
    engram_table* t = open(name.c_str());
    // Samples of eight, 0.2 ms apart, like a learner's updates: long enough
    // that the writer, in its wait, sleeps rather than spins, and often
    // enough that its waits' slices (a wake-up every 0.1 s to see that the
    // server lives) are a few of its sleeps.
    constexpr uint32_t kPerTurn = 8;
    engram_sample_options eight = batch_options(kPerTurn, 1);
    eight.timeout_ms = 5000;
    uint8_t obs[kPerTurn * 20];
    float r[kPerTurn];
    void* bufs[2] = {obs, r};
    std::vector<float> order;  // the rewards sampled: the items in insertion order
    int turns = 0;             // items let through, one per sampled item
    while (!written.load()) {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
      uint32_t n = 0;
      ASSERT_EQ(engram_sample(t, &eight, bufs, nullptr, &n), ENGRAM_OK) << last();
      order.insert(order.end(), r, r + n);
      turns += static_cast<int>(n);
    }
    engram_rate_limiter free;  // the rest goes in unheld, for the flush
    ASSERT_EQ(engram_rate_limiter_min_size(&free, 1), ENGRAM_OK);
    ASSERT_EQ(engram_table_set_rate_limiter(c_, name.c_str(), &free), ENGRAM_OK) << last();
    writer_thread.join();
    EXPECT_EQ(keys.size(), static_cast<size_t>(kItems)) << "every item acked with its key";
    for (size_t i = 0; i < order.size(); ++i) ASSERT_EQ(order[i], static_cast<float>(i)) << "FIFO out, in order in";
    EXPECT_GE(turns, kTurns) << "the writer was held for at least this many turns";
    std::printf("%d limiter turns while the writer wrote; it slept %ld times\n", turns, sleeps);
    // 9 sleeps in 8056 turns here; 14-15 in 7192-7672 with the owner waking
    // it once fewer than an eighth of its ring was queued.
    // The bound is the release build's: under ASan on two cores the owner
    // and the sampler run several times slower than the writer's waits are
    // tuned for, and the writer's other sleeps (its blocks, the allocator's
    // locks) reached 17 in one run. There the test checks order and keys.
    engram_table_close(t);
#ifndef ENGRAM_SANITIZED
    if (sleeps >= turns / 600 && attempt < 2) continue;
    EXPECT_LT(sleeps, turns / 600) << "woken at most about once per 600 turns, not once per turn or once fewer than "
                                      "an eighth of its ring is queued";
#endif
    break;
  }
}

// A client whose insert the rate limiter holds is not woken at every turn
// of the limiter (TableOwner::wake_client), but it must be before its
// queue runs dry: its acks bring the blocks it writes its next chunks in,
// and a writer that sleeps until its last request is applied has left the
// line, so another writer takes every turn until it is back (one of two
// writers got 43 of 400 turns under load). Here a raw client's 24 inserts
// meet a Queue(4): four go in and the rest wait, fewer than the
// thirty-second of a ring (32) below which the owner rings at every turn.
// The client says it sleeps on its response bell; the owner must ring it.
TEST_F(CApi, AHeldClientWithFewRequestsQueuedHearsItsAcks) {
  ASSERT_EQ(create_queue("held", 4), ENGRAM_OK) << last();
  RawClient raw(socket_, "held");
  std::vector<BlockRef> blocks = raw.grant_blocks(24);
  ASSERT_EQ(blocks.size(), 24u);
  Doorbell& answers = raw.chan.responses.data_bell();
  answers.sleepers.store(1);  // as a client asleep on it would have registered
  for (BlockRef b : blocks) {
    RequestRecord ins = one_step_insert(b, 1);
    ins.deadline_ns = -1;  // waits for the limiter, however long
    ASSERT_TRUE(raw.chan.requests.try_push(&ins, /*ring_bell=*/false).ok());
  }
  raw.bell->ring();
  uint32_t acked = 0;
  while (acked < 4) {
    ResponseRecord rsp{};
    ASSERT_TRUE(raw.chan.responses.pop(&rsp, 5'000'000'000).ok()) << "acks of the four the queue takes";
    ASSERT_EQ(rsp.status, 0) << rsp.payload.message;
    acked += rsp.count;
  }
  EXPECT_EQ(acked, 4u);
  // The owner rings after it pushed the batch's acks: give it a moment.
  int64_t until = monotonic_ns() + 2'000'000'000;
  while (answers.sleepers.load() != 0 && monotonic_ns() < until) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(answers.sleepers.load(), 0u) << "a held client with 19 requests queued was left asleep";
}

// An insert_items record answers as one insert per item, item i as request
// id + i: a bad item fails alone, a record the rate limiter holds part-way
// applies each item once (the held copy keeps only the rest), and items
// that may not wait are refused one by one.
TEST_F(CApi, AnInsertItemsRecordAnswersItemByItemAndIsHeldPartWay) {
  ASSERT_EQ(create_queue("held", 4), ENGRAM_OK) << last();
  RawClient raw(socket_, "held");
  std::vector<BlockRef> blocks = raw.grant_blocks(8);
  ASSERT_EQ(blocks.size(), 8u);
  // Items over step 0 of blocks[first...], one step per chunk.
  auto items = [&](uint64_t id, uint32_t first, uint32_t n, int64_t deadline) {
    return items_insert(
        id, n, deadline, 1, [&](uint32_t i) { return blocks[(first + i) % blocks.size()]; },
        [](uint32_t) { return 0u; }, /*priority_step=*/1.0);
  };
  auto answers = [&](uint32_t n) { return raw.insert_answers(n, 5'000'000'000); };
  auto push = [&](const RequestRecord& r) {
    ASSERT_TRUE(raw.chan.requests.try_push(&r).ok());
    raw.bell->ring();
  };

  // Three items, the second over a block that does not exist.
  RequestRecord bad = items(10, 0, 3, -1);
  bad.payload.items.items[1].ref.block = 1u << 30;
  push(bad);
  auto a = answers(3);
  ASSERT_EQ(a.size(), 3u);
  EXPECT_EQ(a[0], std::make_pair(uint64_t{10}, 0));
  EXPECT_EQ(a[1], std::make_pair(uint64_t{11}, static_cast<int>(Errc::stale_reference)));
  EXPECT_EQ(a[2], std::make_pair(uint64_t{12}, 0));
  engram_table_info info;
  engram_table_info_init(&info);
  ASSERT_EQ(engram_table_info_get(c_, "held", &info), ENGRAM_OK) << last();
  EXPECT_EQ(info.size, 2u);

  // Six items into a queue with room for two: two now, the rest one per
  // sample, in order, none twice.
  push(items(20, 2, 6, -1));
  a = answers(2);
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[0].first, 20u);
  EXPECT_EQ(a[1].first, 21u);
  engram_table* t = open("held");
  engram_sample_options one = batch_options(1, 1);
  one.timeout_ms = 5000;
  for (uint64_t next = 22; next < 26; ++next) {
    engram_batch* b = nullptr;
    ASSERT_EQ(engram_sample_view(t, &one, &b), ENGRAM_OK) << last();
    engram_batch_release(b);
    a = answers(1);
    ASSERT_EQ(a.size(), 1u);
    EXPECT_EQ(a[0], std::make_pair(next, 0)) << "the held record's next item, once";
  }
  ASSERT_EQ(engram_table_info_get(c_, "held", &info), ENGRAM_OK) << last();
  EXPECT_EQ(info.size, 8u) << "no item of the held record applied twice";
  EXPECT_EQ(info.inserts, 8u);

  // The queue is full: items that may not wait are each refused.
  push(items(30, 0, 3, 0));
  a = answers(3);
  ASSERT_EQ(a.size(), 3u);
  for (uint32_t i = 0; i < 3; ++i)
    EXPECT_EQ(a[i], std::make_pair(uint64_t{30} + i, static_cast<int>(Errc::rate_limited)));

  // A record of no items, or of more than a record holds: one error answer.
  for (uint32_t n : {0u, kRecordItems + 1}) {
    RequestRecord r = items(40, 0, 1, 0);
    r.count = n;
    ResponseRecord rsp = raw.roundtrip(r);
    EXPECT_EQ(static_cast<Errc>(rsp.status), Errc::invalid_argument) << rsp.payload.message;
    EXPECT_EQ(rsp.id, 40u);
  }
  engram_table_close(t);
}

// Two writers held by one rate limiter take turns item by item. When a
// sample lets many inserts through at once, each round of the owner
// applies one item of each held insert_items record and defers the next
// (not its turn); that is progress, and the owner must go on rather than
// sleep until a bell or its 100 ms bound. Here 64 items wait their turn
// in two channels: 32 such rounds, which took over 3 s when the owner
// slept between them.
TEST_F(CApi, TwoWritersTakingTurnsAtTheLimiterAreServedWithoutSleeping) {
  ASSERT_EQ(create_queue("held", 64), ENGRAM_OK) << last();
  RawClient a(socket_, "held"), b(socket_, "held");
  std::vector<BlockRef> blocks_a = a.grant_blocks(8), blocks_b = b.grant_blocks(4);
  ASSERT_EQ(blocks_a.size(), 8u);
  ASSERT_EQ(blocks_b.size(), 4u);
  // Records of six one-step items over 16-step chunks, item j of a
  // client's at step j % 16 of its block j / 16.
  auto push = [](RawClient& raw, const std::vector<BlockRef>& blocks, uint32_t first, uint32_t records, uint64_t id) {
    for (uint32_t k = 0; k < records; ++k, id += kRecordItems) {
      uint32_t j = first + k * kRecordItems;
      RequestRecord r = items_insert(
          id, kRecordItems, -1, 16, [&](uint32_t i) { return blocks[(j + i) / 16]; },
          [&](uint32_t i) { return (j + i) % 16; });
      ASSERT_TRUE(raw.chan.requests.try_push(&r).ok());
      raw.bell->ring();
    }
  };
  // Counts the inserts answered on raw's channel until `want`, for at most
  // `wait_ns`; each must have gone in.
  auto acked = [](RawClient& raw, uint32_t want, int64_t wait_ns) {
    auto answers = raw.insert_answers(want, wait_ns);
    for (const auto& a : answers) EXPECT_EQ(a.second, 0) << "request " << a.first;
    return static_cast<uint32_t>(answers.size());
  };
  push(a, blocks_a, 0, 11, 1);  // 66 items: the queue takes 64, 2 wait
  ASSERT_EQ(acked(a, 64, 5'000'000'000), 64u);
  push(a, blocks_a, 66, 5, 1001);  // 30 more wait in a's channel
  push(b, blocks_b, 0, 6, 1);      // 36 in b's, behind a's in the line
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  engram_table* t = open("held");
  engram_sample_options all = batch_options(64, 1);
  all.timeout_ms = 5000;
  engram_batch* batch = nullptr;
  int64_t start = monotonic_ns();
  ASSERT_EQ(engram_sample_view(t, &all, &batch), ENGRAM_OK) << last();
  engram_batch_release(batch);
  // 64 places freed: a's 32 waiting and 32 of b's, taking turns.
  uint32_t got_a = acked(a, 32, 10'000'000'000), got_b = acked(b, 32, 10'000'000'000);
  double seconds = static_cast<double>(monotonic_ns() - start) * 1e-9;
  EXPECT_EQ(got_a, 32u);
  EXPECT_EQ(got_b, 32u);
  EXPECT_LT(seconds, 1.5) << "the owner slept between the writers' turns";
  engram_table_close(t);
}

}  // namespace
}  // namespace engram::test
