#include "programs/engramd/service_manager.hpp"

#include <systemd/sd-daemon.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>

#include "core/futex.hpp"
#include "server/log.hpp"

namespace engram {

namespace {

// Each extension must outlast the gap to the next progress call (at most a
// second apart while chunks move, plus one slow chunk's read or write).
constexpr uint64_t kExtendUs = 30'000'000;

std::string base_name(const std::string& path) {
  size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string ago(int64_t s) {
  if (s < 120) return std::to_string(s) + " s ago";
  if (s < 7200) return std::to_string(s / 60) + " min ago";
  return std::to_string(s / 3600) + " h ago";
}

}  // namespace

ServiceManager::ServiceManager() {
  uint64_t us = 0;
  if (sd_watchdog_enabled(0, &us) > 0 && us > 0) {
    watchdog_us_ = us;
    tick_ms_ = static_cast<int>(std::clamp<uint64_t>(us / 3000, 100, 5000));
  }
}

std::string ServiceManager::status_line(const Server::Health& h) {
  if (!h.answering) return "not answering: " + h.stuck + " is stuck";
  std::string s = std::to_string(h.tables) + (h.tables == 1 ? " table, " : " tables, ") + std::to_string(h.clients) +
                  (h.clients == 1 ? " client" : " clients");
  if (h.last_checkpoint.empty()) return s + "; no checkpoint yet";
  return s + "; last checkpoint " + base_name(h.last_checkpoint) + ", " + ago(h.last_checkpoint_age_s);
}

void ServiceManager::progress(const char* what, uint64_t done, uint64_t total) {
  int64_t now = monotonic_ns();
  if (done < total && now - last_progress_ns_ < 1'000'000'000) return;
  last_progress_ns_ = now;
  sd_notifyf(0, "EXTEND_TIMEOUT_USEC=%" PRIu64 "\nWATCHDOG=1\nSTATUS=%s: %" PRIu64 " of %" PRIu64 " chunks", kExtendUs,
             what, done, total);
}

void ServiceManager::ready(Server& server) {
  Server::Health h = server.health(2000);
  sd_notifyf(0, "READY=1\nSTATUS=%s", status_line(h).c_str());
}

void ServiceManager::tick(Server& server) {
  Server::Health h = server.health(std::min(tick_ms_, 2000));
  if (h.answering != answering_) {
    if (h.answering) log_info("answering again");
    else log_error(h.stuck + " did not answer within " + std::to_string(std::min(tick_ms_, 2000)) + " ms" +
                   (watchdog() ? "; withholding the watchdog" : ""));
    answering_ = h.answering;
  }
  std::string status = status_line(h);
  if (h.answering && watchdog()) sd_notifyf(0, "WATCHDOG=1\nSTATUS=%s", status.c_str());
  else sd_notifyf(0, "STATUS=%s", status.c_str());
}

void ServiceManager::reloading() {
  // RELOADING=1 then READY=1 brackets the reload for systemctl reload
  // (systemd 253 waits for it with Type=notify-reload; older ones ignore it).
  sd_notify(0, "RELOADING=1\nSTATUS=reloading the configuration");
}

void ServiceManager::reloaded() { sd_notify(0, "READY=1"); }

void ServiceManager::stopping() { sd_notify(0, "STOPPING=1\nSTATUS=stopping"); }

}  // namespace engram
