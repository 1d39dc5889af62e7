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
