// Carrying on when the server goes away: an engramd restarted (from its
// checkpoint, or empty) or stopped for a while. Every call on the old
// connection then fails with ENGRAM_E_DISCONNECTED; an agent drops what it
// held of engram (its session: client, tables, writers), connects again
// with bounded backoff, opens what it needs and goes on. One line per
// outage, not per try: when it began, how long it lasted, what was lost.
// A learner whose server is embedded in it has nothing to reconnect to:
// the server goes only with the learner.
#pragma once

#include <engram/engram.hpp>

#include <sys/stat.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "agents/common/host/call_clock.hpp"

namespace engram::agents {

// The error that starts an outage.
inline bool server_gone(const api::Error& e) { return e.code() == ENGRAM_E_DISCONNECTED; }

// Whether a first connect that found no server is an outage to wait out
// rather than a mistake to say at once: the socket is there, left by a
// server that was killed (while the actors of a busy machine still
// start, say). No socket at all is a wrong --socket or a server not yet
// started: said at once (exit 3).
inline bool killed_server_left(const api::Error& e, const std::string& socket) {
  struct stat st {};
  return server_gone(e) && !socket.empty() && ::stat(socket.c_str(), &st) == 0 && S_ISSOCK(st.st_mode);
}

// The errors of a try while the server comes back: none there yet, its
// tables not yet restored or created, or too busy restoring to answer.
inline bool not_back_yet(const api::Error& e) {
  int c = e.code();
  return c == ENGRAM_E_DISCONNECTED || c == ENGRAM_E_NOT_FOUND || c == ENGRAM_E_CLOSED || c == ENGRAM_E_TIMEOUT;
}

// Called as the outage is found: tries open() (which makes the session
// again) until it returns, or until stopped(); between tries waits 50 ms,
// doubling up to 2 s, so that a server restoring a large checkpoint is
// not hammered and one back at once is found at once. Then prints the
// outage's line on stderr: `who` went without its server from now for
// how long, and lost `lost`. Returns false if stopped first; errors other
// than those of a server not yet back are thrown.
template <typename Open, typename Stopped>
bool reconnect(const char* who, const std::string& lost, Open open, Stopped stopped) {
  const time_t began_at = ::time(nullptr);
  const double began_s = wall_s();
  auto wait = std::chrono::milliseconds(50);
  int tries = 0;
  for (;;) {
    if (stopped()) return false;
    ++tries;
    try {
      open();
      break;
    } catch (const api::Error& e) {
      if (!not_back_yet(e)) throw;
    }
    std::this_thread::sleep_for(wait);
    wait = std::min(wait * 2, std::chrono::milliseconds(2000));
  }
  // UTC, as every actor's line (Rust's example has no time zones).
  char clock[16] = "?";
  tm utc{};
  if (::gmtime_r(&began_at, &utc)) std::strftime(clock, sizeof clock, "%H:%M:%S UTC", &utc);
  std::fprintf(stderr, "%s: the server went away at %s; back after %.1f s (%d %s); lost %s\n", who, clock,
               wall_s() - began_s, tries, tries == 1 ? "try" : "tries", lost.c_str());
  return true;
}

}  // namespace engram::agents
