// engramd's peers over gRPC ([remote] in engramd.toml(5)): the service
// that serves this server's tables to other engramds, answering the
// standard health check (grpc.health.v1) with the server's own health.
//
// Only engramds talk over the network: clients keep shared memory and the
// C ABI, and nothing of this room is in core/ or libengram. A Remote
// starts after its Server and is destroyed before it: ServerWithPeers
// (server_with_peers.hpp) holds the two, for engramd and the embedded
// server (libengram-server) alike.
#pragma once

#include <memory>
#include <string>

#include "core/status.hpp"
#include "server/config.hpp"
#include "server/server.hpp"

namespace engram::remote {

class Remote {
 public:
  // Listens on c.listen (port 0: any free one) with c's credentials, or
  // does nothing when c.listen is empty. Errors name the key to fix: a
  // TLS file, an address this machine does not have or that is in use.
  static Result<std::unique_ptr<Remote>> start(const RemoteConfig& c, Server& server);
  ~Remote();  // stops listening; what peers sent and this server applied stays

  // Where peers reach this server, the port filled in ("" if not listening).
  const std::string& address() const noexcept;

  struct Impl;

 private:
  explicit Remote(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Keeps gRPC's message buffers in glibc's heap, process-wide (why: in
// remote.cpp). Remote::start calls it; so does a program that measures
// gRPC on its own (bench/grpc_stream.cpp), to measure what engramd runs.
void keep_message_buffers_in_heap();

}  // namespace engram::remote
