"""Ctrl-C during a blocking call.

While the main thread waits inside libengram, Python's own SIGINT handler
only sets a flag: KeyboardInterrupt would be raised once the call returns,
which a sample held by a rate limiter might never do. So, the first time a
blocking call is made from the main thread, this module registers a wakeup
file descriptor (signal.set_wakeup_fd): Python's C-level handler writes each
signal's number to it even while the main thread is inside C, and a watcher
thread that reads it calls engram_client_interrupt on the clients that are
waiting at that moment. Their calls return ENGRAM_E_INTERRUPTED within
about 100 ms, and the binding raises KeyboardInterrupt.

A wakeup descriptor registered before (asyncio's, say) keeps getting every
byte: the watcher passes them on.
"""
import os
import signal
import threading

from . import _ffi

_waiting = {}        # id(core) -> client pointer, for calls blocked right now
_installed = False
_sigint_seen = False  # since the current call began; plain flags: a call costs microseconds
_previous_fd = -1


def _watch(read_fd):
    while True:
        try:
            data = os.read(read_fd, 64)
        except InterruptedError:
            continue
        except OSError:
            return
        if not data:
            return
        if _previous_fd >= 0:
            try:
                os.write(_previous_fd, data)
            except OSError:
                pass
        if signal.SIGINT in data:
            global _sigint_seen
            _sigint_seen = True
            for client in list(_waiting.values()):
                _ffi.lib.engram_client_interrupt(client)


def _install():
    global _installed, _previous_fd
    if _installed or threading.current_thread() is not threading.main_thread():
        return
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)
    try:
        _previous_fd = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
    except ValueError:  # not the main thread of the main interpreter
        os.close(read_fd)
        os.close(write_fd)
        return
    threading.Thread(target=_watch, args=(read_fd,), name="engram-sigint", daemon=True).start()
    _installed = True


class waiting:
    """Marks a client as blocked for the duration of a call. (Single dict
    operations are atomic under the GIL; the watcher takes a copy.)"""
    __slots__ = ("key", "ptr")

    def __init__(self, core):
        self.key = id(core)
        self.ptr = core.ptr

    def __enter__(self):
        global _sigint_seen
        if not _installed:
            _install()
        _sigint_seen = False
        _waiting[self.key] = self.ptr
        return self

    def __exit__(self, *exc):
        _waiting.pop(self.key, None)
        return False


def sigint_seen():
    return _sigint_seen
