// gRPC's own limit on the link, for bench/remote.sh: one Deliver stream of
// engram's peer protocol carrying requests of 1 MiB of chunks (the
// upstream link's batch_bytes), with engramd's credentials and its malloc
// setting, and no engram behind either end: the sender writes one
// prepared request again and again as fast as the stream takes it, the
// receiver parses each and drops it. What engram's link loses against
// this is engram's; what this loses against the TCP and TLS streams is
// gRPC's (HTTP/2 framing, protobuf, its TLS frame protector).
// Prints one JSON line: bytes (chunk bytes), seconds (the receiver's,
// first request to the stream's end), cpu_s (getrusage).
//
//   grpc_stream recv PORT [CERT KEY CA]
//   grpc_stream send HOST:PORT BYTES CHUNK_BYTES [CERT KEY CA]
#include <grpcpp/grpcpp.h>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "bench/bench_clock.h"
#include "server/peer_address.hpp"
#include "remote/credentials.hpp"
#include "remote/peer.grpc.pb.h"
#include "remote/remote.hpp"

namespace pb = engram::peer::v1;
using engram::RemoteConfig;

namespace {

constexpr size_t kRequestBytes = 1 << 20;  // UpstreamLinkOptions::batch_bytes

int usage() {
  std::fprintf(stderr,
               "usage: grpc_stream recv PORT [CERT KEY CA]\n"
               "       grpc_stream send HOST:PORT BYTES CHUNK_BYTES [CERT KEY CA]\n");
  return 2;
}

RemoteConfig config(int argc, char** argv, int first) {
  RemoteConfig c;
  if (argc == first + 3) {
    c.tls_cert = argv[first];
    c.tls_key = argv[first + 1];
    c.tls_ca = argv[first + 2];
  } else {
    c.insecure = true;
  }
  return c;
}

class Sink final : public pb::Peer::Service {
 public:
  grpc::Status Deliver(grpc::ServerContext*, grpc::ServerReaderWriter<pb::DeliverReply, pb::DeliverRequest>* stream)
      override {
    pb::DeliverRequest r;
    int64_t t0 = 0;
    long long bytes = 0;
    while (stream->Read(&r)) {
      if (t0 == 0) t0 = now_ns();
      for (const pb::Chunk& c : r.chunks()) bytes += static_cast<long long>(c.data().size());
    }
    std::printf("{\"bytes\": %lld, \"seconds\": %.6f, \"cpu_s\": %.3f}\n", bytes, (now_ns() - t0) * 1e-9, cpu_s());
    std::fflush(stdout);
    done_ = true;
    return grpc::Status::OK;
  }
  bool done() const { return done_; }

 private:
  std::atomic<bool> done_{false};
};

int recv(int argc, char** argv) {
  if (argc != 3 && argc != 6) return usage();
  RemoteConfig c = config(argc, argv, 3);
  auto tls = engram::remote::load_tls(c);
  if (!tls.ok()) return std::fprintf(stderr, "grpc_stream: %s\n", tls.status().message().c_str()), 1;
  Sink sink;
  grpc::ServerBuilder b;
  b.AddListeningPort(std::string("0.0.0.0:") + argv[2], engram::remote::server_credentials(c, *tls));
  b.SetMaxReceiveMessageSize(64 << 20);
  b.RegisterService(&sink);
  std::unique_ptr<grpc::Server> server = b.BuildAndStart();
  if (!server) return std::fprintf(stderr, "grpc_stream: cannot listen on port %s\n", argv[2]), 1;
  while (!sink.done()) usleep(10'000);
  server->Shutdown();
  return 0;
}

int send(int argc, char** argv) {
  if (argc != 5 && argc != 8) return usage();
  RemoteConfig c = config(argc, argv, 5);
  auto tls = engram::remote::load_tls(c);
  auto peer = engram::parse_peer_address(argv[2], false);
  if (!tls.ok() || !peer.ok()) return std::fprintf(stderr, "grpc_stream: bad certificates or address\n"), 1;
  auto creds = engram::remote::channel_credentials(c, *tls, *peer);
  if (!creds.ok()) return std::fprintf(stderr, "grpc_stream: %s\n", creds.status().message().c_str()), 1;
  const long long total = std::atoll(argv[3]);
  const size_t chunk = static_cast<size_t>(std::atoll(argv[4]));
  if (total <= 0 || chunk == 0) return usage();

  pb::DeliverRequest r;
  r.set_table("replay");
  r.set_producer(1);
  for (size_t at = 0, id = 1; at + chunk <= std::max(kRequestBytes, chunk); at += chunk, ++id) {
    pb::Chunk* ch = r.add_chunks();
    ch->set_id(id);
    ch->set_data(std::string(chunk, static_cast<char>(id)));
  }
  const long long per_request = static_cast<long long>(r.chunks_size()) * static_cast<long long>(chunk);
  auto stub = pb::Peer::NewStub(grpc::CreateChannel(peer->text(), *creds));
  grpc::ClientContext ctx;
  auto stream = stub->Deliver(&ctx);
  for (long long sent = 0; sent < total; sent += per_request)
    if (!stream->Write(r)) return std::fprintf(stderr, "grpc_stream: the stream broke\n"), 1;
  stream->WritesDone();
  grpc::Status s = stream->Finish();
  if (!s.ok()) return std::fprintf(stderr, "grpc_stream: %s\n", s.error_message().c_str()), 1;
  std::printf("{\"cpu_s\": %.3f}\n", cpu_s());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  engram::remote::keep_message_buffers_in_heap();
  if (argc >= 2 && std::string(argv[1]) == "recv") return recv(argc, argv);
  if (argc >= 2 && std::string(argv[1]) == "send") return send(argc, argv);
  return usage();
}
