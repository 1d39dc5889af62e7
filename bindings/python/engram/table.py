"""engram.Table: sampling, priority updates and deletes."""
import ctypes
import os
import weakref

import numpy as np

from . import _ffi, _interrupt
from ._ffi import lib
from ._checks import _I32, _POS32, _U64, _int
from ._columns import _DTYPES, _converted
from ._handles import _Child
from .batch import Batch
from .errors import _check



def _as_table(table):
    """`table` if it is a Table, else TypeError saying what a table
    argument must be (a name was an AttributeError from deep inside)."""
    if not isinstance(table, Table):
        got = f"the str {table!r}" if isinstance(table, str) else type(table).__name__
        raise TypeError(f"table must be an engram.Table (client.table(name) opens one), not {got}")
    return table

class Table(_Child):
    """An open table of a client (Client.table(name) opens one;
    engram_table_open(3)): sampling, priority updates, deletes, export and
    import. .columns lists its (name, dtype, shape). Valid until closed,
    its client closes, or the table is dropped (calls then raise
    engram.Closed)."""
    _kind = "table"

    def __init__(self, client, p, name):
        self._adopt(client, p)
        self.name = name
        n = ctypes.c_uint32()
        cols = (_ffi.Column * 32)()
        _check(lib.engram_table_columns(p, cols, 32, ctypes.byref(n)))
        self.columns = [(cols[i].name.decode(), _DTYPES[cols[i].dtype - 1],
                         tuple(cols[i].shape[k] for k in range(cols[i].rank))) for i in range(n.value)]
        self._batches = weakref.WeakSet()
        self._closing = None  # the C handle, while close() waits for its batches' arrays
        self._begun = None  # (batch_size, num_steps) of the sample begun

    def close(self):
        """Closes the handle (not the table) and its batches
        (engram_table_close(3)); a second close does nothing. While
        arrays over a batch of it live, the handle stays open for them,
        and closes when the last goes (Batch)."""
        if self._p is None:
            return
        with self._core:
            for b in list(self._batches):
                b.close()
            self._closing, self._p = self._p, None
            self._batch_released()

    def _batch_released(self):
        """Closes the handle whose close waited for its batches' arrays,
        once the last batch holding data is released (the lock held)."""
        if self._closing is None or any(b._p is not None for b in self._batches):
            return
        p, self._closing = self._closing, None
        if self._core.ptr is not None:
            lib.engram_table_close(p)

    def _finalize(self):
        if self._p is not None and self._core.ptr is not None:
            p, self._p = self._p, None
            self._core.soon(lambda: lib.engram_table_close(p) if self._core.ptr is not None else None)

    def _options(self, batch_size, num_steps, timeout_ms, no_repeats):
        o = _ffi.SampleOptions()
        lib.engram_sample_options_init(ctypes.byref(o))
        o.batch_size = _int("batch_size", batch_size, _POS32)
        o.num_steps = _int("num_steps", num_steps, _POS32)
        o.timeout_ms = _int("timeout_ms", timeout_ms, _I32)
        if not isinstance(no_repeats, (bool, np.bool_)):
            raise TypeError(f"no_repeats must be True or False, not {no_repeats!r}")
        o.flags = _ffi.SAMPLE_NO_REPEATS if no_repeats else 0
        return o

    def _blocking(self, fn, *args):
        with _interrupt.waiting(self._core):
            return fn(*args)

    def _sample_into(self, o, bufs, infos):
        """engram_sample with options `o` (from _options) into the caller's
        buffers, one per column, and SampleInfos: returns how many items
        were drawn. What engram.torch fills its tensors with."""
        n = ctypes.c_uint32()
        with self._core:
            _check(self._blocking(lib.engram_sample, self._ptr(), ctypes.byref(o), bufs, infos, ctypes.byref(n)))
        return n.value

    def sample(self, batch_size, num_steps=1, timeout_ms=-1, no_repeats=False):
        """Samples a batch and copies it out: returns (data, info). data maps
        each column name to an array [n, num_steps, *shape]; info is a
        structured array of n (key, priority, probability, times_sampled,
        table_size). n < batch_size only when max_times_sampled emptied the
        table. no_repeats=True: no item twice in the batch, with the
        probabilities engram(7) describes ("Batches without repeats"); an
        EngramError with code ENGRAM_E_RANGE when the table holds fewer than
        batch_size items."""
        o = self._options(batch_size, num_steps, timeout_ms, no_repeats)
        return self._copy_out(batch_size, num_steps,
                              lambda bufs, infos, n: lib.engram_sample(self._ptr(), ctypes.byref(o), bufs, infos, n))

    def sample_begin(self, batch_size, num_steps=1, timeout_ms=-1, no_repeats=False):
        """Sends a sample request and returns without waiting: the server
        draws the batch while the caller goes on, and sample_end() copies it
        out. The batch sees every earlier call on this table and none later.
        One at a time per table handle; the timeout counts from this call."""
        o = self._options(batch_size, num_steps, timeout_ms, no_repeats)
        with self._core:
            _check(lib.engram_sample_begin(self._ptr(), ctypes.byref(o)))
        self._begun = (batch_size, num_steps)

    def sample_end(self):
        """Waits for the sample begun by sample_begin() and copies it out:
        returns (data, info), as sample() does."""
        if self._begun is None:
            raise ValueError(f"no sample was begun on table {self.name}: call sample_begin first")
        (batch_size, num_steps), self._begun = self._begun, None
        return self._copy_out(batch_size, num_steps,
                              lambda bufs, infos, n: lib.engram_sample_end(self._ptr(), bufs, infos, n))

    def _copy_out(self, batch_size, num_steps, call):
        data = {name: np.empty((batch_size, num_steps) + shape, dtype) for name, dtype, shape in self.columns}
        bufs = (ctypes.c_void_p * len(self.columns))(*[a.ctypes.data for a in data.values()])
        infos = (_ffi.SampleInfo * batch_size)()
        n = ctypes.c_uint32()
        with self._core:
            _check(self._blocking(call, bufs, infos, ctypes.byref(n)))
        info = np.ctypeslib.as_array(infos)[: n.value].copy()
        return {k: v[: n.value] for k, v in data.items()}, info

    def sample_view(self, batch_size, num_steps=1, timeout_ms=-1, no_repeats=False):
        """Samples a batch without copying (columns must not be compressed):
        a Batch whose views are read-only arrays into shared memory. The
        batch's data stays pinned while any of them lives, also past the
        batch's close (Batch says how)."""
        o = self._options(batch_size, num_steps, timeout_ms, no_repeats)
        p = _ffi.Batch()
        with self._core:
            _check(self._blocking(lib.engram_sample_view, self._ptr(), ctypes.byref(o), ctypes.byref(p)))
            return Batch(self, p)

    def _keys(self, keys):
        if isinstance(keys, np.ndarray):
            return np.ascontiguousarray(_converted("keys", keys, np.dtype(np.uint64)))
        # One by one: numpy makes [a uint64 key, a Python int] a float64 array.
        return np.fromiter((_int("key", k, _U64) for k in keys), dtype=np.uint64)

    def update_priorities(self, keys, priorities):
        """Sets priorities by key; returns per-key codes (0, or
        ENGRAM_E_STALE_KEY / ENGRAM_E_UNKNOWN_KEY for items that are gone)."""
        k = self._keys(keys)
        pr = np.ascontiguousarray(priorities, dtype=np.float64)
        if pr.shape != k.shape:
            raise ValueError(f"{k.size} keys but {pr.size} priorities")
        res = np.zeros(k.size, np.int32)
        with self._core:
            _check(self._blocking(lib.engram_update_priorities, self._ptr(),
                                  k.ctypes.data_as(ctypes.POINTER(ctypes.c_uint64)),
                                  pr.ctypes.data_as(ctypes.POINTER(ctypes.c_double)), k.size,
                                  res.ctypes.data_as(ctypes.POINTER(ctypes.c_int32))))
        return res

    def update_priorities_async(self, keys, priorities):
        """Sends priorities by key without waiting for the server's answer
        (keys of items that are gone are skipped). Later calls on this table
        see them applied; a refusal raises from the next priority call.
        update_priorities([], []) waits until every one is applied."""
        k = self._keys(keys)
        pr = np.ascontiguousarray(priorities, dtype=np.float64)
        if pr.shape != k.shape:
            raise ValueError(f"{k.size} keys but {pr.size} priorities")
        with self._core:
            _check(self._blocking(lib.engram_update_priorities_async, self._ptr(),
                                  k.ctypes.data_as(ctypes.POINTER(ctypes.c_uint64)),
                                  pr.ctypes.data_as(ctypes.POINTER(ctypes.c_double)), k.size))

    def delete_items(self, keys):
        """Deletes items by key and waits until the server removed them;
        returns a numpy int32 array, per key 0 or why it was not deleted:
        engram._ffi.E_STALE_KEY (gone already) or E_UNKNOWN_KEY (never a
        key of this table) (engram_delete_items(3))."""
        k = self._keys(keys)
        res = np.zeros(k.size, np.int32)
        with self._core:
            _check(self._blocking(lib.engram_delete_items, self._ptr(),
                                  k.ctypes.data_as(ctypes.POINTER(ctypes.c_uint64)), k.size,
                                  res.ctypes.data_as(ctypes.POINTER(ctypes.c_int32))))
        return res

    def _transfer(self, fn, path, progress, insert_timeout_ms=-1):
        o = _ffi.TransferOptions()
        lib.engram_transfer_options_init(ctypes.byref(o))
        o.insert_timeout_ms = _int("insert_timeout_ms", insert_timeout_ms, _I32)
        raised = []
        if progress is not None:
            if not callable(progress):
                raise TypeError(f"progress must be callable(done, total) or None, not {progress!r}")

            def report(_ctx, done, total):
                try:
                    return 1 if progress(done, total) else 0
                except BaseException as e:  # stops the transfer; raised again below
                    raised.append(e)
                    return 1
            o.progress = _ffi.PROGRESS(report)
        n = ctypes.c_uint64()
        with self._core:
            rc = self._blocking(fn, self._ptr(), os.fsencode(path), ctypes.byref(o), ctypes.byref(n))
        if raised:
            raise raised[0]
        _check(rc)
        return n.value

    def export(self, path, progress=None):
        """Writes every item the table holds now to path, a NumPy .npz file
        that numpy alone reads (np.load; layout in engram-export(5)): the
        steps of each column as one array "steps/NAME" [steps, ...shape],
        and per item, in insertion order, "items/offset" and
        "items/length" (its rows of the steps), "items/priority",
        "items/key", "items/times_sampled", "items/inserted". Writers and
        samplers go on meanwhile; a failed export leaves no file.
        progress(done_bytes, total_bytes), if given, is called about once
        a second; a true return stops the export. Returns the items
        written (engram_table_export(3))."""
        return self._transfer(lib.engram_table_export, path, progress)

    def import_from(self, path, insert_timeout_ms=-1, progress=None):
        """Inserts the items of an .npz file (one that export() wrote, or
        one saved with np.savez holding the same arrays) into this table
        through a writer: each keeps its steps and priority and gets a new
        key. The file is checked whole first (CRC-32s, the columns against
        the table's), so a damaged or foreign one inserts nothing.
        insert_timeout_ms bounds each item's wait for the rate limiter (-1:
        none). progress(done_items, total_items) as for export(). Returns
        the items inserted (engram_table_import(3))."""
        return self._transfer(lib.engram_table_import, path, progress, insert_timeout_ms)
