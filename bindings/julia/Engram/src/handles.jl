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
    pinned::Int                            # its batches that handed out arrays and are not released yet
    closed::Bool                           # close(c) asked; disconnected once pinned is 0
end

# Clients closed while arrays over their batches may live: each is
# disconnected by a later call into this module (any client's, or
# connect) once the collector has taken the last of those arrays.
const CLOSING_CLIENTS = Client[]

function connect(socket::Union{Nothing,AbstractString} = nothing; timeout_ms::Union{Nothing,Integer} = nothing)
    s = socket === nothing ? nothing : Base.cconvert(Cstring, socket)
    out = Ref{Ptr{engram_client}}(C_NULL)
    GC.@preserve s begin
        o = options_with(defaults(engram_connect_options, engram_connect_options_init);
                 socket_path = s === nothing ? nothing : pointer(s), timeout_ms = timeout_ms)
        check(engram_connect(o, out))
    end
    drain_closing()
    c = Client(out[], Threads.SpinLock(), Any[], 0, false)
    finalizer(c) do x
        # engram_disconnect may wait for a writer's acks: never here. The
        # process's exit closes the socket, and the server reclaims.
        x.ptr == C_NULL || push!(ORPHAN_CLIENTS, x.ptr)
        x.ptr = C_NULL
    end
end

const ORPHAN_CLIENTS = Ptr{engram_client}[]

# Closes what finalizers queued on c.
function drain(c::Client)
    isempty(c.pending) && return nothing
    lock(c.lock)
    todo = c.pending
    c.pending = Any[]
    unlock(c.lock)
    foreach(close, todo)
    nothing
end

function drain_closing()
    isempty(CLOSING_CLIENTS) && return nothing
    foreach(drain, copy(CLOSING_CLIENTS))
    filter!(x -> x.ptr != C_NULL, CLOSING_CLIENTS)
    nothing
end

# The client's pointer for a call, after closing what finalizers queued.
function live(c::Client)
    (c.ptr == C_NULL || c.closed) && throw(closed("client"))
    drain_closing()
    drain(c)
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

"""Closes every table, writer and batch of the client, then the connection;
while arrays from `view_column` over its batches live, that waits for the
collector to take the last of them (see `Batch`)."""
function Base.close(c::Client)
    (c.ptr == C_NULL || c.closed) && return nothing
    c.closed = true
    c.pinned == 0 ? disconnect_now(c) : push!(CLOSING_CLIENTS, c)
    nothing
end

function disconnect_now(c::Client)
    c.ptr == C_NULL && return nothing
    p = c.ptr
    c.ptr = C_NULL
    engram_disconnect(p)  # frees its children; their Julia objects see ptr == C_NULL through it
    nothing
end

"""Ends `c`'s blocking call in another task or thread (ENGRAM_E_INTERRUPTED)."""
interrupt(c::Client) = (c.ptr == C_NULL || engram_client_interrupt(c.ptr); nothing)

"""
    Table

An open table of a client (`open_table(client, name)`; engram_table_open(3)):
sampling, priority updates, deletes, export and import. Valid until closed
(`close(t)`), its client closes, or the table is dropped.
"""
mutable struct Table
    ptr::Ptr{engram_table}
    client::Client
    name::String
    columns::Vector{Column}
    begun::Tuple{Int,Int}  # batch_size and num_steps of the sample begun; (0, 0): none
    pinned::Int            # its batches that handed out arrays and are not released yet
    closed::Bool           # close(t) asked; the handle is closed once pinned is 0
end

"""
    Writer

A writer of steps (`writer(client, columns; ...)`; engram_writer_open(3)):
`append!` steps, `create_item!` items over the last steps, `flush!`.
"""
mutable struct Writer
    ptr::Ptr{engram_writer}
    client::Client
    columns::Vector{Column}
end

"""
    Batch

A zero-copy sample (`sample_view`; engram_sample_view(3)): its items' chunks
stay pinned in shared memory; read them with `view_column` and
`batch_info`. `close(b)` unpins them at once if no array was taken with
`view_column`. Once one was, the arrays hold the batch, and its chunks
stay pinned until the garbage collector has taken the batch and every
array over it: `close(b)`, `close(table)` and `close(client)` then end
them for new calls and leave the unpinning (and the handle's close, and
the connection's) to that moment, so an array never shows bytes that are
not its item's. Copy what you keep (`copy(view_column(...))`) to let the
chunks go at `close`.
"""
mutable struct Batch
    ptr::Ptr{engram_batch}
    table::Table
    arrays::Bool  # view_column handed out an array over it
    closed::Bool  # close(b) asked
end

# What a finalizer of a Batch queues: its release, done by the next call.
mutable struct Release
    batch::Batch
end
Base.close(r::Release) = release!(r.batch)

# A child is usable while it and its client are open (engram_disconnect
# freed the children of a closed client).
function live(t::Writer)
    live(t.client)
    t.ptr == C_NULL && throw(closed("writer"))
    t.ptr
end
function live(t::Table)
    live(t.client)
    (t.ptr == C_NULL || t.closed) && throw(closed("table"))
    t.ptr
end
function live(b::Batch)
    live(b.table)
    (b.ptr == C_NULL || b.closed) && throw(closed("batch"))
    b.ptr
end

function Base.close(t::Table)
    t.closed = true
    t.pinned == 0 && close_now(t)
    nothing
end

function close_now(t::Table)
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
    b.closed = true
    b.arrays || release!(b)  # else the collector's, with the last array (see Batch)
    nothing
end

# Unpins b, once; then closes the table handle and the connection whose
# close waited for it, if it was their last batch with arrays.
function release!(b::Batch)
    b.ptr == C_NULL && return nothing
    t, c = b.table, b.table.client
    t.ptr != C_NULL && c.ptr != C_NULL && engram_batch_release(b.ptr)
    b.ptr = C_NULL
    if b.arrays
        t.pinned -= 1
        c.pinned -= 1
        t.closed && t.pinned == 0 && close_now(t)
        c.closed && c.pinned == 0 && disconnect_now(c)
    end
    nothing
end

function adopt(h, c::Client)
    finalizer(x -> (x.ptr == C_NULL || defer_close(c, x)), h)
end
function adopt(b::Batch, c::Client)
    finalizer(x -> (x.ptr == C_NULL || defer_close(c, Release(x))), b)
end
