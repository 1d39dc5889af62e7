# --- writing ------------------------------------------------------------------------------

"""
    writer(client, columns; chunk_length, max_item_steps, insert_timeout_ms, keep_keys)

A writer of steps with these columns (the tables' signature). Each
keyword left out takes engram_writer_options_init(3)'s default: chunks
of one step, items of any length, inserts that wait for ever, no keys kept.
"""
function writer(c::Client, columns::Vector{Column}; chunk_length::Union{Nothing,Integer} = nothing,
                max_item_steps::Union{Nothing,Integer} = nothing, insert_timeout_ms::Union{Nothing,Integer} = nothing,
                keep_keys::Union{Nothing,Bool} = nothing)
    cols, keep = c_columns(columns)
    out = Ref{Ptr{engram_writer}}(C_NULL)
    GC.@preserve cols keep begin
        o = options_with(defaults(engram_writer_options, engram_writer_options_init); columns = pointer(cols),
                 num_columns = length(cols), chunk_length = chunk_length, max_item_steps = max_item_steps,
                 insert_timeout_ms = insert_timeout_ms, keep_keys = keep_keys === nothing ? nothing : Int32(keep_keys))
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
"""An item over the last `num_steps` steps, in `table`, at the table's largest priority when the server applies it
(1.0 in an empty table)."""
create_item_at_max!(w::Writer, t::Table, num_steps::Integer) =
    check(engram_writer_create_item_at_max(live(w), live(t), UInt32(num_steps)))
"""Ends the episode: later items never reach back into it (engram_writer_end_episode(3))."""
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
