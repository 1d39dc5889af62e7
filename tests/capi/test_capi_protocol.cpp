// The channel protocol spoken raw: commands after the requests before them,
// garbage in rings and chunks, an overrun response ring, and a client that
// does not read its replies.
#include "capi/capi_fixture.hpp"

namespace engram::test {
namespace {

// A command to a table's owner (here a reset) comes after every request
// its sender pushed before sending it, even one the owner has not been
// rung for: the owner drains its channels before it runs commands.
TEST_F(CApi, ACommandComesAfterTheRequestsItsSenderPushedBeforeIt) {
  ASSERT_EQ(create("replay"), ENGRAM_OK);
  RawClient raw(socket_, "replay");
  auto b = raw.ctl.grant_one(0);
  ASSERT_TRUE(b.ok()) << b.status().message();
  RequestRecord ins = one_step_insert(*b, 1);
  // Long enough for the owner to stop spinning and sleep on the table's
  // bell, which the push below does not ring.
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_TRUE(raw.chan.requests.try_push(&ins).ok());
  ASSERT_EQ(engram_table_reset(c_, "replay"), ENGRAM_OK) << last();
  ResponseRecord rsp{};
  ASSERT_TRUE(raw.chan.responses.pop(&rsp, 5'000'000'000).ok());
  EXPECT_EQ(rsp.status, 0) << rsp.payload.message;
  engram_table_info info;
  engram_table_info_init(&info);
  ASSERT_EQ(engram_table_info_get(c_, "replay", &info), ENGRAM_OK) << last();
  EXPECT_EQ(info.size, 0u) << "the insert was applied after the reset";
}

// An insert that names a delivery (producer, sequence) is applied once: sent
// again, or older than the producer's newest, it is refused as
// already_exists and the table is unchanged; a local writer's inserts
// (producer 0) are not marked.
TEST_F(CApi, ADeliveredItemIsAppliedOnceEvenWhenSentAgain) {
  ASSERT_EQ(create("replay"), ENGRAM_OK);
  RawClient raw(socket_, "replay");
  auto b = raw.ctl.grant_one(0);
  ASSERT_TRUE(b.ok()) << b.status().message();
  auto deliver = [&](uint64_t producer, uint64_t sequence) {
    RequestRecord ins = one_step_insert(*b, 1);
    ins.payload.insert.producer = producer;
    ins.payload.insert.sequence = sequence;
    return raw.roundtrip(ins);
  };
  ResponseRecord first = deliver(5, 1);
  ASSERT_EQ(first.status, 0) << first.payload.message;
  for (uint64_t again : {1, 1}) {
    ResponseRecord dup = deliver(5, again);
    EXPECT_EQ(static_cast<Errc>(dup.status), Errc::already_exists) << dup.payload.message;
    EXPECT_NE(std::string(dup.payload.message).find("producer 5's item 1 was applied before"), std::string::npos)
        << dup.payload.message;
  }
  EXPECT_EQ(deliver(5, 3).status, 0);
  EXPECT_EQ(static_cast<Errc>(deliver(5, 2).status), Errc::already_exists) << "older than the newest";
  EXPECT_EQ(deliver(6, 1).status, 0) << "each producer counts on its own";
  EXPECT_EQ(deliver(0, 0).status, 0);
  EXPECT_EQ(deliver(0, 0).status, 0) << "a writer's inserts are not marked";
  EXPECT_EQ(static_cast<Errc>(deliver(7, 0).status), Errc::invalid_argument);
  engram_table_info info;
  engram_table_info_init(&info);
  ASSERT_EQ(engram_table_info_get(c_, "replay", &info), ENGRAM_OK) << last();
  EXPECT_EQ(info.size, 5u);
  EXPECT_EQ(info.inserts, 5u);
}

// A sample with kSampleSequences answers each item's place in the table's
// insertion order where its probability would be (one-slice items packed,
// as every sample); flags on anything else are refused. With
// kSampleNewest it looks at the newest instead, at once.
TEST_F(CApi, ASampleForDeliveryAnswersInsertionSequences) {
  engram_table_options to = two_columns("queue", 100);
  to.sampler = ENGRAM_FIFO;
  to.max_times_sampled = 1;
  ASSERT_EQ(engram_table_create(c_, &to), ENGRAM_OK) << last();
  RawClient raw(socket_, "queue");
  auto b = raw.ctl.grant_one(0);
  ASSERT_TRUE(b.ok()) << b.status().message();
  for (int i = 0; i < 5; ++i) ASSERT_EQ(raw.roundtrip(one_step_insert(*b, 1)).status, 0);
  RequestRecord take{};
  take.op = static_cast<uint32_t>(RequestOp::sample);
  take.count = 2;
  take.id = 100;
  take.flags = kSampleSequences;
  ResponseRecord rsp = raw.roundtrip(take);
  ASSERT_EQ(rsp.status, 0) << rsp.payload.message;
  ASSERT_EQ(rsp.op, static_cast<uint16_t>(RequestOp::sample_packed));
  ASSERT_EQ(rsp.payload.packed.n, 2u);
  // Numbers start at the clock (core/table.hpp, first_sequence) and grow
  // by one an insert.
  const uint64_t first = rsp.payload.packed.items[0].sequence;
  EXPECT_GT(first, uint64_t{1} << 60) << "nanoseconds since 1970";
  EXPECT_EQ(rsp.payload.packed.items[1].sequence, first + 1);
  RequestRecord plain = take;
  plain.id = 101;
  plain.flags = 0;
  rsp = raw.roundtrip(plain);
  ASSERT_EQ(rsp.status, 0) << rsp.payload.message;
  EXPECT_EQ(rsp.payload.packed.items[0].probability, 1.0) << "without the flag, a probability";
  RequestRecord odd = one_step_insert(*b, 1);
  odd.flags = kSampleDistinct;  // a sample's flag on an insert (kSampleNewest's bit is kInsertDraw's)
  rsp = raw.roundtrip(odd);
  EXPECT_EQ(static_cast<Errc>(rsp.status), Errc::invalid_argument);
  EXPECT_NE(std::string(rsp.payload.message).find("an insert kInsertAtMax or kInsertDraw, other requests none"),
            std::string::npos)
      << rsp.payload.message;
  take.id = 102;
  take.flags = 8;  // no sample flag has this bit
  EXPECT_EQ(static_cast<Errc>(raw.roundtrip(take).status), Errc::invalid_argument);
  take.id = 104;
  take.flags = kSampleNewest | kSampleDistinct;  // a look is distinct already
  rsp = raw.roundtrip(take);
  EXPECT_EQ(static_cast<Errc>(rsp.status), Errc::invalid_argument);
  EXPECT_NE(std::string(rsp.payload.message).find("drop kSampleDistinct"), std::string::npos) << rsp.payload.message;

  // A look at the newest (a mirror's): never waits, counts nothing.
  RequestRecord look = take;
  look.id = 103;
  look.flags = kSampleSequences | kSampleNewest;
  look.deadline_ns = 5;
  rsp = raw.roundtrip(look);
  EXPECT_EQ(static_cast<Errc>(rsp.status), Errc::invalid_argument);
  EXPECT_NE(std::string(rsp.payload.message).find("never waits"), std::string::npos) << rsp.payload.message;
  look.deadline_ns = 0;
  look.payload.keys[0] = first + 4;  // items 3 and 4 are left; from 4: the last only
  rsp = raw.roundtrip(look);
  ASSERT_EQ(rsp.status, 0) << rsp.payload.message;
  ASSERT_EQ(rsp.payload.packed.n, 1u);
  EXPECT_EQ(rsp.payload.packed.items[0].sequence, first + 4);
  look.id = 104;
  look.payload.keys[0] = first + 5;  // nothing that new: an empty answer, at once
  rsp = raw.roundtrip(look);
  ASSERT_EQ(rsp.status, 0) << rsp.payload.message;
  EXPECT_EQ(rsp.count, 0u);
}

TEST_F(CApi, GarbageInRingsAndChunksIsRejectedAndTheServerSurvives) {
  ASSERT_EQ(create("replay"), ENGRAM_OK);
  RawClient raw(socket_, "replay");
  std::mt19937_64 rng(3);
  // Random records: each gets an error response.
  for (int i = 0; i < 2000; ++i) {
    RequestRecord r;
    auto* words = reinterpret_cast<uint64_t*>(&r);
    for (size_t k = 0; k < sizeof r / 8; ++k) words[k] = rng();
    if (i % 2) r.op = static_cast<uint32_t>(RequestOp::insert) + static_cast<uint32_t>(rng() % 2);
    if (r.op == static_cast<uint32_t>(RequestOp::sample)) r.deadline_ns = 0;
    ResponseRecord rsp = raw.roundtrip(r);
    ASSERT_NE(rsp.status, 0) << "garbage request " << i << " was accepted";
  }
  // A plain table's owner takes a chunk's layout from the request
  // (chunk_steps), checked against the block, and never reads the header,
  // garbage here: a slice outside the stated steps is refused as corrupt,
  // and so is a layout larger than the block.
  auto b = raw.ctl.grant_one(0);
  ASSERT_TRUE(b.ok()) << b.status().message();
  auto* bytes = static_cast<uint64_t*>(raw.arena.data(*b));
  for (int k = 0; k < 8; ++k) bytes[k] = rng();
  RequestRecord ins = one_step_insert(*b, 0);
  ResponseRecord rsp = raw.roundtrip(ins);
  EXPECT_EQ(static_cast<Errc>(rsp.status), Errc::corrupt) << rsp.payload.message;
  EXPECT_NE(std::string(rsp.payload.message).find("outside the chunk's 0 steps"), std::string::npos)
      << rsp.payload.message;
  ins.payload.insert.chunk_steps = 1000000;
  rsp = raw.roundtrip(ins);
  EXPECT_EQ(static_cast<Errc>(rsp.status), Errc::corrupt) << rsp.payload.message;
  EXPECT_NE(std::string(rsp.payload.message).find("exceeds its block"), std::string::npos) << rsp.payload.message;
  // A chunk in a block that is no longer ours (freed: its generation moved
  // on) cannot be referenced.
  ins.payload.insert.chunk_steps = 1;
  EXPECT_TRUE(raw.ctl.give_back({*b}).ok()) << "refusals left the block ours";
  rsp = raw.roundtrip(ins);
  EXPECT_EQ(static_cast<Errc>(rsp.status), Errc::stale_reference) << rsp.payload.message;

  // Scribbled ring words make records look unpublished, never misread:
  // the owner answers nothing and closes nothing, and the channel works
  // again once the client writes whole records.
  auto* rh = reinterpret_cast<RingHeader*>(static_cast<char*>(raw.chan_seg.data()) + raw.chan.header->request_offset);
  char* slots = reinterpret_cast<char*>(rh) + sizeof(RingHeader);
  uint64_t head = rh->head.load();
  rh->head.store(head + 1'000'000);
  for (uint32_t k = 0; k < rh->capacity; ++k)  // no position near the ring's
    reinterpret_cast<std::atomic<uint32_t>*>(slots + size_t{k} * rh->record_size)->store(0xffff0000u + k);
  raw.bell->ring();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(raw.chan.responses.has_data()) << "a scribbled slot was read as a request";
  EXPECT_EQ(raw.chan.header->closed.load(), 0u);
  rh->head.store(head);  // the client's own scribble would only block its pushes
  rsp = raw.roundtrip(ins);
  EXPECT_EQ(static_cast<Errc>(rsp.status), Errc::stale_reference) << rsp.payload.message;

  // Everyone else is served as before.
  engram_table* t = open("replay");
  engram_writer* w = writer(cols_, 2);
  append(w, 42);
  ASSERT_EQ(engram_writer_create_item(w, t, 1, 1.0), ENGRAM_OK);
  ASSERT_EQ(engram_writer_flush(w, 5000), ENGRAM_OK) << last();
  engram_sample_options so;
  engram_sample_options_init(&so);
  uint8_t obs[20];
  float r;
  void* bufs[2] = {obs, &r};
  uint32_t got = 0;
  ASSERT_EQ(engram_sample(t, &so, bufs, nullptr, &got), ENGRAM_OK) << last();
  EXPECT_EQ(obs[19], 42);

  // With a stated layout that fits, a garbage header does not matter (the
  // owner does not read it): the item is taken, and samples by that layout.
  engram_writer_close(w);
  ASSERT_EQ(engram_table_reset(c_, "replay"), ENGRAM_OK) << last();
  auto g = raw.ctl.grant_one(0);
  ASSERT_TRUE(g.ok()) << g.status().message();
  auto* block = static_cast<uint8_t*>(raw.arena.data(*g));
  for (int k = 0; k < 64; ++k) block[k] = static_cast<uint8_t>(rng());
  uint8_t step_obs[20];
  for (int k = 0; k < 20; ++k) step_obs[k] = static_cast<uint8_t>(100 + k);
  std::vector<Column> cols = {make_column("obs", DType::u8, {4, 5}), make_column("reward", DType::f32, {})};
  std::memcpy(block + chunk_column_offset(cols.data(), 0, 1), step_obs, sizeof step_obs);
  ins.payload.insert.refs[0] = {g->index, g->generation, 0, 1};
  rsp = raw.roundtrip(ins);
  ASSERT_EQ(rsp.status, 0) << rsp.payload.message;
  ASSERT_EQ(engram_sample(t, &so, bufs, nullptr, &got), ENGRAM_OK) << last();
  EXPECT_EQ(std::memcmp(obs, step_obs, sizeof obs), 0);
}

// A client that keeps sending requests without popping their responses
// breaks the credit rule: once its response ring is full, the owner closes
// that channel (it never waits for room) and serves everyone else.
TEST_F(CApi, AClientThatOverrunsItsResponseRingLosesThatChannelOnly) {
  ASSERT_EQ(create("replay"), ENGRAM_OK);
  RawClient raw(socket_, "replay");
  RequestRecord upd{};
  upd.op = static_cast<uint32_t>(RequestOp::update);
  upd.count = 1;
  upd.payload.updates[0] = {12345, 1.0};  // unknown key: one response each
  uint32_t sent = 0;
  for (int64_t end = monotonic_ns() + 5'000'000'000;
       monotonic_ns() < end && raw.chan.header->closed.load() == 0 && sent < 4 * raw.chan.responses.capacity();) {
    upd.id = sent + 1;
    if (raw.chan.requests.try_push(&upd).ok()) ++sent;
    else std::this_thread::sleep_for(std::chrono::microseconds(100));
    raw.bell->ring();
  }
  for (int i = 0; i < 500 && raw.chan.header->closed.load() == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  EXPECT_EQ(raw.chan.header->closed.load(), static_cast<uint32_t>(ChannelClosed::protocol_error))
      << sent << " requests sent, none of their responses popped";
  engram_table* t = open("replay");
  engram_writer* w = writer(cols_, 2);
  append(w, 9);
  ASSERT_EQ(engram_writer_create_item(w, t, 1, 1.0), ENGRAM_OK);
  ASSERT_EQ(engram_writer_flush(w, 5000), ENGRAM_OK) << last();
}

TEST_F(CApi, AClientThatDoesNotReadItsRepliesCannotStallTheServer) {
  ASSERT_EQ(create("replay"), ENGRAM_OK);
  Control flood(socket_);
  ASSERT_TRUE(flood.ok());
  ASSERT_EQ(::fcntl(flood.fd(), F_SETFL, O_NONBLOCK), 0);  // so that this test can only fail, never hang
  // Requests without reading a single reply, for up to 2 s or until the
  // server hangs up on us.
  int sent = 0;
  bool hung_up = false;
  for (int64_t end = monotonic_ns() + 2'000'000'000; monotonic_ns() < end;) {
    Status st = send_message(flood.fd(), ControlType::status, 0, nullptr, 0);
    if (st.ok()) ++sent;
    else if (st.code() == Errc::full) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    else {
      hung_up = true;
      break;
    }
  }
  EXPECT_TRUE(hung_up) << "the server kept a client that does not read its replies (" << sent << " requests)";
  // Everyone else is still served, control plane included.
  engram_table_info i;
  engram_table_info_init(&i);
  for (int k = 0; k < 100; ++k) ASSERT_EQ(engram_table_info_get(c_, "replay", &i), ENGRAM_OK) << last();
  engram_client* other = connect_c(socket_);
  ASSERT_NE(other, nullptr);
  engram_disconnect(other);
}

}  // namespace
}  // namespace engram::test
