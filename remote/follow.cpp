#include "remote/follow.hpp"

#include <chrono>
#include <thread>
#include <unordered_set>

#include "capi/relay.h"
#include "capi/take.h"
#include "core/chunk_format.hpp"
#include "daemon/log.hpp"

namespace engram::remote {
namespace {

namespace pb = engram::peer::v1;

// A client of this server with one table open; closed with the stream.
struct Local {
  engram_client* client = nullptr;
  engram_table* table = nullptr;
  ~Local() {
    if (table) engram_table_close(table);
    if (client) engram_disconnect(client);
  }
};

// The reply carrying batch b's items and their chunks (each once); false
// with *why if a chunk fails its check (a local writer rewrote it).
bool build_reply(const engram_taken* b, const Column* cols, uint32_t ncols, uint64_t sig, pb::FollowReply* r,
                 uint64_t* last, std::string* why) {
  std::unordered_set<uint64_t> sent;
  for (uint32_t i = 0, n = engram_private_taken_count(b); i < n; ++i) {
    engram_private_item it;
    if (engram_private_taken_item(b, i, &it) != ENGRAM_OK) {
      *why = engram_last_error();
      return false;
    }
    pb::Item* item = r->add_items();
    item->set_sequence(it.sequence + 1);  // sequences are never 0 (peer.proto)
    item->set_priority(it.priority);
    *last = it.sequence;
    for (uint32_t k = 0; k < it.num_slices; ++k) {
      const engram_private_slice& sl = it.slices[k];
      if (sent.insert(sl.chunk).second) {
        pb::Chunk* c = r->add_chunks();
        c->set_id(sl.chunk);
        if (Status s = copy_sealed_chunk(sl.block, sl.block_size, cols, ncols, sig, c->mutable_data()); !s.ok()) {
          *why = s.message();
          return false;
        }
      }
      pb::Slice* s = item->add_slices();
      s->set_chunk(sl.chunk);
      s->set_offset(sl.offset);
      s->set_length(sl.length);
    }
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
  Local l;
  engram_connect_options o;
  engram_connect_options_init(&o);
  o.socket_path = socket.c_str();
  if (int e = engram_connect(&o, &l.client); e != ENGRAM_OK) return status_of(e, "connecting to this server");
  if (int e = engram_table_open(l.client, rq.table().c_str(), &l.table); e != ENGRAM_OK)
    return status_of(e, "table " + rq.table());
  const uint64_t sig = engram_private_table_signature(l.table);
  if (rq.signature() != sig)
    return {grpc::StatusCode::FAILED_PRECONDITION,
            "table " + rq.table() + " has other columns than the follower's table (signature hashes differ); give "
                                    "both tables the same columns, dtypes, shapes and compression"};
  uint32_t ncols = 0;
  const Column* cols = static_cast<const Column*>(engram_private_table_columns(l.table, &ncols));
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
    bool built = build_reply(b, cols, ncols, sig, &reply, &last, &why);
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
