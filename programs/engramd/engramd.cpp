// engramd: the engram replay server as a daemon. See man/man8/engramd.8.
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "server/config.hpp"
#include "server/log.hpp"
#include "server/server.hpp"
#include "programs/engramd/service_manager.hpp"
#include "remote/server_with_peers.hpp"

using namespace engram;

namespace {

const char* kUsage =
    "usage: engramd [--config PATH] [--socket PATH] [--restore DIR] [--check-config] [--log-level LEVEL]\n"
    "               [--help] [--version]\n"
    "\n"
    "The engram experience-replay server: owns the shared-memory arena and the\n"
    "tables, and serves clients of libengram over a Unix socket.\n"
    "\n"
    "  --config PATH     TOML configuration (man 5 engramd.toml)\n"
    "  --socket PATH     control socket (default: the config's `socket`, else\n"
    "                    $ENGRAM_SOCKET, else /run/engram/engram.sock)\n"
    "  --restore DIR     restore this checkpoint directory at start (refuse to start\n"
    "                    if it does not check out), instead of the newest in\n"
    "                    [checkpoint] dir\n"
    "  --check-config    validate the configuration and exit (0 if valid)\n"
    "  --log-level L     debug, info (default), warn or error\n"
    "  --help, --version\n"
    "\n"
    "Signals: SIGTERM/SIGINT stop cleanly; SIGHUP reloads rate limiters from --config.\n";

int usage_error(const std::string& msg) {
  std::fprintf(stderr, "engramd: %s\n%s", msg.c_str(), kUsage);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string config_path, socket_flag, restore_flag;
  bool check_only = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](const char* flag) -> const char* {
      if (i + 1 >= argc) return nullptr;
      (void)flag;
      return argv[++i];
    };
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (a == "--version") {
      std::printf("engramd %s\n", ENGRAM_VERSION_STRING);
      return 0;
    } else if (a == "--check-config") {
      check_only = true;
    } else if (a == "--config") {
      const char* v = value("--config");
      if (!v) return usage_error("--config needs a path");
      config_path = v;
    } else if (a == "--socket") {
      const char* v = value("--socket");
      if (!v) return usage_error("--socket needs a path");
      socket_flag = v;
    } else if (a == "--restore") {
      const char* v = value("--restore");
      if (!v) return usage_error("--restore needs a checkpoint directory");
      restore_flag = v;
    } else if (a == "--log-level") {
      const char* v = value("--log-level");
      std::string l = v ? v : "";
      if (l == "debug") set_log_level(LogLevel::debug);
      else if (l == "info") set_log_level(LogLevel::info);
      else if (l == "warn") set_log_level(LogLevel::warn);
      else if (l == "error") set_log_level(LogLevel::error);
      else return usage_error("--log-level must be debug, info, warn or error");
    } else {
      return usage_error("unknown argument " + a);
    }
  }

  const ConfigSources sources{config_path, std::nullopt, socket_flag};
  auto config = configure(sources);
  if (!config.ok()) {
    std::fprintf(stderr, "engramd: %s\n", config.status().message().c_str());
    return 1;
  }
  if (!restore_flag.empty()) config->checkpoint.restore_path = restore_flag;  // over [checkpoint] restore_from
  if (check_only) {
    std::printf("engramd: %s is valid (%zu tables, socket %s)\n", config_path.empty() ? "(defaults)" : config_path.c_str(),
                config->tables.size(), config->socket_path.c_str());
    return 0;
  }

  // Non-dumpable: no core file, and /proc/<pid>/mem, ptrace and
  // process_vm_writev are closed to every process of engramd's uid but
  // root's. engram(7)'s "no one but the server writes an index" rests on it.
  if (::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) {
    log_error(std::string("cannot make engramd non-dumpable (prctl PR_SET_DUMPABLE): ") + std::strerror(errno) +
              "; without it any process of this uid could write the server's memory");
    return 1;
  }

  // Each connection costs a descriptor: take every one the hard limit
  // allows (a shell's or systemd's default soft limit is 1,024), so that
  // [server] max_connections is not lowered for nothing. The unit sets
  // both limits with LimitNOFILE=, and so needs no call here (its system
  // call filter refuses setrlimit).
  if (rlimit r{}; ::getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur < r.rlim_max) {
    rlim_t soft = r.rlim_cur;
    r.rlim_cur = r.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &r) != 0)
      log_warn("cannot raise the descriptor limit from " + std::to_string(soft) + " to " + std::to_string(r.rlim_max) +
               ": " + std::strerror(errno));
  }

  // Signals are taken synchronously by this thread only; every thread the
  // server starts inherits the blocked mask.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  signal(SIGPIPE, SIG_IGN);

  ServiceManager service;
  auto running = remote::ServerWithPeers::start(*config, [&service](const char* what, uint64_t done, uint64_t total) {
    service.progress(what, done, total);
  });
  if (!running.ok()) {
    log_error("cannot start: " + running.status().message());
    return 1;
  }
  Server& server = (*running)->server();
  service.ready(server);
  for (;;) {
    int sig = 0;
    timespec tick{service.tick_ms() / 1000, (service.tick_ms() % 1000) * 1'000'000L};
    sig = sigtimedwait(&set, nullptr, &tick);
    if (sig < 0) {
      if (errno == EAGAIN) service.tick(server);
      continue;
    }
    if (sig == SIGHUP) {
      if (config_path.empty()) {
        log_warn("SIGHUP: no --config to reload");
        continue;
      }
      service.reloading();
      auto next = configure(sources);
      if (!next.ok()) {
        log_warn("SIGHUP: keeping the running configuration: " + next.status().message());
      } else {
        log_info("SIGHUP: reloading " + config_path);
        (*running)->reload(*next);
      }
      service.reloaded();
      continue;
    }
    log_info(std::string("received ") + (sig == SIGTERM ? "SIGTERM" : "SIGINT") + "; stopping");
    service.stopping();
    (*running)->stop();
    return 0;
  }
}
