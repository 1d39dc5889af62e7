/* server.hpp: engram::api::Server, the header-only C++17 wrapper of
 * engram/server.h (link with -lengram-server -lengram). The rest of the
 * wrapper, and its rules, are engram/engram.hpp's.
 */
#ifndef ENGRAM_SERVER_HPP
#define ENGRAM_SERVER_HPP

#include <engram/engram.hpp>
#include <engram/server.h>

#include <string>
#include <utility>

namespace engram {
namespace api {

/* The server inside this process (engram_server_start); stopped when
 * destroyed. Others attach to it as to engramd. */
class Server {
 public:
  /* config_toml: engramd.toml(5) text ("" for the defaults); socket_path:
   * "" for the config's. */
  explicit Server(const std::string& config_toml, const std::string& socket_path = "", bool quiet = true) {
    engram_server_options o;
    engram_server_options_init(&o);
    o.config_toml = config_toml.empty() ? nullptr : config_toml.c_str();
    o.socket_path = socket_path.empty() ? nullptr : socket_path.c_str();
    o.quiet = quiet ? 1 : 0;
    check(engram_server_start(&o, &s_));
  }
  ~Server() {
    if (s_) (void)engram_server_stop(s_);
  }
  Server(Server&& o) noexcept : s_(std::exchange(o.s_, nullptr)) {}
  Server& operator=(Server&& o) noexcept {
    std::swap(s_, o.s_);
    return *this;
  }
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;
  /* Stops it now: Error if the stop failed (a checkpoint on the way out). */
  void stop() {
    if (s_) check(engram_server_stop(std::exchange(s_, nullptr)));
  }

 private:
  engram_server* s_ = nullptr;
};

}  // namespace api
}  // namespace engram

#endif /* ENGRAM_SERVER_HPP */
