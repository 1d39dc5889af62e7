"""
    Engram

engram experience replay through shared memory, from Julia: `ccall` over
libengram's C ABI (`engram/engram.h`, `man 3 engram_*`).

```julia
using Engram
cols = [Column("obs", Float32, (4,)), Column("action", Int32, ())]
client = Engram.connect()                      # ENV["ENGRAM_SOCKET"] or /run/engram/engram.sock
create_table(client, "replay", cols; max_size = 10_000)
table = open_table(client, "replay")
w = writer(client, cols)
append!(w, Float32[0, 1, 2, 3], Int32(1))
create_item!(w, table, 1, 1.0)
flush!(w)
data, infos = sample(table, 32)                # data[1] is 4×1×32 (column-major: shape, steps, batch)
batch = sample_view(table, 32)
obs = view_column(batch, 1, 1)                 # zero-copy; keeps `batch` alive
close(client)
```

Ownership: a `Table` and a `Writer` hold their `Client`, a `Batch` its
`Table`, and an array from `view_column` its `Batch`, so the garbage
collector never frees a parent before a child. Finalizers never call into
libengram themselves (a close may wait for the server): they queue the
handle, and the next call into this module on that client closes it;
`close` closes at once. A closed client's children answer `EngramError`
(`ENGRAM_E_CLOSED`). One client and its handles may be used by one task
at a time; `interrupt(client)` (any thread) ends a blocking call.
"""
module Engram

export EngramError, Column, Server, Client, Table, Writer, Batch, create_table, open_table, writer, create_item!,
       append_items!,
       end_episode!, flush!, take_keys!, sample, sample_view, view_column, batch_info, table_info,
       update_priorities!, update_priorities_async!, sample_begin, sample_end, delete_items!, drop_table, reset_table, set_rate_limiter, checkpoint, interrupt,
       min_size, queue, sample_to_insert_ratio

# The library: ENV["ENGRAM_LIBRARY"] when this module is loaded (precompiled),
# else libengram.so.0 from the dynamic linker's path (package libengram0).
const libengram = get(ENV, "ENGRAM_LIBRARY", "libengram.so.0")
# The embedded server (engram/server.h), loaded only by a Server: at
# $ENGRAM_SERVER_LIBRARY, else libengram-server.so.0 from the dynamic
# linker's path (package libengram-server0).
const libengram_server = get(ENV, "ENGRAM_SERVER_LIBRARY", "libengram-server.so.0")

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

struct engram_sample_options
    struct_size::Csize_t
    batch_size::UInt32
    num_steps::UInt32
    timeout_ms::Int32
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

# --- errors ------------------------------------------------------------------------

"""A failed call: `code` is the `ENGRAM_E_*` value, `message` what was wrong."""
struct EngramError <: Exception
    code::Cint
    message::String
end

Base.showerror(io::IO, e::EngramError) =
    print(io, "EngramError: ", e.message, " (", unsafe_string(engram_strerror(e.code)), ")")

check(rc::Cint) = rc == ENGRAM_OK ? nothing : throw(EngramError(rc, unsafe_string(engram_last_error())))
closed(what) = EngramError(ENGRAM_E_CLOSED, "this $what is closed")

# --- rate limiters ------------------------------------------------------------------

function limiter(f, args...)
    r = Ref{engram_rate_limiter}()
    check(f(r, args...))
    r[]
end
"""Sampling may start once the table holds `n` items; inserts never wait."""
min_size(n::Integer) = limiter(engram_rate_limiter_min_size, n)
"""A queue of at most `size` items (pair with sampler `:fifo`, `max_times_sampled = 1`)."""
queue(size::Integer) = limiter(engram_rate_limiter_queue, size)
"""Reverb's SampleToInsertRatio."""
sample_to_insert_ratio(spi, min_size, error_buffer) =
    limiter(engram_rate_limiter_sample_to_insert_ratio, spi, min_size, error_buffer)

# --- columns ----------------------------------------------------------------------

"""One column of a signature: a name, an element type of `DTYPES`, a shape."""
struct Column
    name::String
    eltype::DataType
    shape::Tuple{Vararg{Int}}
end

function dtype_code(T::DataType)
    i = findfirst(==(T), DTYPES)
    i === nothing && throw(ArgumentError("element type $T is not one of engram's: $(join(DTYPES, ", "))"))
    Int32(i)
end

# The C columns of a signature; the names stay alive in `keep`.
function c_columns(cols::Vector{Column})
    keep = [Base.cconvert(Cstring, c.name) for c in cols]
    out = map(enumerate(cols)) do (i, c)
        length(c.shape) <= ENGRAM_MAX_RANK || throw(ArgumentError("column $(c.name): rank > $ENGRAM_MAX_RANK"))
        shape = ntuple(k -> k <= length(c.shape) ? UInt32(c.shape[k]) : UInt32(0), 6)
        engram_column(pointer(keep[i]), dtype_code(c.eltype), UInt32(length(c.shape)), shape)
    end
    out, keep
end

step_length(c::Column) = prod(c.shape; init = 1)

# --- handles, and closes that finalizers leave ----------------------------------------

"""An engram server inside this process; other processes attach to it as to engramd."""
mutable struct Server
    ptr::Ptr{engram_server}
end

function Server(socket::AbstractString; config_toml::Union{Nothing,AbstractString} = nothing)
    s = Base.cconvert(Cstring, socket)
    t = config_toml === nothing ? nothing : Base.cconvert(Cstring, config_toml)
    GC.@preserve s t begin
        o = engram_server_options(sizeof(engram_server_options), pointer(s), C_NULL,
                                  t === nothing ? C_NULL : pointer(t), Int32(1))
        out = Ref{Ptr{engram_server}}(C_NULL)
        check(engram_server_start(o, out))
    end
    server = Server(out[])
    finalizer(server) do x  # stopping joins the server's threads: not from a finalizer
        x.ptr == C_NULL || push!(ORPHAN_SERVERS, x.ptr)
    end
end

Base.close(s::Server) = (s.ptr == C_NULL || (p = s.ptr; s.ptr = C_NULL; check(engram_server_stop(p))); nothing)

# Server handles whose Julia objects were collected unclosed: stopped at exit.
const ORPHAN_SERVERS = Ptr{engram_server}[]

"""A connection to a server."""
mutable struct Client
    ptr::Ptr{engram_client}
    lock::Threads.SpinLock                 # guards `pending` only; taken without waiting in finalizers
    pending::Vector{Any}                   # handles finalized unclosed: closed by the next call
end

function connect(socket::Union{Nothing,AbstractString} = nothing; timeout_ms::Integer = 10_000)
    s = socket === nothing ? nothing : Base.cconvert(Cstring, socket)
    out = Ref{Ptr{engram_client}}(C_NULL)
    GC.@preserve s begin
        o = engram_connect_options(sizeof(engram_connect_options), s === nothing ? C_NULL : pointer(s),
                                   Int32(timeout_ms))
        check(engram_connect(o, out))
    end
    c = Client(out[], Threads.SpinLock(), Any[])
    finalizer(c) do x
        # engram_disconnect may wait for a writer's acks: never here. The
        # process's exit closes the socket, and the server reclaims.
        x.ptr == C_NULL || push!(ORPHAN_CLIENTS, x.ptr)
        x.ptr = C_NULL
    end
end

const ORPHAN_CLIENTS = Ptr{engram_client}[]

# The client's pointer for a call, after closing what finalizers queued.
function live(c::Client)
    c.ptr == C_NULL && throw(closed("client"))
    if !isempty(c.pending)
        lock(c.lock)
        todo = c.pending
        c.pending = Any[]
        unlock(c.lock)
        foreach(close, todo)
    end
    c.ptr
end

# A finalizer's close: queued on the client without waiting for anything.
function defer_close(c::Client, handle)
    if trylock(c.lock)
        push!(c.pending, handle)
        unlock(c.lock)
    else
        finalizer(h -> defer_close(c, h), handle)  # the lock is busy: try at the next collection
    end
end

"""Closes every table, writer and batch of the client, then the connection."""
function Base.close(c::Client)
    c.ptr == C_NULL && return nothing
    p = c.ptr
    c.ptr = C_NULL
    engram_disconnect(p)  # frees its children; their Julia objects see ptr == C_NULL through it
    nothing
end

"""Ends `c`'s blocking call in another task or thread (ENGRAM_E_INTERRUPTED)."""
interrupt(c::Client) = (c.ptr == C_NULL || engram_client_interrupt(c.ptr); nothing)

mutable struct Table
    ptr::Ptr{engram_table}
    client::Client
    name::String
    columns::Vector{Column}
    begun::Tuple{Int,Int}  # batch_size and num_steps of the sample begun; (0, 0): none
end

mutable struct Writer
    ptr::Ptr{engram_writer}
    client::Client
    columns::Vector{Column}
end

mutable struct Batch
    ptr::Ptr{engram_batch}
    table::Table
end

# A child is usable while it and its client are open (engram_disconnect
# freed the children of a closed client).
function live(t::Union{Table,Writer})
    live(t.client)
    t.ptr == C_NULL && throw(closed(t isa Table ? "table" : "writer"))
    t.ptr
end
function live(b::Batch)
    live(b.table)
    b.ptr == C_NULL && throw(closed("batch"))
    b.ptr
end

function Base.close(t::Table)
    if t.ptr != C_NULL && t.client.ptr != C_NULL
        engram_table_close(t.ptr)  # also releases the table's batches
    end
    t.ptr = C_NULL
    nothing
end
function Base.close(w::Writer)
    w.ptr != C_NULL && w.client.ptr != C_NULL && engram_writer_close(w.ptr)
    w.ptr = C_NULL
    nothing
end
function Base.close(b::Batch)
    b.ptr != C_NULL && b.table.ptr != C_NULL && b.table.client.ptr != C_NULL && engram_batch_release(b.ptr)
    b.ptr = C_NULL
    nothing
end

function adopt(h, c::Client)
    finalizer(x -> (x.ptr == C_NULL || defer_close(c, x)), h)
end

# --- tables ---------------------------------------------------------------------------

"""
    create_table(client, name, columns; max_size, sampler = :uniform, remover = :fifo,
                 priority_exponent = 1.0, max_times_sampled = 0, max_chunks_per_item = 8,
                 rate_limiter = min_size(1))
"""
function create_table(c::Client, name::AbstractString, columns::Vector{Column}; max_size::Integer,
                      sampler::Symbol = :uniform, remover::Symbol = :fifo, priority_exponent::Real = 1.0,
                      max_times_sampled::Integer = 0, max_chunks_per_item::Integer = 8,
                      rate_limiter::engram_rate_limiter = min_size(1))
    sel(s) = (i = findfirst(==(s), SELECTORS); i === nothing ? throw(ArgumentError("selector $s: one of $SELECTORS")) : Int32(i))
    cols, keep = c_columns(columns)
    n = Base.cconvert(Cstring, name)
    GC.@preserve cols keep n begin
        o = engram_table_options(sizeof(engram_table_options), pointer(n), UInt64(max_size), sel(sampler),
                                 sel(remover), Float64(priority_exponent), UInt32(max_times_sampled),
                                 UInt32(max_chunks_per_item), rate_limiter, pointer(cols), UInt32(length(cols)),
                                 C_NULL)
        check(engram_table_create(live(c), o))
    end
    nothing
end

"""Opens a table for writing items and sampling."""
function open_table(c::Client, name::AbstractString)
    out = Ref{Ptr{engram_table}}(C_NULL)
    check(engram_table_open(live(c), name, out))
    cols = Vector{engram_column}(undef, ENGRAM_MAX_COLUMNS)
    n = Ref{UInt32}(0)
    rc = engram_table_columns(out[], cols, UInt32(length(cols)), n)
    rc == ENGRAM_OK || (engram_table_close(out[]); check(rc))
    columns = [Column(unsafe_string(k.name), DTYPES[k.dtype], Tuple(Int.(k.shape[1:k.rank]))) for k in cols[1:n[]]]
    adopt(Table(out[], c, String(name), columns, (0, 0)), c)
end

drop_table(c::Client, name::AbstractString) = check(engram_table_drop(live(c), name))
reset_table(c::Client, name::AbstractString) = check(engram_table_reset(live(c), name))
set_rate_limiter(c::Client, name::AbstractString, r::engram_rate_limiter) =
    check(engram_table_set_rate_limiter(live(c), name, r))

"""A table's size, counters and settings, as a NamedTuple."""
function table_info(c::Client, name::AbstractString)
    i = Ref{engram_table_info}()
    engram_table_info_init(i)
    check(engram_table_info_get(live(c), name, i))
    x = i[]
    bytes = UInt8[reinterpret(UInt8, ch) for ch in x.name]
    (name = String(bytes[1:something(findfirst(==(0x00), bytes), length(bytes) + 1) - 1]), max_size = x.max_size,
     size = x.size,
     inserts = x.inserts, samples = x.samples, deletes = x.deletes, clients = x.clients,
     rate_limiter = x.rate_limiter)
end

"""Writes a checkpoint of every table now; returns its path."""
function checkpoint(c::Client; timeout_ms::Integer = -1)
    buf = zeros(Cchar, 4096)
    check(engram_checkpoint(live(c), Int32(timeout_ms), buf, Csize_t(length(buf))))
    unsafe_string(pointer(buf))
end

# --- writing ------------------------------------------------------------------------------

"""A writer of steps with these columns (the tables' signature)."""
function writer(c::Client, columns::Vector{Column}; chunk_length::Integer = 1, max_item_steps::Integer = 0,
                insert_timeout_ms::Integer = -1, keep_keys::Bool = false)
    cols, keep = c_columns(columns)
    out = Ref{Ptr{engram_writer}}(C_NULL)
    GC.@preserve cols keep begin
        o = engram_writer_options(sizeof(engram_writer_options), pointer(cols), UInt32(length(cols)),
                                  UInt32(chunk_length), UInt32(max_item_steps), Int32(insert_timeout_ms),
                                  Int32(keep_keys), C_NULL)
        check(engram_writer_open(live(c), o, out))
    end
    adopt(Writer(out[], c, columns), c)
end

# Each value as a dense array of its column's type and length (steps of it).
function values_for(w::Writer, values, steps::Int)
    length(values) == length(w.columns) ||
        throw(ArgumentError("$(length(values)) columns given; the writer has $(length(w.columns))"))
    map(zip(values, w.columns)) do (v, col)
        a = v isa AbstractArray ? convert(Array{col.eltype}, v) : fill(convert(col.eltype, v), 1)
        length(a) == step_length(col) * steps ||
            throw(ArgumentError("column $(col.name): $(length(a)) values, $steps steps of it are $(step_length(col) * steps)"))
        a
    end
end

"""Appends one step: a value (or array, in the column's shape) per column."""
function Base.append!(w::Writer, values...)
    arrays = values_for(w, values, 1)
    GC.@preserve arrays check(engram_writer_append(live(w), Ptr{Cvoid}[pointer(a) for a in arrays]))
    w
end

"""
    append_items!(w, table, values...; num_steps = 1, priorities = nothing)

Appends n steps (each value an array of n steps of its column, the step
index last) and after each creates an item over the last `num_steps` steps
in `table`: one call into libengram for the whole batch.
"""
function append_items!(w::Writer, t::Table, values...; num_steps::Integer = 1,
                       priorities::Union{Nothing,AbstractVector{<:Real}} = nothing)
    first = values[1]
    n = first isa AbstractArray ? size(first, ndims(first)) : 1
    arrays = values_for(w, values, n)
    p = priorities === nothing ? C_NULL : Vector{Float64}(priorities)
    GC.@preserve arrays p check(engram_writer_append_items(live(w), Ptr{Cvoid}[pointer(a) for a in arrays], UInt32(n),
                                                          live(t), UInt32(num_steps), p))
    w
end

"""An item over the last `num_steps` steps, in `table`."""
create_item!(w::Writer, t::Table, num_steps::Integer, priority::Real) =
    check(engram_writer_create_item(live(w), live(t), UInt32(num_steps), Float64(priority)))
end_episode!(w::Writer) = check(engram_writer_end_episode(live(w)))
"""Waits until every item created so far is applied or refused."""
flush!(w::Writer; timeout_ms::Integer = -1) = check(engram_writer_flush(live(w), Int32(timeout_ms)))

"""With `keep_keys`: the keys of applied items, in creation order."""
function take_keys!(w::Writer)
    keys = UInt64[]
    buf = Vector{UInt64}(undef, 1024)
    n = Ref{Csize_t}(0)
    while true
        check(engram_writer_take_keys(live(w), buf, Csize_t(length(buf)), n))
        append!(keys, view(buf, 1:n[]))
        n[] < length(buf) && return keys
    end
end

# --- sampling ---------------------------------------------------------------------------------

sample_options(batch_size, num_steps, timeout_ms) =
    engram_sample_options(sizeof(engram_sample_options), UInt32(batch_size), UInt32(num_steps), Int32(timeout_ms))

"""
    sample(table, batch_size; num_steps = 1, timeout_ms = -1) -> (data, infos)

Samples a batch and copies it out. `data[i]` is column i as an array of size
(shape..., num_steps, n), the C layout [batch, steps, shape...] read
column-major; `infos` one `engram_sample_info` per item.
"""
function sample(t::Table, batch_size::Integer; num_steps::Integer = 1, timeout_ms::Integer = -1)
    copy_out(t, batch_size, num_steps) do buffers, infos, n
        engram_sample(live(t), sample_options(batch_size, num_steps, timeout_ms), buffers, infos, n)
    end
end

"""
    sample_begin(table, batch_size; num_steps = 1, timeout_ms = -1)

Sends a sample request and returns without waiting: the server draws the
batch while the caller goes on, and `sample_end` copies it out. The batch
sees every earlier call on the table and none later. One at a time per
table; the timeout counts from this call.
"""
function sample_begin(t::Table, batch_size::Integer; num_steps::Integer = 1, timeout_ms::Integer = -1)
    check(engram_sample_begin(live(t), sample_options(batch_size, num_steps, timeout_ms)))
    t.begun = (Int(batch_size), Int(num_steps))
    nothing
end

"""
    sample_end(table) -> (data, infos)

Waits for the sample begun by `sample_begin` and copies it out, as `sample` does.
"""
function sample_end(t::Table)
    batch_size, num_steps = t.begun
    batch_size > 0 || throw(ArgumentError("no sample was begun on table $(t.name): call sample_begin first"))
    t.begun = (0, 0)
    copy_out(t, batch_size, num_steps) do buffers, infos, n
        engram_sample_end(live(t), buffers, infos, n)
    end
end

# Column arrays for a batch, filled by `call(buffers, infos, count)`
# (engram_sample or engram_sample_end), cut to the items delivered.
function copy_out(call, t::Table, batch_size::Integer, num_steps::Integer)
    data = [Array{c.eltype}(undef, c.shape..., num_steps, batch_size) for c in t.columns]
    infos = Vector{engram_sample_info}(undef, batch_size)
    n = Ref{UInt32}(0)
    GC.@preserve data check(call(Ptr{Cvoid}[pointer(d) for d in data], infos, n))
    [selectdim(d, ndims(d), 1:n[]) for d in data], infos[1:n[]]
end

"""Samples a batch without copying: see `view_column`."""
function sample_view(t::Table, batch_size::Integer; num_steps::Integer = 1, timeout_ms::Integer = -1)
    out = Ref{Ptr{engram_batch}}(C_NULL)
    check(engram_sample_view(live(t), sample_options(batch_size, num_steps, timeout_ms), out))
    adopt(Batch(out[], t), t.client)
end

Base.length(b::Batch) = Int(engram_batch_size(live(b)))

function batch_info(b::Batch, item::Integer)
    i = Ref{engram_sample_info}()
    check(engram_batch_info(live(b), UInt32(item - 1), i))
    i[]
end

"""
    view_column(batch, item, column) -> array

Item `item`'s column `column` (1-based) as an array of size (shape..., steps)
over shared memory, if the item lies in one chunk. The array keeps `batch`
alive; treat it as read-only (the memory is shared with other clients).
"""
function view_column(b::Batch, item::Integer, column::Integer)
    views = Vector{engram_view}(undef, 8)
    n = Ref{UInt32}(0)
    check(engram_batch_views(live(b), UInt32(item - 1), UInt32(column - 1), views, UInt32(8), n))
    n[] == 1 || throw(ArgumentError("item $item spans $(n[]) chunks"))
    col = b.table.columns[column]
    a = unsafe_wrap(Array, Ptr{col.eltype}(views[1].data), (col.shape..., Int(views[1].steps)); own = false)
    # The array must not outlive the batch's pin: tie the batch to it.
    finalizer(_ -> (b; nothing), a)
    a
end

"""Sets priorities by key; per key ENGRAM_OK, ENGRAM_E_STALE_KEY or ENGRAM_E_UNKNOWN_KEY."""
function update_priorities!(t::Table, keys::AbstractVector{<:Integer}, priorities::AbstractVector{<:Real})
    length(keys) == length(priorities) || throw(ArgumentError("$(length(keys)) keys, $(length(priorities)) priorities"))
    k, p = Vector{UInt64}(keys), Vector{Float64}(priorities)
    results = zeros(Int32, length(k))
    check(engram_update_priorities(live(t), k, p, Csize_t(length(k)), results))
    results
end

"""Sends priorities by key without waiting for the server's answer (keys of items that are
gone are skipped). Later calls on the table see them applied; a refusal throws from the next
priority call, and `update_priorities!(t, UInt64[], Float64[])` waits until every one is applied."""
function update_priorities_async!(t::Table, keys::AbstractVector{<:Integer}, priorities::AbstractVector{<:Real})
    length(keys) == length(priorities) || throw(ArgumentError("$(length(keys)) keys, $(length(priorities)) priorities"))
    k, p = Vector{UInt64}(keys), Vector{Float64}(priorities)
    check(engram_update_priorities_async(live(t), k, p, Csize_t(length(k))))
    nothing
end

"""Deletes items by key; results as for update_priorities!."""
function delete_items!(t::Table, keys::AbstractVector{<:Integer})
    k = Vector{UInt64}(keys)
    results = zeros(Int32, length(k))
    check(engram_delete_items(live(t), k, Csize_t(length(k)), results))
    results
end

function __init__()
    atexit() do
        foreach(engram_disconnect, ORPHAN_CLIENTS)
        foreach(engram_server_stop, ORPHAN_SERVERS)
    end
end

end # module
