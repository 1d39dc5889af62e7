// A server and its peers ([remote]) as one: the one start-up that engramd
// and the embedded server (engram_server_start) both run.
//
// Order: the server starts first (the peers serve its tables and deliver
// through its socket), the peers after; on stop the peers go first, so no
// peer's traffic reaches a stopping server, then the server (its shutdown
// checkpoint, the clients told).
#pragma once

#include <memory>

#include "core/status.hpp"
#include "server/config.hpp"
#include "server/server.hpp"
#include "remote/remote.hpp"

namespace engram::remote {

class ServerWithPeers {
 public:
  // Starts both, or neither: a server whose peers cannot start is
  // stopped again, and the error names the key to fix.
  static Result<std::unique_ptr<ServerWithPeers>> start(const ServerConfig& config, Server::Progress progress = {});
  ~ServerWithPeers();  // stop()

  // Peers, then the server. Idempotent; not concurrent with reload.
  void stop();
  // Applies what can change at run time (the server's rate limiters); a
  // changed [remote] takes effect at the next start, and the log says so.
  void reload(const ServerConfig& next);
  Server& server() noexcept { return *server_; }

 private:
  ServerWithPeers(const ServerConfig& config, std::unique_ptr<Server> server, std::unique_ptr<Remote> peers);
  RemoteConfig remote_;  // as started: reload compares against it
  std::unique_ptr<Server> server_;
  std::unique_ptr<Remote> peers_;
};

}  // namespace engram::remote
