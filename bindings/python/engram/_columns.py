"""Columns: numpy dtypes to engram's, the C column array of a signature,
compression per column, and conversions that would change values refused."""

import numpy as np

from . import _ffi
from ._checks import _I32, _U32, _column_index, _int, _text


_DTYPES = [np.uint8, np.int8, np.uint16, np.int16, np.uint32, np.int32, np.uint64, np.int64, np.float16, np.float32,
           np.float64, np.bool_]


_CODE_OF = {np.dtype(t): i + 1 for i, t in enumerate(_DTYPES)}


_SELECTORS = {"uniform": 1, "prioritized": 2, "fifo": 3, "lifo": 4, "max_heap": 5, "min_heap": 6}


_CODECS = {"none": 0, "zstd": 1, "delta_zstd": 2}


def _converted(what, v, dt):
    """v as an array of dt, refusing the conversions numpy would make
    silently but a caller seldom means: floats into an integer or bool column
    (0.7 would be stored as 0) and integers outside its range (300 into
    uint8 would be stored as 44). `what` names v in the messages."""
    try:
        a = np.asarray(v)  # not ascontiguousarray: it makes scalars 1-d
    except (TypeError, ValueError) as e:
        raise ValueError(f"{what}: {e}") from None
    if a.dtype == dt or a.size == 0:  # [] is float64 to numpy
        return a.astype(dt, copy=False)
    if dt.kind in "iub" and a.dtype.kind in "fc":
        raise ValueError(f"{what}: {a.dtype} values would be truncated to fit {dt}; "
                         f"convert them first if that is meant (np.asarray(v).astype('{dt}'))")
    if dt.kind in "iu" and a.dtype.kind in "iu":
        info = np.iinfo(dt)
        lo, hi = a.min(), a.max()
        if lo < info.min or hi > info.max:
            raise ValueError(f"{what}: values {lo}..{hi} do not fit {dt} ({info.min}..{info.max})")
    if a.dtype.kind not in "biuf":
        given = f"{v!r}"[:40] if a.dtype == object else f"{a.dtype} values"
        raise ValueError(f"{what}: {given} cannot be stored as {dt}")
    return a.astype(dt)


class _Columns:
    """A signature: [(name, dtype, shape), ...] as C columns, kept alive here."""

    def __init__(self, columns):
        if not columns:
            raise ValueError("a signature needs at least one column: [(name, dtype, shape), ...]")
        self.names, self.dtypes, self.shapes = [], [], []
        self.c = (_ffi.Column * len(columns))()
        self._names = []
        for i, col in enumerate(columns):
            try:
                name, dtype, shape = col
            except (TypeError, ValueError):
                raise ValueError(f"column {i}: expected (name, dtype, shape), got {col!r}") from None
            if not isinstance(name, str):
                raise TypeError(f"column {i}: its name must be a str, got {name!r}")
            try:
                dt = np.dtype(dtype)
            except TypeError:
                raise TypeError(f"column {name!r}: {dtype!r} is not a dtype") from None
            if dt not in _CODE_OF:
                raise ValueError(f"column {name!r}: dtype {dt} is not one of engram's "
                                 f"({', '.join(str(np.dtype(t)) for t in _DTYPES)})")
            if not isinstance(shape, (tuple, list)):
                shape = (shape,)  # as numpy takes np.zeros(4)
            shape = tuple(_int(f"column {name!r}: shape[{k}]", d, _U32) for k, d in enumerate(shape))
            if len(shape) > _ffi.MAX_RANK:
                raise ValueError(f"column {name!r}: rank {len(shape)} > {_ffi.MAX_RANK}")
            b = _text("a column name", name)
            self._names.append(b)
            self.c[i].name = b
            self.c[i].dtype = _CODE_OF[dt]
            self.c[i].rank = len(shape)
            for k, d in enumerate(shape):
                self.c[i].shape[k] = d
            self.names.append(name)
            self.dtypes.append(dt)
            self.shapes.append(shape)

    def __len__(self):
        return len(self.names)


def _compression(compression, names):
    """None, or {column (index or name): codec or (codec, level)} as a C
    array, one entry per column of `names`."""
    if not compression:
        return None
    arr = (_ffi.Compression * len(names))()
    for column, spec in compression.items():
        i = _column_index("compression", column, names)
        codec, level = (spec, 0) if isinstance(spec, str) else spec
        if codec not in _CODECS:
            raise ValueError(f"compression of column {names[i]!r}: codec {codec!r} is not one of {', '.join(_CODECS)}")
        arr[i].codec = _CODECS[codec]
        arr[i].level = _int(f"compression of column {names[i]!r}: level", level, _I32)
    return arr
