// engramd with separate client processes (tests/capi/engram_proc.c, C API
// only): accounting of every key, byte-exact data, prioritized frequencies,
// queues, rate-limiter blocking, and a daemon that dies under its clients.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "daemon_fixture.hpp"
#include "engram/engram.h"
#include "test_util.hpp"

namespace engram::test {
namespace {

engram_table_info info(engram_client* c, const char* table) {
  engram_table_info i;
  engram_table_info_init(&i);
  EXPECT_EQ(engram_table_info_get(c, table, &i), ENGRAM_OK) << engram_last_error();
  return i;
}

pid_t writer(const Daemon& d, const std::string& table, int id, int steps, const char* mode = "one") {
  return spawn({ENGRAM_PROC_PATH, "writer", d.socket(), table, std::to_string(id), std::to_string(steps),
                d.file("keys" + std::to_string(id)), mode},
               d.file("proc.log"));
}

pid_t sampler(const Daemon& d, const std::string& table, int id, int batches, int batch, const char* mode,
              int timeout_ms = -1) {
  return spawn({ENGRAM_PROC_PATH, "sampler", d.socket(), table, std::to_string(batches), std::to_string(batch),
                d.file("sampled" + std::to_string(id)), mode, std::to_string(timeout_ms)},
               d.file("proc.log"));
}

TEST(MultiProcess, FourWritersTwoSamplersAccountForEveryKeyAndByte) {
  Daemon d(table_toml("replay", "max_size = 1000\nsampler = \"uniform\"\nremover = \"fifo\""));
  std::vector<pid_t> ws, ss;
  for (int w = 0; w < 4; ++w) ws.push_back(writer(d, "replay", w, 1000));
  ss.push_back(sampler(d, "replay", 0, 60, 64, "copy"));
  ss.push_back(sampler(d, "replay", 1, 60, 64, "view"));
  for (pid_t p : ws) ASSERT_EQ(wait_exit(p, 120000), 0) << read_file(d.file("proc.log"));
  for (pid_t p : ss) ASSERT_EQ(wait_exit(p, 120000), 0) << read_file(d.file("proc.log"));

  std::map<uint64_t, int> owner;  // key -> writer
  std::vector<std::vector<uint64_t>> keys(4);
  for (int w = 0; w < 4; ++w) {
    for (const WrittenItem& it : read_keys(d.file("keys" + std::to_string(w)))) {
      ASSERT_TRUE(owner.emplace(it.key, w).second) << "key " << it.key << " issued twice";
      keys[w].push_back(it.key);
    }
    ASSERT_EQ(keys[w].size(), 480u);  // 24 items in each of 20 episodes
  }
  for (int s = 0; s < 2; ++s) {
    auto sampled = read_sampled(d.file("sampled" + std::to_string(s)));
    ASSERT_EQ(sampled.size(), 60u * 64);
    for (uint64_t k : sampled) ASSERT_TRUE(owner.count(k)) << "sampled key " << k << " was never written";
  }

  // Every key is present or was evicted, and FIFO eviction leaves each
  // writer's newest items: a suffix of its own (ordered) key list.
  engram_client* c = connect_c(d.socket());
  engram_table* t = nullptr;
  ASSERT_EQ(engram_table_open(c, "replay", &t), ENGRAM_OK);
  engram_table_info before = info(c, "replay");
  EXPECT_EQ(before.inserts, 1920u);
  EXPECT_EQ(before.size, 1000u);
  EXPECT_EQ(before.evictions, 920u);
  EXPECT_EQ(before.samples, 2u * 60 * 64);
  size_t present = 0;
  for (int w = 0; w < 4; ++w) {
    std::vector<double> prio(keys[w].size(), 2.0);
    std::vector<int32_t> res(keys[w].size());
    ASSERT_EQ(engram_update_priorities(t, keys[w].data(), prio.data(), keys[w].size(), res.data()), ENGRAM_OK);
    size_t first_present = std::find(res.begin(), res.end(), ENGRAM_OK) - res.begin();
    for (size_t i = 0; i < res.size(); ++i) {
      ASSERT_EQ(res[i], i < first_present ? ENGRAM_E_STALE_KEY : ENGRAM_OK)
          << "writer " << w << " item " << i << ": evictions are not FIFO";
    }
    present += res.size() - first_present;
  }
  EXPECT_EQ(present, 1000u);
  engram_table_close(t);
  engram_disconnect(c);

  Control ctl(d.socket());
  StatusReply st = ctl.status();
  EXPECT_EQ(st.blocks_reserved, 0u) << "a client left reserved blocks behind";
  NameRequest n{};
  std::strcpy(n.name, "replay");
  ASSERT_TRUE(ctl.call(ControlType::reset_table, &n, sizeof n, nullptr).ok());
  st = ctl.status();
  EXPECT_EQ(st.blocks_free, st.blocks_total) << "after reset every block is free again: no reference leaked";
}

// Table t of 100 items of one float32[8] column "x", and a writer of it.
constexpr const char* kXTable =
    "[[table]]\nname = \"t\"\nmax_size = 100\n[[table.column]]\nname = \"x\"\ndtype = \"float32\"\nshape = [8]\n";

engram_writer* open_x_writer(engram_client* c, int32_t insert_timeout_ms) {
  engram_column col = {"x", ENGRAM_FLOAT32, 1, {8}};
  engram_writer_options wo;
  engram_writer_options_init(&wo);
  wo.columns = &col;
  wo.num_columns = 1;
  wo.insert_timeout_ms = insert_timeout_ms;
  engram_writer* w = nullptr;
  return engram_writer_open(c, &wo, &w) == ENGRAM_OK ? w : nullptr;
}

// Appends n steps of x and makes each an item of t; x[0] numbers them.
void insert_x(engram_writer* w, engram_table* t, int n) {
  float x[8] = {};
  const void* cols[1] = {x};
  for (int i = 0; i < n; ++i) {
    x[0] = float(i);
    ASSERT_EQ(engram_writer_append(w, cols), ENGRAM_OK) << "item " << i << ": " << engram_last_error();
    ASSERT_EQ(engram_writer_create_item(w, t, 1, 1.0), ENGRAM_OK) << "item " << i << ": " << engram_last_error();
  }
}

// A full table's inserts take their blocks from the acks (InsertAck): the
// evicted item's block goes straight to the writer for its next chunk. None
// is lost on the way: 30 tables' worth of inserts pass through an arena of
// 4; after the last ack the client still holds a spare, and it comes back
// when the client's last writer closes.
TEST(MultiProcess, EvictedBlocksGoStraightToTheWriterAndComeBackWhenItCloses) {
  Daemon d("[client]\nring_records = 64\n[arena]\nclasses = [ { block_size = 512, count = 400 } ]\n" +
           std::string(kXTable));
  engram_client* c = connect_c(d.socket());
  ASSERT_NE(c, nullptr);
  engram_table* t = nullptr;
  ASSERT_EQ(engram_table_open(c, "t", &t), ENGRAM_OK) << engram_last_error();
  // A block leaked per insert would run the arena dry: ENGRAM_E_TIMEOUT.
  engram_writer* w = open_x_writer(c, 2000);
  ASSERT_NE(w, nullptr) << engram_last_error();
  ASSERT_NO_FATAL_FAILURE(insert_x(w, t, 3000));
  ASSERT_EQ(engram_writer_flush(w, 10000), ENGRAM_OK) << engram_last_error();
  EXPECT_EQ(info(c, "t").inserts, 3000u);

  Control ctl(d.socket());
  StatusReply st = ctl.status();
  EXPECT_EQ(st.blocks_sealed, 100u) << "one chunk per item in the table";
  EXPECT_GE(st.blocks_reserved, 1u) << "the last ack's spare block is the client's";
  EXPECT_LE(st.blocks_reserved, 400u / 16 + 1) << "spares are bounded by a 16th of the class (and one chunk may be open)";
  engram_writer_close(w);
  st = ctl.status();
  EXPECT_EQ(st.blocks_reserved, 0u) << "with its last writer closed, the client gave its spares back";
  EXPECT_EQ(st.blocks_free + st.blocks_sealed, st.blocks_total);
  engram_disconnect(c);
  st = ctl.status();
  EXPECT_EQ(st.blocks_reserved, 0u);
  EXPECT_EQ(st.blocks_free + st.blocks_sealed, st.blocks_total);
}

// Acks come in bursts when an owner falls behind, and inserts into a full
// table bring spare blocks. A client keeps up to a 16th of the class (here
// 4096 / 16 = 256), not a fixed 16: spares that do not fit go back to the
// server, and the writer soon asks for them again, a round trip each way.
// The burst is made certain here: a rate limiter holds 100 inserts back
// (the writer runs on its spares meanwhile), then lets them all through
// while the writer only waits for their acks (takes no block). Each evicts
// an item of the first 200, whose chunk nothing else holds.
TEST(MultiProcess, AWriterKeepsTheSparesOfABurstOfAcks) {
  Daemon d("[arena]\nclasses = [ { block_size = 512, count = 4096 } ]\n" + std::string(kXTable));
  engram_client* c = connect_c(d.socket());
  ASSERT_NE(c, nullptr);
  engram_table* t = nullptr;
  ASSERT_EQ(engram_table_open(c, "t", &t), ENGRAM_OK) << engram_last_error();
  engram_writer* w = open_x_writer(c, 60000);  // held back by the limiter meanwhile, not refused
  ASSERT_NE(w, nullptr) << engram_last_error();
  ASSERT_NO_FATAL_FAILURE(insert_x(w, t, 200));  // the table is full: from now on every insert evicts
  ASSERT_EQ(engram_writer_flush(w, 10000), ENGRAM_OK) << engram_last_error();

  engram_rate_limiter hold, open;
  ASSERT_EQ(engram_rate_limiter_sample_to_insert_ratio(&hold, 1.0, 1, 2.0), ENGRAM_OK);  // 200 inserts, no sample: held
  ASSERT_EQ(engram_rate_limiter_min_size(&open, 1), ENGRAM_OK);
  ASSERT_EQ(engram_table_set_rate_limiter(c, "t", &hold), ENGRAM_OK) << engram_last_error();
  ASSERT_NO_FATAL_FAILURE(insert_x(w, t, 100));
  EXPECT_EQ(info(c, "t").inserts, 200u) << "the limiter holds the 100 back";
  ASSERT_EQ(engram_table_set_rate_limiter(c, "t", &open), ENGRAM_OK) << engram_last_error();
  ASSERT_EQ(engram_writer_flush(w, 10000), ENGRAM_OK) << engram_last_error();
  EXPECT_EQ(info(c, "t").inserts, 300u);

  Control ctl(d.socket());
  StatusReply st = ctl.status();
  EXPECT_GE(st.blocks_reserved, 100u) << "the burst's spares, up to the limit, are the client's";
  EXPECT_LE(st.blocks_reserved, 4096u / 16 + 1) << "spares are bounded by a 16th of the class (and one chunk may be open)";
  engram_writer_close(w);
  EXPECT_EQ(ctl.status().blocks_reserved, 0u) << "with its last writer closed, the client gave its spares back";
  engram_disconnect(c);
}

TEST(MultiProcess, PrioritizedSamplingAcrossProcessesMatchesPriorities) {
  Daemon d(table_toml("prio", "max_size = 10000\nsampler = \"prioritized\"\npriority_exponent = 1.0"));
  std::vector<pid_t> ws;
  for (int w = 0; w < 2; ++w) ws.push_back(writer(d, "prio", w, 500, "cycle"));
  for (pid_t p : ws) ASSERT_EQ(wait_exit(p, 60000), 0) << read_file(d.file("proc.log"));
  std::map<uint64_t, double> prio;
  std::map<double, int> items_with;
  for (int w = 0; w < 2; ++w)
    for (const WrittenItem& it : read_keys(d.file("keys" + std::to_string(w)))) {
      prio[it.key] = it.priority;
      ++items_with[it.priority];
    }
  pid_t s = sampler(d, "prio", 0, 200, 256, "copy");
  ASSERT_EQ(wait_exit(s, 60000), 0) << read_file(d.file("proc.log"));
  std::map<double, double> seen;
  auto sampled = read_sampled(d.file("sampled0"));
  ASSERT_EQ(sampled.size(), 200u * 256);
  for (uint64_t k : sampled) seen[prio.at(k)] += 1;
  EXPECT_EQ(seen[0.0], 0) << "items of priority 0 must never be sampled";
  double total_weight = 0;
  for (auto [p, n] : items_with) total_weight += p * n;
  double chi2 = 0;
  for (double p : {1.0, 2.0, 3.0}) {
    double expect = sampled.size() * p * items_with[p] / total_weight;
    chi2 += (seen[p] - expect) * (seen[p] - expect) / expect;
  }
  EXPECT_GT(chi_square_p(chi2, 2), 0.001) << "chi2 " << chi2;
}

TEST(MultiProcess, QueueDeliversEveryItemExactlyOnceAcrossTwoConsumers) {
  Daemon d(table_toml("queue", "max_size = 100\nsampler = \"fifo\"\nremover = \"fifo\"\nmax_times_sampled = 1\n"
                               "rate_limiter = { kind = \"queue\", size = 100 }"));
  std::vector<pid_t> ps;
  for (int w = 0; w < 2; ++w) ps.push_back(writer(d, "queue", w, 500));
  for (int s = 0; s < 2; ++s)
    ps.push_back(spawn({ENGRAM_PROC_PATH, "consume", d.socket(), "queue", d.file("sampled" + std::to_string(s)), "1500"},
                       d.file("proc.log")));
  for (pid_t p : ps) ASSERT_EQ(wait_exit(p, 60000), 0) << read_file(d.file("proc.log"));
  std::multiset<uint64_t> got;
  for (int s = 0; s < 2; ++s)
    for (uint64_t k : read_sampled(d.file("sampled" + std::to_string(s)))) got.insert(k);
  size_t written = 0;
  for (int w = 0; w < 2; ++w)
    for (const WrittenItem& it : read_keys(d.file("keys" + std::to_string(w)))) {
      ++written;
      EXPECT_EQ(got.count(it.key), 1u) << "key " << it.key;
    }
  EXPECT_EQ(written, 2u * 240);
  EXPECT_EQ(got.size(), written);
}

TEST(MultiProcess, SampleToInsertRatioBlocksAndResumesAcrossProcesses) {
  Daemon d(table_toml("ratio", "max_size = 10000\nrate_limiter = { kind = \"sample_to_insert_ratio\", "
                               "samples_per_insert = 1.0, min_size = 10, error_buffer = 20 }"));
  // A sampler alone on an empty table waits, then times out.
  int64_t t0 = monotonic_ns();
  EXPECT_EQ(wait_exit(sampler(d, "ratio", 0, 1, 4, "copy", 300), 10000), 5);
  EXPECT_GE(monotonic_ns() - t0, 300'000'000);
  // A writer alone gets ahead by at most spi * min_size + error_buffer = 30
  // items, then its inserts wait and time out.
  setenv("ENGRAM_PROC_INSERT_TIMEOUT_MS", "300", 1);
  EXPECT_EQ(wait_exit(writer(d, "ratio", 0, 200), 20000), 5);
  unsetenv("ENGRAM_PROC_INSERT_TIMEOUT_MS");
  engram_client* c = connect_c(d.socket());
  EXPECT_EQ(info(c, "ratio").inserts, 30u);
  // Together they carry each other: the writer's 120 more items need
  // samples, and the samples need the items.
  pid_t w = writer(d, "ratio", 1, 250);
  pid_t s = sampler(d, "ratio", 1, 30, 4, "copy");
  EXPECT_EQ(wait_exit(w, 30000), 0) << read_file(d.file("proc.log"));
  EXPECT_EQ(wait_exit(s, 30000), 0) << read_file(d.file("proc.log"));
  engram_table_info i = info(c, "ratio");
  EXPECT_EQ(i.inserts, 150u);
  EXPECT_EQ(i.samples, 120u);
  engram_disconnect(c);
}

TEST(MultiProcess, DaemonKilledClientsGetDisconnectedAndReconnect) {
  Daemon d(table_toml("replay", "max_size = 100"));
  // A sampler blocked on an empty table.
  pid_t s = sampler(d, "replay", 0, 1, 8, "copy", -1);
  engram_client* c = connect_c(d.socket());
  engram_table* t = nullptr;
  ASSERT_EQ(engram_table_open(c, "replay", &t), ENGRAM_OK);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  d.kill9();
  int64_t t0 = monotonic_ns();
  EXPECT_EQ(wait_exit(s, 5000), 4) << "a blocked sampler must return, not hang or crash";
  EXPECT_LT(monotonic_ns() - t0, 2'000'000'000);
  EXPECT_NE(read_file(d.file("proc.log")).find("disconnected"), std::string::npos) << read_file(d.file("proc.log"));

  engram_sample_options so;
  engram_sample_options_init(&so);
  uint8_t obs[300];
  int64_t meta[2];
  void* bufs[2] = {obs, meta};
  uint32_t n = 0;
  EXPECT_EQ(engram_sample(t, &so, bufs, nullptr, &n), ENGRAM_E_DISCONNECTED);
  engram_table_info i;
  engram_table_info_init(&i);
  EXPECT_EQ(engram_table_info_get(c, "replay", &i), ENGRAM_E_DISCONNECTED);
  engram_disconnect(c);

  d.start();  // removes the dead daemon's stale socket and segments
  EXPECT_NE(read_file(d.log()).find("stale"), std::string::npos);
  c = connect_c(d.socket());
  ASSERT_NE(c, nullptr);
  ASSERT_EQ(engram_table_open(c, "replay", &t), ENGRAM_OK);
  engram_disconnect(c);
  pid_t w = writer(d, "replay", 0, 100);
  EXPECT_EQ(wait_exit(w, 30000), 0) << read_file(d.file("proc.log"));
}

TEST(MultiProcess, CleanStopTellsClientsAndRemovesEverything) {
  Daemon d(table_toml("replay", "max_size = 100"));
  pid_t s = sampler(d, "replay", 0, 1, 8, "copy", -1);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(d.terminate(), 0);
  EXPECT_EQ(wait_exit(s, 5000), 4);
  EXPECT_NE(read_file(d.log()).find("stopped; socket removed"), std::string::npos) << read_file(d.log());
  EXPECT_NE(::access(d.socket().c_str(), F_OK), 0) << "socket left behind";
}

}  // namespace
}  // namespace engram::test
