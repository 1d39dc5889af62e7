# --- sampling ---------------------------------------------------------------------------------

# Keywords left out (nothing) take engram_sample_options_init(3)'s defaults.
sample_options(batch_size, num_steps, timeout_ms, no_repeats::Bool) =
    options_with(defaults(engram_sample_options, engram_sample_options_init); batch_size = batch_size, num_steps = num_steps,
         timeout_ms = timeout_ms, flags = no_repeats ? ENGRAM_SAMPLE_NO_REPEATS : nothing)

"""
    sample(table, batch_size; num_steps = 1, timeout_ms, no_repeats = false) -> (data, infos)

Samples a batch and copies it out. `data[i]` is column i as an array of size
(shape..., num_steps, n), the C layout [batch, steps, shape...] read
column-major; `infos` one `engram_sample_info` per item. `timeout_ms`
left out waits as engram_sample_options_init(3) says (for ever). `no_repeats`: no
item twice in the batch (engram(7), "Batches without repeats"); an
`EngramError` with code ENGRAM_E_RANGE when the table holds fewer items.
"""
function sample(t::Table, batch_size::Integer; num_steps::Integer = 1, timeout_ms::Union{Nothing,Integer} = nothing,
                     no_repeats::Bool = false)
    copy_out(t, batch_size, num_steps) do buffers, infos, n
        engram_sample(live(t), sample_options(batch_size, num_steps, timeout_ms, no_repeats), buffers, infos, n)
    end
end

"""
    sample_begin(table, batch_size; num_steps = 1, timeout_ms, no_repeats = false)

Sends a sample request and returns without waiting: the server draws the
batch while the caller goes on, and `sample_end` copies it out. The batch
sees every earlier call on the table and none later. One at a time per
table; the timeout counts from this call.
"""
function sample_begin(t::Table, batch_size::Integer; num_steps::Integer = 1, timeout_ms::Union{Nothing,Integer} = nothing,
                     no_repeats::Bool = false)
    check(engram_sample_begin(live(t), sample_options(batch_size, num_steps, timeout_ms, no_repeats)))
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
function sample_view(t::Table, batch_size::Integer; num_steps::Integer = 1, timeout_ms::Union{Nothing,Integer} = nothing,
                     no_repeats::Bool = false)
    out = Ref{Ptr{engram_batch}}(C_NULL)
    check(engram_sample_view(live(t), sample_options(batch_size, num_steps, timeout_ms, no_repeats), out))
    adopt(Batch(out[], t, false, false), t.client)
end

Base.length(b::Batch) = Int(engram_batch_size(live(b)))

"""Key, priority, probability, times_sampled and table_size of item `item` (1-based) of the batch."""
function batch_info(b::Batch, item::Integer)
    i = Ref{engram_sample_info}()
    check(engram_batch_info(live(b), UInt32(item - 1), i))
    i[]
end

"""
    view_column(batch, item, column) -> array

Item `item`'s column `column` (1-based) as an array of size (shape..., steps)
over shared memory, if the item lies in one chunk. The array keeps `batch`,
and its chunks pinned, until the collector takes both, also past
`close(batch)` (see `Batch`); treat it as read-only (the memory is shared
with other clients).
"""
function view_column(b::Batch, item::Integer, column::Integer)
    views = Vector{engram_view}(undef, 8)
    n = Ref{UInt32}(0)
    check(engram_batch_views(live(b), UInt32(item - 1), UInt32(column - 1), views, UInt32(8), n))
    n[] == 1 || throw(ArgumentError("item $item spans $(n[]) chunks"))
    col = b.table.columns[column]
    a = unsafe_wrap(Array, Ptr{col.eltype}(views[1].data), (col.shape..., Int(views[1].steps)); own = false)
    # The array must not outlive the batch's pin: tie the batch to it,
    # and count the batch as pinned for arrays (close leaves its release
    # to the batch's finalizer).
    finalizer(_ -> (b; nothing), a)
    if !b.arrays
        b.arrays = true
        b.table.pinned += 1
        b.table.client.pinned += 1
    end
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
