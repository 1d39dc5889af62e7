"""engram: experience replay through shared memory, from Python.

A thin layer over libengram's C ABI (engram/engram.h; man 3 engram_*):

    import numpy as np, engram
    columns = [("obs", np.float32, (4,)), ("action", np.int32, ())]
    with engram.connect("/run/engram/engram.sock") as client:
        client.create_table("replay", columns, max_size=10_000)
        with client.table("replay") as table, client.writer(columns) as writer:
            writer.append(obs=np.zeros(4, np.float32), action=1)
            writer.create_item(table, num_steps=1, priority=1.0)
            writer.flush()
            data, info = table.sample(batch_size=1)      # copies: data["obs"] is [1, 1, 4]
            with table.sample_view(batch_size=1) as batch:  # zero-copy, read-only
                obs = batch.view(0, "obs")               # keeps the batch's data pinned

Every handle is a context manager and has close(); closing a client closes
its tables, writers and batches. Errors raise EngramError (or a subclass)
with .code (ENGRAM_E_*) and the library's message. A handle and its client
may be used by one thread at a time (the C rule); the binding serializes the
calls of one client with a lock, and Ctrl-C ends a blocking call
(KeyboardInterrupt) within about 100 ms.
"""
import ctypes
import operator
import os
import threading
import weakref

import numpy as np

from . import _ffi, _interrupt
from ._ffi import lib

__all__ = ["EngramError", "Timeout", "RateLimited", "NotFound", "Exists", "Disconnected", "Interrupted", "Closed", "Limit",
           "Server", "Client", "Table", "Writer", "Batch", "connect", "min_size", "queue", "sample_to_insert_ratio",
           "version"]

# --- errors -------------------------------------------------------------------


class EngramError(Exception):
    """A failed call: .code is the ENGRAM_E_* value, .message what was wrong."""

    def __init__(self, code, message):
        self.code = code
        self.message = message
        name = lib.engram_strerror(code).decode()
        super().__init__(f"{message} ({name})" if message else name)


class Timeout(EngramError, TimeoutError):
    pass


class RateLimited(EngramError):
    pass


class NotFound(EngramError, LookupError):
    pass


class Exists(EngramError):
    pass


class Disconnected(EngramError, ConnectionError):
    pass


class Interrupted(EngramError):
    """Client.interrupt() from another thread ended the wait."""


class Closed(EngramError):
    pass


class Limit(EngramError):
    """A limit the server sets per client or per user (connections, reserved
    blocks); the message names its setting."""


_BY_CODE = {_ffi.E_TIMEOUT: Timeout, _ffi.E_RATE_LIMITED: RateLimited, _ffi.E_NOT_FOUND: NotFound,
            _ffi.E_EXISTS: Exists, _ffi.E_DISCONNECTED: Disconnected, _ffi.E_INTERRUPTED: Interrupted,
            _ffi.E_CLOSED: Closed, _ffi.E_LIMIT: Limit}


def _check(rc):
    if rc != _ffi.OK:
        if rc == _ffi.E_INTERRUPTED and _interrupt.sigint_seen():
            raise KeyboardInterrupt
        raise _BY_CODE.get(rc, EngramError)(rc, lib.engram_last_error().decode(errors="replace"))
    return rc


# ctypes stores an int into a C integer by keeping its low bits: -1 becomes
# 4294967295 and 2**32 becomes 0, and the library would then refuse (or
# worse, accept) a number the caller never passed. Every integer a caller
# gives passes through here on its way to C.
_U32, _I32, _U64, _I64 = (0, 2**32 - 1), (-2**31, 2**31 - 1), (0, 2**64 - 1), (-2**63, 2**63 - 1)


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


def version():
    """The loaded libengram's version, "MAJOR.MINOR.PATCH"."""
    return lib.engram_version_string().decode()


# --- columns ----------------------------------------------------------------------

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


# --- rate limiters ------------------------------------------------------------------


def _limiter(fn, *args):
    r = _ffi.RateLimiter()
    _check(fn(ctypes.byref(r), *args))
    return r


def _limiter_arg(r):
    if not isinstance(r, _ffi.RateLimiter):
        raise TypeError(f"rate_limiter must come from engram.min_size, engram.queue or engram.sample_to_insert_ratio, "
                        f"got {r!r}")
    return r


def min_size(n):
    """Sampling may start once the table holds n items; inserts never wait."""
    return _limiter(lib.engram_rate_limiter_min_size, _int("min_size", n, _I64))


def sample_to_insert_ratio(samples_per_insert, min_size, error_buffer):
    """Reverb's SampleToInsertRatio."""
    return _limiter(lib.engram_rate_limiter_sample_to_insert_ratio, _real("samples_per_insert", samples_per_insert),
                    _int("min_size", min_size, _I64), _real("error_buffer", error_buffer))


def queue(size):
    """A queue of at most `size` items (pair with sampler="fifo", max_times_sampled=1)."""
    return _limiter(lib.engram_rate_limiter_queue, _int("size", size, _I64))


# --- handles ---------------------------------------------------------------------------


class _Core:
    """One client's pointer, its lock, and closes that finalizers left.

    Finalizers (__del__) may run in any thread while another uses the
    client; they never wait for the lock: if it is taken, the close is
    queued and done by the next call that takes it."""

    def __init__(self, ptr):
        self.ptr = ptr
        self.lock = threading.RLock()
        self.deferred = []
        self.closing = False   # close() asked while Batch objects lived
        self.batches = 0       # live Batch objects: their views read the arena's mapping

    def __enter__(self):
        self.lock.acquire()
        if self.deferred:
            self._run_deferred()
        return self

    def __exit__(self, *exc):
        self.lock.release()
        return False

    def _run_deferred(self):
        while self.deferred:
            self.deferred.pop()()

    def soon(self, fn):
        if self.lock.acquire(blocking=False):
            try:
                fn()
                self._run_deferred()
            finally:
                self.lock.release()
        else:
            self.deferred.append(fn)


class _Handle:
    _kind = "handle"

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __del__(self):
        try:
            self._finalize()
        except Exception:
            pass

    def _ptr(self):
        if self._p is None:
            raise _closed(self._kind)
        return self._p


class Server(_Handle):
    """An engram server inside this process (engram_server_start); other
    processes attach to it as to engramd."""
    _kind = "server"

    def __init__(self, socket=None, config_path=None, config_toml=None, quiet=True):
        o = _ffi.ServerOptions()
        _ffi.server_lib().engram_server_options_init(ctypes.byref(o))
        self._keep = [_text(what, s) if s else None
                      for what, s in (("socket", socket), ("config_path", config_path), ("config_toml", config_toml))]
        o.socket_path, o.config_path, o.config_toml = self._keep
        o.quiet = 1 if quiet else 0
        p = _ffi.Server()
        _check(_ffi.server_lib().engram_server_start(ctypes.byref(o), ctypes.byref(p)))
        self._p = p

    def close(self):
        """Stops the server: its clients get Disconnected."""
        if self._p is not None:
            p, self._p = self._p, None
            _check(_ffi.server_lib().engram_server_stop(p))

    def _finalize(self):
        if self._p is not None:
            p, self._p = self._p, None
            _ffi.server_lib().engram_server_stop(p)


def connect(socket=None, timeout_ms=10000):
    """Connects to a server: `socket` or $ENGRAM_SOCKET or /run/engram/engram.sock."""
    return Client(socket, timeout_ms)


class Client(_Handle):
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

    def create_table(self, name, columns, max_size, sampler="uniform", remover="fifo", priority_exponent=1.0,
                     max_times_sampled=0, max_chunks_per_item=8, rate_limiter=None, compression=None):
        """Creates a table. columns: [(name, dtype, shape), ...]; sampler and
        remover: "uniform", "prioritized", "fifo", "lifo", "max_heap",
        "min_heap"; rate_limiter: min_size(n) (default n=1), queue(size) or
        sample_to_insert_ratio(...); compression: {column index or name:
        "zstd" or ("delta_zstd", level)}."""
        cols = _Columns(columns)
        o = _ffi.TableOptions()
        lib.engram_table_options_init(ctypes.byref(o))
        b = _text("a table name", name)
        o.name = b
        o.max_size = _int("max_size", max_size, _U64)
        try:
            o.sampler, o.remover = _SELECTORS[sampler], _SELECTORS[remover]
        except KeyError as e:
            raise ValueError(f"selector {e.args[0]!r}: one of {', '.join(_SELECTORS)}") from None
        o.priority_exponent = _real("priority_exponent", priority_exponent)
        o.max_times_sampled = _int("max_times_sampled", max_times_sampled, _U32)
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
        with self._core:
            _check(lib.engram_table_drop(self._ptr(), _text("a table name", name)))

    def reset_table(self, name):
        with self._core:
            _check(lib.engram_table_reset(self._ptr(), _text("a table name", name)))

    def set_rate_limiter(self, name, rate_limiter):
        with self._core:
            _check(lib.engram_table_set_rate_limiter(self._ptr(), _text("a table name", name),
                                                     ctypes.byref(_limiter_arg(rate_limiter))))

    def table_info(self, name):
        """The table's size, counters and settings, as a dict."""
        i = _ffi.TableInfo()
        lib.engram_table_info_init(ctypes.byref(i))
        with self._core:
            _check(lib.engram_table_info_get(self._ptr(), _text("a table name", name), ctypes.byref(i)))
        out = {f: getattr(i, f) for f, _ in _ffi.TableInfo._fields_ if f not in ("struct_size", "rate_limiter")}
        out["name"] = i.name.decode()
        out["rate_limiter"] = {f: getattr(i.rate_limiter, f) for f, _ in _ffi.RateLimiter._fields_}
        return out

    def checkpoint(self, timeout_ms=-1):
        """Writes a checkpoint of every table now; returns its path."""
        buf = ctypes.create_string_buffer(4096)
        with self._core:
            _check(lib.engram_checkpoint(self._ptr(), _int("timeout_ms", timeout_ms, _I32), buf, len(buf)))
        return buf.value.decode()


def _disconnect(core):
    if core.ptr is not None:
        p, core.ptr = core.ptr, None
        lib.engram_disconnect(p)


class _Child(_Handle):
    _next = 0

    def _adopt(self, client, p):
        self._client = client  # keeps the client alive while this lives
        self._core = client._core
        self._p = p
        _Child._next += 1
        self._order = _Child._next
        client._children.add(self)


class Table(_Child):
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
        self._begun = None  # (batch_size, num_steps) of the sample begun

    def close(self):
        if self._p is None:
            return
        with self._core:
            for b in list(self._batches):
                b.close()
            p, self._p = self._p, None
            lib.engram_table_close(p)

    def _finalize(self):
        if self._p is not None and self._core.ptr is not None:
            p, self._p = self._p, None
            self._core.soon(lambda: lib.engram_table_close(p) if self._core.ptr is not None else None)

    def _options(self, batch_size, num_steps, timeout_ms):
        o = _ffi.SampleOptions()
        lib.engram_sample_options_init(ctypes.byref(o))
        o.batch_size = _int("batch_size", batch_size, _U32)
        o.num_steps = _int("num_steps", num_steps, _U32)
        o.timeout_ms = _int("timeout_ms", timeout_ms, _I32)
        return o

    def _blocking(self, fn, *args):
        with _interrupt.waiting(self._core):
            return fn(*args)

    def sample(self, batch_size, num_steps=1, timeout_ms=-1):
        """Samples a batch and copies it out: returns (data, info). data maps
        each column name to an array [n, num_steps, *shape]; info is a
        structured array of n (key, priority, probability, times_sampled,
        table_size). n < batch_size only when max_times_sampled emptied the
        table."""
        o = self._options(batch_size, num_steps, timeout_ms)
        return self._copy_out(batch_size, num_steps,
                              lambda bufs, infos, n: lib.engram_sample(self._ptr(), ctypes.byref(o), bufs, infos, n))

    def sample_begin(self, batch_size, num_steps=1, timeout_ms=-1):
        """Sends a sample request and returns without waiting: the server
        draws the batch while the caller goes on, and sample_end() copies it
        out. The batch sees every earlier call on this table and none later.
        One at a time per table handle; the timeout counts from this call."""
        o = self._options(batch_size, num_steps, timeout_ms)
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

    def sample_view(self, batch_size, num_steps=1, timeout_ms=-1):
        """Samples a batch without copying (columns must not be compressed):
        a Batch whose views are read-only arrays into shared memory, valid
        while the batch lives (each view keeps it alive)."""
        o = self._options(batch_size, num_steps, timeout_ms)
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
        k = self._keys(keys)
        res = np.zeros(k.size, np.int32)
        with self._core:
            _check(self._blocking(lib.engram_delete_items, self._ptr(),
                                  k.ctypes.data_as(ctypes.POINTER(ctypes.c_uint64)), k.size,
                                  res.ctypes.data_as(ctypes.POINTER(ctypes.c_int32))))
        return res


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
                    self._ptr(), self._ptrs, n, table._ptr(), num_steps,
                    None if pr is None else pr.ctypes.data_as(ctypes.POINTER(ctypes.c_double))))
        del keep

    def create_item(self, table, num_steps, priority):
        """An item over the last num_steps steps, in `table`."""
        num_steps, priority = _int("num_steps", num_steps, _U32), _real("priority", priority)
        with self._core:
            with _interrupt.waiting(self._core):
                _check(lib.engram_writer_create_item(self._ptr(), table._ptr(), num_steps, priority))

    def end_episode(self):
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
