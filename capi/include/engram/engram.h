/*
 * engram.h: the C interface of engram, experience replay through shared
 * memory: the client library, C99, stable ABI (libengram.so.0). The server
 * embedded in a process has a header and a library of its own
 * (engram/server.h, libengram-server.so.0), which clients never load.
 *
 * Conventions
 *  - Every function that can fail returns int: ENGRAM_OK (0) or a negative
 *    ENGRAM_E_* code. engram_strerror(code) names the code;
 *    engram_last_error() returns this thread's message for the last failure,
 *    with the detail (which table, which column, what is allowed).
 *  - Handles are opaque. Option structs begin with `struct_size`: call the
 *    matching *_init function, then set fields; new fields are only ever
 *    appended, so a caller built against an older header keeps working.
 *  - Thread-safety: an engram_client and every handle made from it (tables,
 *    writers, batches) may be used by one thread at a time. Use one client per
 *    thread for parallel work. engram_strerror, engram_last_error,
 *    engram_version*, the *_init functions, the server functions and
 *    engram_client_interrupt (which ends another thread's wait) may be
 *    called from any thread.
 *  - Timeouts (timeout_ms, insert_timeout_ms): -1 waits for ever, 0 not at
 *    all. A wait never ends before its timeout; one of 100 ms or more may
 *    last up to two clock ticks longer (see engram(7)). A request that
 *    timed out is never applied later: the server refuses a request that
 *    reaches it after its deadline (it was stalled), and a sample whose
 *    caller gave up at its deadline is cancelled. A call returns later than
 *    its timeout only when the server took its request before the deadline
 *    and then stalled; it then returns the result.
 *  - Ownership: a client owns every handle made from it, and a table the
 *    batches sampled from it; a listing of items (engram_items) is the
 *    caller's alone. engram_disconnect frees the client's tables,
 *    writers and batches, and engram_table_close the table's batches: after
 *    that call no freed handle may be used or closed (the library cannot
 *    tell a freed pointer from a live one). Close children first, or not at
 *    all. A binding whose finalizers run in any order keeps that order
 *    itself: a child holds its parent, and a finalizer that finds its
 *    parent closed does nothing (bindings/python, bindings/julia). Closes
 *    may wait: engram_writer_close for the writer's acks (up to its
 *    insert_timeout_ms, or 10 s), engram_table_close for what its channel
 *    still owes (up to 1 s) and for the server's answer (up to the client's
 *    timeout_ms); a finalizer should queue them for the owning thread
 *    rather than call them.
 *  - Disconnection: when the server goes away, calls return
 *    ENGRAM_E_DISCONNECTED (never hang, never crash); disconnect and connect
 *    again.
 *  - Trust: the server checks everything a client sends, and survives any
 *    client. Clients of one server share the arena's memory writable, so a
 *    client can overwrite chunks that others wrote (never the allocation
 *    state, which is the server's): give the server's group only to
 *    processes you trust with each other's data. See engram(7). A client
 *    that writes its own channels' memory (rings, headers) other than
 *    through this library harms only itself, but may then wait in any call
 *    on that table until its timeout, and in one without a timeout (a
 *    priority update, a delete, -1) until engram_client_interrupt.
 *  - Arguments: every pointer and array entry the library reads is checked
 *    (ENGRAM_E_INVALID naming it), and strings are read no further than
 *    their limit (ENGRAM_E_RANGE if no NUL comes by then).
 *
 * See engram(7) for the model (tables, chunks, items, rate limiters) and one
 * man page per function in section 3.
 */
#ifndef ENGRAM_ENGRAM_H
#define ENGRAM_ENGRAM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Marks the exported functions; everything else in libengram is hidden. */
#if defined(__GNUC__) || defined(__clang__)
#define ENGRAM_API __attribute__((visibility("default")))
#else
#define ENGRAM_API
#endif

#define ENGRAM_VERSION_MAJOR 0
#define ENGRAM_VERSION_MINOR 5
#define ENGRAM_VERSION_PATCH 0
#define ENGRAM_VERSION_NUMBER (ENGRAM_VERSION_MAJOR * 10000 + ENGRAM_VERSION_MINOR * 100 + ENGRAM_VERSION_PATCH)

/* Status codes. Values never change meaning. Each comment says what the
 * code means, then what a caller should do; engram_errors(3) lists them. */
#define ENGRAM_OK 0
#define ENGRAM_E_INVALID (-1)       /* a bad argument; the message says which. Fix the call: retrying
                                       the same one fails the same way */
#define ENGRAM_E_RANGE (-2)         /* a count or length outside its range (batch, steps, name). The
                                       message gives the range; fix the call */
#define ENGRAM_E_PRIORITY (-3)      /* NaN, infinite or negative priority. Nothing was applied; check
                                       the learner's TD errors for NaN before they become priorities */
#define ENGRAM_E_NOT_FOUND (-4)     /* no table of that name. Create it (engram_table_create,
                                       engramd.toml) or check the name; engramctl tables lists them */
#define ENGRAM_E_EXISTS (-5)        /* a table of that name exists (or is open on this client). Open it
                                       instead, or drop it first */
#define ENGRAM_E_SIGNATURE (-6)     /* columns (count, dtype, shape) do not match. Use the table's
                                       columns and compression (engram_table_columns,
                                       engram_table_compression); the message names the column */
#define ENGRAM_E_TIMEOUT (-7)       /* the rate limiter (or a full arena) did not allow it in time.
                                       Nothing was applied; retry, wait longer, or check that the other
                                       side (samplers, writers) is running */
#define ENGRAM_E_RATE_LIMITED (-8)  /* not allowed now, and no wait was asked for (timeout 0). Retry
                                       later, or wait with a timeout */
#define ENGRAM_E_STALE_KEY (-9)     /* the item is gone (evicted, deleted, expired). Skip it: its slot
                                       may hold another item now, which was left alone */
#define ENGRAM_E_UNKNOWN_KEY (-10)  /* the key never named an item of this table. A key of another
                                       table, or not a key: a bug in the caller */
#define ENGRAM_E_NOMEM (-11)        /* the arena (or the process) is out of memory. Wait for samplers
                                       and evictions to free blocks, or give the server a larger
                                       [arena] */
#define ENGRAM_E_DISCONNECTED (-12) /* the server went away. Every handle of the client is dead:
                                       engram_disconnect, then engram_connect again and reopen */
#define ENGRAM_E_PERMISSION (-13)   /* the server refused these credentials. Run as the server's user
                                       or a member of its group (engramd(8)) */
#define ENGRAM_E_VERSION (-14)      /* client and server layouts or protocols differ. Use the libengram
                                       of the server's release */
#define ENGRAM_E_CORRUPT (-15)      /* shared memory or a file failed validation. Memory: a process
                                       wrote where it should not (this one, or one of the server's
                                       group); a file: it is damaged. The message says which */
#define ENGRAM_E_CLOSED (-16)       /* the table was dropped, or its channel closed. Close the handle;
                                       open the table again if it exists */
#define ENGRAM_E_SYSTEM (-17)       /* an operating-system call failed. The message has the call and
                                       errno's text: a file, a socket, a mapping */
#define ENGRAM_E_INTERRUPTED (-18)  /* engram_client_interrupt ended the wait. What the call leaves is
                                       on engram_client_interrupt(3); carry on or shut down */
#define ENGRAM_E_LIMIT (-19)        /* a per-client or per-user limit of the server. The message names
                                       the setting; wait for others to finish, or raise it */

/* Element types of a column. */
typedef enum engram_dtype {
  ENGRAM_UINT8 = 1, ENGRAM_INT8, ENGRAM_UINT16, ENGRAM_INT16, ENGRAM_UINT32, ENGRAM_INT32,
  ENGRAM_UINT64, ENGRAM_INT64, ENGRAM_FLOAT16, ENGRAM_FLOAT32, ENGRAM_FLOAT64, ENGRAM_BOOL
} engram_dtype;

/* Item selection strategies, for sampling and for eviction. */
typedef enum engram_selector {
  ENGRAM_UNIFORM = 1, ENGRAM_PRIORITIZED, ENGRAM_FIFO, ENGRAM_LIFO, ENGRAM_MAX_HEAP, ENGRAM_MIN_HEAP
} engram_selector;

#define ENGRAM_MAX_RANK 6
#define ENGRAM_MAX_COLUMNS 32
#define ENGRAM_MAX_NAME 63        /* bytes of a table name */
#define ENGRAM_MAX_COLUMN_NAME 31 /* bytes of a column name */

/* One column of a step: a fixed-shape array. A plain struct of fixed size. */
typedef struct engram_column {
  const char* name;  /* 1..ENGRAM_MAX_COLUMN_NAME bytes of letters, digits, '_', '.', ':', '-' */
  int32_t dtype;  /* engram_dtype */
  uint32_t rank;  /* 0 for a scalar, up to ENGRAM_MAX_RANK (6) */
  uint32_t shape[ENGRAM_MAX_RANK]; /* the first `rank` dimensions, each >= 1, at most 2^30 bytes a
                                      step in all; the rest are ignored */
} engram_column;

/* How chunks store a column. Compression runs in the writer when it
 * finalizes a chunk; decompression in the sampling client, into the
 * caller's buffers. A column whose compressed form would not be smaller is
 * stored as is. See engram(7), COMPRESSION. */
typedef enum engram_codec {
  ENGRAM_CODEC_NONE = 0,
  ENGRAM_CODEC_ZSTD = 1,       /* zstd over the column's steps */
  ENGRAM_CODEC_DELTA_ZSTD = 2  /* each step minus the one before, byte by byte, then zstd:
                                  for image-like integer columns */
} engram_codec;

/* A column's codec and zstd level (0 = the default, 3; else -7..22).
 * A plain struct of fixed size. */
typedef struct engram_compression {
  int32_t codec; /* engram_codec */
  int32_t level; /* zstd's level: 0 for the default (3), else -7..22 (others are refused); ignored by ENGRAM_CODEC_NONE */
} engram_compression;

/* Reverb's rate limiter: when a table lets sampling and inserting go on.
 * Build one with the engram_rate_limiter_* presets; engram(7) has the
 * rules. */
typedef struct engram_rate_limiter {
  double samples_per_insert; /* finite, > 0: samples allowed per insert */
  int64_t min_size_to_sample; /* >= 1: items the table must hold before sampling may start */
  double min_diff;           /* finite or -infinity (never hold samples back): a sample of n
                                waits while inserts * samples_per_insert - samples - n < min_diff */
  double max_diff;           /* >= min_diff, finite or +infinity (never hold inserts back): an
                                insert of n waits while (inserts + n) * samples_per_insert -
                                samples > max_diff, once min_size_to_sample items exist */
} engram_rate_limiter;

/* --- version and errors -------------------------------------------------- */

/* ENGRAM_VERSION_NUMBER of the library actually loaded. */
ENGRAM_API unsigned engram_version(void);
/* "MAJOR.MINOR.PATCH" of the library actually loaded. */
ENGRAM_API const char* engram_version_string(void);
/* A short, static description of a status code (never NULL).
 *  - code: any int: ENGRAM_OK (0), an ENGRAM_E_* code, or any other value ("unknown error code").
 */
ENGRAM_API const char* engram_strerror(int code);
/* This thread's message for the last failed call ("" if none). Valid until the
 * thread's next failing call. */
ENGRAM_API const char* engram_last_error(void);

/* --- rate limiter presets (thread-safe) ---------------------------------------- */

/* Fills *out with Reverb's MinSize(n) limiter: sampling may start once the
 * table holds n items; inserts never wait. Put it in
 * engram_table_options.rate_limiter, or pass it to
 * engram_table_set_rate_limiter.
 *  - out: the limiter to fill, e.g. engram_table_options.rate_limiter. Not NULL.
 *  - n: the items the table must hold before sampling may start, 1 or more.
 * Errors: ENGRAM_E_INVALID (out is NULL, or
 * n < 1). */
ENGRAM_API int engram_rate_limiter_min_size(engram_rate_limiter* out, int64_t n);
/* Fills *out with Reverb's SampleToInsertRatio(spi, min_size,
 * error_buffer) limiter: once min_size items exist, samples per insert are
 * kept near spi, within +-error_buffer (samples wait when ahead, inserts
 * when behind).
 *  - out: the limiter to fill. Not NULL.
 *  - spi: samples per insert to keep to: finite and > 0 (e.g. 8: each item sampled about 8 times).
 *  - min_size: the items the table must hold before sampling may start, 1 or more.
 *  - error_buffer: how far, in samples, the count may stray from spi per insert either way: finite,
 *    and at least max(1, spi).
 * Errors: ENGRAM_E_INVALID (out is NULL, spi not finite or
 * not > 0, min_size < 1, error_buffer not finite or < 0, or a window
 * narrower than 2*max(1, spi), which could deadlock writers and samplers). */
ENGRAM_API int engram_rate_limiter_sample_to_insert_ratio(engram_rate_limiter* out, double spi, int64_t min_size,
                                               double error_buffer);
/* Fills *out with Reverb's Queue(size) limiter: at most `size` items wait
 * to be sampled; inserts wait while the queue is full, samples while it is
 * empty. Pair it with a FIFO sampler and max_times_sampled 1.
 *  - out: the limiter to fill. Not NULL.
 *  - size: the most items that wait to be sampled, 1 or more, and at most the table's max_size
 *    (a larger queue would see its items evicted before it held a writer: engram_table_create
 *    refuses it).
 * Errors:
 * ENGRAM_E_INVALID (out is NULL, or size < 1). */
ENGRAM_API int engram_rate_limiter_queue(engram_rate_limiter* out, int64_t size);

/* --- connection --------------------------------------------------------------- */

typedef struct engram_client engram_client;

/* How engram_connect reaches the server: the socket and how long to wait. */
typedef struct engram_connect_options {
  size_t struct_size;
  const char* socket_path;  /* NULL: $ENGRAM_SOCKET, else /run/engram/engram.sock */
  int32_t timeout_ms;       /* bounds engram_connect, every step of it, and each control request;
                               default 10000 (0 or less: the default) */
} engram_connect_options;

/* Sets every field of *o to its default (given at the field) and
 * struct_size to sizeof the struct; call it first, then set fields.
 * Thread-safe.
 *  - o: the struct to set. May be NULL, which does nothing.
 */
ENGRAM_API void engram_connect_options_init(engram_connect_options* o);
/* Connects and maps the shared arena. `o` may be NULL for the defaults.
 * The call waits for the server, connect(2) and its answer included, at
 * most o->timeout_ms.
 *  - o: the socket and the timeout (engram_connect_options(3type)), read during the call only. May
 *    be NULL for the defaults: $ENGRAM_SOCKET or /run/engram/engram.sock, 10000 ms.
 *  - out: gets the client, valid until engram_disconnect. Not NULL; left alone on failure.
 * Errors: ENGRAM_E_DISCONNECTED (no server on the socket, or it hung up),
 * ENGRAM_E_INVALID (out is NULL, or o has an older struct_size),
 * ENGRAM_E_RANGE (socket_path longer than a Unix socket's 107 bytes),
 * ENGRAM_E_PERMISSION, ENGRAM_E_VERSION, ENGRAM_E_TIMEOUT (the server's
 * backlog stayed full, or it did not answer the hello, within timeout_ms:
 * the message says which), ENGRAM_E_LIMIT (the server refused the
 * connection: too many from this user or in all, or it is out of
 * descriptors; the message names the setting), ENGRAM_E_SYSTEM. */
ENGRAM_API int engram_connect(const engram_connect_options* o, engram_client** out);
/* Closes every table, writer and batch of client c, then the connection;
 * c and every handle made from it are freed.
 *  - c: the client. May be NULL, which does nothing.
 * Notes:
 * after this call no handle of c may be used or closed: the library cannot
 * tell a freed pointer from a live one. Close children first, or not at
 * all; a binding whose finalizers run in any order must keep that order
 * itself (see the header's Ownership convention). */
ENGRAM_API void engram_disconnect(engram_client* c);
/* Ends the wait of the call that is blocked on c in another thread (a
 * sample, a writer's append, create_item or flush held by a rate limiter or
 * a full arena, a priority update or delete waiting for its answer) with
 * ENGRAM_E_INTERRUPTED, within about 100 ms. If no call is waiting, the
 * next one that would wait returns ENGRAM_E_INTERRUPTED at once; one
 * interrupt ends one wait. Control requests (connect, create, open, info,
 * checkpoint) are not interrupted; their timeouts bound them.
 * What an interrupted call leaves: a sample is cancelled and samples
 * nothing (unless the server had begun it: then it completes and returns
 * ENGRAM_OK); an item whose insert request was not yet sent is dropped,
 * one already sent is inserted when the rate limiter allows, its key and
 * any error reported by a later call; the writer stays usable. An
 * interrupted update or delete may have been applied.
 * Thread-safe and async-signal-safe (one atomic store): call it from any
 * thread or a signal handler (for Ctrl-C), while c is connected, not after
 * engram_disconnect(c) began. Since 0.3.
 *  - c: the client whose waiting call to end. May be NULL, which does nothing.
 */
ENGRAM_API void engram_client_interrupt(engram_client* c);

/* --- tables ------------------------------------------------------------------- */

typedef struct engram_table engram_table;

/* A table's settings, for engram_table_create: its name, capacity,
 * selectors, rate limiter, columns and their compression. */
typedef struct engram_table_options {
  size_t struct_size;
  const char* name;              /* 1..ENGRAM_MAX_NAME bytes of letters, digits, '_', '.', ':', '-' */
  uint64_t max_size;             /* capacity in items, 1..2^30 */
  int32_t sampler;               /* engram_selector; default ENGRAM_UNIFORM */
  int32_t remover;               /* engram_selector; default ENGRAM_FIFO */
  double priority_exponent;      /* finite, >= 0; read by ENGRAM_PRIORITIZED; default 1 */
  uint32_t max_times_sampled;    /* 0 = unlimited */
  uint32_t max_chunks_per_item;  /* 1..8; default (and 0) 8 */
  engram_rate_limiter rate_limiter; /* default: min_size 1 */
  const engram_column* columns;  /* num_columns columns, read during engram_table_create; not NULL */
  uint32_t num_columns;          /* 1..ENGRAM_MAX_COLUMNS */
  const engram_compression* compression; /* NULL: nothing compressed; else one per column.
                                            Writers must use the same. */
} engram_table_options;

/* Sets every field of *o to its default (given at the field) and
 * struct_size to sizeof the struct; call it first, then set fields.
 * Thread-safe.
 *  - o: the struct to set. May be NULL, which does nothing.
 */
ENGRAM_API void engram_table_options_init(engram_table_options* o);
/* Creates a table on the server from *o (see engram_table_options(3type)).
 * The table lives until it is dropped or the server stops (a checkpoint
 * keeps it across restarts).
 *  - c: a connected client; the call waits for the server's answer up to the client's timeout_ms
 *    (engram_connect_options(3type)). Not NULL.
 *  - o: the table's settings (engram_table_options(3type)), read during the call only. Not NULL.
 * Errors: ENGRAM_E_INVALID (c or o is NULL, an
 * older struct_size, or a bad field: the message names it; also a rate
 * limiter that cannot hold on this table: a min_size above max_size, or
 * a queue larger than max_size),
 * ENGRAM_E_RANGE (a name too long, max_size, num_columns or a column's
 * shape out of range, or the server holds 64 tables, the most it can),
 * ENGRAM_E_EXISTS (a table of that name exists),
 * ENGRAM_E_NOMEM (the server cannot map the table's index),
 * ENGRAM_E_TIMEOUT (no answer within the client's timeout_ms),
 * ENGRAM_E_DISCONNECTED. */
ENGRAM_API int engram_table_create(engram_client* c, const engram_table_options* o);
/* Opens a table for writing items into it and sampling it: *out is a
 * handle of this client (a channel of its own to the table's owner), valid
 * until engram_table_close, engram_disconnect, or the table's drop (calls
 * then return ENGRAM_E_CLOSED).
 *  - c: a connected client; the call waits for the server's answer up to the client's timeout_ms
 *    (engram_connect_options(3type)). Not NULL.
 *  - name: the table's name, 1..ENGRAM_MAX_NAME (63) bytes, NUL-terminated. Not NULL.
 *  - out: gets the handle, valid until engram_table_close or engram_disconnect (after the table's
 *    drop it answers ENGRAM_E_CLOSED, and must still be closed). Not NULL.
 * Errors: ENGRAM_E_INVALID (c, name or out is
 * NULL), ENGRAM_E_RANGE (name too long), ENGRAM_E_NOT_FOUND,
 * ENGRAM_E_EXISTS (already open on this client), ENGRAM_E_SYSTEM (the
 * server cannot make the channel, or this client map it), ENGRAM_E_VERSION, ENGRAM_E_CORRUPT (a reply that does not
 * check out), ENGRAM_E_TIMEOUT, ENGRAM_E_DISCONNECTED. */
ENGRAM_API int engram_table_open(engram_client* c, const char* name, engram_table** out);
/* Releases the table handle t (not the table) and its batches; waits up to
 * one second for what its channel still owes (unanswered updates) and up
 * to the client's timeout_ms for the server's answer.
 *  - t: the table handle. May be NULL, which does nothing.
 * Notes: the batches of t are freed with it, so their views and handles
 * must not be used after this call; a finalizer should not call it (it may
 * wait), but queue it for the thread that owns the client. */
ENGRAM_API void engram_table_close(engram_table* t);
/* Deletes a table and all its items; open handles get ENGRAM_E_CLOSED.
 *  - c: a connected client; the call waits for the server's answer up to the client's timeout_ms
 *    (engram_connect_options(3type)). Not NULL.
 *  - name: the table's name, 1..ENGRAM_MAX_NAME (63) bytes, NUL-terminated. Not NULL.
 * Errors: ENGRAM_E_INVALID (c or name is NULL), ENGRAM_E_RANGE (name too
 * long), ENGRAM_E_NOT_FOUND, ENGRAM_E_TIMEOUT, ENGRAM_E_DISCONNECTED. */
ENGRAM_API int engram_table_drop(engram_client* c, const char* name);
/* Removes every item of a table and zeroes its counters; the table stays.
 * Requests that this client sent to the table before the call (its
 * writers' inserts, deletes, releases) are applied before the reset,
 * unless the rate limiter holds them back; items still held in a writer
 * (over its open chunk) are sent after it.
 *  - c: a connected client; the call waits for the server's answer up to the client's timeout_ms
 *    (engram_connect_options(3type)). Not NULL.
 *  - name: the table's name, 1..ENGRAM_MAX_NAME (63) bytes, NUL-terminated. Not NULL.
 * Errors: ENGRAM_E_INVALID (c or
 * name is NULL), ENGRAM_E_RANGE (name too long), ENGRAM_E_NOT_FOUND,
 * ENGRAM_E_TIMEOUT, ENGRAM_E_DISCONNECTED. */
ENGRAM_API int engram_table_reset(engram_client* c, const char* name);
/* Changes a table's rate limiter at run time; the counters are kept, and
 * waiting writers and samplers are woken to check the new limits.
 *  - c: a connected client; the call waits for the server's answer up to the client's timeout_ms
 *    (engram_connect_options(3type)). Not NULL.
 *  - name: the table's name, 1..ENGRAM_MAX_NAME (63) bytes, NUL-terminated. Not NULL.
 *  - r: the new limiter (engram_rate_limiter(3type), from a preset), read during the call only. Not
 *    NULL.
 * Errors:
 * ENGRAM_E_INVALID (c, name or r is NULL, r is no valid limiter, or r
 * cannot hold on the table, as engram_table_create refuses; the old limiter
 * stays), ENGRAM_E_RANGE (name too long), ENGRAM_E_NOT_FOUND, ENGRAM_E_TIMEOUT,
 * ENGRAM_E_DISCONNECTED. */
ENGRAM_API int engram_table_set_rate_limiter(engram_client* c, const char* name, const engram_rate_limiter* r);

/* A table's size, counters and settings, as engram_table_info_get reads
 * them at one moment. */
typedef struct engram_table_info {
  size_t struct_size;
  char name[ENGRAM_MAX_NAME + 1];      /* the table's name: 1..ENGRAM_MAX_NAME bytes and a NUL */
  uint64_t max_size, size;             /* its capacity, and the items it holds (0..max_size) */
  uint64_t inserts, samples, deletes;  /* the rate limiter's counters, from 0 at creation or reset:
                                          items inserted, items sampled (a batch of n counts n),
                                          and items removed in any way */
  uint64_t updates, evictions, expirations, stale_requests, rate_limited; /* from 0: priority
                                          updates applied; items the remover evicted at capacity;
                                          items removed on reaching max_times_sampled; updates and
                                          deletes of items already gone; inserts and samples the
                                          rate limiter did not allow when asked */
  int32_t sampler, remover;            /* engram_selector */
  uint32_t max_times_sampled;          /* 0 = unlimited */
  uint32_t num_columns;                /* 1..ENGRAM_MAX_COLUMNS */
  int32_t can_sample, can_insert;      /* 1 if the rate limiter would allow one now, else 0 */
  uint32_t clients;                    /* connections that have it open, 0 or more */
  engram_rate_limiter rate_limiter;    /* its limiter now: as created, or as engram_table_set_rate_limiter
                                          last set it */
  uint64_t bytes_raw;                  /* bytes of chunk data under the items inserted since creation
                                          or reset (0 then), each chunk counted once, before
                                          compression */
  uint64_t bytes_stored;               /* the same after compression: 0..bytes_raw */
  double max_priority, min_priority;   /* the largest and smallest priority of the items held now
                                          (0 when there are none); kept as items come, change and
                                          go, at O(log n) a change. Since 0.5 */
  uint32_t shards;                     /* for a view over shards (engramd.toml(5), shards): its
                                          shards; 0 for a table. Since 0.5 */
  uint32_t shards_present;             /* of those, the shards whose links are up: batches are drawn
                                          from these alone, their mass and size those of the one
                                          table (engram(7), SHARDS). Since 0.5 */
} engram_table_info;

/* Sets every field of *i to its default and struct_size to sizeof the
 * struct; call it first, then engram_table_info_get.
 * Thread-safe.
 *  - i: the struct to set. May be NULL, which does nothing.
 */
ENGRAM_API void engram_table_info_init(engram_table_info* i);
/* Fills *out with a table's size, counters and settings (whose
 * struct_size the caller set, e.g. by engram_table_info_init); fields past
 * that size are left alone. max_priority and min_priority are the largest
 * and smallest priority among the items the table holds at that moment (0
 * when it holds none), e.g. for a prioritized writer that inserts new
 * items at the current maximum.
 *  - c: a connected client; the call waits for the server's answer up to the client's timeout_ms
 *    (engram_connect_options(3type)). Not NULL.
 *  - name: the table's name, 1..ENGRAM_MAX_NAME (63) bytes, NUL-terminated. Not NULL.
 *  - out: gets the info; its struct_size must be set first (engram_table_info_init), and fields
 *    past it are left alone. Not NULL.
 * Errors: ENGRAM_E_INVALID (c, name or out
 * is NULL, or struct_size too small), ENGRAM_E_RANGE (name too long),
 * ENGRAM_E_NOT_FOUND, ENGRAM_E_VERSION (a reply of another size),
 * ENGRAM_E_TIMEOUT, ENGRAM_E_DISCONNECTED. */
ENGRAM_API int engram_table_info_get(engram_client* c, const char* name, engram_table_info* out);
/* The table's columns: copies min(cap, count) into out and sets *count.
 *  - t: a table handle of this client (engram_table_open). Not NULL.
 *  - out: room for cap columns. Not NULL unless cap is 0.
 *  - cap: the columns out has room for, 0 (to ask for the count only) up to ENGRAM_MAX_COLUMNS
 *    (32), which is always enough.
 *  - count: gets the table's number of columns, also when cap is smaller. Not NULL.
 * Errors: ENGRAM_E_INVALID (t or count is NULL, or out is NULL with cap >
 * 0). Notes: the column names point into the handle t and live as long as
 * it: copy them to keep them past engram_table_close. */
ENGRAM_API int engram_table_columns(const engram_table* t, engram_column* out, uint32_t cap, uint32_t* count);
/* The table's compression per column, in column order: copies min(cap, n)
 * entries into out and sets *count. A writer for the table passes the same
 * array in engram_writer_options.compression.
 *  - t: a table handle of this client (engram_table_open). Not NULL.
 *  - out: room for cap entries. Not NULL unless cap is 0.
 *  - cap: the entries out has room for, 0 (to ask for the count only) up to ENGRAM_MAX_COLUMNS
 *    (32), which is always enough.
 *  - count: gets the table's number of columns, also when cap is smaller. Not NULL.
 * Errors: ENGRAM_E_INVALID (t
 * or count is NULL, or out is NULL with cap > 0). */
ENGRAM_API int engram_table_compression(const engram_table* t, engram_compression* out, uint32_t cap, uint32_t* count);

/* Asks the server for a checkpoint of every table (see engram-checkpoint(5))
 * and waits until it is on disk, at most timeout_ms (-1 = for ever): traffic
 * goes on meanwhile. Copies the checkpoint's directory into path (cap
 * bytes, NUL-terminated; path may be NULL when cap is 0).
 *  - c: a connected client. Not NULL.
 *  - timeout_ms: how long to wait for the checkpoint to be on disk, in milliseconds: -1 for ever; 0
 *    gives up at once (the server goes on writing it).
 *  - path: gets the checkpoint's directory, NUL-terminated. Not NULL unless cap is 0.
 *  - cap: the bytes path has room for, 0 or more; 4096 (PATH_MAX) is always enough.
 * Errors:
 * ENGRAM_E_INVALID (c is NULL, path is NULL with cap > 0, or the server
 * has no [checkpoint] dir), ENGRAM_E_RANGE
 * (path too small; the checkpoint was still written), ENGRAM_E_TIMEOUT,
 * ENGRAM_E_SYSTEM (the write failed; the message says why),
 * ENGRAM_E_DISCONNECTED. */
ENGRAM_API int engram_checkpoint(engram_client* c, int32_t timeout_ms, char* path, size_t cap);

/* --- listing items ------------------------------------------------------------- */

/* One item of a table, as a listing shows it. Since 0.5. */
typedef struct engram_item {
  uint64_t key;            /* as engram_sample_info.key: for updates and deletes */
  double priority;         /* finite, >= 0 */
  uint64_t inserted;       /* its place in the table's insertion order, from 0: larger is newer,
                              never the same for two items of one table */
  uint32_t times_sampled;  /* 0 until it is first sampled */
  uint32_t num_steps;      /* steps the item spans, over all its chunks: 1 or more */
} engram_item;

#define ENGRAM_BY_INSERTION 0 /* oldest first */
#define ENGRAM_BY_PRIORITY 1  /* highest priority first; equal priorities oldest first */

typedef struct engram_items engram_items;

/* Lists the items of table `name` in `order` (ENGRAM_BY_INSERTION or
 * ENGRAM_BY_PRIORITY): the call collects them all from the server, then
 * engram_items_next hands them out in pages the caller sizes. Writers and
 * samplers go on meanwhile: the server is asked in pieces of at most 65536
 * slots, each holding the table's owner for well under a millisecond.
 * Every item the table holds from this call's start to its end is listed
 * exactly once; an item inserted or removed during the call may be listed
 * or not; no item is listed twice, and none that the table did not hold.
 * Each item's fields are as of the moment its piece was read (a priority
 * updated during the call may show its old value, and the order follows
 * what was read). The listing holds 32 bytes per item in the caller's
 * memory and nothing of the server's; it is the caller's, apart from c:
 * free it with engram_items_close, before or after engram_disconnect.
 *  - c: a connected client; the call waits for the server's answer up to the client's timeout_ms
 *    (engram_connect_options(3type)). Not NULL. Each piece of the listing waits that long at most.
 *  - name: the table's name, 1..ENGRAM_MAX_NAME (63) bytes, NUL-terminated. Not NULL.
 *  - order: ENGRAM_BY_INSERTION (0, oldest first) or ENGRAM_BY_PRIORITY (1, highest first).
 *  - out: gets the listing, the caller's until engram_items_close (also after
 *    engram_disconnect(c)). Not NULL.
 * Errors: ENGRAM_E_INVALID (NULL argument, unknown order), ENGRAM_E_RANGE
 * (name too long), ENGRAM_E_NOT_FOUND, ENGRAM_E_TIMEOUT (a piece not
 * answered within the client's timeout_ms), ENGRAM_E_DISCONNECTED,
 * ENGRAM_E_CORRUPT (a reply that does not add up), ENGRAM_E_NOMEM.
 * Since 0.5. */
ENGRAM_API int engram_items_open(engram_client* c, const char* name, int32_t order, engram_items** out);
/* The number of items the listing it holds; 0 for a NULL it. Since 0.5.
 *  - it: the listing. May be NULL, which counts 0.
 */
ENGRAM_API uint64_t engram_items_count(const engram_items* it);
/* Copies the next min(cap, left) items of the listing into out and sets
 * *count; *count is 0 once every item was handed out.
 *  - it: the listing (engram_items_open). Not NULL.
 *  - out: room for cap items. Not NULL unless cap is 0.
 *  - cap: the items out has room for, 0 or more: the page size.
 *  - count: gets the items copied, 0 once the listing is done. Not NULL.
 * Errors:
 * ENGRAM_E_INVALID (NULL it or count, or NULL out with cap > 0). Since 0.5. */
ENGRAM_API int engram_items_next(engram_items* it, engram_item* out, uint32_t cap, uint32_t* count);
/* Frees the listing it. Since 0.5.
 *  - it: the listing. May be NULL, which does nothing.
 */
ENGRAM_API void engram_items_close(engram_items* it);

/* --- export and import --------------------------------------------------------- */

/* Reports a long call's progress: the work done and the work in all.
 * Called on the calling thread; a nonzero return stops the call. Since 0.5. */
typedef int (*engram_progress_fn)(void* ctx, uint64_t done, uint64_t total);

/* How a long export or import reports and waits. Since 0.5. */
typedef struct engram_transfer_options {
  size_t struct_size;
  engram_progress_fn progress; /* called about once a second and once at the end (export: bytes
                                  of the file; import: items); a nonzero return stops the call,
                                  which then fails with ENGRAM_E_INTERRUPTED and leaves no file
                                  (export) or the items so far (import). NULL (default): no
                                  reports */
  void* progress_ctx;  /* passed to progress as ctx */
  int32_t insert_timeout_ms; /* import: how long one item may wait for the rate limiter
                                (and arena space); -1 = for ever (default) */
} engram_transfer_options;

/* Sets every field of an engram_transfer_options *o to its default, and
 * struct_size to sizeof the struct. Thread-safe.
 * Since 0.5.
 *  - o: the struct to set. May be NULL, which does nothing.
 */
ENGRAM_API void engram_transfer_options_init(engram_transfer_options* o);
/* Writes table t's items to a NumPy .npz file. Every item t holds at the
 * call's start goes to the file `path`, which numpy alone reads (np.load;
 * the format is engram-export(5)): each column's steps as one array [steps, ...shape],
 * the items in insertion order with their keys, priorities, times
 * sampled, insertion order and where their steps lie. Compressed columns
 * are written decoded. The server pins the table's chunks at the start
 * (the table stands still only while its index is copied, as for a
 * checkpoint) and this client copies the steps out at its own pace while
 * writers and samplers go on; the pins go when the call returns. The file
 * is written as path.partial and renamed to path once complete and
 * fsynced: a failed export leaves no file (and replaces none), but for a
 * failure to sync path's directory after the rename, which leaves the
 * whole new file at path. *items
 * (may be NULL) is set to the items written. Writes
 * about steps x step bytes plus 40 bytes per item, and holds 32 bytes per
 * item and chunk reference in memory meanwhile. o may be NULL (defaults).
 *  - t: a table handle of this client (engram_table_open). Not NULL. Each request to the server
 *    waits up to the client's timeout_ms.
 *  - path: the file to write, as open(2) takes it (relative to the working directory); path.partial
 *    is written meanwhile, and a file at path is replaced only when the export is complete. Not
 *    NULL.
 *  - o: the progress callback (engram_transfer_options(3type)), read during the call. May be NULL
 *    for no reports.
 *  - items: gets the number of items written. May be NULL.
 * Errors: ENGRAM_E_INVALID (NULL t or path, an older struct_size),
 * ENGRAM_E_SYSTEM (the file could not be written; the message names it
 * and why), ENGRAM_E_LIMIT (this user already has two exports running),
 * ENGRAM_E_TIMEOUT (the export lapsed: this thread stalled for over 10 s
 * between two of its requests, so the pins went), ENGRAM_E_CORRUPT (a
 * chunk failed validation), ENGRAM_E_INTERRUPTED (the progress callback
 * or engram_client_interrupt stopped it), ENGRAM_E_CLOSED,
 * ENGRAM_E_DISCONNECTED. Since 0.5. */
ENGRAM_API int engram_table_export(engram_table* t, const char* path, const engram_transfer_options* o,
                                   uint64_t* items);
/* Inserts the items of a NumPy .npz file into table t. The file `path`
 * (engram-export(5)) is one that engram_table_export wrote, or one written
 * with np.savez that has the same arrays; its items go in in the file's order, through a writer of
 * this client: the table's rate limiter, capacity and evictions apply as
 * to any writer. Each item keeps its priority and steps and gets a new
 * key; times sampled and insertion order start anew. The file's columns
 * must be the table's (names, dtypes and shapes; compression is the
 * table's own). The whole file is checked (its zip structure, every
 * member's CRC-32, the arrays' headers, and every item's steps within
 * the steps written) before the first item goes in, so a damaged or
 * foreign file inserts nothing. Items over consecutive steps share
 * chunks. *items (may be NULL) is set to the items inserted, also when
 * an error stops the import part-way. o may be NULL (defaults).
 *  - t: a table handle of this client (engram_table_open). Not NULL. Items wait for its rate
 *    limiter up to o->insert_timeout_ms each.
 *  - path: the .npz file to read, as open(2) takes it. Not NULL.
 *  - o: the progress callback and insert_timeout_ms (engram_transfer_options(3type)), read during
 *    the call. May be NULL for the defaults (no reports, waits for ever).
 *  - items: gets the number of items inserted, also when an error stops the import part-way. May be
 *    NULL.
 * Errors: ENGRAM_E_INVALID (NULL t or path, a file that is no .npz or is
 * compressed with np.savez_compressed, an array missing or of the wrong
 * kind; the message names it), ENGRAM_E_SIGNATURE (a column's dtype or
 * shape differs from the table's, or the file has a column the table
 * lacks), ENGRAM_E_CORRUPT (the file is damaged: a CRC-32, an offset or
 * a size does not check out), ENGRAM_E_PRIORITY, ENGRAM_E_SYSTEM (the
 * file cannot be read), ENGRAM_E_INTERRUPTED, and those of
 * engram_writer_open, engram_writer_append and engram_writer_flush.
 * Since 0.5. */
ENGRAM_API int engram_table_import(engram_table* t, const char* path, const engram_transfer_options* o,
                                   uint64_t* items);

/* --- writing ------------------------------------------------------------------ */

typedef struct engram_writer engram_writer;

/* A writer's settings, for engram_writer_open: the columns of its steps,
 * how many steps a chunk holds, the longest item, and how long an item may
 * wait. */
typedef struct engram_writer_options {
  size_t struct_size;
  const engram_column* columns;  /* the step's columns, copied by engram_writer_open; items go
                                    only to tables with the same. Not NULL */
  uint32_t num_columns;          /* 1..ENGRAM_MAX_COLUMNS */
  uint32_t chunk_length;         /* steps per chunk, 1..2^20; default 1 */
  uint32_t max_item_steps;       /* longest item to be created (an item also spans at most the
                                    table's max_chunks_per_item chunks); default (and 0)
                                    chunk_length */
  int32_t insert_timeout_ms;     /* how long an item may wait for the rate limiter (and for arena
                                    space); -1 = for ever (default); 0 = not at all (refused items
                                    then report ENGRAM_E_RATE_LIMITED) */
  int32_t keep_keys;             /* nonzero: remember the keys of created items, see engram_writer_take_keys */
  const engram_compression* compression; /* NULL: nothing compressed; else one per column, the
                                            same as the tables' (see engram_table_compression) */
} engram_writer_options;

/* Sets every field of *o to its default (given at the field) and
 * struct_size to sizeof the struct; call it first, then set fields.
 * Thread-safe.
 *  - o: the struct to set. May be NULL, which does nothing.
 */
ENGRAM_API void engram_writer_options_init(engram_writer_options* o);
/* Opens a writer of client c with the columns and settings of *o (see
 * engram_writer_options(3type)) into *out, valid until engram_writer_close
 * or engram_disconnect. The client's first writer of a
 * block size reads one byte of every page of the arena's blocks of that size,
 * since writers cycle through all of them: a one-time cost that grows with
 * those blocks (about 0.5 s per GB under a hypervisor that shadows page
 * tables, a TLB miss a page without one), so that the first copies run at
 * full speed. The writer also asks the server for blocks for its first
 * chunks, so that it can go on appending while the server is busy.
 *  - c: a connected client. Not NULL.
 *  - o: the writer's columns and settings (engram_writer_options(3type)), copied during the call.
 *    Not NULL.
 *  - out: gets the writer, valid until engram_writer_close or engram_disconnect. Not NULL.
 * Errors: ENGRAM_E_DISCONNECTED,
 * ENGRAM_E_INVALID (c, o or out is NULL, or a bad column: name, dtype,
 * rank), ENGRAM_E_RANGE (no
 * column, too many, a name too long, chunk_length 0, or a chunk larger than
 * the arena's largest block). */
ENGRAM_API int engram_writer_open(engram_client* c, const engram_writer_options* o, engram_writer** out);
/* Appends one step: columns[i] points at one value of column i.
 *  - w: the writer; a call waits for arena blocks, and for room to send items, up to its
 *    insert_timeout_ms (engram_writer_options(3type)). Not NULL.
 *  - columns: one pointer per column of the writer, in its order, each at one value of that
 *    column's dtype and shape; read during the call only. Not NULL, nor any entry.
 * Errors:
 * ENGRAM_E_INVALID (w or columns is NULL),
 * ENGRAM_E_NOMEM (no arena block free, and insert_timeout_ms is 0; or,
 * whatever the timeout, after about 2 s of a wait that nothing but a delete
 * could end: the block size's class is full of items of tables none of
 * which is full or has max_times_sampled; the message names them),
 * ENGRAM_E_TIMEOUT (no arena block within insert_timeout_ms, or, when the
 * writer needs more blocks, no answer from the server within
 * insert_timeout_ms, or the client's timeout if that is -1 or 0),
 * ENGRAM_E_LIMIT (the client holds as many blocks of the size class as the
 * server lets one client hold, and none came back within insert_timeout_ms;
 * the message names the server's setting), ENGRAM_E_INTERRUPTED,
 * ENGRAM_E_DISCONNECTED (the chunk that filled sends its items, and the
 * server is gone). Refusals of items (a table dropped meanwhile, a rate
 * limiter's timeout) are kept for engram_writer_flush.
 * Each value is copied into its chunk column, which starts on a 64-byte
 * boundary. A value of 1 KB or more, when no column of the writer is
 * compressed, bypasses the caches (non-temporal stores: a chunk is read long
 * after it is written, if ever), and its alignment matters little; a smaller
 * one goes through memcpy and copies fastest if it starts on a 64-byte
 * boundary too (glibc's memcpy is slower when source and destination
 * disagree in alignment). */
ENGRAM_API int engram_writer_append(engram_writer* w, const void* const* columns);
/* Appends n steps at once: columns[i] points at n consecutive values of
 * column i.
 *  - w: the writer; a call waits for arena blocks, and for room to send items, up to its
 *    insert_timeout_ms (engram_writer_options(3type)). Not NULL.
 *  - columns: one pointer per column, each at n consecutive values; read during the call only. Not
 *    NULL, nor any entry.
 *  - n: the steps, 1 or more; they may span any number of chunks.
 * Errors: ENGRAM_E_INVALID (w or columns is NULL), ENGRAM_E_RANGE
 * (n is 0), and those of engram_writer_append. */
ENGRAM_API int engram_writer_append_batch(engram_writer* w, const void* const* columns, uint32_t n);
/* Creates an item over the last num_steps steps of the current episode in
 * table t, with `priority`. Asynchronous: the item is sent once the chunks
 * it spans are finalized (full at chunk_length steps, the episode ended, or
 * engram_writer_flush), so chunks fill up and compress well; errors the
 * server finds later (rate-limiter timeouts) are returned by
 * engram_writer_flush.
 *  - w: the writer; a call waits for arena blocks, and for room to send items, up to its
 *    insert_timeout_ms (engram_writer_options(3type)). Not NULL.
 *  - t: a table handle of the writer's client whose columns and compression are the writer's. Not
 *    NULL.
 *  - num_steps: the item's steps, 1..max_item_steps (engram_writer_options), and at most the steps
 *    of the current episode.
 *  - priority: finite and >= 0; 0 means a prioritized sampler never draws it.
 * Errors: ENGRAM_E_INVALID (w or t is NULL, or t
 * belongs to another client), ENGRAM_E_PRIORITY (NaN, infinite or
 * negative), ENGRAM_E_SIGNATURE (t has other columns or compression),
 * ENGRAM_E_RANGE (num_steps is 0, longer than the steps held, or spans too
 * many chunks), ENGRAM_E_INTERRUPTED (an item that leaves at once, over
 * a full chunk, waited for room in the table's request ring),
 * ENGRAM_E_CLOSED (the table was dropped), ENGRAM_E_DISCONNECTED.
 * Refusals of items already sent are kept for engram_writer_flush. */
ENGRAM_API int engram_writer_create_item(engram_writer* w, engram_table* t, uint32_t num_steps, double priority);
/* As engram_writer_create_item, but the item's priority is the largest
 * priority the table holds when the server applies the insert (before any
 * eviction the insert makes), or 1.0 if the table is then empty: Schaul et
 * al.'s rule for new transitions in prioritized replay, without asking
 * for the maximum first (engram_table_info_get's max_priority) and racing
 * other writers. The priority it got comes back with the item when it is
 * sampled.
 *  - w: the writer; a call waits for arena blocks, and for room to send items, up to its
 *    insert_timeout_ms (engram_writer_options(3type)). Not NULL.
 *  - t: a table handle of the writer's client whose columns and compression are the writer's. Not
 *    NULL.
 *  - num_steps: the item's steps, 1..max_item_steps (engram_writer_options), and at most the steps
 *    of the current episode.
 * Errors: those of engram_writer_create_item but
 * ENGRAM_E_PRIORITY. Since 0.5. */
ENGRAM_API int engram_writer_create_item_at_max(engram_writer* w, engram_table* t, uint32_t num_steps);
/* Appends n steps, as engram_writer_append_batch (columns[i] points at n
 * consecutive values of column i), and after each step creates an item
 * over the last num_steps steps in table t, with priorities[k] (1.0 for
 * every item when priorities is NULL): n pairs of engram_writer_append and
 * engram_writer_create_item in one call, for bindings, where a call costs
 * more than the work. While the episode holds fewer than num_steps steps,
 * a step gets no item (so 2-step items start at an episode's second step).
 * Every priority, the signature and num_steps (1..max_item_steps) are
 * checked before anything is appended; a later error (a full arena, the
 * server gone) returns with the steps before it appended and their items
 * created.
 *  - w: the writer; a call waits for arena blocks, and for room to send items, up to its
 *    insert_timeout_ms (engram_writer_options(3type)). Not NULL.
 *  - columns: one pointer per column, each at n consecutive values; read during the call only. Not
 *    NULL, nor any entry.
 *  - n: the steps, 1 or more.
 *  - t: a table handle of the writer's client whose columns and compression are the writer's. Not
 *    NULL.
 *  - num_steps: each item's steps, 1..max_item_steps (engram_writer_options).
 *  - priorities: n priorities, each finite and >= 0, for the items after steps 0..n-1. May be NULL
 *    for 1.0 each.
 * Errors: those of engram_writer_append and
 * engram_writer_create_item. Since 0.3. */
ENGRAM_API int engram_writer_append_items(engram_writer* w, const void* const* columns, uint32_t n, engram_table* t,
                                          uint32_t num_steps, const double* priorities);
/* Ends the episode: later items never reach back into it. The open chunk
 * is finalized and the items over it are sent.
 *  - w: the writer; a call waits for arena blocks, and for room to send items, up to its
 *    insert_timeout_ms (engram_writer_options(3type)). Not NULL.
 * Errors: ENGRAM_E_INVALID (w
 * is NULL), and those of engram_writer_flush. */
ENGRAM_API int engram_writer_end_episode(engram_writer* w);
/* Sends the items waiting for the open chunk (finalizing it: later steps go
 * to a new chunk), then waits until every created item was applied or
 * refused, at most timeout_ms (-1 = for ever). Returns the first error of
 * those items since the last flush, or ENGRAM_E_TIMEOUT if items are still
 * pending: each of those is applied or refused by its own
 * insert_timeout_ms, and a later flush reports it.
 *  - w: the writer. Not NULL.
 *  - timeout_ms: how long to wait for the items' answers, in milliseconds: -1 for ever, 0 not at
 *    all (the items are sent, and a later flush reports them).
 * Errors: ENGRAM_E_INVALID
 * (w is NULL), ENGRAM_E_TIMEOUT (items the rate limiter held past
 * insert_timeout_ms, or that reached a stalled server after it, or items
 * still pending at timeout_ms), ENGRAM_E_RATE_LIMITED (insert_timeout_ms
 * 0 and the rate limiter did not allow an item), ENGRAM_E_PRIORITY (the server refused an item
 * whose weight would take a prioritized table's total past half the
 * largest double), ENGRAM_E_CLOSED (the table was dropped),
 * ENGRAM_E_INTERRUPTED, ENGRAM_E_CORRUPT (the server refused an item's
 * chunk: this process wrote over it), ENGRAM_E_DISCONNECTED. */
ENGRAM_API int engram_writer_flush(engram_writer* w, int32_t timeout_ms);
/* With keep_keys: moves up to cap keys of applied items, in creation order,
 * into keys and sets *count (0 when none are left). Without keep_keys no
 * keys are kept and *count is 0.
 *  - w: the writer. Not NULL.
 *  - keys: room for cap keys. Not NULL unless cap is 0.
 *  - cap: the keys that keys has room for, 0 or more.
 *  - count: gets the keys moved, 0 when none are left. Not NULL.
 * Errors: ENGRAM_E_INVALID (w or count is
 * NULL, or keys is NULL with cap > 0). */
ENGRAM_API int engram_writer_take_keys(engram_writer* w, uint64_t* keys, size_t cap, size_t* count);
/* Flushes (up to insert_timeout_ms), gives back the writer's chunks, frees w.
 *  - w: the writer. May be NULL, which does nothing.
 */
ENGRAM_API void engram_writer_close(engram_writer* w);

/* --- sampling ----------------------------------------------------------------- */

/* What a sample asks for: how many items, of how many steps, how long to
 * wait, and flags (ENGRAM_SAMPLE_NO_REPEATS). */
typedef struct engram_sample_options {
  size_t struct_size;
  uint32_t batch_size;  /* 1..the server's ring size (1024 by default) */
  uint32_t num_steps;   /* steps per item, 1 or more; every sampled item must have exactly this
                           many */
  int32_t timeout_ms;   /* wait for the rate limiter: -1 for ever (default), 0 not at all */
  uint64_t flags;       /* ENGRAM_SAMPLE_* or 0 (default). Since 0.5; 64 bits wide so that it
                           starts past 0.4's struct, whose padding a caller that skipped _init
                           may have left unset */
} engram_sample_options;

/* engram_sample_options.flags: no item twice in one batch. The batch holds
 * exactly batch_size distinct items, or the call fails with
 * ENGRAM_E_RANGE when the table holds fewer (in a prioritized table: fewer
 * of nonzero priority) at the moment the rate limiter allows the sample; a
 * rate limiter with min_size >= batch_size makes samples wait instead.
 * Uniform: a uniform subset. Prioritized: systematic sampling in
 * proportion to priority^exponent, where an item whose weight is at least
 * its share (the total / batch_size) is in every batch. FIFO, LIFO and the
 * heaps: the batch_size first in their order. An item's probability in
 * engram_sample_info is its chance to be in the batch divided by
 * batch_size: for prioritized tables weight / total, as without the flag,
 * unless some item is that heavy (see engram(7)), so importance weights
 * (size * probability)^-beta need no change and stay unbiased. Items that
 * reach max_times_sampled leave after the batch. Since 0.5. */
#define ENGRAM_SAMPLE_NO_REPEATS UINT64_C(1)

/* Per sampled item. A plain struct of fixed size. */
typedef struct engram_sample_info {
  uint64_t key;           /* the item's, for engram_update_priorities and engram_delete_items */
  double priority;        /* when it was drawn: finite, >= 0 */
  double probability;     /* of drawing this item at that moment, 0..1 */
  uint32_t times_sampled; /* including this time: 1 or more */
  uint32_t table_size;    /* items the table held when it was drawn, 1 or more */
} engram_sample_info;

/* Sets every field of *o to its default (given at the field) and
 * struct_size to sizeof the struct; call it first, then set fields.
 * Thread-safe.
 *  - o: the struct to set. May be NULL, which does nothing.
 */
ENGRAM_API void engram_sample_options_init(engram_sample_options* o);
/* Samples a batch and copies it out into the caller's buffers, one per
 * column; fewer than batch_size items only when max_times_sampled emptied
 * the table.
 * With ENGRAM_SAMPLE_NO_REPEATS in o->flags, no item twice in the batch
 * (engram(7), "Batches without repeats"). A call that fails leaves the
 * table as it was (no item counted as sampled or expired, the rate
 * limiter's counts unchanged), except with ENGRAM_E_CORRUPT.
 *  - t: a table handle of this client (engram_table_open). Not NULL.
 *  - o: what to sample (engram_sample_options(3type)); the call waits for the rate limiter up to
 *    o->timeout_ms. Not NULL.
 *  - buffers: one per column of the table, in its order; buffers[i] has room for batch_size *
 *    num_steps values of column i, laid out [batch, steps, ...shape]. Not NULL, nor any entry.
 *  - infos: room for batch_size entries, one per item delivered. May be NULL.
 *  - count: gets the items delivered, 0..batch_size. Not NULL.
 * Errors: ENGRAM_E_RANGE
 * (batch_size 0 or too large, item length differs from num_steps, or,
 * without repeats, the table holds fewer items than batch_size), ENGRAM_E_TIMEOUT, ENGRAM_E_RATE_LIMITED
 * (timeout_ms 0), ENGRAM_E_INTERRUPTED (engram_client_interrupt: nothing
 * was sampled), ENGRAM_E_CLOSED, ENGRAM_E_DISCONNECTED, ENGRAM_E_CORRUPT
 * (a sampled chunk's bytes in shared memory no longer add up: another
 * process wrote where it should not after the insert; found after the
 * batch was drawn, so its items count as sampled, as their bytes cannot
 * be given back whole), ENGRAM_E_INVALID (a NULL argument, unknown bits
 * in o->flags, or a sample begun on t by engram_sample_begin and not yet
 * collected). */
ENGRAM_API int engram_sample(engram_table* t, const engram_sample_options* o, void* const* buffers, engram_sample_info* infos,
                  uint32_t* count);
/* Sends a sample request and returns without waiting for the answer: the
 * table's owner draws the batch while the caller goes on (a learner trains
 * on its previous batch), and engram_sample_end copies it out. Options as
 * for engram_sample; the timeout counts from this call. The server applies
 * the requests of one table handle in the order they were made, so the
 * batch is drawn after every earlier call on t (priority updates included)
 * and before every later one. One sample at a time per table handle: until
 * engram_sample_end, engram_sample_begin, engram_sample and
 * engram_sample_view on t return ENGRAM_E_INVALID; other calls on t go on.
 * The drawn items stay pinned until engram_sample_end or
 * engram_table_close (which cancels a sample not yet drawn). Errors found
 * before sending: ENGRAM_E_RANGE and ENGRAM_E_INVALID (as for
 * engram_sample), ENGRAM_E_CLOSED, ENGRAM_E_DISCONNECTED, and
 * ENGRAM_E_TIMEOUT or ENGRAM_E_INTERRUPTED when t already had as many
 * requests awaiting an answer as its response ring holds and the wait for
 * room ended; the sample's own errors come from engram_sample_end.
 *  - t: a table handle of this client (engram_table_open). Not NULL.
 *  - o: what to sample (engram_sample_options(3type)); copied, and its timeout_ms bounds
 *    engram_sample_end's wait. Not NULL.
 * Errors: ENGRAM_E_INVALID (t or o is NULL, unknown bits in o->flags, or a
 * sample begun on t and not yet collected), ENGRAM_E_RANGE (batch_size or
 * num_steps out of range), ENGRAM_E_CLOSED, ENGRAM_E_TIMEOUT,
 * ENGRAM_E_INTERRUPTED, ENGRAM_E_DISCONNECTED. Since 0.5. */
ENGRAM_API int engram_sample_begin(engram_table* t, const engram_sample_options* o);
/* Waits for the sample begun on t by engram_sample_begin (until that
 * call's timeout) and copies it out, as engram_sample does. The sample is then
 * over, whatever this call returns, except for ENGRAM_E_INVALID: a NULL
 * argument (the sample stays begun, and the call can be made again) or no
 * sample begun on t.
 *  - t: the table handle that engram_sample_begin was called on; the call waits for the batch until
 *    that call's timeout_ms. Not NULL.
 *  - buffers: one per column, as for engram_sample. Not NULL, nor any entry.
 *  - infos: room for batch_size entries. May be NULL.
 *  - count: gets the items delivered. Not NULL.
 * Errors: ENGRAM_E_INVALID (t, buffers or count is
 * NULL, or no sample begun on t), ENGRAM_E_TIMEOUT, ENGRAM_E_RATE_LIMITED
 * (timeout_ms 0 and the rate limiter did not allow it), ENGRAM_E_RANGE (an
 * item whose length differs from num_steps, or without repeats too few
 * items), ENGRAM_E_INTERRUPTED, ENGRAM_E_CLOSED, ENGRAM_E_CORRUPT (as
 * for engram_sample: the one failure after the batch was drawn),
 * ENGRAM_E_DISCONNECTED. Since 0.5. */
ENGRAM_API int engram_sample_end(engram_table* t, void* const* buffers, engram_sample_info* infos, uint32_t* count);

typedef struct engram_batch engram_batch;

/* One contiguous piece of an item's column: `steps` values at `data`. */
typedef struct engram_view {
  const void* data;  /* the first value, in shared memory: read-only, until engram_batch_release */
  uint32_t steps;    /* values at data, 1 or more */
} engram_view;

/* Samples a batch without copying: *out holds the items' chunks in shared
 * memory, pinned (the server keeps them from being reused) and read-only,
 * until engram_batch_release; read them with engram_batch_views and
 * engram_batch_info. Compressed columns cannot be viewed (engram_sample
 * decodes them).
 *  - t: a table handle of this client (engram_table_open). Not NULL.
 *  - o: what to sample (engram_sample_options(3type)); the call waits for the rate limiter up to
 *    o->timeout_ms. Not NULL.
 *  - out: gets the batch, valid until engram_batch_release, engram_table_close(t) or
 *    engram_disconnect. Not NULL.
 * Errors: those of engram_sample. Notes: a batch pins its
 * chunks: the server cannot reuse their blocks until engram_batch_release,
 * so a learner that keeps batches keeps arena memory; release each as soon
 * as it is trained on. The views are read-only: writing through them is
 * undefined (the chunks are other items' too). */
ENGRAM_API int engram_sample_view(engram_table* t, const engram_sample_options* o, engram_batch** out);
/* The number of items in batch b; 0 for a NULL b.
 *  - b: the batch. May be NULL, which counts 0.
 */
ENGRAM_API uint32_t engram_batch_size(const engram_batch* b);
/* Copies into *out the key, priority, probability, times_sampled and
 * table size of item `item` of batch b.
 *  - b: the batch (engram_sample_view). Not NULL.
 *  - item: the item's index, 0..engram_batch_size(b) - 1.
 *  - out: gets the item's info. Not NULL.
 * Errors: ENGRAM_E_INVALID (b or out
 * is NULL), ENGRAM_E_RANGE (item >= engram_batch_size). */
ENGRAM_API int engram_batch_info(const engram_batch* b, uint32_t item, engram_sample_info* out);
/* The pieces of column `column` of item `item` of batch b (one per chunk
 * it spans, at most 8), in step order: copies min(cap, n) views into out
 * and sets *count. The
 * data is read-only and valid until engram_batch_release.
 *  - b: the batch (engram_sample_view). Not NULL.
 *  - item: the item's index, 0..engram_batch_size(b) - 1.
 *  - column: the column's index in the table, 0..its columns - 1.
 *  - out: room for cap views; 8 are always enough. Not NULL unless cap is 0.
 *  - cap: the views out has room for, 0 (to ask for the count only) or more.
 *  - count: gets the item's pieces of the column, 1..8, also when cap is smaller. Not NULL.
 * Errors:
 * ENGRAM_E_RANGE (item or column out of range), ENGRAM_E_INVALID (the
 * column is compressed: only engram_sample can decode it). */
ENGRAM_API int engram_batch_views(const engram_batch* b, uint32_t item, uint32_t column, engram_view* out, uint32_t cap,
                       uint32_t* count);
/* Unpins the batch's data and frees b.
 *  - b: the batch. May be NULL, which does nothing.
 */
ENGRAM_API void engram_batch_release(engram_batch* b);

/* --- priorities and deletes ----------------------------------------------------- */

/* Sets the priorities of n items, by key, and waits until they are
 * applied. Keys of items that are gone are reported and not applied:
 * results[i] (if results is not NULL) becomes ENGRAM_OK,
 * ENGRAM_E_STALE_KEY or ENGRAM_E_UNKNOWN_KEY, and the call still returns
 * ENGRAM_OK. A NaN, infinite or negative
 * priority anywhere returns ENGRAM_E_PRIORITY and applies nothing. In a
 * prioritized table the weights (priority^exponent) may sum to at most half
 * the largest double: an update past that returns ENGRAM_E_PRIORITY, and
 * the entries before it are applied (the message says which), the rest not.
 * Updates sent by engram_update_priorities_async: if the server's refusal
 * of one has arrived, this call returns ENGRAM_E_PRIORITY and sends
 * nothing; with n = 0 it waits until every one is answered (and so
 * returns any refusal).
 *  - t: the table handle the keys were sampled or listed from, or one of the same table. Not NULL.
 *  - keys: n keys (engram_sample_info.key, engram_item.key). Not NULL unless n is 0.
 *  - priorities: n priorities, each finite and >= 0. Not NULL unless n is 0.
 *  - n: the entries, 0 or more; 0 waits until the asynchronous updates sent before are answered.
 *  - results: room for n codes, one per key. May be NULL.
 * Errors: ENGRAM_E_INVALID (t is NULL, or keys or
 * priorities is NULL with n > 0), ENGRAM_E_PRIORITY (as above),
 * ENGRAM_E_CLOSED, ENGRAM_E_INTERRUPTED (the update may have been
 * applied), ENGRAM_E_CORRUPT, ENGRAM_E_DISCONNECTED. */
ENGRAM_API int engram_update_priorities(engram_table* t, const uint64_t* keys, const double* priorities, size_t n,
                             int32_t* results);
/* Sends new priorities for n items without waiting for the answer. As
 * engram_update_priorities, but the call returns once they are sent, and a
 * learner goes on training while the table's owner applies them (Ape-X's
 * learner updates priorities this way). Ordering: the server applies the
 * requests of one table handle in the order they were made, so every later
 * call on t (a sample, an update, a delete) sees these priorities applied.
 * Keys of items that are gone are skipped and not reported. A NaN,
 * infinite or negative priority returns ENGRAM_E_PRIORITY and sends
 * nothing. The call waits only for room: when t already has as many
 * requests awaiting an answer as its response ring holds (then for the
 * oldest to be answered), or its request ring is full (then for the server
 * to take some); engram_client_interrupt ends either wait, and the
 * entries sent before it stay sent.
 * An update the server refuses (in a prioritized table, weights summing
 * past half the largest double) is reported by the next call of
 * engram_update_priorities_async or engram_update_priorities on t, which
 * then returns ENGRAM_E_PRIORITY and sends nothing; the message names the
 * refused entry. To wait until the server has applied every update sent,
 * call engram_update_priorities(t, NULL, NULL, 0, NULL). Updates not yet
 * applied when the server goes away are lost; engram_table_close waits up
 * to one second for them.
 *  - t: a table handle of the keys' table. Not NULL.
 *  - keys: n keys. Not NULL unless n is 0.
 *  - priorities: n priorities, each finite and >= 0. Not NULL unless n is 0.
 *  - n: the entries, 0 or more (0 sends nothing, and reports a refusal that arrived).
 * Errors: ENGRAM_E_INVALID (t is NULL, or keys or
 * priorities is NULL with n > 0), ENGRAM_E_PRIORITY (as above),
 * ENGRAM_E_CLOSED, ENGRAM_E_INTERRUPTED, ENGRAM_E_DISCONNECTED. Since 0.4. */
ENGRAM_API int engram_update_priorities_async(engram_table* t, const uint64_t* keys, const double* priorities,
                                              size_t n);
/* Deletes n items by key and waits until the server has removed them;
 * results as for engram_update_priorities (keys of items already gone are
 * reported there, not as an error).
 *  - t: a table handle of the keys' table. Not NULL.
 *  - keys: n keys. Not NULL unless n is 0.
 *  - n: the entries, 0 or more.
 *  - results: room for n codes, one per key (ENGRAM_OK, ENGRAM_E_STALE_KEY, ENGRAM_E_UNKNOWN_KEY).
 *    May be NULL.
 * Errors: ENGRAM_E_INVALID (t is NULL,
 * or keys is NULL with n > 0), ENGRAM_E_CLOSED, ENGRAM_E_INTERRUPTED (the
 * deletes may have been applied), ENGRAM_E_CORRUPT, ENGRAM_E_DISCONNECTED. */
ENGRAM_API int engram_delete_items(engram_table* t, const uint64_t* keys, size_t n, int32_t* results);

#ifdef __cplusplus
}
#endif

#endif /* ENGRAM_ENGRAM_H */
