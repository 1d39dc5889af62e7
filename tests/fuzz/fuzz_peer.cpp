// libFuzzer target: the peer service's handlers (remote/peer_service,
// remote/deliver) against a real server, as gRPC would call them with a
// peer's parsed messages. Whatever a peer sends, a handler must answer or
// refuse it with a status, never crash, hang or keep what it took; replies
// never claim more than was sent; and the server goes on serving: after
// each input a fresh client opens the table.
//
// Parsing protobuf is gRPC's business, so the input is not wire bytes but
// a compact description of messages, so that the fuzzer spends its time in
// engram's checks (valid chunk headers are easy to reach, and to break):
//   u8 mode: bit 0 Hello, else bit 2 Follow, else bit 3 Sample, else
//            Deliver; bit 1 the
//            first request names table "t", a producer and the right
//            signature (else garbage)
//   Hello:   u8 protocol (the right one if 0), then the name's bytes
//   Follow:  u8 count, then (bit 1 clear) the table's name and a
//            signature; t holds what earlier Deliver inputs left in it
//   Sample:  requests until the input ends, each u8 draws (0..255, and
//            300 if 255), u8 timeout code, u8 fields: bit 0 name a table
//            (the first request: t, or garbage with bit 1 clear), bit 2
//            a wrong signature, bit 4 updates follow: u8 count, then per
//            update u8 key code (a key t issued, or garbage), u8 priority
//            code (NaN, infinite and negative among them)
//   Deliver: requests until the input ends, each
//     u8 shape: bits 0-1 chunks, 2-4 items, 5-6 forgets, 7 repeat the
//               first request's open fields (a rule broken)
//     chunk:  u8 id, u8 steps, u8 capacity, u8 damage (0: none; 1-6 one
//             header field; 7 truncated; 8+ that many raw bytes follow)
//     item:   u8 sequence step (signed), u8 priority code, u8 slices,
//             then per slice u8 chunk, u8 offset, u8 length
//     forget: u8 chunk id
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <string>

#include "engram/engram.h"
#include "core/chunk_format.hpp"
#include "core/signature.hpp"
#include "server/config.hpp"
#include "server/log.hpp"
#include "server/server.hpp"
#include "remote/deliver.hpp"
#include "remote/follow.hpp"
#include "remote/peer_service.hpp"
#include "remote/shard_sample.hpp"

using namespace engram;
namespace pb = engram::peer::v1;

namespace {

// Table t's one column: x uint8 [4].
const Column kCols[1] = {make_column("x", DType::u8, {4})};

// How long one input may keep the handler waiting (for blocks, for the
// table's answers) before its peer "goes away".
constexpr auto kInputBudget = std::chrono::milliseconds(500);

std::string g_socket;

Server* server() {
  static std::unique_ptr<Server> s = [] {
    set_log_level(LogLevel::off);
    char dir[] = "/tmp/engram-fuzz-peer-XXXXXX";
    if (!mkdtemp(dir)) std::abort();
    g_socket = std::string(dir) + "/s.sock";
    std::string toml = "socket = \"" + g_socket +
                       "\"\n[arena]\nclasses = [ { block_size = \"4KiB\", count = 64 } ]\n"
                       "[[table]]\nname = \"t\"\nmax_size = 8\nmax_chunks_per_item = 4\n"
                       "[[table.column]]\nname = \"x\"\ndtype = \"uint8\"\nshape = [4]\n";
    auto config = parse_config(toml, "fuzz");
    if (!config.ok()) {
      std::fprintf(stderr, "fuzz_peer: %s\n", config.status().message().c_str());
      std::abort();
    }
    auto started = Server::start(*config);
    if (!started.ok()) {
      std::fprintf(stderr, "fuzz_peer: %s\n", started.status().message().c_str());
      std::abort();
    }
    return std::move(*started);
  }();
  return s.get();
}

class Input {
 public:
  Input(const uint8_t* d, size_t n) : d_(d), n_(n) {}
  bool more() const { return at_ < n_; }
  uint8_t u8() { return at_ < n_ ? d_[at_++] : 0; }
  std::string bytes(size_t k) {
    k = std::min(k, n_ - at_);
    std::string s(reinterpret_cast<const char*>(d_ + at_), k);
    at_ += k;
    return s;
  }

 private:
  const uint8_t* d_;
  size_t n_, at_ = 0;
};

std::string chunk(Input& in) {
  uint32_t steps = in.u8() % 10, capacity = in.u8() % 10;
  uint8_t damage = in.u8();
  if (damage >= 8) return in.bytes(damage - 8);
  std::string b(chunk_bytes(kCols, 1, std::max(capacity, 1u)), '\x5a');
  ChunkHeader h{};
  h.magic = kChunkMagic;
  h.num_steps = steps;
  h.capacity_steps = capacity;
  h.num_columns = 1;
  h.signature_hash = signature_hash(kCols, 1);
  h.episode = 1;
  switch (damage) {
    case 1: h.magic ^= 1; break;
    case 2: h.num_steps = 0xffffffffu; break;
    case 3: h.capacity_steps = 0x10000000u; break;
    case 4: h.num_columns = 7; break;
    case 5: h.signature_hash ^= 1; break;
    case 6: h.flags = kChunkPacked; break;
  }
  std::memcpy(b.data(), &h, sizeof h);
  if (damage == 7) b.resize(b.size() / 2);
  return b;
}

double priority(uint8_t code) {
  switch (code % 8) {
    case 0: return 1.0;
    case 1: return -1.0;
    case 2: return std::nan("");
    case 3: return INFINITY;
    case 4: return 0.0;
    case 5: return 1e308;
    default: return code / 16.0;
  }
}

// The stream as the handler sees it: the input's requests, the replies
// kept to be checked.
class FakeStream final : public remote::DeliverStream {
 public:
  std::deque<pb::DeliverRequest> requests;
  std::vector<pb::DeliverReply> replies;
  void SendInitialMetadata() override {}
  bool NextMessageSize(uint32_t* sz) override {
    *sz = requests.empty() ? 0 : static_cast<uint32_t>(requests.front().ByteSizeLong());
    return !requests.empty();
  }
  bool Read(pb::DeliverRequest* m) override {
    if (requests.empty()) return false;
    *m = std::move(requests.front());
    requests.pop_front();
    return true;
  }
  bool Write(const pb::DeliverReply& r, grpc::WriteOptions) override {
    replies.push_back(r);
    return true;
  }
};

void deliver(Input& in, bool open_right) {
  FakeStream stream;
  uint64_t sequence = 0, most = 0;
  bool first = true;
  while (in.more()) {
    pb::DeliverRequest rq;
    uint8_t shape = in.u8();
    if (first || (shape & 0x80)) {
      if (open_right) {
        rq.set_table("t");
        rq.set_producer(1 + in.u8() % 4);
        rq.set_signature(signature_hash(kCols, 1));
      } else {
        rq.set_table(in.bytes(in.u8() % 80));
        rq.set_producer(in.u8() % 3);
        rq.set_signature(in.u8());
      }
    }
    first = false;
    for (int i = 0, n = shape & 3; i < n; ++i) {
      auto* c = rq.add_chunks();
      c->set_id(in.u8() % 8);
      c->set_data(chunk(in));
    }
    for (int i = 0, n = (shape >> 2) & 7; i < n; ++i) {
      auto* it = rq.add_items();
      sequence += static_cast<uint64_t>(static_cast<int8_t>(in.u8()));
      it->set_sequence(sequence);
      most = std::max(most, sequence);
      it->set_priority(priority(in.u8()));
      for (int k = 0, m = in.u8() % 10; k < m; ++k) {
        auto* sl = it->add_slices();
        sl->set_chunk(in.u8() % 8);
        sl->set_offset(in.u8() % 12);
        sl->set_length(in.u8() % 12);
      }
    }
    for (int i = 0, n = (shape >> 5) & 3; i < n; ++i) rq.add_forget(in.u8() % 8);
    stream.requests.push_back(std::move(rq));
  }
  auto until = std::chrono::steady_clock::now() + kInputBudget;
  remote::PeerCall peer{"fuzz", [until] { return std::chrono::steady_clock::now() > until; }};
  static remote::ProducerClaims claims;  // each input's stream claims and lets go
  grpc::Status st = remote::serve_deliver(&stream, peer, g_socket, &claims);
  if (!st.ok() && st.error_message().empty()) {
    std::fprintf(stderr, "fuzz_peer: a refusal (code %d) that does not say why\n", static_cast<int>(st.error_code()));
    std::abort();
  }
  uint64_t answered = 0;
  for (const pb::DeliverReply& r : stream.replies) {
    if (r.answered() < answered || r.answered() > most) {
      std::fprintf(stderr, "fuzz_peer: a reply answers up to %llu after %llu; the largest sequence sent was %llu\n",
                   static_cast<unsigned long long>(r.answered()), static_cast<unsigned long long>(answered),
                   static_cast<unsigned long long>(most));
      std::abort();
    }
    answered = r.answered();
  }
}

void hello(Input& in) {
  pb::HelloRequest rq;
  uint8_t protocol = in.u8();
  rq.set_protocol(protocol == 0 ? remote::kPeerProtocol : protocol);
  rq.set_name(in.bytes(300));
  pb::HelloReply out;
  grpc::Status st = remote::answer_hello(rq, "fuzz", &out);
  bool fine = rq.protocol() == remote::kPeerProtocol && !rq.name().empty() && rq.name().size() <= remote::kMaxPeerName;
  if (st.ok() != fine) {
    std::fprintf(stderr, "fuzz_peer: Hello answered %s to protocol %u, a name of %zu bytes\n", st.ok() ? "OK" : "no",
                 rq.protocol(), rq.name().size());
    std::abort();
  }
}

class FakeWriter final : public remote::FollowWriter {
 public:
  std::vector<pb::FollowReply> replies;
  void SendInitialMetadata() override {}
  bool Write(const pb::FollowReply& r, grpc::WriteOptions) override {
    replies.push_back(r);
    return replies.size() < 4;
  }
};

void follow(Input& in, bool right) {
  pb::FollowRequest rq;
  rq.set_count(in.u8());
  rq.set_table(right ? "t" : in.bytes(in.u8() % 80));
  rq.set_signature(right ? signature_hash(kCols, 1) : in.u8());
  FakeWriter out;
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(5);
  remote::PeerCall peer{"fuzz", [until] { return std::chrono::steady_clock::now() > until; }};
  grpc::Status st = remote::serve_follow(rq, &out, peer, g_socket);
  if (!st.ok() && st.error_message().empty()) std::abort();
  uint64_t last = 0;
  for (const pb::FollowReply& r : out.replies)
    for (const pb::Item& it : r.items()) {
      if (it.sequence() <= last || it.slices_size() == 0) {
        std::fprintf(stderr, "fuzz_peer: Follow sent sequence %llu after %llu\n",
                     static_cast<unsigned long long>(it.sequence()), static_cast<unsigned long long>(last));
        std::abort();
      }
      last = it.sequence();
    }
}

class FakeSampleStream final : public remote::SampleStream {
 public:
  std::deque<pb::SampleRequest> requests;
  std::vector<pb::SampleReply> replies;
  void SendInitialMetadata() override {}
  bool NextMessageSize(uint32_t* sz) override {
    *sz = requests.empty() ? 0 : static_cast<uint32_t>(requests.front().ByteSizeLong());
    return !requests.empty();
  }
  bool Read(pb::SampleRequest* m) override {
    if (requests.empty()) return false;
    *m = std::move(requests.front());
    requests.pop_front();
    return true;
  }
  bool Write(const pb::SampleReply& r, grpc::WriteOptions) override {
    replies.push_back(r);
    return true;
  }
};

void sample(Input& in, bool right) {
  FakeSampleStream stream;
  bool first = true;
  while (in.more()) {
    pb::SampleRequest rq;
    uint8_t draws = in.u8(), timeout = in.u8(), fields = in.u8();
    rq.set_draws(draws == 255 ? 300 : draws);
    rq.set_timeout_ms(timeout < 250 ? timeout % 3 : (timeout == 255 ? -1 : 20000));
    if ((first && (fields & 1)) || (!first && (fields & 8))) {
      rq.set_table(right ? "t" : in.bytes(in.u8() % 80));
      rq.set_signature((fields & 4) ? 5 : signature_hash(kCols, 1));
    }
    if (fields & 16)
      for (uint8_t n = in.u8(); n > 0 && in.more(); --n) {
        uint8_t key = in.u8(), prio = in.u8();
        pb::Update* u = rq.add_updates();
        // Slot key % 16 of generation 1 or 2: keys t may have issued.
        u->set_key(key < 128 ? (uint64_t{1u + (key >> 6 & 1)} << 32 | (key & 15)) : key * 0x9e3779b97f4a7c15ULL);
        const double odd[] = {std::nan(""), INFINITY, -1.0, 0.0, 1e300};
        u->set_priority(prio < 5 ? odd[prio] : prio / 8.0);
      }
    first = false;
    stream.requests.push_back(std::move(rq));
  }
  std::vector<uint32_t> asked;
  for (const pb::SampleRequest& rq : stream.requests) asked.push_back(rq.draws());
  auto until = std::chrono::steady_clock::now() + kInputBudget;
  remote::PeerCall peer{"fuzz", [until] { return std::chrono::steady_clock::now() > until; }};
  grpc::Status st = remote::serve_sample(&stream, peer, g_socket);
  if (!st.ok() && st.error_message().empty()) {
    std::fprintf(stderr, "fuzz_peer: a Sample refusal (code %d) that does not say why\n", static_cast<int>(st.error_code()));
    std::abort();
  }
  for (size_t i = 0; i < stream.replies.size(); ++i) {
    const pb::SampleReply& r = stream.replies[i];
    // A reply answers its request: none asked, none drawn and none held.
    const bool none = i < asked.size() && asked[i] == 0;
    bool fine = none ? r.draws_size() == 0 && !r.held()
                     : r.held() ? r.draws_size() == 0 : r.draws_size() > 0 && r.size() > 0;
    fine = fine && std::isfinite(r.mass()) && r.mass() >= 0 && r.draws_size() <= static_cast<int>(remote::kMaxShardDraws);
    for (const pb::Draw& d : r.draws()) {
      fine = fine && d.probability() > 0 && d.probability() <= 1 && d.slices_size() > 0;
      for (const pb::Slice& sl : d.slices()) {
        bool in_reply = false;
        for (const pb::Chunk& c : r.chunks()) in_reply = in_reply || c.id() == sl.chunk();
        fine = fine && in_reply;
      }
    }
    if (!fine) {
      std::fprintf(stderr, "fuzz_peer: a Sample reply of %d draws (held %d, mass %g, size %llu) breaks its rules\n",
                   r.draws_size(), r.held(), r.mass(), static_cast<unsigned long long>(r.size()));
      std::abort();
    }
  }
}

// The server still serves its clients: one connects and opens t.
void still_serving() {
  engram_connect_options o;
  engram_connect_options_init(&o);
  o.socket_path = g_socket.c_str();
  engram_client* c = nullptr;
  engram_table* t = nullptr;
  if (engram_connect(&o, &c) != ENGRAM_OK || engram_table_open(c, "t", &t) != ENGRAM_OK) {
    std::fprintf(stderr, "fuzz_peer: the server stopped serving: %s\n", engram_last_error());
    std::abort();
  }
  engram_table_close(t);
  engram_disconnect(c);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  server();
  Input in(data, size);
  uint8_t mode = in.u8();
  if (mode & 1)
    hello(in);
  else if (mode & 4)
    follow(in, mode & 2);
  else if (mode & 8)
    sample(in, mode & 2);
  else
    deliver(in, mode & 2);
  still_serving();
  return 0;
}
