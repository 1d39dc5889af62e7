// The server core: what engramd runs, and what engram_server_start embeds in
// any process. It owns the shared segments (arena, bells, tables, channels),
// one TableOwner thread per table, and one control thread that serves the
// Unix socket: attach, table management, and the death of clients (a hung-up
// socket reclaims everything the client held).
//
// Start-up order: stale socket and segments removed, arena and tables made,
// socket listening, then start() returns; readiness may be signalled after.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "core/status.hpp"
#include "daemon/config.hpp"

namespace engram {

class Server {
 public:
  static Result<std::unique_ptr<Server>> start(const ServerConfig& config);
  ~Server();  // stop()

  // Graceful stop: stop accepting, answer what the channels hold, tell the
  // clients, remove the socket and every segment. Idempotent, thread-safe.
  void stop();
  // Applies what can change at run time (rate limiters); logs the rest.
  void reload(const ServerConfig& config);
  const std::string& socket_path() const noexcept;
  const std::string& shm_prefix() const noexcept;

  struct Impl;

 private:
  explicit Server(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The segment prefix a config implies: shm_prefix, or one derived from the socket path.
std::string shm_prefix_for(const ServerConfig& c);

}  // namespace engram
