// The relay (capi/relay.h): chunks sealed by a writer elsewhere, copied
// whole into this client's blocks, and items over them inserted once per
// delivery, each answer counted in order; and taking (capi/take.h): items
// of a local table with their insertion sequences, pinned for delivery.
// What engramd's peers build on.
#include "capi/capi_fixture.hpp"
#include "capi/relay.h"
#include "capi/take.h"
#include "core/chunk_format.hpp"

#include <map>

namespace engram::test {
namespace {

// A plain chunk of the fixture's columns (obs uint8 [4, 5], reward float32)
// as a writer elsewhere seals it: step i's obs bytes and reward are i.
std::vector<char> sealed_chunk(uint32_t steps, uint32_t capacity, uint64_t sig_hash_override = 0) {
  Column cols[2] = {make_column("obs", DType::u8, {4, 5}), make_column("reward", DType::f32, {})};
  std::vector<char> bytes(chunk_bytes(cols, 2, capacity));
  ChunkHeader h{};
  h.magic = kChunkMagic;
  h.num_steps = steps;
  h.capacity_steps = capacity;
  h.num_columns = 2;
  h.signature_hash = sig_hash_override ? sig_hash_override : signature_hash(cols, 2);
  h.episode = 1;
  std::memcpy(bytes.data(), &h, sizeof h);
  for (uint32_t i = 0; i < steps; ++i) {
    std::memset(bytes.data() + chunk_column_offset(cols, 0, capacity) + i * 20, static_cast<int>(i), 20);
    float r = static_cast<float>(i);
    std::memcpy(bytes.data() + chunk_column_offset(cols, 1, capacity) + i * 4, &r, 4);
  }
  return bytes;
}

// Takes the relay's answers until `n` items are answered (or about 100 s
// pass); the counts as they then stand.
struct Answers {
  uint64_t answered = 0, duplicates = 0, refused = 0;
};
Answers answered_up_to(engram_writer* relay, uint64_t n) {
  Answers a;
  for (int i = 0; i < 100 && a.answered < n; ++i)
    EXPECT_EQ(engram_private_relay_answered(relay, 1000, &a.answered, &a.duplicates, &a.refused), ENGRAM_OK)
        << engram_last_error();
  return a;
}

TEST_F(CApi, ARelayInsertsChunksSealedElsewhereOncePerDelivery) {
  engram_table_options to = two_columns("replay", 100);
  to.sampler = ENGRAM_FIFO;
  to.max_times_sampled = 1;  // each item once, in insertion order
  ASSERT_EQ(engram_table_create(c_, &to), ENGRAM_OK) << last();
  engram_table* t = open("replay");
  engram_writer* relay = nullptr;
  ASSERT_EQ(engram_private_relay_open(c_, t, &relay), ENGRAM_OK) << last();
  std::vector<char> chunk = sealed_chunk(3, 4);
  uint64_t id = 0;
  ASSERT_EQ(engram_private_relay_chunk(relay, chunk.data(), chunk.size(), 5000, &id), ENGRAM_OK) << last();
  auto item = [&](uint32_t step, uint64_t sequence) {
    uint32_t len = 1;
    return engram_private_relay_item(relay, &id, &step, &len, 1, 1.0, 9, sequence);
  };
  ASSERT_EQ(item(0, 1), ENGRAM_OK) << last();
  ASSERT_EQ(item(1, 2), ENGRAM_OK) << last();
  ASSERT_EQ(item(0, 1), ENGRAM_OK) << "sent again, as after a broken link: " << last();
  ASSERT_EQ(item(2, 3), ENGRAM_OK) << last();
  Answers a = answered_up_to(relay, 4);
  EXPECT_EQ(a.answered, 4u);
  EXPECT_EQ(a.duplicates, 1u);
  EXPECT_EQ(a.refused, 0u) << engram_private_relay_refusal(relay);

  // The three items hold the chunk's steps 0, 1, 2, in order.
  engram_sample_options so = batch_options(3, 1);
  uint8_t obs[3 * 20];
  float reward[3];
  void* bufs[2] = {obs, reward};
  std::vector<engram_sample_info> info;
  sample_full_batch(t, so, bufs, &info);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(reward[i], static_cast<float>(i));
    EXPECT_EQ(obs[i * 20 + 19], i);
  }

  // What no chunk of this table is, and items over what the relay does
  // not hold, are refused by name; the relay carries on.
  std::vector<char> other = sealed_chunk(3, 4, 12345);
  uint64_t unused = 0;
  EXPECT_EQ(engram_private_relay_chunk(relay, other.data(), other.size(), 0, &unused), ENGRAM_E_CORRUPT);
  EXPECT_NE(std::string(last()).find("not that of a sealed chunk of table replay"), std::string::npos) << last();
  EXPECT_EQ(engram_private_relay_chunk(relay, other.data(), 10, 0, &unused), ENGRAM_E_CORRUPT);
  uint32_t step = 3, len = 1;
  EXPECT_EQ(engram_private_relay_item(relay, &id, &step, &len, 1, 1.0, 9, 4), ENGRAM_E_INVALID) << "past the chunk's steps";
  uint64_t nowhere = id + 7;
  step = 0;
  EXPECT_EQ(engram_private_relay_item(relay, &nowhere, &step, &len, 1, 1.0, 9, 4), ENGRAM_E_INVALID);
  ASSERT_EQ(engram_private_relay_forget(relay, id), ENGRAM_OK) << last();
  EXPECT_EQ(engram_private_relay_item(relay, &id, &step, &len, 1, 1.0, 9, 4), ENGRAM_E_INVALID) << "forgotten";
  EXPECT_EQ(engram_private_relay_forget(relay, id), ENGRAM_E_INVALID);

  // A bad priority reaches the table's refusal like any other answer.
  ASSERT_EQ(engram_private_relay_chunk(relay, chunk.data(), chunk.size(), 5000, &id), ENGRAM_OK) << last();
  step = 0;
  EXPECT_EQ(engram_private_relay_item(relay, &id, &step, &len, 1, -1.0, 9, 4), ENGRAM_E_PRIORITY);
  ASSERT_EQ(engram_private_relay_item(relay, &id, &step, &len, 1, 1.0, 9, 4), ENGRAM_OK) << last();
  EXPECT_EQ(answered_up_to(relay, 5).answered, 5u);
  engram_writer_close(relay);
  engram_table_info ti;
  engram_table_info_init(&ti);
  ASSERT_EQ(engram_table_info_get(c_, "replay", &ti), ENGRAM_OK) << last();
  EXPECT_EQ(ti.inserts, 4u);
  engram_table_close(t);
}

// Items taken for delivery come oldest first with their insertion
// sequences, their chunks readable through the batch until it is freed;
// what a sender copies of a chunk is what a relay takes in, so the two
// ends meet: taken from one table, relayed into another, sampled back.
TEST_F(CApi, TakenItemsCarryTheirSequencesAndRelayIntoAnotherTable) {
  engram_table_options to = two_columns("outbox", 100);
  to.sampler = ENGRAM_FIFO;
  to.max_times_sampled = 1;
  ASSERT_EQ(engram_table_create(c_, &to), ENGRAM_OK) << last();
  to.name = "inbox";
  ASSERT_EQ(engram_table_create(c_, &to), ENGRAM_OK) << last();
  engram_table* out = open("outbox");
  engram_table* in = open("inbox");
  engram_writer* w = writer(cols_, 2, 4);  // chunks of 4 steps: 2 chunks for 6 items
  insert_items(w, out, 6);
  engram_writer_close(w);

  engram_taken* taken = nullptr;
  ASSERT_EQ(engram_private_take(out, 4, 1000, &taken), ENGRAM_OK) << last();
  ASSERT_EQ(engram_private_taken_count(taken), 4u);
  uint32_t ncols = 0;
  const auto* cols = static_cast<const Column*>(engram_private_table_columns(out, &ncols));
  ASSERT_EQ(ncols, 2u);
  engram_writer* relay = nullptr;
  ASSERT_EQ(engram_private_relay_open(c_, in, &relay), ENGRAM_OK) << last();
  std::map<uint64_t, uint64_t> relayed;  // the sender's chunk name -> the relay's id
  uint64_t first = 0;  // the table's first number (the clock at its creation)
  for (uint32_t i = 0; i < 4; ++i) {
    engram_private_item it;
    ASSERT_EQ(engram_private_taken_item(taken, i, &it), ENGRAM_OK) << last();
    if (i == 0) first = it.sequence;
    EXPECT_EQ(it.sequence, first + i) << "the oldest first, by their insertion order";
    ASSERT_EQ(it.num_slices, 1u);
    const engram_private_slice& sl = it.slices[0];
    if (!relayed.count(sl.chunk)) {
      std::string bytes;
      ASSERT_TRUE(copy_sealed_chunk(sl.block, sl.block_size, cols, ncols, engram_private_table_signature(out), &bytes).ok());
      uint64_t id = 0;
      ASSERT_EQ(engram_private_relay_chunk(relay, bytes.data(), bytes.size(), 1000, &id), ENGRAM_OK) << last();
      relayed[sl.chunk] = id;
    }
    uint64_t id = relayed[sl.chunk];
    ASSERT_EQ(engram_private_relay_item(relay, &id, &sl.offset, &sl.length, 1, it.priority, 3, it.sequence + 1),
              ENGRAM_OK)
        << last();
  }
  EXPECT_EQ(relayed.size(), 1u) << "the first four items share the first chunk";
  EXPECT_EQ(answered_up_to(relay, 4).answered, 4u);
  engram_private_taken_free(taken);  // answered: the sender lets them go
  engram_writer_close(relay);

  engram_sample_options so = batch_options(4, 1);
  uint8_t obs[4 * 20];
  float reward[4];
  void* bufs[2] = {obs, reward};
  std::vector<engram_sample_info> info;
  sample_full_batch(in, so, bufs, &info);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(reward[i], static_cast<float>(i));
  engram_table_info ti;
  engram_table_info_init(&ti);
  ASSERT_EQ(engram_table_info_get(c_, "outbox", &ti), ENGRAM_OK) << last();
  EXPECT_EQ(ti.size, 2u) << "taken items left the outbox; two wait";
  engram_table_close(in);
  engram_table_close(out);
}

}  // namespace
}  // namespace engram::test
