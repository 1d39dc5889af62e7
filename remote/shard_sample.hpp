// One Sample stream (peer.proto): this server as a shard of a peer's
// sharded table. The stream draws from a table of this server through a
// client of it, as a local sampler would (the draws are the table's
// samples, under its own rate limiter), and sends each batch of draws
// with its chunks and the table's mass and size at the draw, from which
// the peer splits its batches over all its shards (core/shard_split.hpp).
#pragma once

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <string>

#include "remote/peer.grpc.pb.h"
#include "remote/peer_call.hpp"

namespace engram::remote {

// Draws one request may ask for. The peer's batches are split over its
// shards, so each shard's share of one is a part of a batch; 256 keeps a
// reply of 28 KB items near 7 MB. A server whose [client] ring_records is
// smaller draws at most that many at once and refuses more by name.
inline constexpr uint32_t kMaxShardDraws = 256;
// The longest a request may ask the rate limiter to hold its draws: a
// peer asks again rather than hold a stream still for longer.
inline constexpr int32_t kMaxShardWaitMs = 10000;
// Priority updates one request may carry: a learner's updates of a few
// batches, sent with the next request for draws.
inline constexpr int kMaxShardUpdates = 4096;

using SampleStream = grpc::ServerReaderWriterInterface<engram::peer::v1::SampleReply, engram::peer::v1::SampleRequest>;

// Serves one stream until the peer ends it, the table goes, or this
// server stops. `socket` is this server's.
grpc::Status serve_sample(SampleStream* stream, const PeerCall& peer, const std::string& socket);

}  // namespace engram::remote
