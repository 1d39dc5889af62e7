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

# --- tables ---------------------------------------------------------------------------

"""
    create_table(client, name, columns; max_size, sampler, remover, priority_exponent,
                 max_times_sampled, max_chunks_per_item, rate_limiter)

Each keyword left out takes engram_table_options_init(3)'s default: a
uniform sampler, a FIFO remover, exponent 1, no limit on samples, 8
chunks per item, `min_size(1)`.
"""
function create_table(c::Client, name::AbstractString, columns::Vector{Column}; max_size::Integer,
                      sampler::Union{Nothing,Symbol} = nothing, remover::Union{Nothing,Symbol} = nothing,
                      priority_exponent::Union{Nothing,Real} = nothing,
                      max_times_sampled::Union{Nothing,Integer} = nothing,
                      max_chunks_per_item::Union{Nothing,Integer} = nothing,
                      rate_limiter::Union{Nothing,engram_rate_limiter} = nothing)
    sel(s) = s === nothing ? nothing :
        (i = findfirst(==(s), SELECTORS); i === nothing ? throw(ArgumentError("selector $s: one of $SELECTORS")) : i)
    cols, keep = c_columns(columns)
    n = Base.cconvert(Cstring, name)
    GC.@preserve cols keep n begin
        o = options_with(defaults(engram_table_options, engram_table_options_init); name = pointer(n), max_size = max_size,
                 sampler = sel(sampler), remover = sel(remover), priority_exponent = priority_exponent,
                 max_times_sampled = max_times_sampled, max_chunks_per_item = max_chunks_per_item,
                 rate_limiter = rate_limiter, columns = pointer(cols), num_columns = length(cols))
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
    adopt(Table(out[], c, String(name), columns, (0, 0), 0, false), c)
end

"""Deletes table `name` and its items; open handles then fail with ENGRAM_E_CLOSED."""
drop_table(c::Client, name::AbstractString) = check(engram_table_drop(live(c), name))
"""Removes every item of table `name` and zeroes its counters; the table stays."""
reset_table(c::Client, name::AbstractString) = check(engram_table_reset(live(c), name))
"""Changes table `name`'s rate limiter at run time; the counters are kept."""
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
     rate_limiter = x.rate_limiter, max_priority = x.max_priority, min_priority = x.min_priority,
     shards = x.shards, shards_present = x.shards_present)
end

"""
    items(client, name; by = :insertion) -> Vector{engram_item}

Every item of the table (key, priority, inserted, times_sampled, num_steps):
oldest first, or with `by = :priority` highest first (equal priorities
oldest first). Writers and samplers go on meanwhile; every item held
throughout is listed once, none twice (engram_items_open(3)).
"""
function items(c::Client, name::AbstractString; by::Symbol = :insertion)
    by in (:insertion, :priority) || throw(ArgumentError("by must be :insertion or :priority, not :$by"))
    it = Ref{Ptr{engram_items}}(C_NULL)
    check(engram_items_open(live(c), name, by === :priority ? ENGRAM_BY_PRIORITY : ENGRAM_BY_INSERTION, it))
    try
        out = Vector{engram_item}(undef, engram_items_count(it[]))
        got = Ref{UInt32}(0)
        check(engram_items_next(it[], out, UInt32(length(out)), got))
        out[1:got[]]
    finally
        engram_items_close(it[])
    end
end

function transfer_options(insert_timeout_ms::Integer)
    o = Ref(engram_transfer_options(0, C_NULL, C_NULL, 0))
    engram_transfer_options_init(o)
    Ref(engram_transfer_options(o[].struct_size, C_NULL, C_NULL, Int32(insert_timeout_ms)))
end

"""
    export_table(t::Table, path) -> Int

Writes every item `t` holds now to `path`, a NumPy .npz file (engram-export(5)):
each column's steps as `steps/NAME` [steps, ...shape], and per item, in
insertion order, `items/offset`, `items/length`, `items/priority`,
`items/key`, `items/times_sampled` and `items/inserted`. Writers and
samplers go on meanwhile; a failed export leaves no file. Returns the
items written (engram_table_export(3)).
"""
function export_table(t::Table, path::AbstractString)
    n = Ref{UInt64}(0)
    check(engram_table_export(live(t), path, transfer_options(-1), n))
    Int(n[])
end

"""
    import_table!(t::Table, path; insert_timeout_ms = -1) -> Int

Inserts the items of an .npz file (one that `export_table` wrote, or one
saved with numpy's `np.savez` holding the same arrays) into `t`; each keeps
its steps and priority and gets a new key. The file is checked whole
first, so a damaged or foreign one inserts nothing. `insert_timeout_ms`
bounds each item's wait for the rate limiter (-1: none). Returns the
items inserted (engram_table_import(3)).
"""
function import_table!(t::Table, path::AbstractString; insert_timeout_ms::Integer = -1)
    n = Ref{UInt64}(0)
    check(engram_table_import(live(t), path, transfer_options(insert_timeout_ms), n))
    Int(n[])
end

"""Writes a checkpoint of every table now; returns its path."""
function checkpoint(c::Client; timeout_ms::Integer = -1)
    buf = zeros(Cchar, 4096)
    check(engram_checkpoint(live(c), Int32(timeout_ms), buf, Csize_t(length(buf))))
    unsafe_string(pointer(buf))
end
