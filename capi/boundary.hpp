// What every entry point of engram's C libraries does at the boundary:
// core errors become ENGRAM_E_* codes and the thread's last error, callers'
// structs and strings are checked before they are read, and no exception
// crosses. Shared by libengram and libengram-server (a static library of
// its own, engram_cabi); the last-error slot itself is libengram's, which
// libengram-server reaches through engram_private_set_last_error.
#pragma once

#include <cstddef>
#include <new>
#include <stdexcept>
#include <string>

#include "core/status.hpp"
#include "engram/engram.h"

extern "C" {
// Not part of the API (version node ENGRAM_PRIVATE): sets this thread's
// engram_last_error() text, for libengram-server of the same release.
ENGRAM_API void engram_private_set_last_error(const char* message);
}

namespace engram {

// The C code for a core error; Errc values keep their meaning across the ABI.
int to_code(Errc e) noexcept;
// Records s as this thread's last error and returns its code (0 for ok).
int set_error(const Status& s);
inline int fail(Errc e, std::string msg) { return set_error({e, std::move(msg)}); }
// A caller's C string, read no further than max_bytes + 1 bytes: one that
// has no NUL within them is Errc::invalid_capacity naming `what`, never a
// read past the caller's array. NULL is Errc::invalid_argument.
Status bounded_string(const char* s, size_t max_bytes, const char* what, std::string* out);
// Bytes of `type` up to and including `field`: what a caller's struct_size
// must cover for this version to read `field`.
#define ENGRAM_END_OF(type, field) (offsetof(type, field) + sizeof(static_cast<type*>(nullptr)->field))
// Does the caller's struct *o (of `type`) reach `field`? Older callers' do not.
#define ENGRAM_HAS_FIELD(o, type, field) ((o)->struct_size >= ENGRAM_END_OF(type, field))
// Errc::invalid_argument naming `type` when struct_size < need (options
// structs only ever grow at the end; see engram.h).
Status check_struct_size(size_t struct_size, size_t need, const char* type);

}  // namespace engram

// Every entry point catches everything: no exception crosses the C ABI.
#define ENGRAM_GUARD_BEGIN try {
#define ENGRAM_GUARD_END                                                                      \
  }                                                                                           \
  catch (const std::bad_alloc&) {                                                             \
    return engram::fail(engram::Errc::out_of_memory, "out of memory in the client process"); \
  }                                                                                           \
  catch (const std::exception& e) {                                                           \
    return engram::fail(engram::Errc::system, std::string("internal error: ") + e.what());    \
  }
