// libengram-server: the same server core as engramd, in this process
// (engram/server.h). Its errors reach engram_last_error through libengram.
#include <climits>
#include <cstring>
#include <memory>

#include "capi/boundary.hpp"
#include "server/config.hpp"
#include "server/log.hpp"
#include "server/server.hpp"
#include "engram/server.h"
#include "remote/server_with_peers.hpp"

using namespace engram;

struct engram_server {
  std::unique_ptr<remote::ServerWithPeers> running;
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
  // NULL means "not given"; an empty string is a mistake, not NULL.
  if (o && o->socket_path && socket_path.empty()) return fail(Errc::invalid_argument, "socket_path is \"\": give a path, or NULL for the config's");
  if (o && o->config_path && config_path.empty()) return fail(Errc::invalid_argument, "config_path is \"\": give a file, or NULL for none");
  ConfigSources sources{config_path, std::nullopt, socket_path};
  if (o && !o->config_path && o->config_toml) sources.text = o->config_toml;
  Result<ServerConfig> config = configure(sources);
  if (!config.ok()) return set_error(config.status());
  if (o && o->quiet) set_log_level(LogLevel::warn);
  auto running = remote::ServerWithPeers::start(*config);
  if (!running.ok()) return set_error(running.status());
  *out = new engram_server{std::move(*running)};
  return ENGRAM_OK;
  ENGRAM_GUARD_END
}

int engram_server_stop(engram_server* s) {
  ENGRAM_GUARD_BEGIN
  if (!s) return ENGRAM_OK;
  s->running->stop();
  delete s;
  return ENGRAM_OK;
  ENGRAM_GUARD_END
}

}  // extern "C"
