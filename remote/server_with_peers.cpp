#include "remote/server_with_peers.hpp"

#include "server/log.hpp"

namespace engram::remote {

ServerWithPeers::ServerWithPeers(const ServerConfig& config, std::unique_ptr<Server> server,
                                 std::unique_ptr<Remote> peers)
    : remote_(config.remote), server_(std::move(server)), peers_(std::move(peers)) {}

Result<std::unique_ptr<ServerWithPeers>> ServerWithPeers::start(const ServerConfig& config, Server::Progress progress) {
  auto server = Server::start(config, std::move(progress));
  if (!server.ok()) return server.status();
  auto peers = Remote::start(config.remote, **server);
  if (!peers.ok()) {
    (*server)->stop();
    return peers.status();
  }
  return std::unique_ptr<ServerWithPeers>(new ServerWithPeers(config, std::move(*server), std::move(*peers)));
}

ServerWithPeers::~ServerWithPeers() { stop(); }

void ServerWithPeers::stop() {
  peers_.reset();
  server_->stop();
}

void ServerWithPeers::reload(const ServerConfig& next) {
  server_->reload(next);
  if (next.remote != remote_)
    log_warn("reload: [remote] changed; it takes effect at the next start (systemctl restart engramd)");
}

}  // namespace engram::remote
