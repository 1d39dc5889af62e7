#include "remote/shard_link.hpp"

#include <grpcpp/grpcpp.h>

#include <cmath>
#include <deque>
#include <stdexcept>
#include <vector>

#include "capi/relay.h"
#include "core/table.hpp"
#include "server/config.hpp"
#include "server/log.hpp"
#include "remote/local_table.hpp"
#include "remote/peer.grpc.pb.h"
#include "remote/relay_reply.hpp"
#include "remote/shard_sample.hpp"

namespace engram::remote {
namespace {

namespace pb = engram::peer::v1;

static_assert(kMaxShardBatch <= kMaxShardDraws, "a configured shard_batch must be a request the shard takes");

constexpr int32_t kPollMs = 100;        // a wait at the view, with nothing in flight, before it looks again
// How long a shard's rate limiter may hold a request's draws: a held
// reply comes back after it and the request is made again, so that the
// link notices a stop or a break within about it.
constexpr int32_t kDrawWaitMs = 100;
constexpr int64_t kStopWaitMs = 100;

struct Malformed : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace

struct ShardLink::Impl final : PeerLink {
  Impl(ShardLinkOptions opts, std::shared_ptr<grpc::ChannelCredentials> c)
      : PeerLink("shard " + std::to_string(opts.shard) + " of view " + opts.table + " at " + opts.peer + " table " +
                     opts.peer_table,
                 opts.peer, std::move(c)),
        o(std::move(opts)) {
    start();
  }
  ~Impl() override { stop(kStopWaitMs); }

  ShardLinkOptions o;
  Stats stats;  // but the PeerLink's state; under mu_
  LocalTable local;
  bool present = false;  // as last reported to the view
  double mass = 0;
  uint64_t size = 0;
  uint32_t waiting = 0, short_of = 0;  // the view's answer to the last report
  std::deque<pb::Update> owed;         // updates for the shard, oldest first

  std::string after_break() const override {
    return "retrying (the shard's mass is left out of the view's batches meanwhile)";
  }

  bool open_local() override {
    if (local.open(o.socket, o.table) != ENGRAM_OK || local.open_relay() != ENGRAM_OK) {
      set_state("waiting for local view " + o.table, engram_last_error());
      local.close();
      return false;
    }
    present = false;
    return true;
  }

  void close_local() override {
    if (present) (void)tell(false, 0);
    local.close();
  }

  // Reports the shard to the view (its newest mass and size, or away) and
  // waits up to timeout_ms for what it wants; takes the updates owed.
  // ENGRAM_E_INVALID is a report the view refuses: the shard's numbers.
  int tell(bool up, int32_t timeout_ms) {
    uint64_t keys[kRecordUpdates];
    double priorities[kRecordUpdates];
    uint32_t n = 0;
    int e = engram_private_shard_poll(local.relay, o.shard, up ? 1 : 0, mass, size, o.prefetch * o.batch, timeout_ms,
                                      &waiting, &short_of, keys, priorities, kRecordUpdates, &n);
    if (e == ENGRAM_E_DISCONNECTED || e == ENGRAM_E_CLOSED)
      throw std::runtime_error("this server's view " + o.table + " went away");
    if (e != ENGRAM_OK) return e;
    present = up;
    for (uint32_t i = 0; i < n; ++i) {
      pb::Update u;
      u.set_key(keys[i]);
      u.set_priority(priorities[i]);
      owed.push_back(u);
    }
    uint64_t answered = 0, duplicates = 0, refused = 0;
    if (engram_private_relay_answered(local.relay, 0, &answered, &duplicates, &refused) == ENGRAM_OK) {
      std::lock_guard lock(mu_);
      if (refused > stats.refused) stats.last_error = engram_private_relay_refusal(local.relay);
      stats.refused = refused;
    }
    return ENGRAM_OK;
  }

  // One reply's draws into the view, after the mass they were drawn at.
  // The whole reply is checked before the view hears of it: a reply that
  // breaks the protocol (thrown as Malformed) reports nothing, so its
  // numbers never weigh a batch.
  void apply(const pb::SampleReply& r) {
    if (r.draws_size() == 0) return;  // held, or no draws asked: no mass either
    if (!std::isfinite(r.mass()) || r.mass() < 0 || r.size() == 0)
      throw Malformed("a reply of draws with mass " + std::to_string(r.mass()) + " and size " +
                      std::to_string(r.size()));
    RelayedChunks held;
    uint64_t bytes = 0;
    if (Status s = relay_chunks(local, r.chunks(), [this] { return stopping(); }, &held, &bytes); !s.ok()) {
      forget_chunks(local, held);
      if (s.code() == Errc::interrupted) return;
      throw Malformed(s.message());
    }
    struct Slices {
      uint64_t ids[kMaxItemChunks];
      uint32_t offsets[kMaxItemChunks], lengths[kMaxItemChunks], n = 0;
    };
    std::vector<Slices> slices(static_cast<size_t>(r.draws_size()));
    for (int i = 0; i < r.draws_size(); ++i) {
      const pb::Draw& d = r.draws(i);
      Slices& sl = slices[static_cast<size_t>(i)];
      Status s = relay_slices(d.slices(), held, sl.ids, sl.offsets, sl.lengths, &sl.n);
      if (s.ok() && !(std::isfinite(d.probability()) && d.probability() > 0 && d.probability() <= 1))
        s = {Errc::invalid_argument, "a draw of probability " + std::to_string(d.probability())};
      if (!s.ok()) {
        forget_chunks(local, held);
        throw Malformed(s.message());
      }
    }
    mass = r.mass();
    size = r.size();
    if (tell(true, 0) != ENGRAM_OK) {
      forget_chunks(local, held);
      throw Malformed(std::string("numbers the view refuses: ") + engram_last_error());
    }
    for (int i = 0; i < r.draws_size(); ++i) {
      const pb::Draw& d = r.draws(i);
      const Slices& sl = slices[static_cast<size_t>(i)];
      // The view checks the slices against the chunks when it applies
      // the draw: what it refuses then is counted by the relay's answers.
      if (engram_private_relay_draw(local.relay, sl.ids, sl.offsets, sl.lengths, sl.n, d.priority(), d.key(),
                                    d.probability()) != ENGRAM_OK) {
        forget_chunks(local, held);
        throw Malformed(std::string("a draw the view refuses: ") + engram_last_error());
      }
    }
    forget_chunks(local, held);
    std::lock_guard lock(mu_);
    stats.draws += static_cast<uint64_t>(r.draws_size());
    stats.bytes += bytes;
    stats.mass = mass;
    stats.size = size;
  }

  grpc::Status stream(grpc::ClientContext& ctx) override {
    std::shared_ptr<grpc::Channel> ch = channel();
    auto stub = pb::Peer::NewStub(ch);
    set_state("connecting to " + o.peer);
    auto rw = stub->Sample(&ctx);
    bool first = true;
    std::deque<uint32_t> asked;                      // draws per request in flight, oldest first
    std::deque<std::vector<pb::Update>> sent;        // their updates, resent after a break
    uint64_t asked_draws = 0;
    auto send = [&](uint32_t draws) {
      pb::SampleRequest rq;
      if (first) {
        rq.set_table(o.peer_table);
        rq.set_signature(local.signature);
      }
      rq.set_draws(draws);
      rq.set_timeout_ms(kDrawWaitMs);
      std::vector<pb::Update> carried_updates;
      while (!owed.empty() && rq.updates_size() < kMaxShardUpdates) {
        *rq.add_updates() = owed.front();
        carried_updates.push_back(owed.front());
        owed.pop_front();
      }
      if (!rw->Write(rq)) {
        for (auto it = carried_updates.rbegin(); it != carried_updates.rend(); ++it) owed.push_front(*it);
        return false;
      }
      first = false;
      asked.push_back(draws);
      sent.push_back(std::move(carried_updates));
      asked_draws += draws;
      std::lock_guard lock(mu_);
      stats.updates += sent.back().size();
      return true;
    };
    auto wants = [&] {
      const uint64_t level = uint64_t{o.prefetch} * o.batch;
      return waiting + asked_draws < level || short_of > asked_draws;
    };
    // What a break leaves: the updates of the requests unanswered go first
    // on the next stream (applied twice, an update is the same update).
    auto unwind = [&] {
      for (auto it = sent.rbegin(); it != sent.rend(); ++it)
        for (auto u = it->rbegin(); u != it->rend(); ++u) owed.push_front(*u);
      sent.clear();
      if (present) (void)tell(false, 0);
    };
    grpc::Status end = grpc::Status::OK;
    try {
      if (present) (void)tell(present, 0);
      // A write that fails is a stream that broke: Finish says why.
      bool broken = false;
      while (!stopping() && !broken) {
        while (!broken && asked.size() < o.prefetch && wants()) broken = !send(o.batch);
        if (broken) break;
        if (asked.empty()) {
          if (!owed.empty() && !send(0)) break;  // updates alone
          if (asked.empty()) {
            if (int e = tell(present, kPollMs); e != ENGRAM_OK)
              throw Malformed(std::string("the view refused its report: ") + engram_last_error());
            // Nothing in flight, nothing read: a shard that died shows
            // only in its connection's state, which must stay up.
            if (!first && ch->GetState(false) != GRPC_CHANNEL_READY) {
              end = grpc::Status(grpc::StatusCode::UNAVAILABLE, "the connection to the shard was lost");
              break;
            }
            continue;
          }
        }
        pb::SampleReply reply;
        if (!rw->Read(&reply)) break;
        const uint32_t wanted = asked.front();
        asked_draws -= wanted;
        asked.pop_front();
        sent.pop_front();
        if (reply.held()) {
          std::lock_guard lock(mu_);
          ++stats.held;
        }
        if (reply.draws_size() > static_cast<int>(wanted))
          throw Malformed("a reply of " + std::to_string(reply.draws_size()) + " draws to a request of " +
                          std::to_string(wanted));
        apply(reply);
        if (reply.draws_size() == 0 && present) (void)tell(true, 0);  // the view's wants, anew
        set_state("sampling " + o.peer + " table " + o.peer_table);
        carried();
      }
    } catch (const Malformed& m) {
      log_warn("remote: view " + o.table + ": shard " + o.peer + " sent " + m.what() + "; the stream ends");
      end = grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, std::string("the shard sent ") + m.what());
      {
        std::lock_guard lock(mu_);
        ++stats.malformed;
      }
      ctx.TryCancel();
    }
    unwind();
    rw->WritesDone();
    grpc::Status finished = rw->Finish();
    return end.ok() ? finished : end;
  }
};

ShardLink::ShardLink(ShardLinkOptions o, std::shared_ptr<grpc::ChannelCredentials> creds)
    : impl_(std::make_unique<Impl>(std::move(o), std::move(creds))) {}

ShardLink::~ShardLink() = default;

ShardLink::Stats ShardLink::stats() const { return impl_->report(impl_->stats); }

}  // namespace engram::remote
