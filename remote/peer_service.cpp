#include "remote/peer_service.hpp"

#include <string>

#include "daemon/log.hpp"
#include "remote/deliver.hpp"

namespace engram::remote {

using engram::peer::v1::HelloReply;
using engram::peer::v1::HelloRequest;

grpc::Status PeerService::Hello(grpc::ServerContext* ctx, const HelloRequest* rq, HelloReply* out) {
  const std::string& name = rq->name();
  if (name.empty() || name.size() > kMaxPeerName)
    return {grpc::StatusCode::INVALID_ARGUMENT,
            "HelloRequest.name must be 1.." + std::to_string(kMaxPeerName) + " bytes; it has " +
                std::to_string(name.size())};
  out->set_protocol(kPeerProtocol);
  out->set_version(ENGRAM_VERSION_STRING);
  if (rq->protocol() != kPeerProtocol)
    return {grpc::StatusCode::FAILED_PRECONDITION,
            "peer speaks engram peer protocol " + std::to_string(rq->protocol()) + ", this server " +
                std::to_string(kPeerProtocol) + " (engram " ENGRAM_VERSION_STRING
                "); run the same engram release on both machines"};
  log_info("remote: peer " + name + " at " + ctx->peer() + " said hello");
  return grpc::Status::OK;
}

grpc::Status PeerService::Deliver(grpc::ServerContext* ctx, DeliverStream* stream) {
  return serve_deliver(ctx, stream, socket_);
}

}  // namespace engram::remote
