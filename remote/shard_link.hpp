// One shard of a view ([[table]] shards): fetches draws of a table on a
// peer (a Sample stream, peer.proto) into the local view's table, keeping
// `prefetch` requests of `batch` draws in flight while the view wants
// more, and sends the priority updates owed to the shard with them. The
// view (server/table_owner_view.cpp) says what it wants: its draws of this
// shard waiting, those its held batches lack, and the updates owed, each
// time the link reports the shard's mass and size (engram_private_shard_
// poll). A break reports the shard away, so that its mass leaves the
// split until the stream carries again; the draws in flight then are lost
// (they were draws, not items: nothing stored is), and updates owed stay
// owed for the next stream. One thread per shard (PeerLink).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "remote/peer_link.hpp"

namespace engram::remote {

struct ShardLinkOptions : LinkEnds {
  uint32_t shard = 0;     // its index in the view's shards
  uint32_t batch = 64;    // draws a request asks for
  uint32_t prefetch = 2;  // requests in flight
};

class ShardLink {
 public:
  ShardLink(ShardLinkOptions o, std::shared_ptr<grpc::ChannelCredentials> creds);
  ~ShardLink();

  struct Stats : LinkState {
    uint64_t draws = 0, bytes = 0;  // received and inserted into the view
    uint64_t updates = 0;           // sent to the shard
    uint64_t held = 0;              // replies the shard's rate limiter held
    uint64_t refused = 0;           // draws the view refused
    uint64_t malformed = 0;         // replies that broke the protocol (each ended its stream)
    double mass = 0;                // the shard's, as it answered last
    uint64_t size = 0;
  };
  Stats stats() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace engram::remote
