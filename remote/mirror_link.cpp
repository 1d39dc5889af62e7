#include "remote/mirror_link.hpp"

#include <grpcpp/grpcpp.h>

#include <stdexcept>

#include "capi/relay.h"
#include "core/table.hpp"
#include "server/log.hpp"
#include "remote/follow.hpp"
#include "remote/local_table.hpp"
#include "remote/peer.grpc.pb.h"
#include "remote/peer_link.hpp"
#include "remote/relay_reply.hpp"

namespace engram::remote {
namespace {

namespace pb = engram::peer::v1;

constexpr int32_t kAnswerSliceMs = 100;  // a wait for answers before the link looks around
constexpr int64_t kStopWaitMs = 100;    // nothing is owed at a stop: it need not wait

}  // namespace

struct MirrorLink::Impl final : PeerLink {
  Impl(MirrorLinkOptions opts, std::shared_ptr<grpc::ChannelCredentials> c)
      : PeerLink("mirror " + opts.table + " of " + opts.peer + " table " + opts.peer_table, opts.peer, std::move(c)),
        o(std::move(opts)) {
    start();
  }
  ~Impl() override { stop(kStopWaitMs); }

  MirrorLinkOptions o;
  Stats stats;  // but the PeerLink's state; under mu_

  LocalTable local;
  uint32_t keep = 1;  // the newest items the local table keeps (FollowRequest.count)


  std::string after_break() const override { return "retrying (the peer sends its newest items again)"; }

  bool open_local() override {
    engram_table_info info;
    engram_table_info_init(&info);
    if (local.open(o.socket, o.table) != ENGRAM_OK ||
        engram_table_info_get(local.client, o.table.c_str(), &info) != ENGRAM_OK || local.open_relay() != ENGRAM_OK) {
      set_state("waiting for local table " + o.table, engram_last_error());
      local.close();
      return false;
    }
    relayed_ = 0;
    keep = static_cast<uint32_t>(std::min<uint64_t>(info.max_size, kMaxFollowCount));
    return true;
  }

  void close_local() override { local.close(); }

  // Inserts one reply's items over its chunks, and lets the chunks go once
  // the table answered. A reply that breaks the protocol ends the stream.
  grpc::Status apply(const pb::FollowReply& r) {
    RelayedChunks held;
    uint64_t bytes = 0;
    if (Status s = relay_chunks(local, r.chunks(), [this] { return stopping(); }, &held, &bytes); !s.ok()) {
      forget_chunks(local, held);
      if (s.code() == Errc::interrupted) return grpc::Status::CANCELLED;
      return {grpc::StatusCode::INVALID_ARGUMENT, "the peer sent " + s.message()};
    }
    uint64_t items = 0, last = 0;
    for (const pb::Item& it : r.items()) {
      uint64_t ids[kMaxItemChunks];
      uint32_t offsets[kMaxItemChunks], lengths[kMaxItemChunks], n = 0;
      if (Status s = relay_slices(it.slices(), held, ids, offsets, lengths, &n); !s.ok()) {
        forget_chunks(local, held);
        return {grpc::StatusCode::INVALID_ARGUMENT, "the peer sent " + s.message()};
      }
      if (engram_private_relay_item(local.relay, ids, offsets, lengths, n, it.priority(), 0, 0) == ENGRAM_OK)
        ++items;
      else
        log_warn("remote: mirror " + o.table + ": an item from the peer is refused: " + engram_last_error());
      last = it.sequence();
    }
    forget_chunks(local, held);
    // Answered before the next reply: what the table holds is what came.
    uint64_t answered = 0, duplicates = 0, refused = 0, owed = relayed_ + items;
    while (answered < owed) {
      int e = engram_private_relay_answered(local.relay, kAnswerSliceMs, &answered, &duplicates, &refused);
      if (e == ENGRAM_E_DISCONNECTED || e == ENGRAM_E_CLOSED)
        throw std::runtime_error("this server's table " + o.table + " went away");
      if (stopping()) return grpc::Status::CANCELLED;
    }
    relayed_ = owed;
    std::lock_guard lock(mu_);
    stats.items += items;
    stats.bytes += bytes;
    stats.last_sequence = last;
    return grpc::Status::OK;
  }

  grpc::Status stream(grpc::ClientContext& ctx) override {
    auto stub = pb::Peer::NewStub(channel());
    pb::FollowRequest rq;
    rq.set_table(o.peer_table);
    rq.set_signature(local.signature);
    rq.set_count(keep);
    set_state("connecting to " + o.peer);
    auto reader = stub->Follow(&ctx, rq);
    pb::FollowReply reply;
    while (reader->Read(&reply)) {
      if (grpc::Status s = apply(reply); !s.ok()) {
        ctx.TryCancel();
        (void)reader->Finish();
        return s;
      }
      set_state("following " + o.peer + " table " + o.peer_table);
      carried();
    }
    return reader->Finish();
  }

  uint64_t relayed_ = 0;  // items the relay took, all answered
};

MirrorLink::MirrorLink(MirrorLinkOptions o, std::shared_ptr<grpc::ChannelCredentials> creds)
    : impl_(std::make_unique<Impl>(std::move(o), std::move(creds))) {}

MirrorLink::~MirrorLink() = default;

MirrorLink::Stats MirrorLink::stats() const { return impl_->report(impl_->stats); }

}  // namespace engram::remote
