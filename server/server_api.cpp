// libengram-server: the same server core as engramd, in this process
// (engram/server.h). Its errors reach engram_last_error through libengram.
#include <climits>
#include <cstring>
#include <memory>

#include "capi/boundary.hpp"
#include "daemon/config.hpp"
#include "daemon/log.hpp"
#include "daemon/server.hpp"
#include "engram/server.h"
#include "remote/remote.hpp"

using namespace engram;

struct engram_server {
  std::unique_ptr<Server> server;
  std::unique_ptr<remote::Remote> peers;  // [remote]; stopped before the server
};

extern "C" {

void engram_server_options_init(engram_server_options* o) {
  if (!o) return;
  std::memset(o, 0, sizeof *o);
  o->struct_size = sizeof *o;
}

int engram_server_start(const engram_server_options* o, engram_server** out) {
  ENGRAM_GUARD_BEGIN
  if (!out) return fail(Errc::invalid_argument, "out is NULL");
  *out = nullptr;
  if (o)
    if (Status s = check_struct_size(o->struct_size, ENGRAM_END_OF(engram_server_options, quiet), "engram_server_options");
        !s.ok())
      return set_error(s);
  // Strings read with a bound: a caller's array without a NUL is an error, not a read past it.
  std::string socket_path, config_path;
  if (o && o->socket_path)
    if (Status s = bounded_string(o->socket_path, kMaxSocketPath, "socket_path", &socket_path); !s.ok()) return set_error(s);
  if (o && o->config_path)
    if (Status s = bounded_string(o->config_path, PATH_MAX - 1, "config_path", &config_path); !s.ok()) return set_error(s);
  Result<ServerConfig> config = ServerConfig{};
  if (o && o->config_path) config = load_config(config_path);
  else if (o && o->config_toml) config = parse_config(o->config_toml, "config_toml");
  if (!config.ok()) return set_error(config.status());
  if (const char* env = std::getenv("ENGRAM_SOCKET"); env && *env && !(o && o->config_path) && !(o && o->config_toml))
    config->socket_path = env;
  if (o && o->socket_path) config->socket_path = socket_path;
  if (o && o->quiet) set_log_level(LogLevel::warn);
  auto server = Server::start(*config);
  if (!server.ok()) return set_error(server.status());
  auto peers = remote::Remote::start(config->remote, **server);
  if (!peers.ok()) {
    (*server)->stop();
    return set_error(peers.status());
  }
  *out = new engram_server{std::move(*server), std::move(*peers)};
  return ENGRAM_OK;
  ENGRAM_GUARD_END
}

int engram_server_stop(engram_server* s) {
  ENGRAM_GUARD_BEGIN
  if (!s) return ENGRAM_OK;
  s->peers.reset();
  s->server->stop();
  delete s;
  return ENGRAM_OK;
  ENGRAM_GUARD_END
}

}  // extern "C"
