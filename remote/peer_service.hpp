// The Peer service (peer.proto) as this server answers it. One instance
// per Remote; gRPC calls its handlers on its own threads, so each handler
// is thread-safe and touches the server only through thread-safe calls.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>

#include "server/log.hpp"
#include "remote/peer_call.hpp"
#include "remote/producer_claims.hpp"
#include "remote/peer.grpc.pb.h"

namespace engram::remote {

// The peer protocol's number: grows with every change of meaning on the
// wire (peer.proto's invariants). 1: Hello. 2: Deliver. 3: Follow.
// 4: Sample. 5: a Sample request may carry priority updates, and ask for
// no draws.
inline constexpr uint32_t kPeerProtocol = 5;
// The largest message a peer may send (a Deliver request of many items, or
// of one large chunk): what one stream can make this server hold at once.
inline constexpr int kMaxPeerMessageBytes = 64 << 20;
// A peer's name (HelloRequest.name), in bytes.
inline constexpr size_t kMaxPeerName = 255;

// Hello's answer to a peer (named for the log): its checks, gRPC aside.
grpc::Status answer_hello(const engram::peer::v1::HelloRequest& rq, const std::string& peer,
                          engram::peer::v1::HelloReply* out);

class PeerService final : public engram::peer::v1::Peer::Service {
 public:
  PeerService(std::string socket, uint32_t max_streams) : socket_(std::move(socket)), max_streams_(max_streams) {}
  grpc::Status Hello(grpc::ServerContext* ctx, const engram::peer::v1::HelloRequest* rq,
                     engram::peer::v1::HelloReply* out) override;
  using GrpcDeliverStream =
      grpc::ServerReaderWriter<engram::peer::v1::DeliverReply, engram::peer::v1::DeliverRequest>;
  grpc::Status Deliver(grpc::ServerContext* ctx, GrpcDeliverStream* stream) override;
  grpc::Status Follow(grpc::ServerContext* ctx, const engram::peer::v1::FollowRequest* rq,
                      grpc::ServerWriter<engram::peer::v1::FollowReply>* out) override;
  using GrpcSampleStream = grpc::ServerReaderWriter<engram::peer::v1::SampleReply, engram::peer::v1::SampleRequest>;
  grpc::Status Sample(grpc::ServerContext* ctx, GrpcSampleStream* stream) override;
  // This server stops: every handler's peer counts as gone from now on,
  // so that streams end (a Follow never ends by itself, and a Deliver
  // waits for its sender's next request) and gRPC's shutdown can finish.
  void stop() { stopping_ = true; }
  const ProducerClaims& claims() const noexcept { return claims_; }

 private:
  // OK if one more stream may be served (then release it with Admitted).
  grpc::Status admit(const char* what);
  PeerCall call(grpc::ServerContext* ctx) {
    return {ctx->peer(), [this, ctx] { return stopping_ || ctx->IsCancelled(); }};
  }
  struct Admitted {
    std::atomic<uint32_t>& n;
    ~Admitted() { n.fetch_sub(1); }
  };

  std::string socket_;  // this server's control socket: streams are its clients
  uint32_t max_streams_;  // [remote] max_streams: Deliver, Follow and Sample streams served at once
  std::atomic<uint32_t> streams_{0};
  std::atomic<bool> stopping_{false};
  ProducerClaims claims_;
  std::mutex refusals_mu_;
  RepeatedLog refusals_;  // a flood is one line and a count, not a line per stream
};

}  // namespace engram::remote
