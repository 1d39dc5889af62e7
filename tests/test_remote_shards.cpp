// A view over shards (remote/shard_link, server/table_owner_view): one
// learner engramd whose table is a view over a table on each of three
// shard engramds, all on loopback. Its samples have the distribution of
// one table holding every shard's items (chi-square, and probabilities
// to 1e-9), its updates land on the item's shard, and a shard killed
// leaves the others sampled, with the loss said, until it is back.
#include <gtest/gtest.h>

#include <atomic>
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <cmath>
#include <map>
#include <regex>
#include <set>
#include <thread>

#include "remote/peer.grpc.pb.h"
#include "remote/peer_probe.hpp"
#include "test_util.hpp"

namespace engram::test {
namespace {

constexpr int kShards = 3, kPerShard = 50;
constexpr uint32_t kBatch = 64;

std::string shard_config(int port) {
  return "[remote]\nlisten = \"127.0.0.1:" + std::to_string(port) + "\"\n" +
         table_toml("replay", "max_size = 1000\nsampler = \"prioritized\"\npriority_exponent = 1.0\n");
}

std::string view_config(const std::vector<int>& ports) {
  std::string list;
  for (int p : ports) list += std::string(list.empty() ? "" : ", ") + "\"127.0.0.1:" + std::to_string(p) + "\"";
  return table_toml("replay", "max_size = 4096\nshards = [" + list + "]\nshard_table = \"replay\"\n");
}

struct Sampled {
  int64_t item;  // meta[0]: shard k's items are 50k .. 50k + 49, priority 1 + item
  engram_sample_info info;
};

class RemoteShards : public ::testing::Test {
 protected:
  RemoteShards() {
    for (int k = 0; k < kShards; ++k) {
      ports_.push_back(free_port());
      shards_.push_back(std::make_unique<Daemon>(shard_config(ports_.back())));
      EXPECT_FALSE(remote_address(*shards_.back()).empty()) << read_file(shards_.back()->log());
      write_items(shards_.back()->socket(), "replay", int64_t{kPerShard} * k, kPerShard, 8, true);
    }
    learner_ = std::make_unique<Daemon>(view_config(ports_));
    client_ = connect_c(learner_->socket());
    EXPECT_EQ(engram_table_open(client_, "replay", &view_), ENGRAM_OK) << engram_last_error();
  }
  ~RemoteShards() override {
    if (view_) engram_table_close(view_);
    if (client_) engram_disconnect(client_);
  }

  // One batch from the view, copied out; false (with the error) if it fails.
  bool sample(std::vector<Sampled>* out, int32_t timeout_ms = 10000) {
    engram_sample_options so;
    engram_sample_options_init(&so);
    so.batch_size = kBatch;
    so.num_steps = 1;
    so.timeout_ms = timeout_ms;
    std::vector<uint8_t> obs(kBatch * 300);
    std::vector<int64_t> meta(kBatch * 2);
    std::vector<engram_sample_info> infos(kBatch);
    void* bufs[2] = {obs.data(), meta.data()};
    uint32_t n = 0;
    int e = engram_sample(view_, &so, bufs, infos.data(), &n);
    EXPECT_EQ(e, ENGRAM_OK) << engram_last_error();
    if (e != ENGRAM_OK) return false;
    EXPECT_EQ(n, kBatch) << "a batch is never silently short";
    for (uint32_t i = 0; i < n; ++i) {
      EXPECT_EQ(obs[i * 300 + 299], static_cast<uint8_t>(meta[i * 2] & 0xff)) << "the item's bytes";
      EXPECT_EQ(meta[i * 2 + 1], 7);
      out->push_back({meta[i * 2], infos[i]});
    }
    return true;
  }

  // Shards join as their links connect; until then batches come from
  // those that did (as after a loss). Waits for a batch of all of them.
  bool all_shards_joined() {
    std::vector<Sampled> batch;
    for (auto t0 = std::chrono::steady_clock::now(); std::chrono::steady_clock::now() - t0 < std::chrono::seconds(20);) {
      batch.clear();
      if (!sample(&batch)) return false;
      if (batch.back().info.table_size == kShards * kPerShard) return true;
    }
    return false;
  }

  std::vector<int> ports_;
  std::vector<std::unique_ptr<Daemon>> shards_;
  std::unique_ptr<Daemon> learner_;
  engram_client* client_ = nullptr;
  engram_table* view_ = nullptr;
};

TEST_F(RemoteShards, SamplesHaveTheDistributionOfOneTableAndUpdatesGoToTheirShard) {
  const int items = kShards * kPerShard;
  const double total = items * (items + 1) / 2.0;  // priorities 1..150, exponent 1
  std::vector<uint64_t> seen(items, 0);
  std::vector<Sampled> batch;
  ASSERT_TRUE(all_shards_joined());
  const int batches = 1600;  // 102400 samples
  for (int b = 0; b < batches; ++b) {
    batch.clear();
    ASSERT_TRUE(sample(&batch));
    for (const Sampled& s : batch) {
      ASSERT_GE(s.item, 0);
      ASSERT_LT(s.item, items);
      ++seen[s.item];
      ASSERT_NEAR(s.info.probability, (1.0 + s.item) / total, 1e-9) << "as one table of every shard's items";
      ASSERT_EQ(s.info.table_size, static_cast<uint32_t>(items));
      ASSERT_EQ(s.info.priority, 1.0 + s.item);
    }
  }
  double chi2 = 0;
  const double n = double(batches) * kBatch;
  for (int i = 0; i < items; ++i) {
    double want = n * (1.0 + i) / total;
    chi2 += (seen[i] - want) * (seen[i] - want) / want;
  }
  EXPECT_GT(chi_square_p(chi2, items - 1), 1e-4) << "chi2 " << chi2;

  // Items 0..9 (shard 0's first) to priority 0 through the view: they land
  // on shard 0, which then never draws them.
  std::map<int64_t, uint64_t> key_of;
  while (key_of.size() < 10) {
    batch.clear();
    ASSERT_TRUE(sample(&batch));
    for (const Sampled& s : batch)
      if (s.item < 10) key_of[s.item] = s.info.key;
  }
  std::vector<uint64_t> keys;
  std::vector<double> zeros(10, 0.0);
  for (auto& [item, key] : key_of) keys.push_back(key);
  std::vector<int32_t> results(10, 1);
  ASSERT_EQ(engram_update_priorities(view_, keys.data(), zeros.data(), keys.size(), results.data()), ENGRAM_OK)
      << engram_last_error();
  for (int32_t r : results) EXPECT_EQ(r, ENGRAM_OK);
  bool landed = false;
  for (int i = 0; i < 100 && !landed; ++i) {
    landed = table_info(shards_[0]->socket(), "replay").min_priority == 0.0;
    if (!landed) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(landed) << "shard 0 holds priority 0 now";
  EXPECT_GT(table_info(shards_[1]->socket(), "replay").min_priority, 0.0) << "not another shard";
  // Once the draws made before the update are spent, none of them comes:
  // shard 0 keeps up to shard_prefetch x shard_batch = 128 draws waiting,
  // and in flight as many, spent at its share of each batch (1275 of
  // 11325 of the mass: about 7 of 64), so 60 batches are past them.
  for (int b = 0; b < 60; ++b) {
    batch.clear();
    ASSERT_TRUE(sample(&batch));
  }
  for (int b = 0; b < 100; ++b) {
    batch.clear();
    ASSERT_TRUE(sample(&batch));
    for (const Sampled& s : batch) ASSERT_GE(s.item, 10) << "item " << s.item << " has priority 0 on its shard";
  }
}

TEST_F(RemoteShards, AShardKilledIsLeftOutAndSaidAndRejoinsWhenBack) {
  std::vector<Sampled> batch;
  ASSERT_TRUE(all_shards_joined());
  shards_[2]->kill9();
  // Within a bounded time, batches come from shards 0 and 1 alone, with
  // their probabilities over those two shards' mass.
  const double two = 100 * 101 / 2.0;
  auto start = std::chrono::steady_clock::now();
  int clean = 0;
  std::set<uint64_t> keys;
  while (clean < 20) {
    ASSERT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20)) << "sampling did not go on";
    batch.clear();
    ASSERT_TRUE(sample(&batch));
    bool from_two = true;
    for (const Sampled& s : batch) {
      from_two = from_two && s.item < 100;
      EXPECT_TRUE(keys.insert(s.info.key).second) << "a draw handed out twice";
    }
    clean = from_two ? clean + 1 : 0;
    if (clean > 5)  // split since the shard went away: one table of the two others' items
      for (const Sampled& s : batch) {
        EXPECT_NEAR(s.info.probability, (1.0 + s.item) / two, 1e-9);
        EXPECT_EQ(s.info.table_size, 100u);
      }
  }
  EXPECT_EQ(table_info(learner_->socket(), "replay").shards, 3u);
  EXPECT_EQ(table_info(learner_->socket(), "replay").shards_present, 2u) << "the table info says the loss";
  auto [rc, status] = engramctl(*learner_, {"status"});
  EXPECT_EQ(rc, 0);
  EXPECT_NE(status.find("shard        replay <- 127.0.0.1:" + std::to_string(ports_[2])), std::string::npos) << status;
  EXPECT_NE(status.find("waiting to reconnect"), std::string::npos) << status;
  EXPECT_NE(read_file(learner_->log()).find("shard 2 of view replay"), std::string::npos) << "the log says it once";

  // Back (its items written again), it rejoins.
  shards_[2]->start();
  write_items(shards_[2]->socket(), "replay", 100, kPerShard, 8, true);
  bool rejoined = false;
  for (auto t0 = std::chrono::steady_clock::now();
       !rejoined && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(20);) {
    batch.clear();
    ASSERT_TRUE(sample(&batch));
    for (const Sampled& s : batch) rejoined = rejoined || s.item >= 100;
  }
  EXPECT_EQ(table_info(learner_->socket(), "replay").shards_present, 3u);
  EXPECT_TRUE(rejoined) << engramctl(*learner_, {"status"}).second << "\nthe shard's log:\n"
                        << read_file(shards_[2]->log()) << "\nthe learner's log:\n" << read_file(learner_->log());
}

// A shard that answers with replies that break the protocol, one kind a
// stream (mass NaN, probability 2, a slice over a chunk not sent, a chunk
// of garbage, more draws than asked): its link refuses each (counted, the
// stream ended), and the view goes on sampling its other shard.
class BadShard final : public engram::peer::v1::Peer::Service {
 public:
  grpc::Status Sample(grpc::ServerContext*,
                      grpc::ServerReaderWriter<engram::peer::v1::SampleReply, engram::peer::v1::SampleRequest>* s)
      override {
    engram::peer::v1::SampleRequest rq;
    if (!s->Read(&rq)) return grpc::Status::OK;
    engram::peer::v1::SampleReply r;
    const int kind = streams_++ % 5;
    r.set_mass(kind == 0 ? std::nan("") : 10.0);
    r.set_size(10);
    engram::peer::v1::Draw* d = r.add_draws();
    d->set_key(1);
    d->set_priority(1.0);
    d->set_probability(kind == 1 ? 2.0 : 0.1);
    engram::peer::v1::Slice* sl = d->add_slices();
    sl->set_chunk(kind == 2 ? 99 : 1);  // 2: a chunk not in the reply
    sl->set_length(1);
    engram::peer::v1::Chunk* c = r.add_chunks();
    c->set_id(1);
    c->set_data(std::string(kind == 3 ? 8 : 64, 'x'));  // never a sealed chunk of the view's columns
    if (kind == 4)  // more draws than the request asked for
      for (uint32_t k = 0; k < rq.draws(); ++k) *r.add_draws() = r.draws(0);
    s->Write(r);
    while (s->Read(&rq)) {
    }
    return grpc::Status::OK;
  }
  std::atomic<int> streams_{0};
};

TEST(RemoteShardsBadPeer, MalformedRepliesAreRefusedAndCountedAndSamplingGoesOn) {
  const int good_port = free_port(), bad_port = free_port();
  Daemon good(shard_config(good_port));
  ASSERT_FALSE(remote_address(good).empty()) << read_file(good.log());
  write_items(good.socket(), "replay", 0, kPerShard, 8, true);
  BadShard bad;
  grpc::ServerBuilder b;
  b.AddListeningPort("127.0.0.1:" + std::to_string(bad_port), grpc::InsecureServerCredentials());
  b.RegisterService(&bad);
  std::unique_ptr<grpc::Server> server = b.BuildAndStart();
  ASSERT_TRUE(server);
  Daemon learner(view_config({good_port, bad_port}));
  engram_client* c = connect_c(learner.socket());
  engram_table* view = nullptr;
  ASSERT_EQ(engram_table_open(c, "replay", &view), ENGRAM_OK) << engram_last_error();
  engram_sample_options so;
  engram_sample_options_init(&so);
  so.batch_size = kBatch;
  so.num_steps = 1;
  so.timeout_ms = 10000;
  std::vector<uint8_t> obs(kBatch * 300);
  std::vector<int64_t> meta(kBatch * 2);
  std::vector<engram_sample_info> infos(kBatch);
  void* bufs[2] = {obs.data(), meta.data()};
  // The bad shard's link reconnects after each refusal (100 ms, doubling):
  // five kinds of damage within about 4 s, while the good shard serves.
  for (auto t0 = std::chrono::steady_clock::now(); bad.streams_ < 5;) {
    ASSERT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(20)) << "the bad shard was not asked again";
    uint32_t n = 0;
    ASSERT_EQ(engram_sample(view, &so, bufs, infos.data(), &n), ENGRAM_OK) << engram_last_error();
    ASSERT_EQ(n, kBatch);
    for (uint32_t i = 0; i < n; ++i) {
      ASSERT_LT(meta[i * 2], kPerShard) << "only the good shard's items";
      ASSERT_EQ(infos[i].table_size, static_cast<uint32_t>(kPerShard));
    }
  }
  std::string status = engramctl(learner, {"status", "--json"}).second;
  EXPECT_TRUE(std::regex_search(status, std::regex("\"malformed\": [1-9]"))) << "the bad shard's refusals: " << status;
  EXPECT_TRUE(std::regex_search(status, std::regex("\"malformed\": 0"))) << "and none of the good one's: " << status;
  std::string log = read_file(learner.log());
  EXPECT_NE(log.find("shard 127.0.0.1:" + std::to_string(bad_port) + " sent"), std::string::npos) << log;
  engram_table_close(view);
  engram_disconnect(c);
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
}

// A reply of 256 draws of 400 items of 28 KB (about 190 of them, each
// chunk once) is about 5 MB, past gRPC's default limit of a
// received message (4 MB): the shard link's channel takes what a peer may
// send. (Before it did, such a view never answered: each reply broke its
// stream.)
TEST(RemoteShardsLarge, RepliesPastFourMegabytesCross) {
  const int port = free_port();
  const std::string col = "[[table.column]]\nname = \"obs\"\ndtype = \"uint8\"\nshape = [28672]\n";
  Daemon shard("[remote]\nlisten = \"127.0.0.1:" + std::to_string(port) + "\"\n[[table]]\nname = \"big\"\n" +
               "max_size = 400\nsampler = \"prioritized\"\n" + col);
  ASSERT_FALSE(remote_address(shard).empty()) << read_file(shard.log());
  {
    engram_client* c = connect_c(shard.socket());
    engram_table* t = nullptr;
    ASSERT_EQ(engram_table_open(c, "big", &t), ENGRAM_OK) << engram_last_error();
    engram_column cols[1] = {{"obs", ENGRAM_UINT8, 1, {28672}}};
    engram_writer_options wo;
    engram_writer_options_init(&wo);
    wo.columns = cols;
    wo.num_columns = 1;
    engram_writer* w = nullptr;
    ASSERT_EQ(engram_writer_open(c, &wo, &w), ENGRAM_OK) << engram_last_error();
    std::vector<uint8_t> obs(28672);
    for (int i = 0; i < 400; ++i) {
      std::fill(obs.begin(), obs.end(), static_cast<uint8_t>(i));
      const void* step[1] = {obs.data()};
      ASSERT_EQ(engram_writer_append(w, step), ENGRAM_OK) << engram_last_error();
      ASSERT_EQ(engram_writer_create_item(w, t, 1, 1.0), ENGRAM_OK) << engram_last_error();
    }
    ASSERT_EQ(engram_writer_flush(w, 20000), ENGRAM_OK) << engram_last_error();
    engram_writer_close(w);
    engram_table_close(t);
    engram_disconnect(c);
  }
  Daemon learner("[[table]]\nname = \"big\"\nmax_size = 2048\nshards = [\"127.0.0.1:" + std::to_string(port) +
                 "\"]\nshard_batch = 256\n" + col);
  engram_client* c = connect_c(learner.socket());
  engram_table* view = nullptr;
  ASSERT_EQ(engram_table_open(c, "big", &view), ENGRAM_OK) << engram_last_error();
  engram_sample_options so;
  engram_sample_options_init(&so);
  so.batch_size = 256;
  so.num_steps = 1;
  so.timeout_ms = 10000;
  std::vector<uint8_t> out(256 * 28672);
  void* bufs[1] = {out.data()};
  for (int b = 0; b < 8; ++b) {
    uint32_t n = 0;
    ASSERT_EQ(engram_sample(view, &so, bufs, nullptr, &n), ENGRAM_OK)
        << engram_last_error() << "\n" << engramctl(learner, {"status"}).second;
    ASSERT_EQ(n, 256u);
    for (uint32_t i = 0; i < n; ++i) ASSERT_EQ(out[i * 28672], out[i * 28672 + 28671]) << "an item's own bytes";
  }
  engram_table_close(view);
  engram_disconnect(c);
}

// Each shard keeps its own rate limiter (engram(7), SHARDS): with every
// shard at samples_per_insert 2, the global ratio (the shards' samples over
// their inserts) is 2 within the shards' error buffers summed, and what the
// learner was handed is that less the draws waiting and in flight.
TEST(RemoteShardsLimiters, TheGlobalRatioIsEachShardsWithinTheirBuffers) {
  const std::string limiter =
      "rate_limiter = { kind = \"sample_to_insert_ratio\", samples_per_insert = 2.0, min_size = 20, "
      "error_buffer = 100 }\n";
  std::vector<int> ports = {free_port(), free_port()};
  std::vector<std::unique_ptr<Daemon>> shards;
  for (int p : ports) {
    shards.push_back(std::make_unique<Daemon>("[remote]\nlisten = \"127.0.0.1:" + std::to_string(p) + "\"\n" +
                                              table_toml("replay", "max_size = 10000\nsampler = \"prioritized\"\n" +
                                                                       limiter)));
    ASSERT_FALSE(remote_address(*shards.back()).empty()) << read_file(shards.back()->log());
  }
  Daemon learner(view_config(ports));
  engram_client* c = connect_c(learner.socket());
  engram_table* view = nullptr;
  ASSERT_EQ(engram_table_open(c, "replay", &view), ENGRAM_OK) << engram_last_error();
  // Two writers, held by their shards' limiters until the view samples,
  // writing until told to stop. (A shard whose writers stop holds the
  // batches that need its draws, and with them the other shards'
  // writers, whose limiters wait for samples: engram(7), SHARDS.)
  std::atomic<bool> stop{false};
  std::vector<std::thread> writers;
  for (int k = 0; k < 2; ++k)
    writers.emplace_back([&, k] {
      engram_client* wc = connect_c(shards[k]->socket());
      engram_table* t = nullptr;
      if (!wc || engram_table_open(wc, "replay", &t) != ENGRAM_OK) return;
      engram_column cols[2] = {{"obs", ENGRAM_UINT8, 2, {10, 30}}, {"meta", ENGRAM_INT64, 1, {2}}};
      engram_writer_options wo;
      engram_writer_options_init(&wo);
      wo.columns = cols;
      wo.num_columns = 2;
      wo.insert_timeout_ms = 100;
      engram_writer* w = nullptr;
      if (engram_writer_open(wc, &wo, &w) != ENGRAM_OK) return;
      for (int64_t i = 0; !stop; ++i) {
        uint8_t obs[300];
        int64_t meta[2] = {i, 7};
        std::memset(obs, static_cast<int>(i & 0xff), sizeof obs);
        const void* step[2] = {obs, meta};
        if (engram_writer_append(w, step) != ENGRAM_OK) break;
        while (!stop) {
          int e = engram_writer_create_item(w, t, 1, 1.0);
          if (e == ENGRAM_OK) break;
          if (e != ENGRAM_E_TIMEOUT) return;
        }
      }
      engram_writer_close(w);
      engram_table_close(t);
      engram_disconnect(wc);
    });
  engram_sample_options so;
  engram_sample_options_init(&so);
  so.batch_size = kBatch;
  so.num_steps = 1;
  so.timeout_ms = 10000;
  std::vector<uint8_t> obs(kBatch * 300);
  std::vector<int64_t> meta(kBatch * 2);
  void* bufs[2] = {obs.data(), meta.data()};
  uint64_t handed = 0;
  for (int b = 0; b < 100; ++b) {
    uint32_t n = 0;
    ASSERT_EQ(engram_sample(view, &so, bufs, nullptr, &n), ENGRAM_OK) << engram_last_error();
    handed += n;
  }
  // The counters at one moment: the writers held, the links' requests
  // held or answered.
  std::vector<engram_table_info> at(2);
  for (int k = 0; k < 2; ++k) at[k] = table_info(shards[k]->socket(), "replay");
  stop = true;
  for (auto& w : writers) w.join();
  uint64_t samples = 0, inserts = 0;
  for (const engram_table_info& i : at) {
    samples += i.samples;
    inserts += i.inserts;
    // Each shard alone: its ratio within its own window.
    EXPECT_GE(double(i.samples), 2.0 * i.inserts - 140) << "shard's own limiter";
    EXPECT_LE(double(i.samples), 2.0 * i.inserts + 60 + 256) << "shard's own limiter (a request of draws past it)";
  }
  EXPECT_GT(inserts, 3000u) << "about the 6400 handed, over 2";
  const double ratio = double(samples) / double(inserts);
  EXPECT_NEAR(ratio, 2.0, (2 * 140 + 2 * 316) / double(inserts)) << samples << " samples of " << inserts << " inserts";
  // The learner got what the shards drew, less what waits in the view or
  // is in flight (up to 2 x shard_prefetch x shard_batch per shard).
  EXPECT_LE(handed, samples);
  EXPECT_GE(handed + 2 * 2 * 2 * 64, samples) << "handed " << handed;
  std::printf("global samples per insert %.4f (%llu of %llu); handed to the learner %llu\n", ratio,
              static_cast<unsigned long long>(samples), static_cast<unsigned long long>(inserts),
              static_cast<unsigned long long>(handed));
  engram_table_close(view);
  engram_disconnect(c);
}

// What a view's [[table]] may not say is refused at start-up, by name.
TEST(RemoteShardsConfig, AViewsBadKeysAreRefusedByName) {
  struct Case {
    std::string body, expect;
  } cases[] = {
      {table_toml("v", "max_size = 1000\nshards = [\"127.0.0.1:7\"]\nsampler = \"prioritized\"\n"),
       "table[0].sampler: a view over shards samples as its shards"},
      {table_toml("v", "max_size = 1000\nshards = []\n"), "table[0].shards: must be a list of 1..64"},
      {table_toml("v", "max_size = 1000\nshards = \"127.0.0.1:7\"\n"), "table[0].shards: must be a list"},
      {table_toml("v", "max_size = 1000\nshards = [\"127.0.0.1:7\", \"127.0.0.1:7\"]\n"), "listed twice"},
      {table_toml("v", "max_size = 1000\nshard_table = \"x\"\n"), "table[0].shards: is needed"},
      {table_toml("v", "max_size = 1000\nshards = [\"127.0.0.1:7\"]\nshard_batch = 257\n"),
       "table[0].shard_batch: 257 is out of range"},
      {table_toml("v", "max_size = 100\nshards = [\"127.0.0.1:7\"]\n"), "cannot hold the draws"},
      {table_toml("v", "max_size = 1000\nshards = [\"10.1.2.3:7\"]\n"), "the link needs TLS"},
      {table_toml("v", "max_size = 1000\nshards = [\"127.0.0.1:7\"]\nmirror = \"127.0.0.1:8\"\n"),
       "not also linked so"},
  };
  for (const Case& c : cases) expect_refused_config(c.body, c.expect);
}

}  // namespace
}  // namespace engram::test
