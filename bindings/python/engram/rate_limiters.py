"""Rate limiter presets (engram_rate_limiter_*): min_size, queue and
sample_to_insert_ratio."""
import ctypes

from . import _ffi
from ._ffi import lib
from ._checks import _I64, _int, _real
from .errors import _check


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
