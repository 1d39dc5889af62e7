#include "remote/peer_service.hpp"

#include <mutex>
#include <string>

#include "server/log.hpp"
#include "remote/deliver.hpp"
#include "remote/follow.hpp"
#include "remote/shard_sample.hpp"

namespace engram::remote {

using engram::peer::v1::FollowReply;
using engram::peer::v1::FollowRequest;
using engram::peer::v1::HelloReply;
using engram::peer::v1::HelloRequest;

grpc::Status answer_hello(const HelloRequest& rq, const std::string& peer, HelloReply* out) {
  const std::string& name = rq.name();
  if (name.empty() || name.size() > kMaxPeerName)
    return {grpc::StatusCode::INVALID_ARGUMENT,
            "HelloRequest.name must be 1.." + std::to_string(kMaxPeerName) + " bytes; it has " +
                std::to_string(name.size())};
  out->set_protocol(kPeerProtocol);
  out->set_version(ENGRAM_VERSION_STRING);
  if (rq.protocol() != kPeerProtocol)
    return {grpc::StatusCode::FAILED_PRECONDITION,
            "peer speaks engram peer protocol " + std::to_string(rq.protocol()) + ", this server " +
                std::to_string(kPeerProtocol) + " (engram " ENGRAM_VERSION_STRING
                "); run the same engram release on both machines"};
  log_info("remote: peer " + name + " at " + peer + " said hello");
  return grpc::Status::OK;
}

grpc::Status PeerService::Hello(grpc::ServerContext* ctx, const HelloRequest* rq, HelloReply* out) {
  return answer_hello(*rq, ctx->peer(), out);
}

// Counted before anything is opened: a flood of streams is refused here,
// before it holds connections of this server's uid or arena blocks.
grpc::Status PeerService::admit(const char* what) {
  if (streams_.fetch_add(1) < max_streams_) return grpc::Status::OK;
  streams_.fetch_sub(1);
  std::lock_guard lock(refusals_mu_);
  refusals_.note("remote: refused " + std::string(what) + " streams: " + std::to_string(max_streams_) +
                 " are open, the most [remote] max_streams allows");
  return {grpc::StatusCode::RESOURCE_EXHAUSTED,
          "this server serves " + std::to_string(max_streams_) +
              " streams at once ([remote] max_streams in its engramd.toml), all open; try again later"};
}

grpc::Status PeerService::Deliver(grpc::ServerContext* ctx, GrpcDeliverStream* stream) {
  if (grpc::Status s = admit("Deliver"); !s.ok()) return s;
  Admitted release{streams_};
  return serve_deliver(stream, call(ctx), socket_, &claims_);
}

grpc::Status PeerService::Follow(grpc::ServerContext* ctx, const FollowRequest* rq,
                                 grpc::ServerWriter<FollowReply>* out) {
  if (grpc::Status s = admit("Follow"); !s.ok()) return s;
  Admitted release{streams_};
  return serve_follow(*rq, out, call(ctx), socket_);
}

grpc::Status PeerService::Sample(grpc::ServerContext* ctx, GrpcSampleStream* stream) {
  if (grpc::Status s = admit("Sample"); !s.ok()) return s;
  Admitted release{streams_};
  return serve_sample(stream, call(ctx), socket_);
}

}  // namespace engram::remote
