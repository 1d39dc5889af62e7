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
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "core/status.hpp"
#include "server/config.hpp"

namespace engram {

class Server {
 public:
  // Long work (restoring a checkpoint at start, writing one at stop) calls
  // this after each chunk, from the thread doing it: `what` names the work. A
  // service manager hears from it that the
  // work moves (engramd extends systemd's timeouts only then). done/total
  // count chunks. Keep it cheap.
  using Progress = std::function<void(const char* what, uint64_t done, uint64_t total)>;

  static Result<std::unique_ptr<Server>> start(const ServerConfig& config, Progress progress = {});
  ~Server();  // stop()

  // Graceful stop: stop accepting, answer what the channels hold, tell the
  // clients, remove the socket and every segment. Idempotent, thread-safe.
  void stop();
  // Applies what can change at run time (rate limiters); logs the rest.
  void reload(const ServerConfig& config);
  // Whether the server answers: its control thread and every table's
  // owner each ran a no-op within `timeout_ms`. A wedged thread makes
  // `answering` false and names itself in `stuck`; this call itself
  // returns after about timeout_ms at most. Thread-safe.
  struct Health {
    bool answering = false;
    std::string stuck;
    size_t tables = 0;
    size_t clients = 0;
    std::string last_checkpoint;  // written or restored; empty if none
    int64_t last_checkpoint_age_s = -1;
  };
  Health health(int timeout_ms);
  // What engramctl status shows of the server's peers (remote/): text
  // lines, or with `json` one JSON object. Called on the control thread;
  // an empty function (the default) means no [remote]. Thread-safe.
  using RemoteStatus = std::function<std::string(bool json)>;
  void set_remote_status(RemoteStatus f);
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
