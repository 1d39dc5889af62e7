// engram.hpp, the C++ wrapper, against a server in this process. This file
// sees only the public headers and links only libengram, as a user's
// program does.
#include <engram/engram.hpp>
#include <engram/server.hpp>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

namespace {

namespace api = engram::api;

class Wrapper : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/engram-hpp-XXXXXX";
    ASSERT_NE(::mkdtemp(dir), nullptr);
    dir_ = dir;
    socket_ = dir_ + "/s.sock";
    server_ = std::make_unique<api::Server>("[arena]\nclasses = [ { block_size = 4096, count = 256 } ]\n", socket_);
  }
  void TearDown() override {
    server_.reset();
    (void)!std::system(("rm -rf " + dir_).c_str());
  }
  static api::TableOptions replay(const std::string& name) {
    api::TableOptions t;
    t.name = name;
    t.max_size = 100;
    t.sampler = ENGRAM_PRIORITIZED;
    t.columns.add("obs", ENGRAM_FLOAT32, {4}).add("action", ENGRAM_INT32);
    return t;
  }
  std::string dir_, socket_;
  std::unique_ptr<api::Server> server_;
};

// Each failure is an Error carrying the C code and engram_last_error()'s
// message, whichever call failed.
TEST_F(Wrapper, ErrorsCarryTheCodeAndTheMessage) {
  api::Client c = api::Client::connect(socket_);
  try {
    c.open_table("nope");
    FAIL() << "opening a table that does not exist succeeded";
  } catch (const api::Error& e) {
    EXPECT_EQ(e.code(), ENGRAM_E_NOT_FOUND);
    EXPECT_NE(std::string(e.what()).find("no table named \"nope\""), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(engram_strerror(ENGRAM_E_NOT_FOUND)), std::string::npos) << e.what();
  }
  c.create_table(replay("r"));
  try {
    c.create_table(replay("r"));
    FAIL() << "a second table of one name";
  } catch (const api::Error& e) {
    EXPECT_EQ(e.code(), ENGRAM_E_EXISTS);
  }
  api::TableOptions bad = replay("bad name");
  try {
    c.create_table(bad);
    FAIL() << "a table name with a space";
  } catch (const api::Error& e) {
    EXPECT_EQ(e.code(), ENGRAM_E_INVALID) << e.what();
  }
  try {
    api::RateLimiter::sample_to_insert_ratio(-1, 1, 1);
    FAIL() << "a negative samples-per-insert";
  } catch (const api::Error& e) {
    EXPECT_EQ(e.code(), ENGRAM_E_INVALID);
  }
  try {
    api::Client::connect(dir_ + "/no.sock", 500);
    FAIL() << "connected to a socket nobody serves";
  } catch (const api::Error& e) {
    EXPECT_NE(e.code(), ENGRAM_OK);
  }
  // The wrapper's own checks: a step with the wrong number of columns.
  api::WriterOptions wo;
  wo.columns = replay("r").columns;
  api::Writer w = c.writer(wo);
  float obs[4] = {};
  try {
    w.append({obs});
    FAIL() << "a step of one column for a writer of two";
  } catch (const api::Error& e) {
    EXPECT_EQ(e.code(), ENGRAM_E_INVALID);
  }
}

// Write, sample (copied and zero-copy), update priorities by key, delete.
TEST_F(Wrapper, ARoundTripThroughEveryHandle) {
  api::Client c = api::Client::connect(socket_);
  c.create_table(replay("r"));
  api::Table t = c.open_table("r");
  api::WriterOptions wo;
  wo.columns = replay("r").columns;
  wo.keep_keys = true;
  api::Writer w = c.writer(wo);
  for (int32_t i = 0; i < 10; ++i) {
    float obs[4] = {float(i), float(i) + 0.25f, float(i) + 0.5f, float(i) + 0.75f};
    w.append({obs, &i});
    w.create_item(t, 1, 1.0 + i);
  }
  w.flush(5000);
  std::vector<uint64_t> keys = w.take_keys();
  ASSERT_EQ(keys.size(), 10u);
  EXPECT_EQ(c.info("r").size, 10u);

  std::vector<float> obs(8 * 4);
  std::vector<int32_t> action(8);
  std::vector<void*> bufs = {obs.data(), action.data()};
  std::vector<engram_sample_info> infos(8);
  uint32_t n = t.sample(api::sample_options(8, 1, 1000), bufs, infos);
  ASSERT_EQ(n, 8u);
  for (uint32_t i = 0; i < n; ++i) {
    EXPECT_EQ(obs[i * 4], float(action[i])) << "item " << i << " came back whole";
    EXPECT_EQ(obs[i * 4 + 3], float(action[i]) + 0.75f);
    EXPECT_GT(infos[i].probability, 0.0);
  }

  api::Batch b = t.sample_view(api::sample_options(4, 1, 1000));
  ASSERT_EQ(b.size(), 4u);
  for (uint32_t i = 0; i < b.size(); ++i) {
    std::vector<engram_view> v = b.views(i, 1);
    ASSERT_EQ(v.size(), 1u);
    int32_t a = *static_cast<const int32_t*>(v[0].data);
    EXPECT_EQ(b.info(i).priority, 1.0 + a);
  }

  // Only item 3 keeps any weight: every sample draws it.
  std::vector<double> prio(keys.size(), 0.0);
  prio[3] = 5.0;
  std::vector<int32_t> results(keys.size(), 99);
  t.update_priorities(keys, prio, results);
  for (int32_t r : results) EXPECT_EQ(r, ENGRAM_OK);
  n = t.sample(api::sample_options(8, 1, 1000), bufs);
  ASSERT_EQ(n, 8u);
  for (uint32_t i = 0; i < n; ++i) EXPECT_EQ(action[i], 3);

  // The same without waiting: item 5 alone; the next sample sees it.
  prio[3] = 0.0;
  prio[5] = 2.0;
  t.update_priorities_async(keys, prio);
  n = t.sample(api::sample_options(8, 1, 1000), bufs);
  ASSERT_EQ(n, 8u);
  for (uint32_t i = 0; i < n; ++i) EXPECT_EQ(action[i], 5);
  // Begun now, collected later: drawn after the update sent before it.
  prio[5] = 0.0;
  prio[6] = 1.0;
  t.update_priorities_async(keys, prio);
  t.sample_begin(api::sample_options(8, 1, 1000));
  EXPECT_THROW(t.sample_begin(api::sample_options(8, 1, 1000)), api::Error) << "one at a time";
  std::vector<engram_sample_info> few(2);
  EXPECT_THROW(t.sample_end(bufs, few), api::Error) << "fewer infos than batch_size";
  n = t.sample_end(bufs, infos);
  ASSERT_EQ(n, 8u);
  for (uint32_t i = 0; i < n; ++i) EXPECT_EQ(action[i], 6);
  EXPECT_THROW(t.sample_end(bufs), api::Error) << "nothing begun";
  std::vector<double> bad(keys.size(), -1.0);
  EXPECT_THROW(t.update_priorities_async(keys, bad), api::Error);
  std::vector<double> short_prio(1, 1.0);
  EXPECT_THROW(t.update_priorities_async(keys, short_prio), api::Error);

  std::vector<uint64_t> gone = {keys[0], keys[1]};
  t.delete_items(gone);
  EXPECT_EQ(c.info("r").size, 8u);
  std::vector<engram_item> listed = c.items("r", ENGRAM_BY_PRIORITY);
  ASSERT_EQ(listed.size(), 8u);
  EXPECT_EQ(listed[0].key, keys[6]) << "the one item of priority 1, the rest 0";
  EXPECT_EQ(listed[0].priority, 1.0);
  EXPECT_THROW(c.items("nope"), api::Error);
  std::vector<int32_t> again(2);
  t.delete_items(gone, again);
  EXPECT_EQ(again[0], ENGRAM_E_STALE_KEY);

  // Out to a file and back into a table of the same columns.
  EXPECT_EQ(t.export_to(dir_ + "/r.npz"), 8u);
  c.create_table(replay("r2"));
  api::Table t2 = c.open_table("r2");
  EXPECT_EQ(t2.import_from(dir_ + "/r.npz"), 8u);
  EXPECT_EQ(c.info("r2").size, 8u);
  EXPECT_THROW(t2.import_from(dir_ + "/none.npz"), api::Error);
}

// Handles keep their connection alive: a Table, Writer or Batch may
// outlive the Client object it came from, and be used and destroyed after.
TEST_F(Wrapper, HandlesOutliveTheirClientObject) {
  api::Table t;
  api::Writer w;
  {
    api::Client c = api::Client::connect(socket_);
    c.create_table(replay("r"));
    t = c.open_table("r");
    api::WriterOptions wo;
    wo.columns = replay("r").columns;
    w = c.writer(wo);
  }
  float obs[4] = {1, 2, 3, 4};
  int32_t a = 7;
  w.append({obs, &a});
  w.create_item(t, 1, 1.0);
  w.flush(5000);
  api::Batch b = t.sample_view(api::sample_options(1, 1, 1000));
  EXPECT_EQ(b.size(), 1u);
  t = api::Table();  // the batch still holds the connection
  EXPECT_EQ(*static_cast<const int32_t*>(b.views(0, 1)[0].data), 7);
}

}  // namespace
