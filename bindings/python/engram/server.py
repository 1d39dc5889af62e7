"""engram.Server: the server embedded in this process (libengram-server)."""
import ctypes

from . import _ffi
from ._checks import _text
from ._handles import _Handle
from .errors import Disconnected, _check


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
