"""The checks every argument passes on its way to C: integers that fit,
real numbers, text, indexes and column names, and closed handles."""
import operator
import os

from . import _ffi
from .errors import Closed


# ctypes stores an int into a C integer by keeping its low bits: -1 becomes
# 4294967295 and 2**32 becomes 0, and the library would then refuse (or
# worse, accept) a number the caller never passed. Every integer a caller
# gives passes through here on its way to C.
_U32, _I32, _U64, _I64 = (0, 2**32 - 1), (-2**31, 2**31 - 1), (0, 2**64 - 1), (-2**63, 2**63 - 1)
_POS32 = (1, 2**32 - 1)  # counts the library refuses at 0: batch sizes, steps


def _int(what, value, bounds):
    try:
        i = operator.index(value)
    except TypeError:
        raise TypeError(f"{what} must be an integer, got {value!r}") from None
    lo, hi = bounds
    if not lo <= i <= hi:
        raise ValueError(f"{what} is {i}; it must be in {lo}..{hi}")
    return i


def _real(what, value):
    # float() would read a str ('1') too: a number is wanted, not its text.
    if isinstance(value, (str, bytes, bytearray)):
        raise TypeError(f"{what} must be a number, got {value!r}")
    try:
        return float(value)
    except (TypeError, ValueError):
        raise TypeError(f"{what} must be a number, got {value!r}") from None


def _text(what, value):
    """A name or a path (str, or os.PathLike) as the bytes C takes."""
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a str, got {value!r}")
    return value.encode()


def _index(what, i, n):
    """i as an index into n things, counting from the end when negative, as
    Python's sequences do."""
    i = _int(what, i, _I64)
    if not -n <= i < n:
        raise IndexError(f"{what} {i} is out of range: there are {n}")
    return i + n if i < 0 else i


def _column_index(what, column, names):
    """A column given by name or by index (negative from the end) as its
    index among `names`."""
    if isinstance(column, str):
        if column not in names:
            raise KeyError(f"{what}: no column {column!r}; the columns are {names}")
        return names.index(column)
    return _index(f"{what}: column", column, len(names))


def _closed(what):
    return Closed(_ffi.E_CLOSED, f"this {what} handle is closed")
