// The C API's tests against an embedded server, one file per theme
// (tests/capi/test_capi_*.cpp): every kind of bad input gets its own error
// code and a message that says what was wrong, and the server survives
// clients that write garbage into their rings and chunks. This is what they
// share: the CApi fixture (a server, a client, helpers) and RawClient.
#pragma once

#include <grp.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <limits>
#include <random>
#include <set>
#include <thread>

#include "core/chunk_format.hpp"
#include "core/shm.hpp"
#include "daemon_fixture.hpp"
#include "engram/engram.h"
#include "engram/server.h"
#include "listed_errors.hpp"  // last: it checks every call below against its man page

namespace engram::test {
namespace {

inline std::string last() { return engram_last_error(); }

class CApi : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = make_temp_dir();
    socket_ = dir_ + "/engram.sock";
    engram_server_options so;
    engram_server_options_init(&so);
    so.socket_path = socket_.c_str();
    so.quiet = 1;
    ASSERT_EQ(engram_server_start(&so, &server_), ENGRAM_OK) << last();
    c_ = connect_c(socket_);
    ASSERT_NE(c_, nullptr);
    cols_[0] = {"obs", ENGRAM_UINT8, 2, {4, 5}};
    cols_[1] = {"reward", ENGRAM_FLOAT32, 0, {}};
  }
  void TearDown() override {
    engram_disconnect(c_);
    EXPECT_EQ(engram_server_stop(server_), ENGRAM_OK);
    std::string cmd = "rm -rf " + dir_;
    EXPECT_EQ(std::system(cmd.c_str()), 0);
  }
  // Options for a table of two columns (cols_ unless given), the rest default.
  engram_table_options two_columns(const char* name, uint64_t max_size, const engram_column* cols = nullptr) {
    engram_table_options o;
    engram_table_options_init(&o);
    o.name = name;
    o.max_size = max_size;
    o.columns = cols ? cols : cols_;
    o.num_columns = 2;
    return o;
  }
  int create(const char* name, uint64_t max_size = 100, int sampler = ENGRAM_UNIFORM) {
    engram_table_options o = two_columns(name, max_size);
    o.sampler = sampler;
    return engram_table_create(c_, &o);
  }
  // A table of 100 items behind a Queue(size) rate limiter.
  int create_queue(const char* name, int64_t size) {
    engram_table_options o = two_columns(name, 100);
    if (int r = engram_rate_limiter_queue(&o.rate_limiter, size); r != ENGRAM_OK) return r;
    return engram_table_create(c_, &o);
  }
  engram_table* open(const char* name) {
    engram_table* t = nullptr;
    EXPECT_EQ(engram_table_open(c_, name, &t), ENGRAM_OK) << last();
    return t;
  }
  engram_writer* writer(const engram_column* cols, uint32_t n, uint32_t chunk_length = 1, uint32_t max_steps = 0) {
    engram_writer_options o;
    engram_writer_options_init(&o);
    o.columns = cols;
    o.num_columns = n;
    o.chunk_length = chunk_length;
    o.max_item_steps = max_steps;
    o.keep_keys = 1;
    engram_writer* w = nullptr;
    EXPECT_EQ(engram_writer_open(c_, &o, &w), ENGRAM_OK) << last();
    return w;
  }
  void append(engram_writer* w, uint8_t v) {
    uint8_t obs[20];
    std::memset(obs, v, sizeof obs);
    float r = v;
    const void* cols[2] = {obs, &r};
    ASSERT_EQ(engram_writer_append(w, cols), ENGRAM_OK) << last();
  }

  // Writes n one-step items (step i filled with byte i, priority 1) into t
  // through w (opened with keep_keys) and returns their keys in order.
  std::vector<uint64_t> insert_items(engram_writer* w, engram_table* t, int n) {
    for (int i = 0; i < n; ++i) {
      append(w, static_cast<uint8_t>(i));
      EXPECT_EQ(engram_writer_create_item(w, t, 1, 1.0), ENGRAM_OK) << last();
    }
    EXPECT_EQ(engram_writer_flush(w, 5000), ENGRAM_OK) << last();
    std::vector<uint64_t> keys(static_cast<size_t>(n));
    size_t got = 0;
    EXPECT_EQ(engram_writer_take_keys(w, keys.data(), keys.size(), &got), ENGRAM_OK);
    EXPECT_EQ(got, keys.size());
    return keys;
  }

  // Options for batches of `batch` items of `steps` steps.
  static engram_sample_options batch_options(uint32_t batch, uint32_t steps) {
    engram_sample_options so;
    engram_sample_options_init(&so);
    so.batch_size = batch;
    so.num_steps = steps;
    return so;
  }
  // Copies one full batch out of t into bufs; info gets one entry per item.
  void sample_full_batch(engram_table* t, const engram_sample_options& so, void* const* bufs,
                         std::vector<engram_sample_info>* info) {
    info->assign(so.batch_size, engram_sample_info{});
    uint32_t n = 0;
    ASSERT_EQ(engram_sample(t, &so, bufs, info->data(), &n), ENGRAM_OK) << last();
    ASSERT_EQ(n, so.batch_size);
  }

  void large_steps_sample_byte_exact(bool hop_threads);

  std::string dir_, socket_;
  engram_server* server_ = nullptr;
  engram_client* c_ = nullptr;
  engram_column cols_[2];
};

// A raw client: the control protocol by hand, and the channel and arena mapped.
struct RawClient {
  Control ctl;
  ShmSegment arena_seg, chan_seg;
  ArenaBlocks arena;
  Channel chan;
  Doorbell* bell = nullptr;
  ShmSegment bells_seg;

  RawClient(const std::string& socket, const char* table) : ctl(socket) {
    EXPECT_TRUE(ctl.ok());
    arena_seg = ctl.map_arena();
    arena = *ArenaBlocks::attach(arena_seg.data(), arena_seg.size(), ctl.arena_config());
    bells_seg = ctl.map_bells();
    NameRequest n{};
    std::strncpy(n.name, table, sizeof n.name - 1);
    std::vector<char> r;
    ReceivedFds fds;
    EXPECT_TRUE(ctl.call(ControlType::open_table, &n, sizeof n, &r, &fds).ok());
    OpenReply o;
    std::memcpy(&o, r.data(), sizeof o);
    chan_seg = std::move(*ShmSegment::map_fd(fds.take(0), o.channel_size, ShmSegment::Access::read_write, "channel"));
    chan = *Channel::attach(chan_seg.data(), chan_seg.size());
    bell = &static_cast<BellsHeader*>(bells_seg.data())->slots[o.table_id].bell;
  }
  // n blocks of the class of 4 KiB blocks (the tests' 16-step chunks fit
  // them), reserved for this client (fewer if refused).
  std::vector<BlockRef> grant_blocks(uint32_t n) {
    auto k = arena.class_for(4096);
    EXPECT_TRUE(k.ok() && arena.size_class(*k).block_size == 4096);
    auto b = ctl.grant(k.ok() ? *k : 0, n);
    EXPECT_TRUE(b.ok()) << b.status().message();
    return b.ok() ? *b : std::vector<BlockRef>{};
  }
  // The answers to inserts on this channel, (request id, status) per
  // insert in order, until n came or wait_ns passed.
  std::vector<std::pair<uint64_t, int>> insert_answers(uint32_t n, int64_t wait_ns) {
    std::vector<std::pair<uint64_t, int>> out;
    int64_t until = monotonic_ns() + wait_ns;
    while (out.size() < n) {
      ResponseRecord rsp{};
      int64_t left = until - monotonic_ns();
      if (left <= 0 || !chan.responses.pop(&rsp, left).ok()) break;
      EXPECT_EQ(rsp.op, static_cast<uint16_t>(RequestOp::insert));
      if (rsp.status != 0) out.push_back({rsp.id, rsp.status});
      else
        for (uint32_t k = 0; k < rsp.count; ++k) out.push_back({rsp.id + k, 0});
    }
    return out;
  }
  // Sends r and returns its (single) response, or the closed reason.
  ResponseRecord roundtrip(const RequestRecord& r) {
    EXPECT_TRUE(chan.requests.try_push(&r).ok());
    bell->ring();
    ResponseRecord rsp{};
    Status s = chan.responses.pop(&rsp, 5'000'000'000);
    EXPECT_TRUE(s.ok()) << s.message();
    return rsp;
  }
};

// A raw insert request of one item over step 0 of block b, whose chunk
// the request says holds chunk_steps steps.
inline RequestRecord one_step_insert(BlockRef b, uint32_t chunk_steps) {
  RequestRecord ins{};
  ins.op = static_cast<uint32_t>(RequestOp::insert);
  ins.count = 1;
  ins.payload.insert.priority = 1.0;
  ins.payload.insert.chunk_steps = chunk_steps;
  ins.payload.insert.refs[0] = {b.index, b.generation, 0, 1};
  return ins;
}

// A raw insert_items record of n one-step items, item i over step
// step_of(i) of block block_of(i), whose chunks hold chunk_steps steps.
template <typename BlockOf, typename StepOf>
RequestRecord items_insert(uint64_t id, uint32_t n, int64_t deadline_ns, uint32_t chunk_steps, BlockOf block_of,
                           StepOf step_of, double priority_step = 0.0) {
  RequestRecord r{};
  r.op = static_cast<uint32_t>(RequestOp::insert_items);
  r.count = n;
  r.id = id;
  r.deadline_ns = deadline_ns;
  r.payload.items.chunk_steps = chunk_steps;
  for (uint32_t i = 0; i < n; ++i) {
    BlockRef b = block_of(i);
    r.payload.items.items[i] = {1.0 + priority_step * i, {b.index, b.generation, step_of(i), 1}};
  }
  return r;
}

}  // namespace
}  // namespace engram::test
