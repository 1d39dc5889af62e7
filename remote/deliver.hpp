// One Deliver stream (peer.proto): a peer's upstream table feeding a table
// of this server. The stream's items go in through a relay (capi/relay.h),
// a client of this server like any other, so that a peer's chunks and
// items meet the checks a local writer's meet; the table applies each
// delivery once. Backpressure: while the table's rate limiter holds the
// items, this stream reads no further, and gRPC's flow control holds the
// sender.
#pragma once

#include <grpcpp/grpcpp.h>

#include <string>

#include "remote/peer.grpc.pb.h"
#include "remote/peer_call.hpp"
#include "remote/producer_claims.hpp"

namespace engram::remote {

// Chunks one stream may hold at once (DeliverRequest.forget lets them go):
// each holds an arena block of this server.
inline constexpr size_t kMaxHeldChunks = 1024;
// DeliverRequest.sender, in bytes: a [remote] name.
inline constexpr size_t kMaxSenderName = 255;

// The stream as the handler sees it: gRPC's, or a fuzzer's.
using DeliverStream = grpc::ServerReaderWriterInterface<engram::peer::v1::DeliverReply, engram::peer::v1::DeliverRequest>;

// Serves one stream until the peer ends it, breaks a rule (a status that
// names the field), or this server stops. `socket` is this server's;
// `claims` (nullptr: none kept, for a fuzzer) the producers' live streams.
grpc::Status serve_deliver(DeliverStream* stream, const PeerCall& peer, const std::string& socket,
                           ProducerClaims* claims);

}  // namespace engram::remote
