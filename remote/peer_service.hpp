// The Peer service (peer.proto) as this server answers it. One instance
// per Remote; gRPC calls its handlers on its own threads, so each handler
// is thread-safe and touches the server only through thread-safe calls.
#pragma once

#include <cstdint>
#include <string>

#include "remote/peer.grpc.pb.h"

namespace engram::remote {

// The peer protocol's number: grows with every change of meaning on the
// wire (peer.proto's invariants). 1: Hello. 2: Deliver.
inline constexpr uint32_t kPeerProtocol = 2;
// The largest message a peer may send (a Deliver request of many items, or
// of one large chunk): what one stream can make this server hold at once.
inline constexpr int kMaxPeerMessageBytes = 64 << 20;
// A peer's name (HelloRequest.name), in bytes.
inline constexpr size_t kMaxPeerName = 255;

class PeerService final : public engram::peer::v1::Peer::Service {
 public:
  explicit PeerService(std::string socket) : socket_(std::move(socket)) {}
  grpc::Status Hello(grpc::ServerContext* ctx, const engram::peer::v1::HelloRequest* rq,
                     engram::peer::v1::HelloReply* out) override;
  grpc::Status Deliver(grpc::ServerContext* ctx,
                       grpc::ServerReaderWriter<engram::peer::v1::DeliverReply, engram::peer::v1::DeliverRequest>* stream)
      override;

 private:
  std::string socket_;  // this server's control socket: streams are its clients
};

}  // namespace engram::remote
