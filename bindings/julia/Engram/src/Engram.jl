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
obs = view_column(batch, 1, 1)                 # zero-copy; keeps `batch` pinned while obs lives
close(client)
```

Ownership: a `Table` and a `Writer` hold their `Client`, a `Batch` its
`Table`, and an array from `view_column` its `Batch`, so the garbage
collector never frees a parent before a child. Finalizers never call into
libengram themselves (a close may wait for the server): they queue the
handle, and the next call into this module on that client closes it;
`close` closes at once, but for a batch that handed out arrays (and its
table and client), whose chunks stay pinned until the collector takes the
last array (see `Batch`). A closed client's children answer `EngramError`
(`ENGRAM_E_CLOSED`). One client and its handles may be used by one task
at a time; `interrupt(client)` (any thread) ends a blocking call.
"""
module Engram

export EngramError, Column, Server, Client, Table, Writer, Batch, create_table, open_table, writer, create_item!,
       create_item_at_max!, append_items!,
       end_episode!, flush!, take_keys!, sample, sample_view, view_column, batch_info, table_info,
       update_priorities!, update_priorities_async!, items, export_table, import_table!, sample_begin, sample_end, delete_items!, drop_table, reset_table, set_rate_limiter, checkpoint, interrupt,
       min_size, queue, sample_to_insert_ratio

# The library: ENV["ENGRAM_LIBRARY"] when this module is loaded (precompiled),
# else libengram.so.0 from the dynamic linker's path (package libengram0).
const libengram = get(ENV, "ENGRAM_LIBRARY", "libengram.so.0")
# The embedded server (engram/server.h), loaded only by a Server: at
# $ENGRAM_SERVER_LIBRARY, else libengram-server.so.0 from the dynamic
# linker's path (package libengram-server0).
const libengram_server = get(ENV, "ENGRAM_SERVER_LIBRARY", "libengram-server.so.0")

include("c_api.jl")
include("errors.jl")
include("columns.jl")
include("handles.jl")
include("tables.jl")
include("writing.jl")
include("sampling.jl")

function __init__()
    atexit() do
        foreach(engram_disconnect, ORPHAN_CLIENTS)
        foreach(engram_server_stop, ORPHAN_SERVERS)
    end
end

end # module
