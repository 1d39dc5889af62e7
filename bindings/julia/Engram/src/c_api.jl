# The C ABI, mirrored: engram.h's constants, its structs in their C layout
# (test/runtests.jl and bindings/julia/check compare), and one wrapper per C
# function of engram.h and engram/server.h.

# --- constants (engram.h) ----------------------------------------------------

const ENGRAM_OK = Cint(0)
const ENGRAM_E_INVALID = Cint(-1)
const ENGRAM_E_RANGE = Cint(-2)
const ENGRAM_E_PRIORITY = Cint(-3)
const ENGRAM_E_NOT_FOUND = Cint(-4)
const ENGRAM_E_EXISTS = Cint(-5)
const ENGRAM_E_SIGNATURE = Cint(-6)
const ENGRAM_E_TIMEOUT = Cint(-7)
const ENGRAM_E_RATE_LIMITED = Cint(-8)
const ENGRAM_E_STALE_KEY = Cint(-9)
const ENGRAM_E_UNKNOWN_KEY = Cint(-10)
const ENGRAM_E_NOMEM = Cint(-11)
const ENGRAM_E_DISCONNECTED = Cint(-12)
const ENGRAM_E_PERMISSION = Cint(-13)
const ENGRAM_E_VERSION = Cint(-14)
const ENGRAM_E_CORRUPT = Cint(-15)
const ENGRAM_E_CLOSED = Cint(-16)
const ENGRAM_E_SYSTEM = Cint(-17)
const ENGRAM_E_INTERRUPTED = Cint(-18)
const ENGRAM_E_LIMIT = Cint(-19)

const ENGRAM_MAX_RANK = 6
const ENGRAM_MAX_COLUMNS = 32
const ENGRAM_MAX_NAME = 63

# engram_dtype, in order from 1.
const DTYPES = (UInt8, Int8, UInt16, Int16, UInt32, Int32, UInt64, Int64, Float16, Float32, Float64, Bool)
# engram_selector, from 1.
const SELECTORS = (:uniform, :prioritized, :fifo, :lifo, :max_heap, :min_heap)

# --- mirrored structs (the C layout; test/runtests.jl and the checker compare) --

struct engram_column
    name::Ptr{Cchar}
    dtype::Int32
    rank::UInt32
    shape::NTuple{6,UInt32}
end

struct engram_compression
    codec::Int32
    level::Int32
end

struct engram_rate_limiter
    samples_per_insert::Cdouble
    min_size_to_sample::Int64
    min_diff::Cdouble
    max_diff::Cdouble
end

struct engram_server_options
    struct_size::Csize_t
    socket_path::Ptr{Cchar}
    config_path::Ptr{Cchar}
    config_toml::Ptr{Cchar}
    quiet::Int32
end

struct engram_connect_options
    struct_size::Csize_t
    socket_path::Ptr{Cchar}
    timeout_ms::Int32
end

struct engram_table_options
    struct_size::Csize_t
    name::Ptr{Cchar}
    max_size::UInt64
    sampler::Int32
    remover::Int32
    priority_exponent::Cdouble
    max_times_sampled::UInt32
    max_chunks_per_item::UInt32
    rate_limiter::engram_rate_limiter
    columns::Ptr{engram_column}
    num_columns::UInt32
    compression::Ptr{engram_compression}
end

struct engram_table_info
    struct_size::Csize_t
    name::NTuple{64,Cchar}
    max_size::UInt64
    size::UInt64
    inserts::UInt64
    samples::UInt64
    deletes::UInt64
    updates::UInt64
    evictions::UInt64
    expirations::UInt64
    stale_requests::UInt64
    rate_limited::UInt64
    sampler::Int32
    remover::Int32
    max_times_sampled::UInt32
    num_columns::UInt32
    can_sample::Int32
    can_insert::Int32
    clients::UInt32
    rate_limiter::engram_rate_limiter
    bytes_raw::UInt64
    bytes_stored::UInt64
    max_priority::Float64
    min_priority::Float64
    shards::UInt32
    shards_present::UInt32
end

struct engram_writer_options
    struct_size::Csize_t
    columns::Ptr{engram_column}
    num_columns::UInt32
    chunk_length::UInt32
    max_item_steps::UInt32
    insert_timeout_ms::Int32
    keep_keys::Int32
    compression::Ptr{engram_compression}
end

const ENGRAM_SAMPLE_NO_REPEATS = UInt64(1)

# A C options struct as its engram_*_init function fills it: engram.h asks
# every caller to start from there, so this package's defaults are the
# library's and are written nowhere here.
function defaults(::Type{T}, init) where {T}
    r = Ref{T}()
    init(r)
    r[]
end

# The struct `d` with the fields named in `fields` replaced, each
# converted to its field's type; a field given as `nothing` keeps d's
# value (a keyword the caller left out keeps the library's default).
function options_with(d::T; fields...) where {T}
    pick(f) = (v = get(fields, f, nothing); v === nothing ? getfield(d, f) : v)
    T(map(pick, fieldnames(T))...)
end

struct engram_transfer_options
    struct_size::Csize_t
    progress::Ptr{Cvoid}      # int (*)(void*, uint64_t, uint64_t), or C_NULL
    progress_ctx::Ptr{Cvoid}
    insert_timeout_ms::Int32
end

struct engram_sample_options
    struct_size::Csize_t
    batch_size::UInt32
    num_steps::UInt32
    timeout_ms::Int32
    flags::UInt64   # ENGRAM_SAMPLE_*, since 0.5
end

struct engram_sample_info
    key::UInt64
    priority::Cdouble
    probability::Cdouble
    times_sampled::UInt32
    table_size::UInt32
end

struct engram_view
    data::Ptr{Cvoid}
    steps::UInt32
end

# Opaque handles: only pointers to them exist.
struct engram_server end
struct engram_client end
struct engram_table end
struct engram_writer end
struct engram_batch end
struct engram_items end

struct engram_item
    key::UInt64
    priority::Float64
    inserted::UInt64      # place in insertion order: larger is newer
    times_sampled::UInt32
    num_steps::UInt32
end

const ENGRAM_BY_INSERTION = Int32(0)
const ENGRAM_BY_PRIORITY = Int32(1)

# --- the C functions, one wrapper each -------------------------------------------

engram_version() = ccall((:engram_version, libengram), Cuint, ())
engram_version_string() = ccall((:engram_version_string, libengram), Cstring, ())
engram_strerror(code) = ccall((:engram_strerror, libengram), Cstring, (Cint,), code)
engram_last_error() = ccall((:engram_last_error, libengram), Cstring, ())
engram_rate_limiter_min_size(out, n) =
    ccall((:engram_rate_limiter_min_size, libengram), Cint, (Ref{engram_rate_limiter}, Int64), out, n)
engram_rate_limiter_sample_to_insert_ratio(out, spi, min_size, error_buffer) =
    ccall((:engram_rate_limiter_sample_to_insert_ratio, libengram), Cint,
          (Ref{engram_rate_limiter}, Cdouble, Int64, Cdouble), out, spi, min_size, error_buffer)
engram_rate_limiter_queue(out, size) =
    ccall((:engram_rate_limiter_queue, libengram), Cint, (Ref{engram_rate_limiter}, Int64), out, size)
engram_server_options_init(o) =
    ccall((:engram_server_options_init, libengram_server), Cvoid, (Ref{engram_server_options},), o)
engram_server_start(o, out) = ccall((:engram_server_start, libengram_server), Cint,
                                    (Ref{engram_server_options}, Ref{Ptr{engram_server}}), o, out)
engram_server_stop(s) = ccall((:engram_server_stop, libengram_server), Cint, (Ptr{engram_server},), s)
engram_connect_options_init(o) =
    ccall((:engram_connect_options_init, libengram), Cvoid, (Ref{engram_connect_options},), o)
engram_connect(o, out) =
    ccall((:engram_connect, libengram), Cint, (Ref{engram_connect_options}, Ref{Ptr{engram_client}}), o, out)
engram_disconnect(c) = ccall((:engram_disconnect, libengram), Cvoid, (Ptr{engram_client},), c)
engram_client_interrupt(c) = ccall((:engram_client_interrupt, libengram), Cvoid, (Ptr{engram_client},), c)
engram_table_options_init(o) = ccall((:engram_table_options_init, libengram), Cvoid, (Ref{engram_table_options},), o)
engram_table_create(c, o) =
    ccall((:engram_table_create, libengram), Cint, (Ptr{engram_client}, Ref{engram_table_options}), c, o)
engram_table_open(c, name, out) =
    ccall((:engram_table_open, libengram), Cint, (Ptr{engram_client}, Cstring, Ref{Ptr{engram_table}}), c, name, out)
engram_table_close(t) = ccall((:engram_table_close, libengram), Cvoid, (Ptr{engram_table},), t)
engram_table_drop(c, name) = ccall((:engram_table_drop, libengram), Cint, (Ptr{engram_client}, Cstring), c, name)
engram_table_reset(c, name) = ccall((:engram_table_reset, libengram), Cint, (Ptr{engram_client}, Cstring), c, name)
engram_table_set_rate_limiter(c, name, r) =
    ccall((:engram_table_set_rate_limiter, libengram), Cint, (Ptr{engram_client}, Cstring, Ref{engram_rate_limiter}),
          c, name, r)
engram_table_info_init(i) = ccall((:engram_table_info_init, libengram), Cvoid, (Ref{engram_table_info},), i)
engram_table_info_get(c, name, out) =
    ccall((:engram_table_info_get, libengram), Cint, (Ptr{engram_client}, Cstring, Ref{engram_table_info}), c, name, out)
engram_items_open(c, name, order, out) =
    ccall((:engram_items_open, libengram), Cint, (Ptr{engram_client}, Cstring, Int32, Ref{Ptr{engram_items}}), c, name,
          order, out)
engram_items_count(it) = ccall((:engram_items_count, libengram), UInt64, (Ptr{engram_items},), it)
engram_items_next(it, out, cap, count) =
    ccall((:engram_items_next, libengram), Cint, (Ptr{engram_items}, Ptr{engram_item}, UInt32, Ref{UInt32}), it, out,
          cap, count)
engram_items_close(it) = ccall((:engram_items_close, libengram), Cvoid, (Ptr{engram_items},), it)
engram_transfer_options_init(o) =
    ccall((:engram_transfer_options_init, libengram), Cvoid, (Ref{engram_transfer_options},), o)
engram_table_export(t, path, o, items) =
    ccall((:engram_table_export, libengram), Cint, (Ptr{engram_table}, Cstring, Ref{engram_transfer_options},
                                                    Ref{UInt64}), t, path, o, items)
engram_table_import(t, path, o, items) =
    ccall((:engram_table_import, libengram), Cint, (Ptr{engram_table}, Cstring, Ref{engram_transfer_options},
                                                    Ref{UInt64}), t, path, o, items)
engram_table_columns(t, out, cap, count) =
    ccall((:engram_table_columns, libengram), Cint, (Ptr{engram_table}, Ptr{engram_column}, UInt32, Ref{UInt32}),
          t, out, cap, count)
engram_table_compression(t, out, cap, count) =
    ccall((:engram_table_compression, libengram), Cint,
          (Ptr{engram_table}, Ptr{engram_compression}, UInt32, Ref{UInt32}), t, out, cap, count)
engram_checkpoint(c, timeout_ms, path, cap) =
    ccall((:engram_checkpoint, libengram), Cint, (Ptr{engram_client}, Int32, Ptr{Cchar}, Csize_t), c, timeout_ms, path,
          cap)
engram_writer_options_init(o) =
    ccall((:engram_writer_options_init, libengram), Cvoid, (Ref{engram_writer_options},), o)
engram_writer_open(c, o, out) =
    ccall((:engram_writer_open, libengram), Cint, (Ptr{engram_client}, Ref{engram_writer_options},
                                                  Ref{Ptr{engram_writer}}), c, o, out)
engram_writer_append(w, columns) =
    ccall((:engram_writer_append, libengram), Cint, (Ptr{engram_writer}, Ptr{Ptr{Cvoid}}), w, columns)
engram_writer_append_batch(w, columns, n) =
    ccall((:engram_writer_append_batch, libengram), Cint, (Ptr{engram_writer}, Ptr{Ptr{Cvoid}}, UInt32), w, columns, n)
engram_writer_append_items(w, columns, n, t, num_steps, priorities) =
    ccall((:engram_writer_append_items, libengram), Cint, (Ptr{engram_writer}, Ptr{Ptr{Cvoid}}, UInt32, Ptr{engram_table},
                                                          UInt32, Ptr{Cdouble}), w, columns, n, t, num_steps, priorities)
engram_writer_create_item(w, t, num_steps, priority) =
    ccall((:engram_writer_create_item, libengram), Cint, (Ptr{engram_writer}, Ptr{engram_table}, UInt32, Cdouble),
          w, t, num_steps, priority)
engram_writer_create_item_at_max(w, t, num_steps) =
    ccall((:engram_writer_create_item_at_max, libengram), Cint, (Ptr{engram_writer}, Ptr{engram_table}, UInt32),
          w, t, num_steps)
engram_writer_end_episode(w) = ccall((:engram_writer_end_episode, libengram), Cint, (Ptr{engram_writer},), w)
engram_writer_flush(w, timeout_ms) =
    ccall((:engram_writer_flush, libengram), Cint, (Ptr{engram_writer}, Int32), w, timeout_ms)
engram_writer_take_keys(w, keys, cap, count) =
    ccall((:engram_writer_take_keys, libengram), Cint, (Ptr{engram_writer}, Ptr{UInt64}, Csize_t, Ref{Csize_t}),
          w, keys, cap, count)
engram_writer_close(w) = ccall((:engram_writer_close, libengram), Cvoid, (Ptr{engram_writer},), w)
engram_sample_options_init(o) =
    ccall((:engram_sample_options_init, libengram), Cvoid, (Ref{engram_sample_options},), o)
engram_sample(t, o, buffers, infos, count) =
    ccall((:engram_sample, libengram), Cint, (Ptr{engram_table}, Ref{engram_sample_options}, Ptr{Ptr{Cvoid}},
                                             Ptr{engram_sample_info}, Ref{UInt32}), t, o, buffers, infos, count)
engram_sample_begin(t, o) =
    ccall((:engram_sample_begin, libengram), Cint, (Ptr{engram_table}, Ref{engram_sample_options}), t, o)
engram_sample_end(t, buffers, infos, count) =
    ccall((:engram_sample_end, libengram), Cint, (Ptr{engram_table}, Ptr{Ptr{Cvoid}}, Ptr{engram_sample_info},
                                                 Ref{UInt32}), t, buffers, infos, count)
engram_sample_view(t, o, out) =
    ccall((:engram_sample_view, libengram), Cint, (Ptr{engram_table}, Ref{engram_sample_options},
                                                  Ref{Ptr{engram_batch}}), t, o, out)
engram_batch_size(b) = ccall((:engram_batch_size, libengram), UInt32, (Ptr{engram_batch},), b)
engram_batch_info(b, item, out) =
    ccall((:engram_batch_info, libengram), Cint, (Ptr{engram_batch}, UInt32, Ref{engram_sample_info}), b, item, out)
engram_batch_views(b, item, column, out, cap, count) =
    ccall((:engram_batch_views, libengram), Cint, (Ptr{engram_batch}, UInt32, UInt32, Ptr{engram_view}, UInt32,
                                                  Ref{UInt32}), b, item, column, out, cap, count)
engram_batch_release(b) = ccall((:engram_batch_release, libengram), Cvoid, (Ptr{engram_batch},), b)
engram_update_priorities(t, keys, priorities, n, results) =
    ccall((:engram_update_priorities, libengram), Cint, (Ptr{engram_table}, Ptr{UInt64}, Ptr{Cdouble}, Csize_t,
                                                        Ptr{Int32}), t, keys, priorities, n, results)
engram_update_priorities_async(t, keys, priorities, n) =
    ccall((:engram_update_priorities_async, libengram), Cint, (Ptr{engram_table}, Ptr{UInt64}, Ptr{Cdouble}, Csize_t),
          t, keys, priorities, n)
engram_delete_items(t, keys, n, results) =
    ccall((:engram_delete_items, libengram), Cint, (Ptr{engram_table}, Ptr{UInt64}, Csize_t, Ptr{Int32}),
          t, keys, n, results)
