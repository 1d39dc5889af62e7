// One Follow stream (peer.proto): a peer's mirrored table following a
// table of this server. The stream looks at the table's newest items
// through a client of this server, as a look that counts for nothing
// (engram_private_newest: no sample, no rate limiter), and sends what is
// new: parameters cross the network once per version per follower.
#pragma once

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <string>

#include "server/config.hpp"
#include "remote/peer.grpc.pb.h"
#include "remote/peer_call.hpp"

namespace engram::remote {

// The most items a follower may keep (FollowRequest.count).
inline constexpr uint32_t kMaxFollowCount = kMaxMirrorItems;
// How often a stream looks for new items: a version reaches a follower
// within about this plus the network's time (bench/NOTES.md, mirrors).
inline constexpr int kFollowLookMs = 1;

using FollowWriter = grpc::ServerWriterInterface<engram::peer::v1::FollowReply>;

// Serves one stream until the peer ends it, the table goes, or this
// server stops. `socket` is this server's.
grpc::Status serve_follow(const engram::peer::v1::FollowRequest& rq, FollowWriter* out, const PeerCall& peer,
                          const std::string& socket);

}  // namespace engram::remote
