"""engram.Batch: a zero-copy sample, pinned until closed."""
import ctypes

import numpy as np

from . import _ffi
from ._ffi import lib
from ._checks import _column_index, _index
from ._handles import _Child, _disconnect
from .errors import _check


class Batch(_Child):
    """A zero-copy sample. Views are read-only numpy arrays over shared
    memory that keep this batch (and its pins) alive."""
    _kind = "batch"

    def __init__(self, table, p):
        self._adopt(table._client, p)
        self._table = table
        self._columns = table.columns
        self._names = [name for name, _, _ in self._columns]
        self._core.batches += 1
        table._batches.add(self)
        self.size = lib.engram_batch_size(p)

    def __len__(self):
        return self.size

    def info(self, item):
        """A dict of key, priority, probability, times_sampled and
        table_size of item `item` of the batch (engram_batch_info(3))."""
        item = _index("item", item, self.size)
        i = _ffi.SampleInfo()
        with self._core:
            _check(lib.engram_batch_info(self._ptr(), item, ctypes.byref(i)))
        return {f: getattr(i, f) for f, _ in _ffi.SampleInfo._fields_}

    def views(self, item, column):
        """The pieces of an item's column (one per chunk it spans), each a
        read-only array [steps, *shape] over shared memory."""
        item = _index("item", item, self.size)
        c = _column_index("views", column, self._names)
        _, dtype, shape = self._columns[c]
        out = (_ffi.View * 8)()
        n = ctypes.c_uint32()
        with self._core:
            _check(lib.engram_batch_views(self._ptr(), item, c, out, 8, ctypes.byref(n)))
        return [np.asarray(_Pinned(out[k].data, (out[k].steps,) + shape, dtype, self)) for k in range(n.value)]

    def view(self, item, column):
        """The item's column as one read-only array [steps, *shape], if it
        lies in one chunk (else use views())."""
        v = self.views(item, column)
        if len(v) != 1:
            raise ValueError(f"item {item} spans {len(v)} chunks; use views()")
        return v[0]

    def close(self):
        """Unpins the data: views still held then read memory that other
        items may reuse (never unmapped memory: the client's connection
        stays until the last Batch object is gone)."""
        if self._p is None:
            return
        with self._core:
            p, self._p = self._p, None
            if self._core.ptr is not None:
                lib.engram_batch_release(p)

    def _finalize(self):
        core = self._core
        p, self._p = self._p, None
        core.batches -= 1
        last = core.closing and core.batches == 0

        def release():
            if p is not None and core.ptr is not None:
                lib.engram_batch_release(p)
            if last:
                _disconnect(core)
        core.soon(release)


class _Pinned:
    """The array interface of one view: numpy keeps this object, and with it
    the batch, as the array's base."""

    def __init__(self, address, shape, dtype, batch):
        self.__array_interface__ = {"version": 3, "shape": shape, "typestr": np.dtype(dtype).str,
                                    "data": (address, True)}  # True: read-only
        self._batch = batch
