"""engram.connect and engram.Client: a connection, its tables and writers."""
import ctypes
import weakref

import numpy as np

from . import _ffi
from ._ffi import lib
from ._checks import _I32, _U32, _U64, _int, _real, _text
from ._columns import _Columns, _SELECTORS, _compression
from ._handles import _Core, _Handle, _disconnect
from .batch import Batch
from .errors import Disconnected, Interrupted, _check
from .rate_limiters import _limiter_arg, min_size, queue, sample_to_insert_ratio
from .table import Table
from .writer import Writer


def connect(socket=None, timeout_ms=10000):
    """Connects to a server: `socket` or $ENGRAM_SOCKET or /run/engram/engram.sock."""
    return Client(socket, timeout_ms)



def _selector(what, name):
    try:
        return _SELECTORS[name]
    except (KeyError, TypeError):
        raise ValueError(f"{what} {name!r}: one of {', '.join(_SELECTORS)}") from None

class Client(_Handle):
    """A connection to an engram server (engram.connect makes one;
    engram_connect(3)): tables, writers and listings are made from it.
    Closing it (close(), or leaving a with block) closes every table,
    writer and batch made from it. One thread at a time may use a client
    and its handles; use one client per thread."""
    _kind = "client"

    def __init__(self, socket=None, timeout_ms=10000):
        self._socket, self._timeout_ms = socket, timeout_ms
        self._connect()

    def _connect(self):
        socket, timeout_ms = self._socket, self._timeout_ms
        o = _ffi.ConnectOptions()
        lib.engram_connect_options_init(ctypes.byref(o))
        path = _text("socket", socket) if socket else None
        o.socket_path = path
        o.timeout_ms = _int("timeout_ms", timeout_ms, _I32)
        p = _ffi.Client()
        _check(lib.engram_connect(ctypes.byref(o), ctypes.byref(p)))
        self._p = p
        self._core = _Core(p)
        self._children = weakref.WeakSet()

    # Closing: children first (as engram_disconnect would), through their own
    # close so that their Python objects know. Zero-copy batches keep the
    # arena mapped: while one lives, the disconnect waits for the last.
    def close(self):
        """Closes the connection and every table, writer and batch made
        from it (engram_disconnect(3)); a second close does nothing."""
        if self._p is None:
            return
        with self._core:
            # As engram_disconnect: batches, writers (they send what is
            # pending into tables), then tables.
            rank = {Batch: 0, Writer: 1, Table: 2}
            for child in sorted(self._children, key=lambda h: (rank[type(h)], h._order)):
                child.close()
            self._core.closing = True
            self._p = None
            if self._core.batches == 0:
                _disconnect(self._core)

    def _finalize(self):
        if self._p is not None:
            core = self._core
            self._p = None
            core.closing = True
            if core.batches == 0:
                core.soon(lambda: _disconnect(core))

    def reconnect(self):
        """After Disconnected (the server restarted): closes this client's
        handles and connects again to the same socket. Tables, writers and
        batches of before are closed; open them again."""
        self.close()
        self._connect()
        return self

    def interrupt(self):
        """Ends this client's blocking call in another thread (Interrupted).
        Thread-safe; see engram_client_interrupt(3)."""
        if self._p is not None:
            lib.engram_client_interrupt(self._p)

    def create_table(self, name, columns, max_size, sampler=None, remover=None, priority_exponent=None,
                     max_times_sampled=None, max_chunks_per_item=None, rate_limiter=None, compression=None):
        """Creates a table. columns: [(name, dtype, shape), ...]; sampler and
        remover: "uniform", "prioritized", "fifo", "lifo", "max_heap",
        "min_heap"; rate_limiter: min_size(n) (default n=1), queue(size) or
        sample_to_insert_ratio(...); compression: {column index or name:
        "zstd" or ("delta_zstd", level)}. An option left None is
        engram_table_options_init(3)'s default (a uniform sampler, a FIFO
        remover, exponent 1, no limit on times sampled, 8 chunks per item)."""
        cols = _Columns(columns)
        o = _ffi.TableOptions()
        lib.engram_table_options_init(ctypes.byref(o))
        b = _text("a table name", name)
        o.name = b
        o.max_size = _int("max_size", max_size, _U64)
        if sampler is not None:
            o.sampler = _selector("sampler", sampler)
        if remover is not None:
            o.remover = _selector("remover", remover)
        if priority_exponent is not None:
            o.priority_exponent = _real("priority_exponent", priority_exponent)
        if max_times_sampled is not None:
            o.max_times_sampled = _int("max_times_sampled", max_times_sampled, _U32)
        if max_chunks_per_item is not None:
            o.max_chunks_per_item = _int("max_chunks_per_item", max_chunks_per_item, _U32)
        if rate_limiter is not None:
            o.rate_limiter = _limiter_arg(rate_limiter)
        o.columns = cols.c
        o.num_columns = len(cols)
        comp = _compression(compression, cols.names)
        if comp is not None:
            o.compression = comp
        with self._core:
            _check(lib.engram_table_create(self._ptr(), ctypes.byref(o)))

    def table(self, name):
        """Opens a table for writing items and sampling."""
        with self._core:
            p = _ffi.Table()
            _check(lib.engram_table_open(self._ptr(), _text("a table name", name), ctypes.byref(p)))
            return Table(self, p, name)

    def writer(self, columns, chunk_length=1, max_item_steps=0, insert_timeout_ms=-1, keep_keys=False,
               compression=None):
        """A writer of steps with these columns ([(name, dtype, shape), ...],
        the tables' signature)."""
        return Writer(self, columns, chunk_length, max_item_steps, insert_timeout_ms, keep_keys, compression)

    def drop_table(self, name):
        """Deletes table `name` and its items; open handles to it then
        raise engram.Closed (engram_table_drop(3))."""
        with self._core:
            _check(lib.engram_table_drop(self._ptr(), _text("a table name", name)))

    def reset_table(self, name):
        """Removes every item of table `name` and zeroes its counters; the
        table stays (engram_table_reset(3))."""
        with self._core:
            _check(lib.engram_table_reset(self._ptr(), _text("a table name", name)))

    def set_rate_limiter(self, name, rate_limiter):
        """Changes table `name`'s rate limiter at run time (a
        rate_limiters.min_size, queue or sample_to_insert_ratio); the
        counters are kept (engram_table_set_rate_limiter(3))."""
        with self._core:
            _check(lib.engram_table_set_rate_limiter(self._ptr(), _text("a table name", name),
                                                     ctypes.byref(_limiter_arg(rate_limiter))))

    def table_info(self, name):
        """The table's size, counters and settings, as a dict; its sampler
        and remover by name ("prioritized"), as create_table takes them."""
        i = _ffi.TableInfo()
        lib.engram_table_info_init(ctypes.byref(i))
        with self._core:
            _check(lib.engram_table_info_get(self._ptr(), _text("a table name", name), ctypes.byref(i)))
        out = {f: getattr(i, f) for f, _ in _ffi.TableInfo._fields_ if f not in ("struct_size", "rate_limiter")}
        out["name"] = i.name.decode()
        # By name, as create_table takes them (an unknown code stays a number).
        names = {code: name for name, code in _SELECTORS.items()}
        out["sampler"], out["remover"] = names.get(out["sampler"], out["sampler"]), names.get(out["remover"], out["remover"])
        out["rate_limiter"] = {f: getattr(i.rate_limiter, f) for f, _ in _ffi.RateLimiter._fields_}
        return out

    def items(self, name, by="insertion"):
        """Every item of the table, as a numpy structured array of (key,
        priority, inserted, times_sampled, num_steps): oldest first, or with
        by="priority" highest first (equal priorities oldest first).
        Writers and samplers go on meanwhile; every item held throughout is
        listed once, none twice (engram_items_open(3))."""
        orders = {"insertion": _ffi.BY_INSERTION, "priority": _ffi.BY_PRIORITY}
        if by not in orders:
            raise ValueError(f"by must be 'insertion' or 'priority', not {by!r}")
        it = _ffi.Items()
        with self._core:
            _check(lib.engram_items_open(self._ptr(), _text("a table name", name), orders[by], ctypes.byref(it)))
        try:
            n = lib.engram_items_count(it)
            out = (_ffi.Item * max(n, 1))()
            got = ctypes.c_uint32()
            _check(lib.engram_items_next(it, out, n, ctypes.byref(got)))
            return np.ctypeslib.as_array(out)[: got.value].copy()
        finally:
            lib.engram_items_close(it)

    def checkpoint(self, timeout_ms=-1):
        """Writes a checkpoint of every table now; returns its path."""
        buf = ctypes.create_string_buffer(4096)
        with self._core:
            _check(lib.engram_checkpoint(self._ptr(), _int("timeout_ms", timeout_ms, _I32), buf, len(buf)))
        return buf.value.decode()
