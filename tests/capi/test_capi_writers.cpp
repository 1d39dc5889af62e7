// Writers: item lengths, steps and items in one call, batches across chunks
// and tables, large steps byte-exact (membarrier or not), compressed frames,
// a full arena, and one-chunk items read by the layout checked at insert.
#include <linux/membarrier.h>
#include <sys/syscall.h>

#include "capi/capi_fixture.hpp"
#include "seccomp_deny.hpp"

namespace engram::test {
namespace {

// With ENGRAM_TEST_DENY_MEMBARRIER set (by CApiFallback below, which runs
// this binary again), membarrier(2) fails with ENOSYS in this process from
// before main on, as on a kernel without it: a writer that streams must
// then fence each step itself (core/stream_copy.hpp). Any call but the
// query kills the process: after a refused query there must be none.
const bool kMembarrierDenied = [] {
  if (!std::getenv("ENGRAM_TEST_DENY_MEMBARRIER")) return false;
  std::string refused = deny_syscall(__NR_membarrier, ENOSYS, MEMBARRIER_CMD_QUERY);
  if (!refused.empty() || syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0) != -1 || errno != ENOSYS) {
    std::fprintf(stderr, "could not deny membarrier: %s\n", refused.c_str());
    std::_Exit(3);
  }
  std::fprintf(stderr, "membarrier denied in this process\n");
  return true;
}();

TEST_F(CApi, ItemLengthsAreChecked) {
  ASSERT_EQ(create("replay"), ENGRAM_OK);
  engram_table* t = open("replay");
  engram_writer* w = writer(cols_, 2, 1, 3);
  append(w, 1);
  append(w, 2);
  EXPECT_EQ(engram_writer_create_item(w, t, 0, 1.0), ENGRAM_E_RANGE);
  EXPECT_EQ(engram_writer_create_item(w, t, 3, 1.0), ENGRAM_E_RANGE) << "longer than the steps written";
  EXPECT_NE(last().find("holds 2 steps"), std::string::npos) << last();
  append(w, 3);
  append(w, 4);
  EXPECT_EQ(engram_writer_create_item(w, t, 4, 1.0), ENGRAM_E_RANGE) << "longer than max_item_steps";
  EXPECT_EQ(engram_writer_create_item(w, t, 3, 1.0), ENGRAM_OK) << last();
  ASSERT_EQ(engram_writer_end_episode(w), ENGRAM_OK);
  append(w, 5);
  EXPECT_EQ(engram_writer_create_item(w, t, 2, 1.0), ENGRAM_E_RANGE) << "items never span episodes";
  ASSERT_EQ(engram_writer_flush(w, 5000), ENGRAM_OK) << last();
  // A table that allows items of at most 2 chunks.
  engram_table_options o = two_columns("short", 10);
  o.max_chunks_per_item = 2;
  ASSERT_EQ(engram_table_create(c_, &o), ENGRAM_OK) << last();
  engram_table* s = open("short");
  append(w, 6);
  append(w, 7);
  EXPECT_EQ(engram_writer_create_item(w, s, 3, 1.0), ENGRAM_E_RANGE) << "3 chunks of 1 step";
  EXPECT_NE(last().find("chunk_length"), std::string::npos) << last();
}

// A chunk longer than the arena's largest block is refused at open with the
// block's size and the longest chunk_length that fits, and that one opens
// (before, the message said neither, and --check-config can check only one
// step: a writer's chunk_length is not in the config).
TEST_F(CApi, AChunkTooLargeForTheArenaNamesTheLongestThatFits) {
  engram_writer_options o;
  engram_writer_options_init(&o);
  o.columns = cols_;
  o.num_columns = 2;
  o.chunk_length = 1u << 20;
  engram_writer* w = nullptr;
  ASSERT_EQ(engram_writer_open(c_, &o, &w), ENGRAM_E_RANGE);
  const std::string msg = last();
  EXPECT_NE(msg.find("more than the arena's largest block (8388608 bytes)"), std::string::npos) << msg;
  const size_t at = msg.find("lower chunk_length to ");
  ASSERT_NE(at, std::string::npos) << msg;
  const uint32_t fits = static_cast<uint32_t>(std::stoul(msg.substr(at + 22)));
  o.chunk_length = fits + 1;
  EXPECT_EQ(engram_writer_open(c_, &o, &w), ENGRAM_E_RANGE) << fits + 1 << " steps";
  o.chunk_length = fits;
  ASSERT_EQ(engram_writer_open(c_, &o, &w), ENGRAM_OK) << fits << " steps: " << last();
  engram_writer_close(w);
}

// engram_writer_append_items: n appends and their items in one call.
TEST_F(CApi, AppendItemsWritesStepsAndTheirItemsInOneCall) {
  engram_table_options o = two_columns("fifo", 100);
  o.sampler = ENGRAM_FIFO;
  o.max_times_sampled = 1;
  ASSERT_EQ(engram_table_create(c_, &o), ENGRAM_OK) << last();
  engram_table* t = open("fifo");
  engram_writer* w = writer(cols_, 2, /*chunk_length=*/4, /*max_steps=*/2);
  uint8_t obs[6][20];
  float rewards[6];
  for (int k = 0; k < 6; ++k) {
    std::memset(obs[k], 10 + k, sizeof obs[k]);
    rewards[k] = static_cast<float>(k);
  }
  const void* cols[2] = {obs, rewards};
  double pr[6] = {1, 1, 1, -1, 1, 1};
  EXPECT_EQ(engram_writer_append_items(w, cols, 6, t, 2, pr), ENGRAM_E_PRIORITY);
  EXPECT_NE(std::string(last()).find("priorities[3]"), std::string::npos) << last();
  EXPECT_EQ(engram_writer_append_items(w, cols, 6, t, 3, nullptr), ENGRAM_E_RANGE) << "longer than max_item_steps";
  // 2-step items: the episode's first step gets none.
  ASSERT_EQ(engram_writer_append_items(w, cols, 6, t, 2, nullptr), ENGRAM_OK) << last();
  ASSERT_EQ(engram_writer_flush(w, 5000), ENGRAM_OK) << last();
  engram_table_info i;
  engram_table_info_init(&i);
  ASSERT_EQ(engram_table_info_get(c_, "fifo", &i), ENGRAM_OK);
  EXPECT_EQ(i.size, 5u) << "nothing was appended by the refused calls, and 5 items by this one";
  engram_sample_options so = batch_options(5, 2);
  uint8_t got_obs[5][2][20];
  float got_r[5][2];
  void* bufs[2] = {got_obs, got_r};
  std::vector<engram_sample_info> info;
  sample_full_batch(t, so, bufs, &info);
  for (int k = 0; k < 5; ++k) {
    EXPECT_EQ(got_r[k][0], static_cast<float>(k)) << "item " << k;
    EXPECT_EQ(got_r[k][1], static_cast<float>(k + 1)) << "item " << k;
    EXPECT_EQ(got_obs[k][1][19], 11 + k);
  }
  // One-step items with their priorities, across the writer's chunks.
  double ones[6] = {2, 2, 2, 2, 2, 2};
  ASSERT_EQ(engram_writer_append_items(w, cols, 6, t, 1, ones), ENGRAM_OK) << last();
  ASSERT_EQ(engram_writer_flush(w, 5000), ENGRAM_OK);
  ASSERT_EQ(engram_table_info_get(c_, "fifo", &i), ENGRAM_OK);
  EXPECT_EQ(i.size, 6u);
}

TEST_F(CApi, AppendBatchChunksAndItemsAcrossChunksAndTables) {
  ASSERT_EQ(create("a", 100, ENGRAM_FIFO), ENGRAM_OK);
  ASSERT_EQ(create("b", 100, ENGRAM_FIFO), ENGRAM_OK);
  engram_table* ta = open("a");
  engram_table* tb = open("b");
  engram_writer* w = writer(cols_, 2, /*chunk_length=*/4, /*max_item_steps=*/6);
  uint8_t obs[10 * 20];
  float rew[10];
  for (int i = 0; i < 10; ++i) {
    std::memset(obs + 20 * i, i, 20);
    rew[i] = float(i);
  }
  const void* cols[2] = {obs, rew};
  ASSERT_EQ(engram_writer_append_batch(w, cols, 10), ENGRAM_OK) << last();
  EXPECT_EQ(engram_writer_append_batch(w, cols, 0), ENGRAM_E_RANGE);
  // Steps 4..9: chunk [4..7] and the open chunk [8, 9]; the same chunks back
  // an item in each table.
  ASSERT_EQ(engram_writer_create_item(w, ta, 6, 1.0), ENGRAM_OK) << last();
  ASSERT_EQ(engram_writer_create_item(w, tb, 3, 1.0), ENGRAM_OK) << last();
  ASSERT_EQ(engram_writer_flush(w, 5000), ENGRAM_OK) << last();
  engram_sample_options so;
  engram_sample_options_init(&so);
  uint8_t got_obs[6 * 20];
  float got_rew[6];
  void* bufs[2] = {got_obs, got_rew};
  uint32_t n = 0;
  so.num_steps = 6;
  ASSERT_EQ(engram_sample(ta, &so, bufs, nullptr, &n), ENGRAM_OK) << last();
  for (int k = 0; k < 6; ++k) {
    EXPECT_EQ(got_rew[k], float(4 + k));
    EXPECT_EQ(got_obs[20 * k + 19], 4 + k);
  }
  so.num_steps = 3;
  ASSERT_EQ(engram_sample(tb, &so, bufs, nullptr, &n), ENGRAM_OK) << last();
  for (int k = 0; k < 3; ++k) EXPECT_EQ(got_rew[k], float(7 + k));
  engram_batch* b = nullptr;
  ASSERT_EQ(engram_sample_view(tb, &so, &b), ENGRAM_OK) << last();
  engram_view v[8];
  uint32_t nv = 0;
  ASSERT_EQ(engram_batch_views(b, 0, 1, v, 8, &nv), ENGRAM_OK);
  ASSERT_EQ(nv, 2u) << "steps 7..9 span two chunks";
  EXPECT_EQ(v[0].steps, 1u);
  EXPECT_EQ(v[1].steps, 2u);
  EXPECT_EQ(static_cast<const float*>(v[1].data)[1], 9.0f);
  engram_batch_release(b);
}

// Steps of 1 KB and more go into the arena by non-temporal stores, whole
// cache lines only; steps of 1500 bytes in chunks of 3 start at offsets
// that split lines, so both kinds of store meet in one chunk. Items of 2
// steps, sampled byte-exact. With hop_threads, every other step is appended by a thread
// of its own, and the item over it is created back on this one: the
// streamed bytes of one thread are published by another.
void CApi::large_steps_sample_byte_exact(bool hop_threads) {
  engram_column big[2] = {{"frame", ENGRAM_UINT8, 1, {1500}}, {"id", ENGRAM_UINT32, 0, {}}};
  engram_table_options o = two_columns("big", 100, big);
  ASSERT_EQ(engram_table_create(c_, &o), ENGRAM_OK) << last();
  engram_table* t = open("big");
  engram_writer* w = writer(big, 2, /*chunk_length=*/3, /*max_steps=*/2);
  auto byte = [](uint32_t step, uint32_t i) { return static_cast<uint8_t>(step * 7 + i * 13 + i / 256); };
  std::vector<uint8_t> frame(1500);
  for (uint32_t step = 0; step < 31; ++step) {
    for (uint32_t i = 0; i < frame.size(); ++i) frame[i] = byte(step, i);
    const void* cols[2] = {frame.data(), &step};
    if (hop_threads && step % 2 == 1) {
      int rc = ENGRAM_E_SYSTEM;
      std::thread([&] { rc = engram_writer_append(w, cols); }).join();
      ASSERT_EQ(rc, ENGRAM_OK);
    } else {
      ASSERT_EQ(engram_writer_append(w, cols), ENGRAM_OK) << last();
    }
    if (step > 0) {
      ASSERT_EQ(engram_writer_create_item(w, t, 2, 1.0), ENGRAM_OK) << last();
    }
  }
  ASSERT_EQ(engram_writer_flush(w, 5000), ENGRAM_OK) << last();
  std::vector<uint8_t> frames(64 * 2 * 1500);
  std::vector<uint32_t> ids(64 * 2);
  void* bufs[2] = {frames.data(), ids.data()};
  std::vector<engram_sample_info> info;
  ASSERT_NO_FATAL_FAILURE(sample_full_batch(t, batch_options(64, 2), bufs, &info));
  std::set<uint32_t> seen;
  for (uint32_t k = 0; k < 64 * 2; ++k) {
    uint32_t step = ids[k];
    ASSERT_LT(step, 31u) << "row " << k;
    seen.insert(step);
    for (uint32_t i = 0; i < 1500; ++i)
      ASSERT_EQ(frames[size_t(k) * 1500 + i], byte(step, i)) << "row " << k << " (step " << step << "), byte " << i;
  }
  EXPECT_GT(seen.size(), 15u) << "uniform draws over 30 items";
  engram_writer_close(w);
}

TEST_F(CApi, LargeStepsSampleByteExactWhateverTheirOffsetInTheChunk) { large_steps_sample_byte_exact(false); }

TEST_F(CApi, LargeStepsStreamedByOneThreadAndSentByAnotherSampleByteExact) { large_steps_sample_byte_exact(true); }

// Both tests above again, in this binary run anew where membarrier is
// denied (kMembarrierDenied): streamed steps are then fenced one by one,
// and every sampled byte is still the one written.
TEST(CApiFallback, LargeStepsSampleByteExactWhereMembarrierIsDenied) {
  std::string dir = make_temp_dir();
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  ASSERT_GT(n, 0);
  self[n] = '\0';
  ASSERT_EQ(setenv("ENGRAM_TEST_DENY_MEMBARRIER", "1", 1), 0);
  pid_t pid = spawn({self, "--gtest_filter=CApi.LargeSteps*"}, dir + "/child.out");
  unsetenv("ENGRAM_TEST_DENY_MEMBARRIER");
  int rc = wait_exit(pid, 60000);
  std::string out = read_file(dir + "/child.out");
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("membarrier denied in this process"), std::string::npos) << out;
  EXPECT_NE(out.find("[  PASSED  ] 2 tests."), std::string::npos) << out;
  EXPECT_EQ(std::system(("rm -rf " + dir).c_str()), 0);
}

// An Atari-like frame: a static low-entropy texture, a score box that
// changes every 10 steps, and a 6x6 sprite that moves every step.
void atari_frame(uint32_t t, uint8_t* f) {
  std::mt19937 texture(11);  // the same background every frame
  for (uint32_t i = 0; i < 84 * 84; ++i) f[i] = static_cast<uint8_t>(texture() & 15);
  for (uint32_t y = 0; y < 8; ++y)
    for (uint32_t x = 0; x < 16; ++x) f[y * 84 + x] = static_cast<uint8_t>(t / 10);
  uint32_t sx = (t * 3) % 78, sy = 20 + t % 50;
  for (uint32_t y = 0; y < 6; ++y)
    for (uint32_t x = 0; x < 6; ++x) f[(sy + y) * 84 + sx + x] = static_cast<uint8_t>(200 + t % 50);
}

TEST_F(CApi, DeltaZstdFramesShrinkBelowAQuarterAndSampleByteExact) {
  engram_column cols[2] = {{"obs", ENGRAM_UINT8, 2, {84, 84}}, {"step", ENGRAM_UINT32, 0, {}}};
  engram_compression comp[2] = {{ENGRAM_CODEC_DELTA_ZSTD, 0}, {ENGRAM_CODEC_NONE, 0}};
  engram_table_options o = two_columns("atari", 10000, cols);
  o.compression = comp;
  ASSERT_EQ(engram_table_create(c_, &o), ENGRAM_OK) << last();
  engram_table* t = open("atari");
  engram_compression got[2];
  uint32_t n = 0;
  ASSERT_EQ(engram_table_compression(t, got, 2, &n), ENGRAM_OK);
  EXPECT_EQ(n, 2u);
  EXPECT_EQ(got[0].codec, ENGRAM_CODEC_DELTA_ZSTD);
  EXPECT_EQ(got[0].level, 3) << "level 0 means zstd's default, 3";
  EXPECT_EQ(got[1].codec, ENGRAM_CODEC_NONE);

  // A writer without the table's compression is refused, and told why.
  engram_writer* plain = writer(cols, 2, 20, 4);
  uint8_t frame[84 * 84];
  uint32_t step = 0;
  const void* data[2] = {frame, &step};
  atari_frame(0, frame);
  ASSERT_EQ(engram_writer_append(plain, data), ENGRAM_OK);
  EXPECT_EQ(engram_writer_create_item(plain, t, 1, 1.0), ENGRAM_E_SIGNATURE);
  EXPECT_NE(last().find("delta_zstd"), std::string::npos) << last();
  engram_writer_close(plain);

  engram_writer_options wo;
  engram_writer_options_init(&wo);
  wo.columns = cols;
  wo.num_columns = 2;
  wo.chunk_length = 20;
  wo.max_item_steps = 4;
  wo.compression = got;
  engram_writer* w = nullptr;
  ASSERT_EQ(engram_writer_open(c_, &wo, &w), ENGRAM_OK) << last();
  const uint32_t kSteps = 2000;
  for (step = 0; step < kSteps; ++step) {
    atari_frame(step, frame);
    ASSERT_EQ(engram_writer_append(w, data), ENGRAM_OK) << last();
    if (step >= 3) {
      ASSERT_EQ(engram_writer_create_item(w, t, 4, 1.0), ENGRAM_OK) << last();
    }
  }
  ASSERT_EQ(engram_writer_flush(w, 10000), ENGRAM_OK) << last();
  engram_table_info info;
  engram_table_info_init(&info);
  ASSERT_EQ(engram_table_info_get(c_, "atari", &info), ENGRAM_OK);
  EXPECT_EQ(info.size, kSteps - 3);
  EXPECT_EQ(info.bytes_raw, uint64_t{kSteps} * (84 * 84 + 4)) << "every chunk counted once";
  EXPECT_LT(info.bytes_stored * 4, info.bytes_raw) << info.bytes_stored << " of " << info.bytes_raw;
  std::printf("delta_zstd Atari-like frames: %llu raw bytes stored in %llu (%.1f%%)\n",
              static_cast<unsigned long long>(info.bytes_raw), static_cast<unsigned long long>(info.bytes_stored),
              100.0 * double(info.bytes_stored) / double(info.bytes_raw));

  // Every sampled byte is the frame that was written at that step.
  engram_sample_options so;
  engram_sample_options_init(&so);
  so.batch_size = 64;
  so.num_steps = 4;
  std::vector<uint8_t> obs(64 * 4 * 84 * 84);
  std::vector<uint32_t> steps(64 * 4);
  void* bufs[2] = {obs.data(), steps.data()};
  uint32_t count = 0;
  uint8_t want[84 * 84];
  for (int round = 0; round < 20; ++round) {
    ASSERT_EQ(engram_sample(t, &so, bufs, nullptr, &count), ENGRAM_OK) << last();
    ASSERT_EQ(count, 64u);
    for (uint32_t i = 0; i < 64 * 4; ++i) {
      ASSERT_LT(steps[i], kSteps);
      if (i % 4) {
        ASSERT_EQ(steps[i], steps[i - 1] + 1) << "an item's steps are consecutive";
      }
      atari_frame(steps[i], want);
      ASSERT_EQ(std::memcmp(&obs[size_t{i} * 84 * 84], want, sizeof want), 0) << "frame of step " << steps[i];
    }
  }

  // Zero-copy views: the uncompressed column yes, the compressed one no.
  engram_batch* b = nullptr;
  ASSERT_EQ(engram_sample_view(t, &so, &b), ENGRAM_OK) << last();
  engram_view views[8];
  uint32_t nv = 0;
  EXPECT_EQ(engram_batch_views(b, 0, 0, views, 8, &nv), ENGRAM_E_INVALID);
  EXPECT_NE(last().find("engram_sample"), std::string::npos) << last();
  ASSERT_EQ(engram_batch_views(b, 0, 1, views, 8, &nv), ENGRAM_OK) << last();
  uint32_t first = *static_cast<const uint32_t*>(views[0].data), seen = 0;
  for (uint32_t k = 0; k < nv; ++k)
    for (uint32_t j = 0; j < views[k].steps; ++j)
      EXPECT_EQ(static_cast<const uint32_t*>(views[k].data)[j], first + seen++);
  EXPECT_EQ(seen, 4u);
  engram_batch_release(b);
}

// A full arena: a writer with insert_timeout_ms 0 gets ENGRAM_E_NOMEM at
// once; with a timeout it waits at least that long for a block, then gets
// ENGRAM_E_TIMEOUT, and nothing already stored is lost.
TEST(CApiArena, AFullArenaIsNoMemAtOnceOrATimeoutAfterTheWait) {
  std::string dir = make_temp_dir(), socket = dir + "/engram.sock";
  engram_server_options so;
  engram_server_options_init(&so);
  so.socket_path = socket.c_str();
  so.config_toml = "[arena]\nclasses = [ { block_size = 128, count = 24 } ]\n";
  so.quiet = 1;
  engram_server* server = nullptr;
  ASSERT_EQ(engram_server_start(&so, &server), ENGRAM_OK) << last();
  engram_client* c = connect_c(socket);
  ASSERT_NE(c, nullptr);
  engram_column col = {"x", ENGRAM_FLOAT32, 0, {}};
  engram_table_options to;
  engram_table_options_init(&to);
  to.name = "t";
  to.max_size = 100;  // more items than blocks: the arena runs out first
  to.columns = &col;
  to.num_columns = 1;
  ASSERT_EQ(engram_table_create(c, &to), ENGRAM_OK) << last();
  engram_table* t = nullptr;
  ASSERT_EQ(engram_table_open(c, "t", &t), ENGRAM_OK) << last();
  int total = 0;  // items stored by both writers: the second finds the arena full already
  for (int32_t timeout_ms : {0, kCoarseDeadlineMs + 50}) {
    engram_writer_options wo;
    engram_writer_options_init(&wo);
    wo.columns = &col;
    wo.num_columns = 1;
    wo.insert_timeout_ms = timeout_ms;
    engram_writer* w = nullptr;
    ASSERT_EQ(engram_writer_open(c, &wo, &w), ENGRAM_OK) << last();
    float v = 1;
    const void* cols[1] = {&v};
    int rc = ENGRAM_OK;
    int stored = 0;
    int64_t start = 0;
    for (int i = 0; i < 100 && rc == ENGRAM_OK; ++i) {
      start = monotonic_ns();
      rc = engram_writer_append(w, cols);
      if (rc == ENGRAM_OK) {
        ASSERT_EQ(engram_writer_create_item(w, t, 1, 1.0), ENGRAM_OK) << last();
        ASSERT_EQ(engram_writer_flush(w, 5000), ENGRAM_OK) << last();
        ++stored;
      }
    }
    int64_t waited_ms = (monotonic_ns() - start) / 1000000;
    EXPECT_EQ(rc, timeout_ms == 0 ? ENGRAM_E_NOMEM : ENGRAM_E_TIMEOUT) << timeout_ms << ": " << last();
    EXPECT_NE(last().find("no free block of 128 bytes"), std::string::npos) << last();
    total += stored;
    EXPECT_GT(total, 0);
    if (timeout_ms == 0) EXPECT_LT(waited_ms, 50) << "insert_timeout_ms 0 must not wait";
    else EXPECT_GE(waited_ms, timeout_ms);
    engram_table_info info;
    engram_table_info_init(&info);
    ASSERT_EQ(engram_table_info_get(c, "t", &info), ENGRAM_OK) << last();
    EXPECT_EQ(info.size, uint64_t(total));
    engram_writer_close(w);
  }
  engram_table_close(t);
  engram_disconnect(c);
  EXPECT_EQ(engram_server_stop(server), ENGRAM_OK);
  EXPECT_EQ(std::system(("rm -rf " + dir).c_str()), 0);
}

// Samplers find an item of one plain chunk by the layout the owner checked
// at insert (PackedItemsWire::plain_steps), not by the chunk's header,
// which a writer can rewrite afterwards: such items still sample whole. An
// item of two chunks has its headers read and checked, so the rewrite is
// refused as corrupt.
TEST_F(CApi, OneChunkItemsSampleByTheLayoutCheckedAtInsert) {
  ASSERT_EQ(create("one"), ENGRAM_OK);
  ASSERT_EQ(create("two"), ENGRAM_OK);
  engram_table* one = open("one");
  engram_table* two = open("two");
  engram_writer* w = writer(cols_, 2, /*chunk_length=*/4, /*max_steps=*/2);
  for (int v = 1; v <= 8; ++v) {
    append(w, static_cast<uint8_t>(v));
    ASSERT_EQ(engram_writer_create_item(w, one, 1, 1.0), ENGRAM_OK) << last();
    if (v == 5) {  // steps 4 and 5, in two chunks
      ASSERT_EQ(engram_writer_create_item(w, two, 2, 1.0), ENGRAM_OK) << last();
    }
  }
  ASSERT_EQ(engram_writer_flush(w, 5000), ENGRAM_OK) << last();
  RawClient raw(socket_, "one");
  uint32_t rewritten = 0;
  for (uint32_t b = 0; b < raw.arena.total_blocks(); ++b) {
    if (!raw.ctl.committed_at_hello(raw.arena, b)) continue;
    auto* h = static_cast<ChunkHeader*>(raw.arena.data({b, 0}));
    if (h->magic != kChunkMagic) continue;
    h->magic = 0;
    h->capacity_steps = 1000000;
    ++rewritten;
  }
  EXPECT_EQ(rewritten, 2u) << "the writer's two chunks";

  engram_sample_options so;
  engram_sample_options_init(&so);
  so.batch_size = 32;
  uint8_t obs[32 * 20];
  float reward[32];
  void* bufs[2] = {obs, reward};
  uint32_t n = 0;
  ASSERT_EQ(engram_sample(one, &so, bufs, nullptr, &n), ENGRAM_OK) << last();
  ASSERT_EQ(n, 32u);
  for (uint32_t i = 0; i < n; ++i) {
    ASSERT_GE(reward[i], 1.0f);
    ASSERT_LE(reward[i], 8.0f);
    EXPECT_EQ(obs[i * 20 + 19], static_cast<uint8_t>(reward[i])) << "item " << i;
  }
  engram_batch* batch = nullptr;
  ASSERT_EQ(engram_sample_view(one, &so, &batch), ENGRAM_OK) << last();
  for (uint32_t i = 0; i < engram_batch_size(batch); ++i) {
    engram_view ov, rv;
    uint32_t nv = 0;
    ASSERT_EQ(engram_batch_views(batch, i, 0, &ov, 1, &nv), ENGRAM_OK) << last();
    ASSERT_EQ(engram_batch_views(batch, i, 1, &rv, 1, &nv), ENGRAM_OK) << last();
    float r = *static_cast<const float*>(rv.data);
    EXPECT_EQ(static_cast<const uint8_t*>(ov.data)[19], static_cast<uint8_t>(r)) << "item " << i;
  }
  engram_batch_release(batch);

  so.batch_size = 1;
  so.num_steps = 2;
  EXPECT_EQ(engram_sample(two, &so, bufs, nullptr, &n), ENGRAM_E_CORRUPT);
  EXPECT_EQ(engram_sample_view(two, &so, &batch), ENGRAM_E_CORRUPT);
}

// A copy-out works out a plain chunk's layout once per capacity, not per
// item (copy_plain_item in capi/sample.cpp). Writers of other chunk lengths
// lay the same columns out at other offsets, and one batch mixes their
// items: each must still come back whole.
TEST_F(CApi, OneChunkItemsOfWritersWithOtherChunkLengthsCopyOutWhole) {
  ASSERT_EQ(create("mixed", 200), ENGRAM_OK);
  engram_table* t = open("mixed");
  engram_writer* a = writer(cols_, 2, /*chunk_length=*/3);
  engram_writer* b = writer(cols_, 2, /*chunk_length=*/7);
  for (int v = 1; v <= 42; ++v) {
    ASSERT_NO_FATAL_FAILURE(append(a, static_cast<uint8_t>(v)));
    ASSERT_EQ(engram_writer_create_item(a, t, 1, 1.0), ENGRAM_OK) << last();
    ASSERT_NO_FATAL_FAILURE(append(b, static_cast<uint8_t>(100 + v)));
    ASSERT_EQ(engram_writer_create_item(b, t, 1, 1.0), ENGRAM_OK) << last();
  }
  ASSERT_EQ(engram_writer_flush(a, 5000), ENGRAM_OK) << last();
  ASSERT_EQ(engram_writer_flush(b, 5000), ENGRAM_OK) << last();
  std::vector<uint8_t> obs(128 * 20);
  std::vector<float> reward(128);
  void* bufs[2] = {obs.data(), reward.data()};
  std::vector<engram_sample_info> info;
  ASSERT_NO_FATAL_FAILURE(sample_full_batch(t, batch_options(128, 1), bufs, &info));
  uint32_t from_a = 0, from_b = 0;
  for (uint32_t i = 0; i < 128; ++i) {
    float v = reward[i];
    bool in_a = v >= 1 && v <= 42, in_b = v >= 101 && v <= 142;
    ASSERT_TRUE(in_a || in_b) << "item " << i << ": reward " << v << " was never written";
    (in_a ? from_a : from_b)++;
    for (uint32_t k = 0; k < 20; ++k)
      ASSERT_EQ(obs[i * 20 + k], static_cast<uint8_t>(v)) << "item " << i << ", obs byte " << k;
  }
  EXPECT_GT(from_a, 20u) << "uniform draws over both writers' items";
  EXPECT_GT(from_b, 20u) << "uniform draws over both writers' items";
  engram_writer_close(a);
  engram_writer_close(b);
}

}  // namespace
}  // namespace engram::test
