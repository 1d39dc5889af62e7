"""engram.Batch: a zero-copy sample, pinned until closed."""
import ctypes

import numpy as np

from . import _ffi
from ._ffi import lib
from ._checks import _closed, _column_index, _index
from ._handles import _Child, _disconnect
from .errors import _check


class Batch(_Child):
    """A zero-copy sample. Views are read-only numpy arrays over shared
    memory. As a memoryview's buffer stays while arrays export it, the
    batch's data stays pinned while any array over it lives (a slice or
    view of one included; a copy is the caller's): close(), the end of a
    with block, or the table's or client's close end the batch, and its
    pins go when the last such array goes. So an array never shows bytes
    that are not its item's."""
    _kind = "batch"
    _exports = 0     # live arrays over this batch (_Pinned objects)
    _closed = False  # ended by close(): no more views

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
        """Ends the batch: no more views of it. Its data is unpinned now,
        or, while arrays over it live, when the last of them goes."""
        self._closed = True
        if self._exports == 0:
            with self._core:
                self._release()

    def _ptr(self):
        if self._closed:
            raise _closed(self._kind)
        return super()._ptr()

    def _release(self):
        """Unpins the data (the client's lock held), once; and closes the
        table handle if its close waited for this batch."""
        p, self._p = self._p, None
        if p is None:
            return
        if self._core.ptr is not None:
            lib.engram_batch_release(p)
        self._table._batch_released()

    def _export_gone(self):
        self._exports -= 1
        if self._exports == 0 and self._closed:
            self._core.soon(self._release)  # a finalizer's: never waits for the lock

    def _finalize(self):
        core = self._core
        core.batches -= 1
        last = core.closing and core.batches == 0

        def release():
            self._release()
            if last:
                _disconnect(core)
        core.soon(release)


class _Pinned:
    """The array interface of one view: numpy keeps this object, and with it
    the batch, as the array's base (and the base of every array made from
    it without a copy), and the batch counts it as an export."""

    def __init__(self, address, shape, dtype, batch):
        self.__array_interface__ = {"version": 3, "shape": shape, "typestr": np.dtype(dtype).str,
                                    "data": (address, True)}  # True: read-only
        self._batch = batch
        batch._exports += 1

    def __del__(self):
        self._batch._export_gone()
