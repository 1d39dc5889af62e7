//! Raw declarations of libengram's C ABI, written by hand from
//! `engram/engram.h` (the manual: every function's errors and thread rules
//! are there, and in `man 3 engram_*`). Use the `engram` crate for a safe
//! API; this one mirrors the header one to one.
//!
//! The structs' layouts are checked against the C compiler by this crate's
//! tests (`tests/layout.rs`); every function's arguments and result, and
//! whether each pointee is const, against the header by
//! `scripts/check-bindings.py` (ctest `bindings_match_header`).
#![allow(non_camel_case_types)]

use std::os::raw::{c_char, c_int, c_uint, c_void};

/// ENGRAM_OK.
pub const ENGRAM_OK: c_int = 0;
/// A bad argument; the message says which.
pub const ENGRAM_E_INVALID: c_int = -1;
/// A count or length outside its range.
pub const ENGRAM_E_RANGE: c_int = -2;
/// NaN, infinite or negative priority.
pub const ENGRAM_E_PRIORITY: c_int = -3;
/// No table of that name.
pub const ENGRAM_E_NOT_FOUND: c_int = -4;
/// A table of that name exists.
pub const ENGRAM_E_EXISTS: c_int = -5;
/// Columns (count, dtype, shape) do not match.
pub const ENGRAM_E_SIGNATURE: c_int = -6;
/// The rate limiter (or a full arena) did not allow it in time.
pub const ENGRAM_E_TIMEOUT: c_int = -7;
/// Not allowed now, and no wait was asked for.
pub const ENGRAM_E_RATE_LIMITED: c_int = -8;
/// The item is gone (evicted, deleted, expired).
pub const ENGRAM_E_STALE_KEY: c_int = -9;
/// The key never named an item of this table.
pub const ENGRAM_E_UNKNOWN_KEY: c_int = -10;
/// The arena (or the process) is out of memory.
pub const ENGRAM_E_NOMEM: c_int = -11;
/// The server went away; reconnect.
pub const ENGRAM_E_DISCONNECTED: c_int = -12;
/// The server refused these credentials.
pub const ENGRAM_E_PERMISSION: c_int = -13;
/// Client and server layouts or protocols differ.
pub const ENGRAM_E_VERSION: c_int = -14;
/// Shared memory failed validation.
pub const ENGRAM_E_CORRUPT: c_int = -15;
/// The table was dropped, or its channel closed.
pub const ENGRAM_E_CLOSED: c_int = -16;
/// An operating-system call failed; see the message.
pub const ENGRAM_E_SYSTEM: c_int = -17;
/// engram_client_interrupt ended the wait.
pub const ENGRAM_E_INTERRUPTED: c_int = -18;
pub const ENGRAM_E_LIMIT: c_int = -19;

/// `engram_dtype` values.
pub const ENGRAM_UINT8: i32 = 1;
/// int8.
pub const ENGRAM_INT8: i32 = 2;
/// uint16.
pub const ENGRAM_UINT16: i32 = 3;
/// int16.
pub const ENGRAM_INT16: i32 = 4;
/// uint32.
pub const ENGRAM_UINT32: i32 = 5;
/// int32.
pub const ENGRAM_INT32: i32 = 6;
/// uint64.
pub const ENGRAM_UINT64: i32 = 7;
/// int64.
pub const ENGRAM_INT64: i32 = 8;
/// float16.
pub const ENGRAM_FLOAT16: i32 = 9;
/// float32.
pub const ENGRAM_FLOAT32: i32 = 10;
/// float64.
pub const ENGRAM_FLOAT64: i32 = 11;
/// bool (one byte).
pub const ENGRAM_BOOL: i32 = 12;

/// `engram_selector` values.
pub const ENGRAM_UNIFORM: i32 = 1;
/// Prioritized: probability proportional to priority^exponent.
pub const ENGRAM_PRIORITIZED: i32 = 2;
/// Oldest first.
pub const ENGRAM_FIFO: i32 = 3;
/// Newest first.
pub const ENGRAM_LIFO: i32 = 4;
/// Highest priority first.
pub const ENGRAM_MAX_HEAP: i32 = 5;
/// Lowest priority first.
pub const ENGRAM_MIN_HEAP: i32 = 6;

/// `engram_codec` values.
pub const ENGRAM_CODEC_NONE: i32 = 0;
/// zstd over the column's steps.
pub const ENGRAM_CODEC_ZSTD: i32 = 1;
/// Each step minus the one before, byte by byte, then zstd.
pub const ENGRAM_CODEC_DELTA_ZSTD: i32 = 2;

/// Dimensions of a column's shape, at most.
pub const ENGRAM_MAX_RANK: usize = 6;
/// Columns of a signature, at most.
pub const ENGRAM_MAX_COLUMNS: usize = 32;
/// Bytes of a table name, at most.
pub const ENGRAM_MAX_NAME: usize = 63;
/// Bytes of a column name, at most.
pub const ENGRAM_MAX_COLUMN_NAME: usize = 31;

/// One column of a signature.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct engram_column {
    /// NUL-terminated name.
    pub name: *const c_char,
    /// An `engram_dtype`.
    pub dtype: i32,
    /// 0 for a scalar.
    pub rank: u32,
    /// The first `rank` entries count.
    pub shape: [u32; ENGRAM_MAX_RANK],
}

/// How chunks store a column.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct engram_compression {
    /// An `engram_codec`.
    pub codec: i32,
    /// zstd level; 0 for the default.
    pub level: i32,
}

/// Reverb's rate limiter; build one with the presets.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct engram_rate_limiter {
    /// Samples per insert.
    pub samples_per_insert: f64,
    /// Items before sampling may start.
    pub min_size_to_sample: i64,
    /// Lower bound of inserts*spi - samples.
    pub min_diff: f64,
    /// Upper bound of inserts*spi - samples.
    pub max_diff: f64,
}

/// Options of engram_server_start.
#[repr(C)]
pub struct engram_server_options {
    /// sizeof, set by _init.
    pub struct_size: usize,
    /// NULL: the config's, else $ENGRAM_SOCKET, else /run/engram/engram.sock.
    pub socket_path: *const c_char,
    /// engramd.toml(5) file, or NULL.
    pub config_path: *const c_char,
    /// The same as text, or NULL.
    pub config_toml: *const c_char,
    /// Nonzero: log only warnings and errors.
    pub quiet: i32,
}

/// Options of engram_connect.
#[repr(C)]
pub struct engram_connect_options {
    /// sizeof, set by _init.
    pub struct_size: usize,
    /// NULL: $ENGRAM_SOCKET, else /run/engram/engram.sock.
    pub socket_path: *const c_char,
    /// For control requests; default 10000.
    pub timeout_ms: i32,
}

/// Options of engram_table_create.
#[repr(C)]
pub struct engram_table_options {
    /// sizeof, set by _init.
    pub struct_size: usize,
    /// Table name.
    pub name: *const c_char,
    /// Capacity in items.
    pub max_size: u64,
    /// An `engram_selector`.
    pub sampler: i32,
    /// An `engram_selector`.
    pub remover: i32,
    /// For ENGRAM_PRIORITIZED.
    pub priority_exponent: f64,
    /// 0 = unlimited.
    pub max_times_sampled: u32,
    /// 1..8.
    pub max_chunks_per_item: u32,
    /// Default: min_size 1.
    pub rate_limiter: engram_rate_limiter,
    /// The signature.
    pub columns: *const engram_column,
    /// Columns in the signature.
    pub num_columns: u32,
    /// NULL, or one per column.
    pub compression: *const engram_compression,
}

/// What engram_table_info_get fills in.
#[repr(C)]
pub struct engram_table_info {
    /// sizeof, set by _init.
    pub struct_size: usize,
    /// NUL-terminated.
    pub name: [c_char; ENGRAM_MAX_NAME + 1],
    /// Capacity.
    pub max_size: u64,
    /// Items now.
    pub size: u64,
    /// Rate-limiter counter.
    pub inserts: u64,
    /// Rate-limiter counter.
    pub samples: u64,
    /// Rate-limiter counter.
    pub deletes: u64,
    /// Priority updates.
    pub updates: u64,
    /// Items evicted.
    pub evictions: u64,
    /// Items removed by max_times_sampled.
    pub expirations: u64,
    /// Requests for items that were gone.
    pub stale_requests: u64,
    /// Requests the rate limiter held back.
    pub rate_limited: u64,
    /// An `engram_selector`.
    pub sampler: i32,
    /// An `engram_selector`.
    pub remover: i32,
    /// 0 = unlimited.
    pub max_times_sampled: u32,
    /// Columns in the signature.
    pub num_columns: u32,
    /// The rate limiter would allow a sample now.
    pub can_sample: i32,
    /// The rate limiter would allow an insert now.
    pub can_insert: i32,
    /// Connections that have the table open.
    pub clients: u32,
    /// The table's rate limiter.
    pub rate_limiter: engram_rate_limiter,
    /// Chunk bytes under the items, before compression.
    pub bytes_raw: u64,
    /// The same after compression.
    pub bytes_stored: u64,
    /// The largest priority of the items held now (0 when there are none).
    pub max_priority: f64,
    /// The smallest priority of the items held now (0 when there are none).
    pub min_priority: f64,
    /// For a view over shards: its shards (0 for a table).
    pub shards: u32,
    /// Of those, the shards whose links are up.
    pub shards_present: u32,
}

/// Options of engram_writer_open.
#[repr(C)]
pub struct engram_writer_options {
    /// sizeof, set by _init.
    pub struct_size: usize,
    /// The step's columns.
    pub columns: *const engram_column,
    /// Columns in the step.
    pub num_columns: u32,
    /// Steps per chunk.
    pub chunk_length: u32,
    /// Longest item to be created.
    pub max_item_steps: u32,
    /// -1 = for ever, 0 = not at all.
    pub insert_timeout_ms: i32,
    /// Nonzero: remember the keys of created items.
    pub keep_keys: i32,
    /// NULL, or one per column.
    pub compression: *const engram_compression,
}

/// Options of engram_sample and engram_sample_view.
#[repr(C)]
pub struct engram_sample_options {
    /// sizeof, set by _init.
    pub struct_size: usize,
    /// Items per batch.
    pub batch_size: u32,
    /// Steps per item.
    pub num_steps: u32,
    /// -1 for ever, 0 not at all.
    pub timeout_ms: i32,
    /// ENGRAM_SAMPLE_* or 0 (since 0.5).
    pub flags: u64,
}

/// engram_sample_options.flags: no item twice in one batch.
pub const ENGRAM_SAMPLE_NO_REPEATS: u64 = 1;

/// Per sampled item.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct engram_sample_info {
    /// The item's key.
    pub key: u64,
    /// Its priority.
    pub priority: f64,
    /// Of drawing this item at that moment.
    pub probability: f64,
    /// Including this time.
    pub times_sampled: u32,
    /// When it was drawn.
    pub table_size: u32,
}

/// One contiguous piece of an item's column.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct engram_view {
    /// `steps` values.
    pub data: *const c_void,
    /// Steps in this piece.
    pub steps: u32,
}

/// Opaque embedded server.
#[repr(C)]
pub struct engram_server {
    _private: [u8; 0],
}
/// Opaque connection.
#[repr(C)]
pub struct engram_client {
    _private: [u8; 0],
}
/// Opaque table handle.
#[repr(C)]
pub struct engram_table {
    _private: [u8; 0],
}
/// Opaque writer.
#[repr(C)]
pub struct engram_writer {
    _private: [u8; 0],
}
/// Opaque zero-copy batch.
#[repr(C)]
pub struct engram_batch {
    _private: [u8; 0],
}
/// Opaque listing of a table's items.
#[repr(C)]
pub struct engram_items {
    _private: [u8; 0],
}

/// Reports a long call's progress (engram_transfer_options.progress):
/// the work done and in all; a nonzero return stops the call.
pub type engram_progress_fn = Option<unsafe extern "C" fn(ctx: *mut c_void, done: u64, total: u64) -> c_int>;

/// How an export or import reports and waits (engram_transfer_options_init).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct engram_transfer_options {
    /// sizeof this struct.
    pub struct_size: usize,
    /// Called about once a second and at the end; None: no reports.
    pub progress: engram_progress_fn,
    /// Passed to progress.
    pub progress_ctx: *mut c_void,
    /// Import: how long one item may wait for the rate limiter; -1 = for ever.
    pub insert_timeout_ms: i32,
}

/// One item of a listing (engram_items_next).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct engram_item {
    /// Its key.
    pub key: u64,
    /// Its priority.
    pub priority: f64,
    /// Its place in the table's insertion order: larger is newer.
    pub inserted: u64,
    /// Times sampled so far.
    pub times_sampled: u32,
    /// Steps it spans.
    pub num_steps: u32,
}

/// Listing order: oldest first.
pub const ENGRAM_BY_INSERTION: i32 = 0;
/// Listing order: highest priority first, equal priorities oldest first.
pub const ENGRAM_BY_PRIORITY: i32 = 1;

// engram/server.h, in libengram-server.so.0: linked as needed, so a
// program that never starts a server does not load it.
#[link(name = "engram-server")]
extern "C" {
    pub fn engram_server_options_init(o: *mut engram_server_options);
    pub fn engram_server_start(o: *const engram_server_options, out: *mut *mut engram_server) -> c_int;
    pub fn engram_server_stop(s: *mut engram_server) -> c_int;
}

extern "C" {
    pub fn engram_version() -> c_uint;
    pub fn engram_version_string() -> *const c_char;
    pub fn engram_strerror(code: c_int) -> *const c_char;
    pub fn engram_last_error() -> *const c_char;
    pub fn engram_rate_limiter_min_size(out: *mut engram_rate_limiter, n: i64) -> c_int;
    pub fn engram_rate_limiter_sample_to_insert_ratio(out: *mut engram_rate_limiter, spi: f64, min_size: i64,
                                                      error_buffer: f64) -> c_int;
    pub fn engram_rate_limiter_queue(out: *mut engram_rate_limiter, size: i64) -> c_int;
    pub fn engram_connect_options_init(o: *mut engram_connect_options);
    pub fn engram_connect(o: *const engram_connect_options, out: *mut *mut engram_client) -> c_int;
    pub fn engram_disconnect(c: *mut engram_client);
    pub fn engram_client_interrupt(c: *mut engram_client);
    pub fn engram_table_options_init(o: *mut engram_table_options);
    pub fn engram_table_create(c: *mut engram_client, o: *const engram_table_options) -> c_int;
    pub fn engram_table_open(c: *mut engram_client, name: *const c_char, out: *mut *mut engram_table) -> c_int;
    pub fn engram_table_close(t: *mut engram_table);
    pub fn engram_table_drop(c: *mut engram_client, name: *const c_char) -> c_int;
    pub fn engram_table_reset(c: *mut engram_client, name: *const c_char) -> c_int;
    pub fn engram_table_set_rate_limiter(c: *mut engram_client, name: *const c_char,
                                         r: *const engram_rate_limiter) -> c_int;
    pub fn engram_table_info_init(i: *mut engram_table_info);
    pub fn engram_table_info_get(c: *mut engram_client, name: *const c_char, out: *mut engram_table_info) -> c_int;
    pub fn engram_items_open(c: *mut engram_client, name: *const c_char, order: i32, out: *mut *mut engram_items)
                             -> c_int;
    pub fn engram_items_count(it: *const engram_items) -> u64;
    pub fn engram_items_next(it: *mut engram_items, out: *mut engram_item, cap: u32, count: *mut u32) -> c_int;
    pub fn engram_items_close(it: *mut engram_items);
    pub fn engram_transfer_options_init(o: *mut engram_transfer_options);
    pub fn engram_table_export(t: *mut engram_table, path: *const c_char, o: *const engram_transfer_options,
                               items: *mut u64) -> c_int;
    pub fn engram_table_import(t: *mut engram_table, path: *const c_char, o: *const engram_transfer_options,
                               items: *mut u64) -> c_int;
    pub fn engram_table_columns(t: *const engram_table, out: *mut engram_column, cap: u32, count: *mut u32) -> c_int;
    pub fn engram_table_compression(t: *const engram_table, out: *mut engram_compression, cap: u32,
                                    count: *mut u32) -> c_int;
    pub fn engram_checkpoint(c: *mut engram_client, timeout_ms: i32, path: *mut c_char, cap: usize) -> c_int;
    pub fn engram_writer_options_init(o: *mut engram_writer_options);
    pub fn engram_writer_open(c: *mut engram_client, o: *const engram_writer_options,
                              out: *mut *mut engram_writer) -> c_int;
    pub fn engram_writer_append(w: *mut engram_writer, columns: *const *const c_void) -> c_int;
    pub fn engram_writer_append_batch(w: *mut engram_writer, columns: *const *const c_void, n: u32) -> c_int;
    pub fn engram_writer_append_items(w: *mut engram_writer, columns: *const *const c_void, n: u32,
                                      t: *mut engram_table, num_steps: u32, priorities: *const f64) -> c_int;
    pub fn engram_writer_create_item(w: *mut engram_writer, t: *mut engram_table, num_steps: u32,
                                     priority: f64) -> c_int;
    pub fn engram_writer_create_item_at_max(w: *mut engram_writer, t: *mut engram_table, num_steps: u32) -> c_int;
    pub fn engram_writer_end_episode(w: *mut engram_writer) -> c_int;
    pub fn engram_writer_flush(w: *mut engram_writer, timeout_ms: i32) -> c_int;
    pub fn engram_writer_take_keys(w: *mut engram_writer, keys: *mut u64, cap: usize, count: *mut usize) -> c_int;
    pub fn engram_writer_close(w: *mut engram_writer);
    pub fn engram_sample_options_init(o: *mut engram_sample_options);
    pub fn engram_sample(t: *mut engram_table, o: *const engram_sample_options, buffers: *const *mut c_void,
                         infos: *mut engram_sample_info, count: *mut u32) -> c_int;
    pub fn engram_sample_begin(t: *mut engram_table, o: *const engram_sample_options) -> c_int;
    pub fn engram_sample_end(t: *mut engram_table, buffers: *const *mut c_void, infos: *mut engram_sample_info,
                             count: *mut u32) -> c_int;
    pub fn engram_sample_view(t: *mut engram_table, o: *const engram_sample_options,
                              out: *mut *mut engram_batch) -> c_int;
    pub fn engram_batch_size(b: *const engram_batch) -> u32;
    pub fn engram_batch_info(b: *const engram_batch, item: u32, out: *mut engram_sample_info) -> c_int;
    pub fn engram_batch_views(b: *const engram_batch, item: u32, column: u32, out: *mut engram_view, cap: u32,
                              count: *mut u32) -> c_int;
    pub fn engram_batch_release(b: *mut engram_batch);
    pub fn engram_update_priorities(t: *mut engram_table, keys: *const u64, priorities: *const f64, n: usize,
                                    results: *mut i32) -> c_int;
    pub fn engram_update_priorities_async(t: *mut engram_table, keys: *const u64, priorities: *const f64,
                                          n: usize) -> c_int;
    pub fn engram_delete_items(t: *mut engram_table, keys: *const u64, n: usize, results: *mut i32) -> c_int;
}
