// The Peer service (peer.proto) as this server answers it. One instance
// per Remote; gRPC calls its handlers on its own threads, so each handler
// is thread-safe and touches the server only through thread-safe calls.
#pragma once

#include <cstdint>

#include "remote/peer.grpc.pb.h"

namespace engram::remote {

// The peer protocol's number: grows with every change of meaning on the
// wire (peer.proto's invariants). 1: Hello.
inline constexpr uint32_t kPeerProtocol = 1;
// A peer's name (HelloRequest.name), in bytes.
inline constexpr size_t kMaxPeerName = 255;

class PeerService final : public engram::peer::v1::Peer::Service {
 public:
  grpc::Status Hello(grpc::ServerContext* ctx, const engram::peer::v1::HelloRequest* rq,
                     engram::peer::v1::HelloReply* out) override;
};

}  // namespace engram::remote
