/*
 * engram/server.h: the engram server embedded in a process (the server
 * engramd runs), C99, stable ABI (libengram-server.so.0; link with
 * -lengram-server -lengram, or pkg-config engram-server). Clients need only
 * engram/engram.h and libengram.so.0, which carries nothing of the server.
 *
 * Moved here from engram.h before the first release (0.5): programs that
 * call engram_server_start include this header and link this library too.
 * Every convention of engram.h holds: int status codes, engram_last_error()
 * for the message, options structs that begin with struct_size.
 */
#ifndef ENGRAM_SERVER_H
#define ENGRAM_SERVER_H

#include <engram/engram.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct engram_server engram_server;

/* An embedded server's settings, for engram_server_start: its socket and
 * its configuration (an engramd.toml file or text). */
typedef struct engram_server_options {
  size_t struct_size;
  const char* socket_path;   /* NULL: the config's, else $ENGRAM_SOCKET, else /run/engram/engram.sock */
  const char* config_path;   /* engramd.toml(5) file, or NULL */
  const char* config_toml;   /* the same as text (used when config_path is NULL), or NULL */
  int32_t quiet;             /* 0: log as engramd does; nonzero: only warnings and errors */
} engram_server_options;

/* Sets every field of *o to its default (given at the field) and
 * struct_size to sizeof the struct; call it first, then set fields.
 * Thread-safe.
 *  - o: the struct to set. May be NULL, which does nothing.
 */
ENGRAM_API void engram_server_options_init(engram_server_options* o);
/* Runs the server in this process (its own threads), configured by *o (see
 * engram_server_options(3type); o may be NULL for the defaults), and sets
 * *out to its handle, valid until engram_server_stop. Other processes
 * attach to it exactly as to engramd.
 *  - o: the socket and configuration (engram_server_options(3type)), read during the call only. May
 *    be NULL for the defaults.
 *  - out: gets the server, running until engram_server_stop. Not NULL.
 * Errors: ENGRAM_E_INVALID (out is
 * NULL, or the config is bad: the message names the key), ENGRAM_E_RANGE
 * (socket_path longer than a Unix socket's 107 bytes), ENGRAM_E_EXISTS (a
 * live server on the socket), ENGRAM_E_NOMEM (the memory left, or the
 * memory cgroup's limit, cannot hold the arena), ENGRAM_E_SYSTEM. Trust: the server lives in this process's memory, so
 * every process that can read or write this process (any of its uid,
 * through ptrace or /proc/PID/mem, unless the process made itself
 * non-dumpable) can write the server's indexes; clients of other uids
 * cannot. For engramd's guarantee against its own uid, run engramd as a
 * user of its own (engramd(8)). */
ENGRAM_API int engram_server_start(const engram_server_options* o, engram_server** out);
/* Stops the server cleanly and frees the handle: a shutdown checkpoint if
 * the config asks for one, then every client's calls return
 * ENGRAM_E_DISCONNECTED.
 *  - s: the server. May be NULL, which does nothing.
 * Errors: ENGRAM_E_SYSTEM (an
 * internal error while stopping; the message says which). */
ENGRAM_API int engram_server_stop(engram_server* s);

#ifdef __cplusplus
}
#endif

#endif /* ENGRAM_SERVER_H */
