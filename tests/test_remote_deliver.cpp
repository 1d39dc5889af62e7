// Deliver (remote/deliver): a peer's items into a table of engramd over
// gRPC, each delivery applied once, every bad request refused by name
// while the server carries on (and a bad Follow beside a delivery). The
// peer here is the test, with chunks built by hand as a writer elsewhere
// seals them.
#include <gtest/gtest.h>

#include "core/chunk_format.hpp"
#include "remote/peer.grpc.pb.h"
#include "remote/peer_probe.hpp"

namespace engram::test {
namespace {

namespace pb = engram::peer::v1;

// The columns of kProcColumns: obs uint8 [10, 30], meta int64 [2].
const Column kCols[2] = {make_column("obs", DType::u8, {10, 30}), make_column("meta", DType::i64, {2})};
const uint64_t kSig = signature_hash(kCols, 2);

// A sealed plain chunk of `steps` steps (room for `capacity`): step i's obs
// bytes are (first + i) & 0xff and its meta is {first + i, 7}.
std::string sealed_chunk(uint32_t steps, uint32_t capacity, int64_t first) {
  std::string bytes(chunk_bytes(kCols, 2, capacity), '\0');
  ChunkHeader h{};
  h.magic = kChunkMagic;
  h.num_steps = steps;
  h.capacity_steps = capacity;
  h.num_columns = 2;
  h.signature_hash = kSig;
  h.episode = 1;
  std::memcpy(bytes.data(), &h, sizeof h);
  for (uint32_t i = 0; i < steps; ++i) {
    std::memset(bytes.data() + chunk_column_offset(kCols, 0, capacity) + i * 300, static_cast<int>((first + i) & 0xff), 300);
    int64_t meta[2] = {first + i, 7};
    std::memcpy(bytes.data() + chunk_column_offset(kCols, 1, capacity) + i * 16, meta, 16);
  }
  return bytes;
}

// A request carrying chunk `id` (steps of values first..) and one item per
// step, sequences seq0, seq0 + 1, ...
pb::DeliverRequest batch(uint64_t id, uint32_t steps, int64_t first, uint64_t seq0) {
  pb::DeliverRequest rq;
  auto* c = rq.add_chunks();
  c->set_id(id);
  c->set_data(sealed_chunk(steps, 4, first));
  for (uint32_t i = 0; i < steps; ++i) {
    auto* it = rq.add_items();
    it->set_sequence(seq0 + i);
    it->set_priority(1.0);
    auto* s = it->add_slices();
    s->set_chunk(id);
    s->set_offset(i);
    s->set_length(1);
  }
  return rq;
}

void open_fields(pb::DeliverRequest* rq, const std::string& table, uint64_t producer, uint64_t sig = kSig) {
  rq->set_table(table);
  rq->set_producer(producer);
  rq->set_signature(sig);
}

class RemoteDeliver : public ::testing::Test {
 protected:
  explicit RemoteDeliver(const std::string& remote_keys = "")
      : d_("[remote]\nlisten = \"127.0.0.1:0\"\n" + remote_keys +
           table_toml("replay", "max_size = 1000\nsampler = \"fifo\"\nmax_times_sampled = 1\n")) {
    address_ = remote_address(d_);
    EXPECT_FALSE(address_.empty()) << read_file(d_.log());
    stub_ = pb::Peer::NewStub(grpc::CreateChannel(address_, grpc::InsecureChannelCredentials()));
  }
  struct Stream {
    grpc::ClientContext ctx;
    std::unique_ptr<grpc::ClientReaderWriter<pb::DeliverRequest, pb::DeliverReply>> rw;
  };
  std::unique_ptr<Stream> open() {
    auto s = std::make_unique<Stream>();
    s->ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    s->rw = stub_->Deliver(&s->ctx);
    return s;
  }
  // Sends rq and reads the reply; false (and the stream's status in *st)
  // if the server ended the stream instead.
  static bool send(Stream& s, const pb::DeliverRequest& rq, pb::DeliverReply* out, grpc::Status* st) {
    if (s.rw->Write(rq) && s.rw->Read(out)) return true;
    s.rw->WritesDone();
    *st = s.rw->Finish();
    return false;
  }
  std::vector<int64_t> drain() { return drain_items(d_.socket(), "replay"); }

  Daemon d_;
  std::string address_;
  std::unique_ptr<pb::Peer::Stub> stub_;
};

TEST_F(RemoteDeliver, ItemsArriveOnceInOrderAcrossAReconnect) {
  pb::DeliverReply reply;
  grpc::Status st;
  {
    auto s = open();
    pb::DeliverRequest rq = batch(1, 3, 100, 1);
    open_fields(&rq, "replay", 77);
    ASSERT_TRUE(send(*s, rq, &reply, &st)) << st.error_message();
    EXPECT_EQ(reply.answered(), 3u);
    EXPECT_EQ(reply.duplicates(), 0u);
    pb::DeliverRequest more = batch(2, 2, 103, 4);
    more.add_forget(1);
    ASSERT_TRUE(send(*s, more, &reply, &st)) << st.error_message();
    EXPECT_EQ(reply.answered(), 5u);
    s->rw->WritesDone();
    EXPECT_TRUE(s->rw->Finish().ok());
  }
  // As after a broken link: the sender sends again what it had not seen
  // answered (here items 4 and 5, and one more), on a new stream.
  auto s = open();
  pb::DeliverRequest again = batch(1, 3, 103, 4);
  open_fields(&again, "replay", 77);
  ASSERT_TRUE(send(*s, again, &reply, &st)) << st.error_message();
  EXPECT_EQ(reply.answered(), 6u);
  EXPECT_EQ(reply.duplicates(), 2u);
  EXPECT_EQ(reply.refused(), 0u) << reply.refusal();
  s->rw->WritesDone();
  EXPECT_TRUE(s->rw->Finish().ok());
  EXPECT_EQ(drain(), (std::vector<int64_t>{100, 101, 102, 103, 104, 105}));
}

TEST_F(RemoteDeliver, BadRequestsAreRefusedByNameAndOthersStillServed) {
  struct Case {
    const char* what;
    std::function<void(pb::DeliverRequest*)> make;
    grpc::StatusCode code;
    std::string expect;
  } cases[] = {
      {"no such table", [](pb::DeliverRequest* r) { open_fields(r, "nowhere", 5); }, grpc::StatusCode::NOT_FOUND,
       "table nowhere"},
      {"producer 0", [](pb::DeliverRequest* r) { open_fields(r, "replay", 0); }, grpc::StatusCode::INVALID_ARGUMENT,
       "DeliverRequest.producer must be nonzero"},
      {"other columns", [](pb::DeliverRequest* r) { open_fields(r, "replay", 5, kSig + 1); },
       grpc::StatusCode::FAILED_PRECONDITION, "has other columns than the sender's table"},
      {"an item over a chunk never sent",
       [](pb::DeliverRequest* r) {
         open_fields(r, "replay", 5);
         r->mutable_items(0)->mutable_slices(0)->set_chunk(99);
       },
       grpc::StatusCode::INVALID_ARGUMENT, "names chunk 99, which this stream does not hold"},
      {"sequences not growing",
       [](pb::DeliverRequest* r) {
         open_fields(r, "replay", 5);
         r->mutable_items(1)->set_sequence(1);
       },
       grpc::StatusCode::INVALID_ARGUMENT, "sequences must grow within a stream"},
      {"a chunk of other columns",
       [](pb::DeliverRequest* r) {
         open_fields(r, "replay", 5);
         std::string bytes = r->chunks(0).data();
         bytes[16] ^= 1;  // the header's signature hash
         r->mutable_chunks(0)->set_data(bytes);
       },
       grpc::StatusCode::INVALID_ARGUMENT, "not that of a sealed chunk of table replay"},
      {"a chunk too short for its header",
       [](pb::DeliverRequest* r) {
         open_fields(r, "replay", 5);
         r->mutable_chunks(0)->set_data("tiny");
       },
       grpc::StatusCode::INVALID_ARGUMENT, "has no room for its header"},
  };
  for (const Case& c : cases) {
    auto s = open();
    pb::DeliverRequest rq = batch(1, 3, 0, 1);
    c.make(&rq);
    pb::DeliverReply reply;
    grpc::Status st;
    ASSERT_FALSE(send(*s, rq, &reply, &st)) << c.what;
    EXPECT_EQ(st.error_code(), c.code) << c.what << ": " << st.error_message();
    EXPECT_NE(st.error_message().find(c.expect), std::string::npos) << c.what << ": " << st.error_message();
  }
  // A refused priority is an answer, final and named; the stream goes on.
  auto s = open();
  pb::DeliverRequest rq = batch(1, 3, 200, 1);
  open_fields(&rq, "replay", 6);
  rq.mutable_items(1)->set_priority(-1.0);
  pb::DeliverReply reply;
  grpc::Status st;
  ASSERT_TRUE(send(*s, rq, &reply, &st)) << st.error_message();
  EXPECT_EQ(reply.answered(), 3u);
  EXPECT_EQ(reply.refused(), 1u);
  EXPECT_NE(reply.refusal().find("priority"), std::string::npos) << reply.refusal();
  s->rw->WritesDone();
  EXPECT_TRUE(s->rw->Finish().ok());
  // The stream whose second item's sequence did not grow had applied its
  // first (value 0) before it was refused: a refusal ends the stream where
  // it is, and the items before it stand (sent again, they would be
  // duplicates).
  EXPECT_EQ(drain(), (std::vector<int64_t>{0, 200, 202}));
}

// Follow over the same connection's server: each bad request refused by
// name, while a delivery stream stays open and goes on, and a good
// follower of the same table is served.
TEST_F(RemoteDeliver, BadFollowsAreRefusedByNameWhileADeliveryGoesOn) {
  auto delivery = open();
  pb::DeliverRequest rq = batch(1, 3, 10, 1);
  open_fields(&rq, "replay", 8);
  pb::DeliverReply reply;
  grpc::Status st;
  ASSERT_TRUE(send(*delivery, rq, &reply, &st)) << st.error_message();
  struct Case {
    const char* what;
    std::string table;
    uint64_t signature;
    uint32_t count;
    grpc::StatusCode code;
    std::string expect;
  } cases[] = {
      {"no table", "", kSig, 1, grpc::StatusCode::INVALID_ARGUMENT, "FollowRequest.table must name a table"},
      {"a name too long", std::string(300, 'x'), kSig, 1, grpc::StatusCode::INVALID_ARGUMENT,
       "FollowRequest.table must name a table"},
      {"count 0", "replay", kSig, 0, grpc::StatusCode::INVALID_ARGUMENT, "FollowRequest.count is 0"},
      {"count past the bound", "replay", kSig, 65, grpc::StatusCode::INVALID_ARGUMENT, "FollowRequest.count is 65"},
      {"no such table", "nowhere", kSig, 1, grpc::StatusCode::NOT_FOUND, "table nowhere"},
      {"other columns", "replay", kSig ^ 1, 1, grpc::StatusCode::FAILED_PRECONDITION, "has other columns"},
  };
  for (const Case& c : cases) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    pb::FollowRequest f;
    f.set_table(c.table);
    f.set_signature(c.signature);
    f.set_count(c.count);
    auto reader = stub_->Follow(&ctx, f);
    pb::FollowReply r;
    EXPECT_FALSE(reader->Read(&r)) << c.what << ": answered";
    grpc::Status fs = reader->Finish();
    EXPECT_EQ(fs.error_code(), c.code) << c.what << ": " << fs.error_message();
    EXPECT_NE(fs.error_message().find(c.expect), std::string::npos) << c.what << ": " << fs.error_message();
  }
  // The delivery goes on, and a good follower sees its items, newest last.
  rq = batch(2, 3, 20, 4);
  ASSERT_TRUE(send(*delivery, rq, &reply, &st)) << st.error_message();
  EXPECT_EQ(reply.answered(), 6u);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  pb::FollowRequest f;
  f.set_table("replay");
  f.set_signature(kSig);
  f.set_count(2);
  auto reader = stub_->Follow(&ctx, f);
  pb::FollowReply r;
  ASSERT_TRUE(reader->Read(&r));
  ASSERT_EQ(r.items_size(), 2);
  EXPECT_LT(r.items(0).sequence(), r.items(1).sequence());
  ctx.TryCancel();
  delivery->rw->WritesDone();
  EXPECT_TRUE(delivery->rw->Finish().ok());
  EXPECT_EQ(drain(), (std::vector<int64_t>{10, 11, 12, 20, 21, 22}));
}

class RemoteDeliverSmallArena : public RemoteDeliver {
 protected:
  RemoteDeliverSmallArena() : RemoteDeliver("[arena]\nclasses = [ { block_size = \"4KiB\", count = 16 } ]\n") {}
};

// One client may hold a quarter of a size class reserved (here 4 blocks):
// a request of more chunks than that must still go in, its chunks handed
// to the table item by item, not all reserved before the first item.
TEST_F(RemoteDeliverSmallArena, ARequestOfMoreChunksThanOneClientMayReserveGoesIn) {
  pb::DeliverRequest rq;
  open_fields(&rq, "replay", 9);
  for (uint64_t c = 1; c <= 10; ++c) {
    pb::DeliverRequest one = batch(c, 1, static_cast<int64_t>(c), c);
    rq.MergeFrom(one);
    rq.add_forget(c);  // no later item names it
  }
  auto s = open();
  pb::DeliverReply reply;
  grpc::Status st;
  ASSERT_TRUE(send(*s, rq, &reply, &st)) << st.error_message();
  EXPECT_EQ(reply.answered(), 10u);
  EXPECT_EQ(reply.refused(), 0u) << reply.refusal();
  s->rw->WritesDone();
  EXPECT_TRUE(s->rw->Finish().ok());
  EXPECT_EQ(drain(), (std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}));
}

// Chunks that no item names hold this stream's blocks until forgotten: a
// stream that only sends chunks is refused when it holds all it may, by
// name, instead of waiting for blocks that only it can give back.
TEST_F(RemoteDeliverSmallArena, ChunksNoItemNamesAreRefusedPastTheClientsShare) {
  pb::DeliverRequest rq;
  open_fields(&rq, "replay", 9);
  for (uint64_t c = 1; c <= 10; ++c) {
    auto* ch = rq.add_chunks();
    ch->set_id(c);
    ch->set_data(sealed_chunk(1, 4, 0));
  }
  auto s = open();
  pb::DeliverReply reply;
  grpc::Status st;
  ASSERT_FALSE(send(*s, rq, &reply, &st));
  EXPECT_EQ(st.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << st.error_message();
  EXPECT_NE(st.error_message().find("forget"), std::string::npos) << st.error_message();
}

class RemoteDeliverBounded : public RemoteDeliver {
 protected:
  RemoteDeliverBounded() : RemoteDeliver("max_streams = 2\n") {}
};

// Each stream is a connection of the server's own uid and holds blocks: a
// peer that opens streams without end is refused past the bound, by name,
// and the streams already open, and the server's local clients, go on.
TEST_F(RemoteDeliverBounded, StreamsPastMaxStreamsAreRefusedAndOthersGoOn) {
  std::vector<std::unique_ptr<Stream>> open_streams;
  pb::DeliverReply reply;
  grpc::Status st;
  for (uint64_t producer = 1; producer <= 2; ++producer) {
    open_streams.push_back(open());
    pb::DeliverRequest hello;
    open_fields(&hello, "replay", producer);
    ASSERT_TRUE(send(*open_streams.back(), hello, &reply, &st)) << st.error_message();
  }
  auto third = open();
  pb::DeliverRequest rq = batch(1, 1, 50, 1);
  open_fields(&rq, "replay", 3);
  ASSERT_FALSE(send(*third, rq, &reply, &st));
  EXPECT_EQ(st.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << st.error_message();
  EXPECT_NE(st.error_message().find("[remote] max_streams"), std::string::npos) << st.error_message();
  auto [rc, out] = engramctl(d_, {"status"});  // local clients are still served
  EXPECT_EQ(rc, 0) << out;

  // The open streams still deliver; one closed makes room for another.
  pb::DeliverRequest first = batch(1, 1, 60, 1);
  ASSERT_TRUE(send(*open_streams[0], first, &reply, &st)) << st.error_message();
  EXPECT_EQ(reply.answered(), 1u);
  open_streams[0]->rw->WritesDone();
  EXPECT_TRUE(open_streams[0]->rw->Finish().ok());
  auto again = open();
  ASSERT_TRUE(send(*again, rq, &reply, &st)) << st.error_message();
  EXPECT_EQ(reply.answered(), 1u);
  for (auto* s : {open_streams[1].get(), again.get()}) {
    s->rw->WritesDone();
    EXPECT_TRUE(s->rw->Finish().ok());
  }
  EXPECT_EQ(drain(), (std::vector<int64_t>{60, 50}));
}

}  // namespace
}  // namespace engram::test
