// What engramd tells its service manager (systemd's notify protocol,
// sd_notify(3)): READY once the tables exist and the newest good checkpoint
// is restored, a STATUS line, EXTEND_TIMEOUT_USEC while a restore or the
// shutdown checkpoint makes progress, and WATCHDOG=1 only while the server
// answers (so that systemd restarts a wedged daemon instead of feeding it).
// Outside systemd (no NOTIFY_SOCKET) every message is dropped.
#pragma once

#include <cstdint>
#include <string>

#include "server/server.hpp"

namespace engram {

class ServiceManager {
 public:
  ServiceManager();

  // How often tick() should run: a third of the watchdog period when
  // systemd set one, else every few seconds for the status line.
  int tick_ms() const noexcept { return tick_ms_; }
  bool watchdog() const noexcept { return watchdog_us_ != 0; }

  // Server::Progress: extends systemd's start or stop timeout, at most
  // once a second, by long enough to reach the next call.
  void progress(const char* what, uint64_t done, uint64_t total);
  void ready(Server& server);
  // Asks the server whether it answers; feeds the watchdog only if so, and
  // logs when that changes.
  void tick(Server& server);
  void reloading();
  void reloaded();
  void stopping();

  // The STATUS= line for a health report (public for tests).
  static std::string status_line(const Server::Health& h);

 private:
  uint64_t watchdog_us_ = 0;
  int tick_ms_ = 5000;
  int64_t last_progress_ns_ = 0;
  bool answering_ = true;
};

}  // namespace engram
