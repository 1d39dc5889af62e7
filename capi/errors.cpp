// Errors and versions at the C boundary: the Errc -> ENGRAM_E_* map, the
// thread's last error, and the checks every entry point makes of its
// caller's structs and strings.
#include <cstring>

#include "capi/client.hpp"

using namespace engram;

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
    case Errc::out_of_memory: return ENGRAM_E_NOMEM;
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

namespace {
thread_local std::string t_last_error;
}

const char* last_error() noexcept { return t_last_error.c_str(); }

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
  t_last_error = s.message().empty() ? errc_name(s.code()) : s.message();
  return to_code(s.code());
}

}  // namespace engram

extern "C" {

unsigned engram_version(void) { return ENGRAM_VERSION_NUMBER; }

const char* engram_version_string(void) { return ENGRAM_VERSION_STRING; }

const char* engram_strerror(int code) {
  switch (code) {
    case ENGRAM_OK: return "success";
    case ENGRAM_E_INVALID: return "invalid argument";
    case ENGRAM_E_RANGE: return "value out of range";
    case ENGRAM_E_PRIORITY: return "invalid priority (NaN, infinite or negative)";
    case ENGRAM_E_NOT_FOUND: return "no such table";
    case ENGRAM_E_EXISTS: return "already exists";
    case ENGRAM_E_SIGNATURE: return "columns do not match the table's signature";
    case ENGRAM_E_TIMEOUT: return "timed out";
    case ENGRAM_E_RATE_LIMITED: return "rate limited";
    case ENGRAM_E_STALE_KEY: return "stale key (the item is gone)";
    case ENGRAM_E_UNKNOWN_KEY: return "unknown key";
    case ENGRAM_E_NOMEM: return "out of memory";
    case ENGRAM_E_DISCONNECTED: return "disconnected from the server";
    case ENGRAM_E_PERMISSION: return "permission denied";
    case ENGRAM_E_VERSION: return "client and server versions differ";
    case ENGRAM_E_CORRUPT: return "shared memory failed validation";
    case ENGRAM_E_CLOSED: return "table closed or dropped";
    case ENGRAM_E_INTERRUPTED: return "interrupted (engram_client_interrupt)";
    case ENGRAM_E_LIMIT: return "a limit the server sets per client or per user was reached";
    case ENGRAM_E_SYSTEM: return "system error";
  }
  return "unknown error code";
}

const char* engram_last_error(void) { return engram::last_error(); }

}  // extern "C"
