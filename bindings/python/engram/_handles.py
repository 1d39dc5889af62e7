"""What every handle shares: a client's pointer and lock (_Core), context
management and finalizers (_Handle), and a client's children (_Child)."""
import threading

from ._ffi import lib
from ._checks import _closed


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
