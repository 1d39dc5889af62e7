// libengram's versions, error names and the thread's last error (the
// Errc -> ENGRAM_E_* map and the boundary's checks are boundary.cpp's).
#include <cstring>

#include "capi/client.hpp"

using namespace engram;

namespace {
thread_local std::string t_last_error;
}

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
    case ENGRAM_E_CORRUPT: return "shared memory or a file failed validation";
    case ENGRAM_E_CLOSED: return "table closed or dropped";
    case ENGRAM_E_INTERRUPTED: return "interrupted (engram_client_interrupt)";
    case ENGRAM_E_LIMIT: return "a limit the server sets per client or per user was reached";
    case ENGRAM_E_SYSTEM: return "system error";
  }
  return "unknown error code";
}

const char* engram_last_error(void) { return t_last_error.c_str(); }

void engram_private_set_last_error(const char* message) { t_last_error = message ? message : ""; }

}  // extern "C"
