// The C boundary's checks and its error codes (boundary.hpp), in both of
// engram's C libraries.
#include "capi/boundary.hpp"

#include <cstring>

namespace engram {

int to_code(Errc e) noexcept {
  switch (e) {
    case Errc::ok: return ENGRAM_OK;
    case Errc::invalid_argument: return ENGRAM_E_INVALID;
    case Errc::invalid_priority: return ENGRAM_E_PRIORITY;
    case Errc::invalid_exponent:
    case Errc::invalid_rate_limiter: return ENGRAM_E_INVALID;
    case Errc::invalid_capacity: return ENGRAM_E_RANGE;
    case Errc::stale_key: return ENGRAM_E_STALE_KEY;
    case Errc::unknown_key: return ENGRAM_E_UNKNOWN_KEY;
    case Errc::rate_limited: return ENGRAM_E_RATE_LIMITED;
    case Errc::empty: return ENGRAM_E_RATE_LIMITED;
    case Errc::full: return ENGRAM_E_RANGE;
    case Errc::out_of_memory:
    case Errc::arena_exhausted: return ENGRAM_E_NOMEM;
    case Errc::double_free:
    case Errc::stale_reference:
    case Errc::corrupt: return ENGRAM_E_CORRUPT;
    case Errc::layout_mismatch: return ENGRAM_E_VERSION;
    case Errc::system: return ENGRAM_E_SYSTEM;
    case Errc::timeout: return ENGRAM_E_TIMEOUT;
    case Errc::not_found: return ENGRAM_E_NOT_FOUND;
    case Errc::already_exists: return ENGRAM_E_EXISTS;
    case Errc::permission_denied: return ENGRAM_E_PERMISSION;
    case Errc::disconnected: return ENGRAM_E_DISCONNECTED;
    case Errc::signature_mismatch: return ENGRAM_E_SIGNATURE;
    case Errc::closed: return ENGRAM_E_CLOSED;
    case Errc::interrupted: return ENGRAM_E_INTERRUPTED;
    case Errc::limit: return ENGRAM_E_LIMIT;
  }
  return ENGRAM_E_INVALID;
}

Status check_struct_size(size_t struct_size, size_t need, const char* type) {
  if (struct_size >= need) return Status::Ok();
  return {Errc::invalid_argument, std::string(type) + ".struct_size is " + std::to_string(struct_size) + ", less than the " +
                                      std::to_string(need) + " bytes this version reads; call " + type + "_init first"};
}

Status bounded_string(const char* s, size_t max_bytes, const char* what, std::string* out) {
  if (!s) return {Errc::invalid_argument, std::string(what) + " is NULL"};
  size_t n = strnlen(s, max_bytes + 1);
  if (n > max_bytes)
    return {Errc::invalid_capacity, std::string(what) + " is longer than " + std::to_string(max_bytes) +
                                        " bytes (or lacks its terminating NUL)"};
  out->assign(s, n);
  return Status::Ok();
}

int set_error(const Status& s) {
  if (s.ok()) return ENGRAM_OK;
  engram_private_set_last_error(s.message().empty() ? errc_name(s.code()) : s.message().c_str());
  return to_code(s.code());
}

}  // namespace engram
