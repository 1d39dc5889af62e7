// Sample (remote/shard_sample): engramd as a shard of a peer's sharded
// table. Draws come with their chunks, each item's probability in the
// table, and the table's mass and size at the draw, which is what the
// peer splits its batches by (core/shard_split); they count as the
// table's samples; bad requests are refused by name, the server going on.
// The peer here is the test.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "core/chunk_format.hpp"
#include "remote/peer.grpc.pb.h"
#include "remote/peer_probe.hpp"

namespace engram::test {
namespace {

namespace pb = engram::peer::v1;

const Column kCols[2] = {make_column("obs", DType::u8, {10, 30}), make_column("meta", DType::i64, {2})};
const uint64_t kSig = signature_hash(kCols, 2);
constexpr double kExponent = 0.6;
constexpr int kItems = 50;

// The meta[0] of the step a draw's first slice names, read from its
// reply's chunk as a peer would; -1 if the chunk is not in the reply or
// the slice is outside it.
int64_t meta_of(const pb::SampleReply& r, const pb::Draw& d) {
  if (d.slices_size() != 1) return -1;
  for (const pb::Chunk& c : r.chunks()) {
    if (c.id() != d.slices(0).chunk()) continue;
    ChunkHeader h;
    if (c.data().size() < sizeof h) return -1;
    std::memcpy(&h, c.data().data(), sizeof h);
    if (d.slices(0).offset() >= h.num_steps) return -1;
    int64_t meta[2];
    std::memcpy(meta, c.data().data() + chunk_column_offset(kCols, 1, h.capacity_steps) + d.slices(0).offset() * 16,
                sizeof meta);
    uint8_t obs = static_cast<uint8_t>(c.data()[chunk_column_offset(kCols, 0, h.capacity_steps) + d.slices(0).offset() * 300]);
    return obs == static_cast<uint8_t>(meta[0]) && meta[1] == 7 ? meta[0] : -1;
  }
  return -1;
}

class RemoteSample : public ::testing::Test {
 protected:
  RemoteSample()
      : d_("[remote]\nlisten = \"127.0.0.1:0\"\n" +
           table_toml("replay", "max_size = 1000\nsampler = \"prioritized\"\npriority_exponent = 0.6\n") +
           table_toml("even", "max_size = 1000\n") +
           table_toml("queue", "max_size = 1000\nsampler = \"fifo\"\n") +
           table_toml("held", "max_size = 1000\nrate_limiter = { kind = \"min_size\", min_size = 100 }\n")) {
    address_ = remote_address(d_);
    EXPECT_FALSE(address_.empty()) << read_file(d_.log());
    stub_ = pb::Peer::NewStub(grpc::CreateChannel(address_, grpc::InsecureChannelCredentials()));
  }
  struct Stream {
    grpc::ClientContext ctx;
    std::unique_ptr<grpc::ClientReaderWriter<pb::SampleRequest, pb::SampleReply>> rw;
  };
  std::unique_ptr<Stream> open() {
    auto s = std::make_unique<Stream>();
    s->ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    s->rw = stub_->Sample(&s->ctx);
    return s;
  }
  static pb::SampleRequest request(uint32_t draws, const std::string& table = "", int32_t timeout_ms = 2000) {
    pb::SampleRequest rq;
    if (!table.empty()) {
      rq.set_table(table);
      rq.set_signature(kSig);
    }
    rq.set_draws(draws);
    rq.set_timeout_ms(timeout_ms);
    return rq;
  }
  // The status a stream ends with after rq (and, if given, a first good one).
  grpc::Status refused(const std::vector<pb::SampleRequest>& rqs) {
    auto s = open();
    pb::SampleReply r;
    for (const auto& rq : rqs)
      if (!s->rw->Write(rq) || !s->rw->Read(&r)) break;
    s->rw->WritesDone();
    return s->rw->Finish();
  }

  Daemon d_;
  std::string address_;
  std::unique_ptr<pb::Peer::Stub> stub_;
};

TEST_F(RemoteSample, DrawsCarryTheirChunksProbabilitiesAndTheTablesMass) {
  write_items(d_.socket(), "replay", 0, kItems, 8, true);
  double mass = 0;
  for (int i = 0; i < kItems; ++i) mass += std::pow(1.0 + i, kExponent);

  auto s = open();
  // Three requests in flight before the first reply is read.
  ASSERT_TRUE(s->rw->Write(request(64, "replay")));
  ASSERT_TRUE(s->rw->Write(request(5)));
  ASSERT_TRUE(s->rw->Write(request(200)));
  uint32_t want[3] = {64, 5, 200};
  for (uint32_t n : want) {
    pb::SampleReply r;
    ASSERT_TRUE(s->rw->Read(&r)) << s->rw->Finish().error_message();
    ASSERT_FALSE(r.held());
    ASSERT_EQ(r.draws_size(), static_cast<int>(n));
    EXPECT_EQ(r.size(), static_cast<uint64_t>(kItems));
    EXPECT_NEAR(r.mass() / mass, 1.0, 1e-12) << "the table's mass, from its sum tree";
    for (const pb::Draw& d : r.draws()) {
      int64_t i = meta_of(r, d);
      ASSERT_GE(i, 0) << "a draw's slice must name a chunk of its reply, whole";
      EXPECT_EQ(d.priority(), 1.0 + i) << "the draw's bytes are its item's";
      EXPECT_NEAR(d.probability() * mass / std::pow(d.priority(), kExponent), 1.0, 1e-12);
      EXPECT_GE(d.times_sampled(), 1u) << "times_sampled counts this draw";
    }
  }
  s->rw->WritesDone();
  EXPECT_TRUE(s->rw->Finish().ok());
  EXPECT_EQ(samples(d_.socket(), "replay"), 269u) << "draws are the table's samples";
}

TEST_F(RemoteSample, AUniformTablesMassIsItsSize) {
  write_items(d_.socket(), "even", 0, 20, 8, true);
  auto s = open();
  pb::SampleReply r;
  ASSERT_TRUE(s->rw->Write(request(10, "even")));
  ASSERT_TRUE(s->rw->Read(&r)) << s->rw->Finish().error_message();
  EXPECT_EQ(r.mass(), 20.0);
  EXPECT_EQ(r.size(), 20u);
  for (const pb::Draw& d : r.draws()) EXPECT_DOUBLE_EQ(d.probability(), 1.0 / 20);
  s->rw->WritesDone();
  EXPECT_TRUE(s->rw->Finish().ok());
}

TEST_F(RemoteSample, DrawsTheRateLimiterHoldsComeBackHeld) {
  write_items(d_.socket(), "held", 0, 10, 8, true);  // min_size 100: sampling waits
  auto s = open();
  pb::SampleReply r;
  ASSERT_TRUE(s->rw->Write(request(4, "held", 50)));
  ASSERT_TRUE(s->rw->Read(&r)) << s->rw->Finish().error_message();
  EXPECT_TRUE(r.held());
  EXPECT_EQ(r.draws_size(), 0);
  // The stream goes on: the next request is served once the limiter allows.
  write_items(d_.socket(), "held", 0, 100, 8, true);
  ASSERT_TRUE(s->rw->Write(request(4)));
  ASSERT_TRUE(s->rw->Read(&r)) << s->rw->Finish().error_message();
  EXPECT_FALSE(r.held());
  EXPECT_EQ(r.draws_size(), 4);
  s->rw->WritesDone();
  EXPECT_TRUE(s->rw->Finish().ok());
}

TEST_F(RemoteSample, UpdatesGoInOrderBeforeTheDrawsAndAnItemGoneIsCounted) {
  write_items(d_.socket(), "replay", 0, kItems, 8, true);
  auto s = open();
  pb::SampleReply r;
  ASSERT_TRUE(s->rw->Write(request(4, "replay")));
  ASSERT_TRUE(s->rw->Read(&r)) << s->rw->Finish().error_message();
  ASSERT_EQ(r.draws_size(), 4);
  std::map<uint64_t, double> drawn;  // key -> its priority
  for (const pb::Draw& d : r.draws()) drawn[d.key()] = d.priority();
  double mass = r.mass();
  // Each drawn item to 100, then its first to 3 (the later update wins),
  // and one key the table never issued: no draws, only updates.
  pb::SampleRequest up = request(0);
  for (const auto& [key, p] : drawn) {
    pb::Update* u = up.add_updates();
    u->set_key(key);
    u->set_priority(100.0);
    mass += std::pow(100.0, kExponent) - std::pow(p, kExponent);
  }
  pb::Update* again = up.add_updates();
  again->set_key(drawn.begin()->first);
  again->set_priority(3.0);
  mass += std::pow(3.0, kExponent) - std::pow(100.0, kExponent);
  pb::Update* gone = up.add_updates();
  gone->set_key(drawn.begin()->first + (uint64_t{7} << 32));
  gone->set_priority(1.0);
  ASSERT_TRUE(s->rw->Write(up));
  ASSERT_TRUE(s->rw->Read(&r)) << s->rw->Finish().error_message();
  EXPECT_EQ(r.draws_size(), 0);
  EXPECT_FALSE(r.held()) << "none asked, none held";
  ASSERT_TRUE(s->rw->Write(request(1)));
  ASSERT_TRUE(s->rw->Read(&r)) << s->rw->Finish().error_message();
  EXPECT_NEAR(r.mass() / mass, 1.0, 1e-12) << "the updates were applied, in order, before the draw";
  // Items evicted since their draw: their updates are counted there.
  write_items(d_.socket(), "replay", kItems, 1000, 8, true);
  pb::SampleRequest late = request(0);
  for (const auto& [key, p] : drawn) {
    pb::Update* u = late.add_updates();
    u->set_key(key);
    u->set_priority(5.0);
  }
  const uint64_t stale_before = stale_requests(d_.socket(), "replay");
  ASSERT_TRUE(s->rw->Write(late));
  ASSERT_TRUE(s->rw->Read(&r)) << s->rw->Finish().error_message();
  ASSERT_TRUE(s->rw->Write(request(1)));  // after the updates' answers
  ASSERT_TRUE(s->rw->Read(&r)) << s->rw->Finish().error_message();
  EXPECT_EQ(stale_requests(d_.socket(), "replay") - stale_before, 4u);
  // A priority the table refuses ends the stream, by name.
  pb::SampleRequest bad = request(1);
  pb::Update* neg = bad.add_updates();
  neg->set_key(drawn.begin()->first);
  neg->set_priority(-1.0);
  ASSERT_TRUE(s->rw->Write(bad));
  EXPECT_FALSE(s->rw->Read(&r));
  grpc::Status st = s->rw->Finish();
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << st.error_message();
  EXPECT_NE(st.error_message().find("SampleRequest.updates"), std::string::npos) << st.error_message();
}

TEST_F(RemoteSample, BadRequestsAreRefusedByNameAndTheServerGoesOn) {
  write_items(d_.socket(), "replay", 0, kItems, 8, true);
  write_items(d_.socket(), "queue", 0, 5, 8, true);
  pb::SampleRequest wrong_columns = request(4, "replay");
  wrong_columns.set_signature(kSig + 1);
  pb::SampleRequest late_table = request(4, "replay");
  struct Case {
    std::vector<pb::SampleRequest> rqs;
    grpc::StatusCode code;
    const char* says;
  } cases[] = {
      {{request(0, "replay")}, grpc::StatusCode::INVALID_ARGUMENT, "SampleRequest.draws is 0"},
      {{request(257, "replay")}, grpc::StatusCode::INVALID_ARGUMENT, "SampleRequest.draws is 257"},
      {{request(4, "replay", -1)}, grpc::StatusCode::INVALID_ARGUMENT, "SampleRequest.timeout_ms is -1"},
      {{request(4, "replay", 10001)}, grpc::StatusCode::INVALID_ARGUMENT, "SampleRequest.timeout_ms is 10001"},
      {{request(4)}, grpc::StatusCode::INVALID_ARGUMENT, "SampleRequest.table must name a table"},
      {{request(4, "nope")}, grpc::StatusCode::NOT_FOUND, "nope"},
      {{wrong_columns}, grpc::StatusCode::FAILED_PRECONDITION, "other columns"},
      {{request(4, "queue")}, grpc::StatusCode::FAILED_PRECONDITION, "not sampled uniformly or by priority"},
      {{request(4, "replay"), late_table}, grpc::StatusCode::INVALID_ARGUMENT, "for the first request only"},
  };
  for (const Case& c : cases) {
    grpc::Status st = refused(c.rqs);
    EXPECT_EQ(st.error_code(), c.code) << c.says << ": " << st.error_message();
    EXPECT_NE(st.error_message().find(c.says), std::string::npos) << st.error_message();
  }
  auto s = open();
  pb::SampleReply r;
  ASSERT_TRUE(s->rw->Write(request(8, "replay")));
  ASSERT_TRUE(s->rw->Read(&r)) << s->rw->Finish().error_message();
  EXPECT_EQ(r.draws_size(), 8);
  s->rw->WritesDone();
  EXPECT_TRUE(s->rw->Finish().ok());
}

}  // namespace
}  // namespace engram::test
