"""Errors: EngramError, with .code (an ENGRAM_E_* value) and .message (what
was wrong), and one subclass for each code a caller may want to catch."""

from . import _ffi, _interrupt
from ._ffi import lib


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
