// Samples: begun and collected later, one at a time per handle, batch sizes
// and waits, zero-copy views that outlive eviction, items of one and two
// slices, and interrupts of a blocked call.
#include "capi/capi_fixture.hpp"

namespace engram::test {
namespace {

// engram_sample_begin sends the request in turn with the handle's other
// calls: the batch sees the update sent before it and not the one after,
// and its records, answered while the caller makes another call on the
// handle (here a delete, whose answer comes after them), are kept for
// engram_sample_end, byte for byte.
TEST_F(CApi, ASampleBegunIsDrawnInTurnAndCollectedLater) {
  ASSERT_EQ(create("prio", 100, ENGRAM_PRIORITIZED), ENGRAM_OK);
  engram_table* t = open("prio");
  engram_writer* w = writer(cols_, 2);
  std::vector<uint64_t> keys = insert_items(w, t, 3);
  ASSERT_EQ(keys.size(), 3u);
  engram_writer_close(w);
  double zero = 0.0, one = 1.0;
  ASSERT_EQ(engram_update_priorities_async(t, &keys[0], &zero, 1), ENGRAM_OK) << last();
  engram_sample_options so = batch_options(64, 1);
  so.timeout_ms = 5000;
  ASSERT_EQ(engram_sample_begin(t, &so), ENGRAM_OK) << last();
  ASSERT_EQ(engram_update_priorities_async(t, &keys[0], &one, 1), ENGRAM_OK) << last();
  ASSERT_EQ(engram_update_priorities_async(t, &keys[1], &zero, 1), ENGRAM_OK) << last();
  uint64_t unknown = 123456789;
  int32_t result = 0;
  ASSERT_EQ(engram_delete_items(t, &unknown, 1, &result), ENGRAM_OK) << last();
  EXPECT_EQ(result, ENGRAM_E_UNKNOWN_KEY);

  uint8_t obs[64 * 20];
  float rew[64];
  void* bufs[2] = {obs, rew};
  std::vector<engram_sample_info> info(64);
  uint32_t n = 0;
  ASSERT_EQ(engram_sample_end(t, bufs, info.data(), &n), ENGRAM_OK) << last();
  ASSERT_EQ(n, 64u);
  std::set<uint64_t> seen;
  for (uint32_t i = 0; i < n; ++i) {
    seen.insert(info[i].key);
    EXPECT_NE(info[i].key, keys[0]) << "drawn before the update sent before it";
    uint8_t v = info[i].key == keys[1] ? 1 : 2;  // insert_items: step i filled with byte i
    for (int k = 0; k < 20; ++k) ASSERT_EQ(obs[i * 20 + k], v) << "item " << i;
    EXPECT_EQ(rew[i], float(v));
    EXPECT_DOUBLE_EQ(info[i].probability, 0.5);
  }
  EXPECT_EQ(seen.size(), 2u) << "both items of priority 1";

  // The next batch sees the updates sent after the first began.
  ASSERT_EQ(engram_sample_begin(t, &so), ENGRAM_OK) << last();
  ASSERT_EQ(engram_sample_end(t, bufs, info.data(), &n), ENGRAM_OK) << last();
  ASSERT_EQ(n, 64u);
  for (uint32_t i = 0; i < n; ++i) EXPECT_NE(info[i].key, keys[1]) << "an item of priority 0 was drawn";

  // Nothing stays pinned: without items, every block is free.
  ASSERT_EQ(engram_table_reset(c_, "prio"), ENGRAM_OK) << last();
  Control ctl(socket_);
  ASSERT_TRUE(ctl.ok());
  StatusReply st = ctl.status();
  EXPECT_EQ(st.blocks_free, st.blocks_total) << st.blocks_sealed << " blocks still sealed: a sample's pins stayed";
  engram_table_close(t);
}

TEST_F(CApi, OneSampleAtATimeIsBegunAndMisuseIsRefusedWithTheRule) {
  ASSERT_EQ(create("replay"), ENGRAM_OK);
  engram_table* t = open("replay");
  engram_writer* w = writer(cols_, 2);
  insert_items(w, t, 4);
  uint8_t obs[8 * 20];
  float rew[8];
  void* bufs[2] = {obs, rew};
  void* half[2] = {obs, nullptr};
  uint32_t n = 7;
  EXPECT_EQ(engram_sample_end(t, bufs, nullptr, &n), ENGRAM_E_INVALID);
  EXPECT_NE(last().find("engram_sample_begin first"), std::string::npos) << last();
  EXPECT_EQ(n, 0u);
  const engram_sample_options so = batch_options(8, 1);
  EXPECT_EQ(engram_sample_begin(nullptr, &so), ENGRAM_E_INVALID);
  EXPECT_EQ(engram_sample_begin(t, nullptr), ENGRAM_E_INVALID);
  engram_sample_options zero = so;
  zero.batch_size = 0;
  EXPECT_EQ(engram_sample_begin(t, &zero), ENGRAM_E_RANGE);

  ASSERT_EQ(engram_sample_begin(t, &so), ENGRAM_OK) << last();
  EXPECT_EQ(engram_sample_begin(t, &so), ENGRAM_E_INVALID);
  EXPECT_NE(last().find("engram_sample_end first"), std::string::npos) << last();
  EXPECT_EQ(engram_sample(t, &so, bufs, nullptr, &n), ENGRAM_E_INVALID);
  engram_batch* b = nullptr;
  EXPECT_EQ(engram_sample_view(t, &so, &b), ENGRAM_E_INVALID);
  EXPECT_EQ(b, nullptr);
  // A NULL buffer leaves the sample begun.
  EXPECT_EQ(engram_sample_end(t, half, nullptr, &n), ENGRAM_E_INVALID);
  EXPECT_NE(last().find("buffers[1]"), std::string::npos) << last();
  EXPECT_EQ(engram_sample_end(t, bufs, nullptr, nullptr), ENGRAM_E_INVALID);
  ASSERT_EQ(engram_sample_end(t, bufs, nullptr, &n), ENGRAM_OK) << last();
  EXPECT_EQ(n, 8u);
  EXPECT_EQ(engram_sample_end(t, bufs, nullptr, &n), ENGRAM_E_INVALID) << "ended";
  // Another connection's handle samples meanwhile.
  engram_client* c2 = connect_c(socket_);
  ASSERT_NE(c2, nullptr);
  engram_table* t2 = nullptr;
  ASSERT_EQ(engram_table_open(c2, "replay", &t2), ENGRAM_OK) << last();
  ASSERT_EQ(engram_sample_begin(t, &so), ENGRAM_OK) << last();
  ASSERT_EQ(engram_sample(t2, &so, bufs, nullptr, &n), ENGRAM_OK) << last();
  ASSERT_EQ(engram_sample_end(t, bufs, nullptr, &n), ENGRAM_OK) << last();
  EXPECT_EQ(n, 8u);
  engram_disconnect(c2);
  // A table closed with a sample begun and not collected.
  ASSERT_EQ(engram_sample_begin(t, &so), ENGRAM_OK) << last();
  engram_writer_close(w);
  engram_table_close(t);
}

TEST_F(CApi, BatchSizesAndWaitsAreChecked) {
  ASSERT_EQ(create("replay"), ENGRAM_OK);
  engram_table* t = open("replay");
  engram_sample_options so;
  engram_sample_options_init(&so);
  uint8_t obs[20 * 2];
  float r[2];
  void* bufs[2] = {obs, r};
  uint32_t got = 0;
  so.batch_size = 0;
  EXPECT_EQ(engram_sample(t, &so, bufs, nullptr, &got), ENGRAM_E_RANGE);
  so.batch_size = 1025;
  EXPECT_EQ(engram_sample(t, &so, bufs, nullptr, &got), ENGRAM_E_RANGE);
  EXPECT_NE(last().find("1024"), std::string::npos) << last();
  so.batch_size = 1;
  so.timeout_ms = 0;
  EXPECT_EQ(engram_sample(t, &so, bufs, nullptr, &got), ENGRAM_E_RATE_LIMITED);
  so.timeout_ms = 100;
  EXPECT_EQ(engram_sample(t, &so, bufs, nullptr, &got), ENGRAM_E_TIMEOUT);
  engram_writer* w = writer(cols_, 2);
  append(w, 9);
  ASSERT_EQ(engram_writer_create_item(w, t, 1, 1.0), ENGRAM_OK);
  ASSERT_EQ(engram_writer_flush(w, 5000), ENGRAM_OK);
  so.num_steps = 2;
  EXPECT_EQ(engram_sample(t, &so, bufs, nullptr, &got), ENGRAM_E_RANGE) << "the item has 1 step";
  so.num_steps = 1;
  ASSERT_EQ(engram_sample(t, &so, bufs, nullptr, &got), ENGRAM_OK) << last();
  EXPECT_EQ(obs[0], 9);
  EXPECT_EQ(r[0], 9.0f);
}

TEST_F(CApi, ZeroCopyViewsStayValidUntilReleasedEvenIfTheItemIsEvicted) {
  ASSERT_EQ(create("one", 1), ENGRAM_OK);
  engram_table* t = open("one");
  engram_writer* w = writer(cols_, 2);
  append(w, 7);
  ASSERT_EQ(engram_writer_create_item(w, t, 1, 1.0), ENGRAM_OK);
  ASSERT_EQ(engram_writer_flush(w, 5000), ENGRAM_OK);
  engram_sample_options so;
  engram_sample_options_init(&so);
  engram_batch* b = nullptr;
  ASSERT_EQ(engram_sample_view(t, &so, &b), ENGRAM_OK) << last();
  engram_view v;
  uint32_t nv = 0;
  ASSERT_EQ(engram_batch_views(b, 0, 0, &v, 1, &nv), ENGRAM_OK);
  const auto* bytes = static_cast<const uint8_t*>(v.data);
  // Evict the viewed item many times over, with the writer's chunks recycled.
  for (int i = 0; i < 200; ++i) {
    append(w, static_cast<uint8_t>(100 + i % 100));
    ASSERT_EQ(engram_writer_create_item(w, t, 1, 1.0), ENGRAM_OK);
  }
  ASSERT_EQ(engram_writer_flush(w, 5000), ENGRAM_OK);
  for (int k = 0; k < 20; ++k) ASSERT_EQ(bytes[k], 7) << "a pinned chunk was recycled under its view";
  engram_sample_info si;
  ASSERT_EQ(engram_batch_info(b, 0, &si), ENGRAM_OK);
  EXPECT_EQ(si.times_sampled, 1u);
  EXPECT_EQ(si.table_size, 1u);
  EXPECT_EQ(engram_batch_info(b, 1, &si), ENGRAM_E_RANGE);
  engram_batch_release(b);
}

// Items of one chunk slice travel packed, several to a response record;
// items that span two chunks travel one to a record. A batch mixing both
// must come back whole and in order: every item's two steps consecutive,
// copied out and viewed zero-copy alike.
TEST_F(CApi, SampledItemsOfOneAndTwoSlicesComeBackWhole) {
  ASSERT_EQ(create("mix", 100), ENGRAM_OK);
  engram_table* t = open("mix");
  engram_writer* w = writer(cols_, 2, /*chunk_length=*/2, /*max_steps=*/2);
  append(w, 0);
  for (int v = 1; v <= 40; ++v) {  // an item of 2 steps ending at each step: 1 slice, 2 slices, ...
    append(w, static_cast<uint8_t>(v));
    ASSERT_EQ(engram_writer_create_item(w, t, 2, 1.0), ENGRAM_OK) << last();
  }
  ASSERT_EQ(engram_writer_flush(w, 5000), ENGRAM_OK) << last();
  engram_sample_options so = batch_options(64, 2);
  std::vector<uint8_t> obs(64 * 2 * 20);
  std::vector<float> reward(64 * 2);
  void* bufs[2] = {obs.data(), reward.data()};
  std::vector<engram_sample_info> info;
  ASSERT_NO_FATAL_FAILURE(sample_full_batch(t, so, bufs, &info));
  std::set<uint64_t> keys;
  for (uint32_t i = 0; i < 64; ++i) {
    float a = reward[2 * i], b = reward[2 * i + 1];
    EXPECT_EQ(b, a + 1) << "item " << i << ": its two steps are not consecutive";
    EXPECT_EQ(obs[i * 40], static_cast<uint8_t>(a)) << "item " << i;
    EXPECT_EQ(obs[i * 40 + 39], static_cast<uint8_t>(b)) << "item " << i;
    EXPECT_EQ(info[i].table_size, 40u);
    keys.insert(info[i].key);
  }
  EXPECT_GT(keys.size(), 20u) << "uniform draws over 40 items";
  engram_batch* batch = nullptr;
  ASSERT_EQ(engram_sample_view(t, &so, &batch), ENGRAM_OK) << last();
  ASSERT_EQ(engram_batch_size(batch), 64u);
  uint32_t one = 0, two = 0;
  for (uint32_t i = 0; i < 64; ++i) {
    engram_view v[2];
    uint32_t nv = 0;
    ASSERT_EQ(engram_batch_views(batch, i, 1, v, 2, &nv), ENGRAM_OK) << last();
    std::vector<float> steps;
    for (uint32_t k = 0; k < nv; ++k)
      for (uint32_t s = 0; s < v[k].steps; ++s) steps.push_back(static_cast<const float*>(v[k].data)[s]);
    ASSERT_EQ(steps.size(), 2u) << "item " << i;
    EXPECT_EQ(steps[1], steps[0] + 1) << "item " << i;
    (nv == 1 ? one : two)++;
  }
  EXPECT_GT(one, 0u) << "items within one chunk were sampled";
  EXPECT_GT(two, 0u) << "items across two chunks were sampled";
  engram_batch_release(batch);
}

// engram_client_interrupt: a blocked call returns ENGRAM_E_INTERRUPTED
// within about 100 ms, and what it was waiting for is not lost.
// A sample refused for a wrong num_steps takes nothing, however it was
// asked (copied out, begun and ended, zero-copy): on a queue of
// max_times_sampled 1, the items, their counts and the limiter stay, and
// the right num_steps then gets them all. Before the owner checked the
// length, the client found it after the owner had counted the batch: two
// of three items expired, and nobody got them.
TEST_F(CApi, ASampleOfTheWrongLengthTakesNothing) {
  engram_table_options o = two_columns("q", 100);
  o.max_times_sampled = 1;
  o.sampler = ENGRAM_FIFO;
  ASSERT_EQ(engram_rate_limiter_queue(&o.rate_limiter, 100), ENGRAM_OK);
  ASSERT_EQ(engram_table_create(c_, &o), ENGRAM_OK) << last();
  engram_table* t = open("q");
  engram_writer* w = writer(cols_, 2, /*chunk_length=*/2);
  for (int i = 0; i < 6; ++i) {
    append(w, static_cast<uint8_t>(i));
    if (i % 2 == 1) {
      ASSERT_EQ(engram_writer_create_item(w, t, 2, 1.0), ENGRAM_OK) << last();
    }
  }
  ASSERT_EQ(engram_writer_flush(w, 5000), ENGRAM_OK) << last();
  engram_writer_close(w);
  auto expect_untouched = [&](const char* how) {
    engram_table_info i;
    engram_table_info_init(&i);
    ASSERT_EQ(engram_table_info_get(c_, "q", &i), ENGRAM_OK) << last();
    EXPECT_EQ(i.size, 3u) << how;
    EXPECT_EQ(i.samples, 0u) << how;
    EXPECT_EQ(i.expirations, 0u) << how;
    EXPECT_EQ(i.deletes, 0u) << how;
  };
  uint8_t obs[3 * 2 * 20];
  float rew[3 * 2];
  void* bufs[2] = {obs, rew};
  uint32_t n = 9;
  engram_sample_options so = batch_options(2, 1);
  so.timeout_ms = 200;
  EXPECT_EQ(engram_sample(t, &so, bufs, nullptr, &n), ENGRAM_E_RANGE);
  EXPECT_NE(last().find("has 2 steps; the sample options ask for num_steps 1"), std::string::npos) << last();
  EXPECT_EQ(n, 0u);
  expect_untouched("after engram_sample");
  ASSERT_EQ(engram_sample_begin(t, &so), ENGRAM_OK) << last();
  EXPECT_EQ(engram_sample_end(t, bufs, nullptr, &n), ENGRAM_E_RANGE);
  expect_untouched("after engram_sample_begin and _end");
  engram_batch* b = nullptr;
  EXPECT_EQ(engram_sample_view(t, &so, &b), ENGRAM_E_RANGE);
  EXPECT_EQ(b, nullptr);
  expect_untouched("after engram_sample_view");
  // The library's own checks come before the request is sent: a buffer
  // left out, no count, a batch too large, unknown flags.
  so.num_steps = 2;
  void* one_missing[2] = {obs, nullptr};
  EXPECT_EQ(engram_sample(t, &so, one_missing, nullptr, &n), ENGRAM_E_INVALID);
  EXPECT_EQ(engram_sample(t, &so, bufs, nullptr, nullptr), ENGRAM_E_INVALID);
  so.batch_size = 1u << 30;
  EXPECT_EQ(engram_sample(t, &so, bufs, nullptr, &n), ENGRAM_E_RANGE);
  so.batch_size = 2;
  so.flags = 1u << 7;
  EXPECT_EQ(engram_sample(t, &so, bufs, nullptr, &n), ENGRAM_E_INVALID);
  so.flags = 0;
  expect_untouched("after the buffer and option checks");
  so.batch_size = 3;
  so.num_steps = 2;
  std::vector<engram_sample_info> info(3);
  ASSERT_EQ(engram_sample(t, &so, bufs, info.data(), &n), ENGRAM_OK) << last();
  ASSERT_EQ(n, 3u);
  for (uint32_t i = 0; i < n; ++i) {
    EXPECT_EQ(obs[i * 40], 2 * i) << "item " << i << " in order, whole";
    EXPECT_EQ(obs[i * 40 + 20], 2 * i + 1);
  }
  engram_table_close(t);
}

class CApiInterrupt : public CApi {
 protected:
  // A queue table "q" of `size` items and a writer for it.
  void queue(int64_t size) {
    engram_table_options o = two_columns("q", 100);
    o.sampler = ENGRAM_FIFO;
    o.max_times_sampled = 1;
    ASSERT_EQ(engram_rate_limiter_queue(&o.rate_limiter, size), ENGRAM_OK);
    ASSERT_EQ(engram_table_create(c_, &o), ENGRAM_OK) << last();
    t_ = open("q");
    w_ = writer(cols_, 2);
  }
  void put(uint8_t v) {
    append(w_, v);
    ASSERT_EQ(engram_writer_create_item(w_, t_, 1, 1.0), ENGRAM_OK) << last();
  }
  // Samples one item of t (default t_) with timeout_ms; its first byte in *v.
  int take(int32_t timeout_ms, uint8_t* v, engram_table* t = nullptr) {
    engram_sample_options so = batch_options(1, 1);
    so.timeout_ms = timeout_ms;
    uint8_t obs[20] = {};
    float r;
    void* bufs[2] = {obs, &r};
    uint32_t n = 0;
    int rc = engram_sample(t ? t : t_, &so, bufs, nullptr, &n);
    *v = obs[0];
    return rc;
  }
  // Interrupts c_ from another thread after ms.
  std::thread interrupt_after(int ms) {
    return std::thread([this, ms] {
      std::this_thread::sleep_for(std::chrono::milliseconds(ms));
      engram_client_interrupt(c_);
    });
  }
  static double since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  engram_table* t_ = nullptr;
  engram_writer* w_ = nullptr;
};

// The cancelled sample must not take the item that comes after it: before
// the gate covered samples without a timeout, the owner applied the
// abandoned request when the item came, and the item was lost.
TEST_F(CApiInterrupt, ABlockedSampleReturnsAndTakesNothing) {
  queue(10);
  std::thread k = interrupt_after(200);
  auto t0 = std::chrono::steady_clock::now();
  uint8_t v = 0;
  EXPECT_EQ(take(-1, &v), ENGRAM_E_INTERRUPTED) << last();
  double waited = since(t0);
  k.join();
  EXPECT_GE(waited, 0.19);
  EXPECT_LT(waited, 0.2 + 0.5) << "within about 100 ms of the interrupt";
  put(7);
  ASSERT_EQ(engram_writer_flush(w_, 5000), ENGRAM_OK) << last();
  EXPECT_EQ(take(5000, &v), ENGRAM_OK) << last();
  EXPECT_EQ(v, 7);
  engram_table_info i;
  engram_table_info_init(&i);
  ASSERT_EQ(engram_table_info_get(c_, "q", &i), ENGRAM_OK);
  EXPECT_EQ(i.samples, 1u) << "the interrupted sample sampled nothing";
}

// A begun sample that the rate limiter holds: engram_sample_end waits for
// it until the timeout given to engram_sample_begin, or until interrupted,
// and a cancelled one takes nothing; closing the table cancels one too,
// at once.
TEST_F(CApiInterrupt, ABegunSampleTimesOutOrIsInterruptedAndTakesNothing) {
  queue(10);
  uint8_t obs[20] = {};
  float r;
  void* bufs[2] = {obs, &r};
  uint32_t n = 9;
  engram_sample_options so = batch_options(1, 1);
  so.timeout_ms = 0;
  ASSERT_EQ(engram_sample_begin(t_, &so), ENGRAM_OK) << last();
  EXPECT_EQ(engram_sample_end(t_, bufs, nullptr, &n), ENGRAM_E_RATE_LIMITED) << last();
  EXPECT_EQ(n, 0u);

  so.timeout_ms = 200;
  auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(engram_sample_begin(t_, &so), ENGRAM_OK) << last();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(engram_sample_end(t_, bufs, nullptr, &n), ENGRAM_E_TIMEOUT) << last();
  double waited = since(t0);
  EXPECT_GE(waited, 0.19) << "the timeout counts from the begin";
  EXPECT_LT(waited, 0.2 + 0.5);

  so.timeout_ms = -1;
  ASSERT_EQ(engram_sample_begin(t_, &so), ENGRAM_OK) << last();
  std::thread k = interrupt_after(200);
  t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(engram_sample_end(t_, bufs, nullptr, &n), ENGRAM_E_INTERRUPTED) << last();
  k.join();
  EXPECT_LT(since(t0), 0.2 + 0.5);

  // Closed with a sample held: it is cancelled, and closing does not wait for it.
  engram_client* c2 = connect_c(socket_);
  ASSERT_NE(c2, nullptr);
  engram_table* t2 = nullptr;
  ASSERT_EQ(engram_table_open(c2, "q", &t2), ENGRAM_OK) << last();
  ASSERT_EQ(engram_sample_begin(t2, &so), ENGRAM_OK) << last();
  t0 = std::chrono::steady_clock::now();
  engram_table_close(t2);
  EXPECT_LT(since(t0), 0.5);
  engram_disconnect(c2);

  put(7);
  ASSERT_EQ(engram_writer_flush(w_, 5000), ENGRAM_OK) << last();
  ASSERT_EQ(engram_sample_begin(t_, &so), ENGRAM_OK) << last();
  ASSERT_EQ(engram_sample_end(t_, bufs, nullptr, &n), ENGRAM_OK) << last();
  EXPECT_EQ(n, 1u);
  EXPECT_EQ(obs[0], 7);
  engram_table_info i;
  engram_table_info_init(&i);
  ASSERT_EQ(engram_table_info_get(c_, "q", &i), ENGRAM_OK);
  EXPECT_EQ(i.samples, 1u) << "a timed-out, interrupted or cancelled sample sampled nothing";
}

TEST_F(CApiInterrupt, AnInterruptWithNoWaitEndsTheNextWaitOnly) {
  queue(10);
  engram_client_interrupt(c_);
  uint8_t v;
  EXPECT_EQ(take(-1, &v), ENGRAM_E_INTERRUPTED);
  EXPECT_EQ(take(100, &v), ENGRAM_E_TIMEOUT) << "one interrupt ends one wait";
  put(3);
  ASSERT_EQ(engram_writer_flush(w_, 5000), ENGRAM_OK);
  engram_client_interrupt(c_);
  EXPECT_EQ(take(0, &v), ENGRAM_OK) << "a sample that does not wait is answered";
  EXPECT_EQ(v, 3);
  EXPECT_EQ(take(-1, &v), ENGRAM_E_INTERRUPTED) << "and leaves the interrupt to the next wait";
}

// A writer held back by a full queue: flush returns when interrupted, the
// items already sent go in once the queue has room, and the writer works on.
TEST_F(CApiInterrupt, AWriterHeldByARateLimiterReturnsAndStaysUsable) {
  queue(2);
  for (uint8_t v = 1; v <= 4; ++v) put(v);
  std::thread k = interrupt_after(200);
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(engram_writer_flush(w_, -1), ENGRAM_E_INTERRUPTED) << last();
  EXPECT_LT(since(t0), 0.7);
  k.join();
  // Another client samples: this one's held inserts come first on its
  // channel (engram(7), Rate limiters).
  engram_client* c2 = connect_c(socket_);
  ASSERT_NE(c2, nullptr);
  engram_table* t2 = nullptr;
  ASSERT_EQ(engram_table_open(c2, "q", &t2), ENGRAM_OK) << last();
  std::vector<uint8_t> got;
  uint8_t v;
  for (int i = 0; i < 4; ++i) {
    ASSERT_EQ(take(5000, &v, t2), ENGRAM_OK) << "item " << i << ": " << last();
    got.push_back(v);
  }
  EXPECT_EQ(got, (std::vector<uint8_t>{1, 2, 3, 4})) << "nothing lost, in order";
  put(5);
  EXPECT_EQ(engram_writer_flush(w_, 5000), ENGRAM_OK) << last();
  EXPECT_EQ(take(5000, &v, t2), ENGRAM_OK);
  EXPECT_EQ(v, 5);
  engram_disconnect(c2);
}

engram_client* g_interrupt_target = nullptr;
void interrupt_from_handler(int) { engram_client_interrupt(g_interrupt_target); }

// Ctrl-C: a signal handler may call it.
TEST_F(CApiInterrupt, ASignalHandlerCanInterrupt) {
  queue(10);
  g_interrupt_target = c_;
  struct sigaction sa {}, old{};
  sa.sa_handler = interrupt_from_handler;
  ASSERT_EQ(::sigaction(SIGALRM, &sa, &old), 0);
  itimerval it{};
  it.it_value.tv_usec = 150'000;
  ASSERT_EQ(::setitimer(ITIMER_REAL, &it, nullptr), 0);
  uint8_t v;
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(take(-1, &v), ENGRAM_E_INTERRUPTED) << last();
  EXPECT_LT(since(t0), 0.7);
  ::sigaction(SIGALRM, &old, nullptr);
}

// ENGRAM_SAMPLE_NO_REPEATS through the server: no key twice in 10k batches
// (each item's data is its own), from engram_sample, sample_begin/end and
// sample_view; too few items and unknown flags refused by name; a caller
// built before the flags field is not read past its struct_size.
TEST_F(CApi, BatchesWithoutRepeatsHoldNoItemTwice) {
  ASSERT_EQ(create("replay", 100, ENGRAM_PRIORITIZED), ENGRAM_OK);
  engram_table* t = open("replay");
  engram_writer* w = writer(cols_, 2);
  for (int i = 0; i < 60; ++i) {
    append(w, static_cast<uint8_t>(i));
    // One heavy item, in every batch (its weight is past its share).
    ASSERT_EQ(engram_writer_create_item(w, t, 1, i == 7 ? 500.0 : 1.0 + i % 5), ENGRAM_OK) << last();
  }
  ASSERT_EQ(engram_writer_flush(w, 5000), ENGRAM_OK) << last();
  std::vector<uint64_t> keys(60);
  size_t got_keys = 0;
  ASSERT_EQ(engram_writer_take_keys(w, keys.data(), keys.size(), &got_keys), ENGRAM_OK);
  ASSERT_EQ(got_keys, keys.size());

  engram_sample_options so = batch_options(32, 1);
  so.flags = ENGRAM_SAMPLE_NO_REPEATS;
  std::vector<uint8_t> obs(32 * 20);
  std::vector<float> reward(32);
  void* bufs[2] = {obs.data(), reward.data()};
  std::vector<engram_sample_info> info(32);
  uint64_t repeats = 0, wrong_data = 0, heavy_missing = 0;
  auto check = [&](uint32_t n, auto data_of) {
    std::set<uint64_t> seen;
    bool heavy = false;
    for (uint32_t i = 0; i < n; ++i) {
      repeats += !seen.insert(info[i].key).second;
      size_t place = std::find(keys.begin(), keys.end(), info[i].key) - keys.begin();
      wrong_data += data_of(i) != place;
      heavy |= place == 7;
    }
    heavy_missing += !heavy;
  };
  const int batches = 10'000;
  for (int k = 0; k < batches; ++k) {
    uint32_t n = 0;
    if (k % 3 == 0) {
      ASSERT_EQ(engram_sample(t, &so, bufs, info.data(), &n), ENGRAM_OK) << last();
    } else if (k % 3 == 1) {
      ASSERT_EQ(engram_sample_begin(t, &so), ENGRAM_OK) << last();
      ASSERT_EQ(engram_sample_end(t, bufs, info.data(), &n), ENGRAM_OK) << last();
    } else {
      engram_batch* b = nullptr;
      ASSERT_EQ(engram_sample_view(t, &so, &b), ENGRAM_OK) << last();
      n = engram_batch_size(b);
      for (uint32_t i = 0; i < n; ++i) ASSERT_EQ(engram_batch_info(b, i, &info[i]), ENGRAM_OK);
      check(n, [&](uint32_t i) {
        engram_view v;
        uint32_t pieces = 0;
        EXPECT_EQ(engram_batch_views(b, i, 0, &v, 1, &pieces), ENGRAM_OK);
        return static_cast<size_t>(*static_cast<const uint8_t*>(v.data));
      });
      engram_batch_release(b);
      ASSERT_EQ(n, 32u);
      continue;
    }
    ASSERT_EQ(n, 32u);
    check(n, [&](uint32_t i) { return static_cast<size_t>(obs[i * 20]); });
  }
  EXPECT_EQ(repeats, 0u) << "keys drawn twice in one batch";
  EXPECT_EQ(wrong_data, 0u) << "items whose data is not their own";
  EXPECT_EQ(heavy_missing, 0u) << "batches without the item heavier than its share";

  uint32_t n = 0;
  so.batch_size = 61;
  info.resize(61);
  obs.resize(61 * 20);
  reward.resize(61);
  bufs[0] = obs.data();
  bufs[1] = reward.data();
  EXPECT_EQ(engram_sample(t, &so, bufs, info.data(), &n), ENGRAM_E_RANGE);
  EXPECT_NE(last().find("holds 60 items, fewer than a batch of 61 without repeats"), std::string::npos) << last();
  so.flags = 2;
  EXPECT_EQ(engram_sample(t, &so, bufs, info.data(), &n), ENGRAM_E_INVALID);
  EXPECT_NE(last().find("ENGRAM_SAMPLE_NO_REPEATS"), std::string::npos) << last();
  // An older caller's struct ends before flags: whatever follows is not read.
  so.struct_size = offsetof(engram_sample_options, flags);
  EXPECT_EQ(engram_sample(t, &so, bufs, info.data(), &n), ENGRAM_OK) << last();
  EXPECT_EQ(n, 61u);
  engram_writer_close(w);
  engram_table_close(t);
}

}  // namespace
}  // namespace engram::test
