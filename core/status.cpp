#include "core/status.hpp"

#include <cstdio>

namespace engram {

const char* errc_name(Errc c) noexcept {
  switch (c) {
    case Errc::ok: return "ok";
    case Errc::invalid_argument: return "invalid argument";
    case Errc::invalid_priority: return "invalid priority";
    case Errc::invalid_exponent: return "invalid priority exponent";
    case Errc::invalid_capacity: return "invalid capacity";
    case Errc::invalid_rate_limiter: return "invalid rate limiter";
    case Errc::stale_key: return "stale key";
    case Errc::unknown_key: return "unknown key";
    case Errc::rate_limited: return "rate limited";
    case Errc::empty: return "empty";
    case Errc::full: return "full";
    case Errc::out_of_memory: return "out of memory";
    case Errc::double_free: return "double free";
    case Errc::stale_reference: return "stale reference";
    case Errc::layout_mismatch: return "layout mismatch";
    case Errc::corrupt: return "corrupt shared memory";
    case Errc::system: return "system error";
    case Errc::timeout: return "timeout";
    case Errc::not_found: return "not found";
    case Errc::already_exists: return "already exists";
    case Errc::permission_denied: return "permission denied";
    case Errc::disconnected: return "disconnected";
    case Errc::signature_mismatch: return "signature mismatch";
    case Errc::closed: return "closed";
    case Errc::interrupted: return "interrupted";
    case Errc::limit: return "limit";
    case Errc::arena_exhausted: return "arena_exhausted";
  }
  return "unknown error";
}

std::string Status::to_string() const {
  if (ok()) return "ok";
  std::string s = errc_name(code_);
  if (!message_.empty()) s += ": " + message_;
  return s;
}

std::string number_text(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%g", v);
  return b;
}

}  // namespace engram
