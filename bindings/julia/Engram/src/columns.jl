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
