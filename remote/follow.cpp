#include "remote/follow.hpp"

#include <chrono>
#include <thread>
#include <unordered_set>

#include "capi/take.h"
#include "server/log.hpp"
#include "remote/local_table.hpp"
#include "remote/wire_items.hpp"

namespace engram::remote {
namespace {

namespace pb = engram::peer::v1;

// The reply carrying batch b's items and their chunks (each once); false
// with *why if a chunk fails its check (a local writer rewrote it).
bool build_reply(const engram_taken* b, const LocalTable& t, pb::FollowReply* r, uint64_t* last, std::string* why) {
  std::unordered_set<uint64_t> sent;
  uint64_t bytes = 0;
  for (uint32_t i = 0, n = engram_private_taken_count(b); i < n; ++i) {
    engram_private_item it;
    if (engram_private_taken_item(b, i, &it) != ENGRAM_OK) {
      *why = engram_last_error();
      return false;
    }
    if (Status s = add_wire_item(it, t, &sent, r->mutable_chunks(), r->mutable_items(), &bytes); !s.ok()) {
      *why = s.message();
      return false;
    }
    *last = it.sequence;
  }
  return true;
}

}  // namespace

grpc::Status serve_follow(const pb::FollowRequest& rq, FollowWriter* out, const PeerCall& peer,
                          const std::string& socket) {
  if (rq.table().empty() || rq.table().size() > ENGRAM_MAX_NAME)
    return bad_field("FollowRequest.table must name a table (1.." + std::to_string(ENGRAM_MAX_NAME) + " bytes)");
  if (rq.count() == 0 || rq.count() > kMaxFollowCount)
    return bad_field("FollowRequest.count is " + std::to_string(rq.count()) + "; a follower keeps 1.." +
                     std::to_string(kMaxFollowCount) + " of the newest items");
  LocalTable l;
  if (int e = l.open(socket, rq.table()); e != ENGRAM_OK) return status_of(e, "table " + rq.table());
  if (rq.signature() != l.signature) return other_columns(rq.table(), "follower");
  log_info("remote: " + peer.name + " follows table " + rq.table());
  uint64_t from = 0;  // the next inserted_seq not sent
  while (!peer.gone()) {
    engram_taken* b = nullptr;
    if (int e = engram_private_newest(l.table, rq.count(), from, &b); e != ENGRAM_OK) {
      grpc::Status s = status_of(e, "table " + rq.table());
      log_warn("remote: the stream following table " + rq.table() + " for " + peer.name + " ended: " + s.error_message());
      return s;
    }
    if (engram_private_taken_count(b) == 0) {
      engram_private_taken_free(b);
      std::this_thread::sleep_for(std::chrono::milliseconds(kFollowLookMs));
      continue;
    }
    pb::FollowReply reply;
    uint64_t last = 0;
    std::string why;
    bool built = build_reply(b, l, &reply, &last, &why);
    engram_private_taken_free(b);  // the bytes are in the reply now
    if (!built) {
      log_warn("remote: table " + rq.table() + ": a chunk fails its check and is not sent: " + why);
      return {grpc::StatusCode::INTERNAL, "table " + rq.table() + ": a chunk fails its check: " + why};
    }
    from = last + 1;
    if (!out->Write(reply)) break;  // the peer went away
  }
  return grpc::Status::OK;
}

}  // namespace engram::remote
