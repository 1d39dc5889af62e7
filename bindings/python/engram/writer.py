"""engram.Writer: steps and the items over them."""
import ctypes

import numpy as np

from . import _ffi, _interrupt
from ._ffi import lib
from ._checks import _I32, _U32, _int, _real
from ._columns import _Columns, _compression, _converted
from ._handles import _Child
from .errors import _check
from .table import _as_table



class Writer(_Child):
    """Appends steps and creates items over the last steps."""
    _kind = "writer"

    def __init__(self, client, columns, chunk_length, max_item_steps, insert_timeout_ms, keep_keys, compression):
        self._cols = _Columns(columns)
        o = _ffi.WriterOptions()
        lib.engram_writer_options_init(ctypes.byref(o))
        o.columns = self._cols.c
        o.num_columns = len(self._cols)
        o.chunk_length = _int("chunk_length", chunk_length, _U32)
        o.max_item_steps = _int("max_item_steps", max_item_steps, _U32)
        o.insert_timeout_ms = _int("insert_timeout_ms", insert_timeout_ms, _I32)
        o.keep_keys = 1 if keep_keys else 0
        comp = _compression(compression, self._cols.names)
        if comp is not None:
            o.compression = comp
        self._comp = comp
        p = _ffi.Writer()
        with client._core:
            _check(lib.engram_writer_open(client._ptr(), ctypes.byref(o), ctypes.byref(p)))
        self._adopt(client, p)
        self._ptrs = (ctypes.c_void_p * len(self._cols))()

    def _arrays(self, values, kwargs, steps):
        if kwargs:
            if values:
                raise TypeError("give the columns either positionally or by name, not both")
            missing = [n for n in self._cols.names if n not in kwargs]
            extra = [n for n in kwargs if n not in self._cols.names]
            if missing or extra:
                raise ValueError(f"columns missing: {missing}, unknown: {extra}; the writer's are {self._cols.names}")
            values = [kwargs[n] for n in self._cols.names]
        if len(values) != len(self._cols):
            raise ValueError(f"{len(values)} columns given; the writer has {len(self._cols)}: {self._cols.names}")
        keep = []
        for i, (v, name, dt, shape) in enumerate(zip(values, self._cols.names, self._cols.dtypes, self._cols.shapes)):
            want = shape if steps is None else (steps,) + shape
            if type(v) is np.ndarray and v.dtype == dt and v.shape == want and v.flags.c_contiguous:
                keep.append(v)  # the common case, checked cheaply
                self._ptrs[i] = v.ctypes.data
                continue
            a = _converted(f"column {name!r}", v, dt)
            if not a.flags.c_contiguous:
                a = a.copy(order="C")
            if a.shape != want:
                raise ValueError(f"column {name!r}: shape {a.shape}, the writer's is {want}")
            keep.append(a)
            self._ptrs[i] = a.ctypes.data
        return keep

    def _steps(self, values, columns):
        """The steps of a batch: the first column's length."""
        if not values and not columns:
            raise ValueError(f"no columns given; the writer's are {self._cols.names}")
        first = next(iter(columns.values())) if columns else values[0]
        return _int("the number of steps (the first column's length)", len(first), _U32)

    def append(self, *values, **columns):
        """Appends one step: a value per column, positionally or by name."""
        keep = self._arrays(values, columns, None)
        with self._core:
            with _interrupt.waiting(self._core):
                _check(lib.engram_writer_append(self._ptr(), self._ptrs))
        del keep

    def append_batch(self, *values, **columns):
        """Appends n steps at once: arrays [n, *shape] per column."""
        n = self._steps(values, columns)
        keep = self._arrays(values, columns, n)
        with self._core:
            with _interrupt.waiting(self._core):
                _check(lib.engram_writer_append_batch(self._ptr(), self._ptrs, n))
        del keep

    def append_items(self, table, *values, num_steps=1, priorities=None, **columns):
        """Appends n steps (arrays [n, *shape] per column, by position or
        name) and after each creates an item over the last num_steps steps in
        `table`, with priorities[k] (default 1.0): one call into libengram
        for the batch (engram_writer_append_items)."""
        n = self._steps(values, columns)
        num_steps = _int("num_steps", num_steps, _U32)
        keep = self._arrays(values, columns, n)
        pr = None
        if priorities is not None:
            pr = np.ascontiguousarray(priorities, dtype=np.float64)
            if pr.shape != (n,):
                raise ValueError(f"{pr.size} priorities for {n} steps")
        with self._core:
            with _interrupt.waiting(self._core):
                _check(lib.engram_writer_append_items(
                    self._ptr(), self._ptrs, n, _as_table(table)._ptr(), num_steps,
                    None if pr is None else pr.ctypes.data_as(ctypes.POINTER(ctypes.c_double))))
        del keep

    def create_item(self, table, num_steps, priority):
        """An item over the last num_steps steps, in `table`."""
        num_steps, priority = _int("num_steps", num_steps, _U32), _real("priority", priority)
        with self._core:
            with _interrupt.waiting(self._core):
                _check(lib.engram_writer_create_item(self._ptr(), _as_table(table)._ptr(), num_steps, priority))

    def create_item_at_max(self, table, num_steps):
        """An item over the last num_steps steps, in `table`, at the table's
        largest priority when the server applies it (1.0 in an empty table)."""
        num_steps = _int("num_steps", num_steps, _U32)
        with self._core:
            with _interrupt.waiting(self._core):
                _check(lib.engram_writer_create_item_at_max(self._ptr(), _as_table(table)._ptr(), num_steps))

    def end_episode(self):
        """Ends the episode: later items never reach back into it; the
        items over its last chunk are sent (engram_writer_end_episode(3))."""
        with self._core:
            _check(lib.engram_writer_end_episode(self._ptr()))

    def flush(self, timeout_ms=-1):
        """Waits until every item created so far is applied or refused."""
        with self._core:
            with _interrupt.waiting(self._core):
                _check(lib.engram_writer_flush(self._ptr(), _int("timeout_ms", timeout_ms, _I32)))

    def take_keys(self, cap=4096):
        """With keep_keys: the keys of applied items, in creation order."""
        keys = np.empty(_int("cap", cap, _U32), np.uint64)
        n = ctypes.c_size_t()
        with self._core:
            _check(lib.engram_writer_take_keys(self._ptr(), keys.ctypes.data_as(ctypes.POINTER(ctypes.c_uint64)), cap,
                                               ctypes.byref(n)))
        return keys[: n.value]

    def close(self):
        """Sends what is pending and waits for it (up to insert_timeout_ms, or 10 s)."""
        if self._p is None:
            return
        with self._core:
            p, self._p = self._p, None
            lib.engram_writer_close(p)

    def _finalize(self):
        if self._p is not None and self._core.ptr is not None:
            p, self._p = self._p, None
            core = self._core
            core.soon(lambda: lib.engram_writer_close(p) if core.ptr is not None else None)
