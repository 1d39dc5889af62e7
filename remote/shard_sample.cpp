#include "remote/shard_sample.hpp"

#include <algorithm>
#include <chrono>
#include <unordered_set>
#include <vector>

#include "capi/take.h"
#include "server/log.hpp"
#include "remote/local_table.hpp"
#include "remote/wire_items.hpp"

namespace engram::remote {
namespace {

namespace pb = engram::peer::v1;

// A draw waits in slices of this, so that a stream whose peer went away
// (or whose server stops) ends within about it.
constexpr int32_t kDrawSliceMs = 100;

// The first request's checks: the table, its columns and its sampler.
grpc::Status open_shard(const pb::SampleRequest& rq, const std::string& socket, LocalTable* l) {
  if (rq.table().empty() || rq.table().size() > ENGRAM_MAX_NAME)
    return bad_field("SampleRequest.table must name a table (1.." + std::to_string(ENGRAM_MAX_NAME) + " bytes)");
  if (int e = l->open(socket, rq.table()); e != ENGRAM_OK) return status_of(e, "table " + rq.table());
  if (rq.signature() != l->signature) return other_columns(rq.table(), "sharded table");
  engram_table_info info;
  engram_table_info_init(&info);
  if (int e = engram_table_info_get(l->client, rq.table().c_str(), &info); e != ENGRAM_OK)
    return status_of(e, "table " + rq.table());
  if (info.sampler != ENGRAM_UNIFORM && info.sampler != ENGRAM_PRIORITIZED)
    return {grpc::StatusCode::FAILED_PRECONDITION,
            "table " + rq.table() + " is not sampled uniformly or by priority; only such a table can be a shard "
            "(a batch over shards is split by their masses)"};
  return grpc::Status::OK;
}

// Draws what rq asks within its timeout, in slices: *out, or nullptr when
// the rate limiter held them past it; a status to end the stream on.
grpc::Status draw(const pb::SampleRequest& rq, const std::string& table, LocalTable& l, const PeerCall& peer,
                  engram_taken** out) {
  *out = nullptr;
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(rq.timeout_ms());
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now()).count();
    int32_t slice = static_cast<int32_t>(std::clamp<int64_t>(left, 0, kDrawSliceMs));
    int e = engram_private_draw(l.table, rq.draws(), slice, out);
    if (e == ENGRAM_OK) return grpc::Status::OK;
    if (e != ENGRAM_E_TIMEOUT && e != ENGRAM_E_RATE_LIMITED) {
      if (e == ENGRAM_E_RANGE || e == ENGRAM_E_INVALID) return bad_field("SampleRequest.draws: " + std::string(engram_last_error()));
      return status_of(e, "table " + table);
    }
    if (left <= 0 || peer.gone()) return grpc::Status::OK;  // held
  }
}

// The reply for batch b: its draws with their chunks, the table's mass
// and size; false with *why if a chunk fails its check.
bool build_reply(const engram_taken* b, const LocalTable& t, pb::SampleReply* r, std::string* why) {
  double mass = 0;
  if (engram_private_taken_mass(b, &mass) != ENGRAM_OK) {
    *why = engram_last_error();
    return false;
  }
  std::unordered_set<uint64_t> sent;
  uint64_t bytes = 0;
  for (uint32_t i = 0, n = engram_private_taken_count(b); i < n; ++i) {
    engram_private_item it;
    if (engram_private_taken_item(b, i, &it) != ENGRAM_OK) {
      *why = engram_last_error();
      return false;
    }
    pb::Draw* d = r->add_draws();
    d->set_key(it.key);
    d->set_priority(it.priority);
    d->set_probability(it.probability);
    d->set_times_sampled(it.times_sampled);
    if (Status s = add_wire_slices(it, t, &sent, r->mutable_chunks(), d->mutable_slices(), &bytes); !s.ok()) {
      *why = s.message();
      return false;
    }
    r->set_size(it.table_size);
  }
  r->set_mass(mass);
  return true;
}

// The request's updates, in order, through the table as a learner's own
// (validated there: a priority that is not finite and >= 0 ends the
// stream); an item gone is the table's stale count, not an error.
grpc::Status apply_updates(const pb::SampleRequest& rq, const std::string& table, LocalTable& l) {
  if (rq.updates_size() > kMaxShardUpdates)
    return bad_field("SampleRequest.updates holds " + std::to_string(rq.updates_size()) + "; at most " +
                     std::to_string(kMaxShardUpdates));
  if (rq.updates_size() == 0) return grpc::Status::OK;
  std::vector<uint64_t> keys;
  std::vector<double> priorities;
  for (const pb::Update& u : rq.updates()) {
    keys.push_back(u.key());
    priorities.push_back(u.priority());
  }
  int e = engram_update_priorities_async(l.table, keys.data(), priorities.data(), keys.size());
  if (e == ENGRAM_E_PRIORITY) return bad_field("SampleRequest.updates: " + std::string(engram_last_error()));
  if (e != ENGRAM_OK) return status_of(e, "table " + table);
  return grpc::Status::OK;
}

}  // namespace

grpc::Status serve_sample(SampleStream* stream, const PeerCall& peer, const std::string& socket) {
  pb::SampleRequest rq;
  if (!stream->Read(&rq)) return grpc::Status::OK;  // ended before it began
  LocalTable l;
  if (grpc::Status s = open_shard(rq, socket, &l); !s.ok()) return s;
  const std::string table = rq.table();
  log_info("remote: " + peer.name + " samples table " + table + " as a shard");
  bool first = true;
  do {
    if (!first && (!rq.table().empty() || rq.signature() != 0))
      return bad_field("SampleRequest.table and signature are for the first request only");
    first = false;
    if (rq.draws() > kMaxShardDraws || (rq.draws() == 0 && rq.updates_size() == 0))
      return bad_field("SampleRequest.draws is " + std::to_string(rq.draws()) + "; a request asks for 1.." +
                       std::to_string(kMaxShardDraws) + " draws, or 0 with updates");
    if (rq.timeout_ms() < 0 || rq.timeout_ms() > kMaxShardWaitMs)
      return bad_field("SampleRequest.timeout_ms is " + std::to_string(rq.timeout_ms()) + "; 0.." +
                       std::to_string(kMaxShardWaitMs) + " ms");
    if (grpc::Status s = apply_updates(rq, table, l); !s.ok()) return s;
    engram_taken* b = nullptr;
    if (rq.draws() > 0)
      if (grpc::Status s = draw(rq, table, l, peer, &b); !s.ok()) return s;
    pb::SampleReply reply;
    if (!b) {
      reply.set_held(rq.draws() > 0);
    } else {
      std::string why;
      bool built = build_reply(b, l, &reply, &why);
      engram_private_taken_free(b);  // the bytes are in the reply now
      if (!built) {
        log_warn("remote: table " + table + ": a draw for " + peer.name + " is not sent: " + why);
        return {grpc::StatusCode::INTERNAL, "table " + table + ": " + why};
      }
    }
    if (!stream->Write(reply)) break;  // the peer went away
  } while (!peer.gone() && stream->Read(&rq));
  return grpc::Status::OK;
}

}  // namespace engram::remote
