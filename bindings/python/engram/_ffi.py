"""libengram through ctypes: the structs of engram/engram.h, mirrored field
by field, and every public function with its argument and result types
(checked against the header by scripts/check-bindings.py; the structs'
layouts against the C compiler by test_structs_match_the_c_compiler).

The library is found, in this order, at $ENGRAM_LIBRARY (a path to
libengram.so.0), in this source tree's build (build/release/capi), then
wherever the dynamic linker finds libengram.so.0 (the libengram0 package).
The embedded server's library (engram/server.h) is loaded only by
server_lib(), the first time a process starts a server: at
$ENGRAM_SERVER_LIBRARY, beside the client library (or in the tree's
build/release/embedded), then wherever the dynamic linker finds
libengram-server.so.0 (the libengram-server0 package).
"""
import ctypes
import os
from ctypes import (POINTER, Structure, c_char, c_char_p, c_double, c_int, c_int32, c_int64, c_size_t,
                    c_uint, c_uint32, c_uint64, c_void_p)

MAX_RANK = 6
MAX_NAME = 63

# Status codes (engram.h); values never change meaning.
OK = 0
E_INVALID, E_RANGE, E_PRIORITY, E_NOT_FOUND, E_EXISTS, E_SIGNATURE = -1, -2, -3, -4, -5, -6
E_TIMEOUT, E_RATE_LIMITED, E_STALE_KEY, E_UNKNOWN_KEY, E_NOMEM = -7, -8, -9, -10, -11
E_DISCONNECTED, E_PERMISSION, E_VERSION, E_CORRUPT, E_CLOSED, E_SYSTEM = -12, -13, -14, -15, -16, -17
E_INTERRUPTED = -18
E_LIMIT = -19


def _find_library():
    env = os.environ.get("ENGRAM_LIBRARY")
    if env:
        return env
    here = os.path.dirname(os.path.abspath(__file__))
    tree = os.path.join(here, "..", "..", "..", "build", "release", "capi", "libengram.so.0")
    if os.path.exists(tree):
        return os.path.normpath(tree)
    return "libengram.so.0"


def _load(path, name, package, env, signatures, needed_by=""):
    """Loads one of engram's two libraries and types its functions; an
    ImportError says how to get the library, or which function it lacks."""
    try:
        loaded = ctypes.CDLL(path)
    except OSError as e:
        raise ImportError(
            f"engram: cannot load {name} ({e}){needed_by}; install the {package} package, build the tree "
            f"(cmake --preset release && cmake --build --preset release), or set {env} to the path of "
            f"{name}.so.0") from None
    for fn_name, (res, args) in signatures.items():
        try:
            fn = getattr(loaded, fn_name)
        except AttributeError:
            raise ImportError(f"engram: {fn_name} is missing from the loaded {name} ({loaded._name}); it is "
                              "older than this binding needs (0.5)") from None
        fn.restype = res
        fn.argtypes = args
    return loaded


class Column(Structure):
    _fields_ = [("name", c_char_p), ("dtype", c_int32), ("rank", c_uint32), ("shape", c_uint32 * MAX_RANK)]


class Compression(Structure):
    _fields_ = [("codec", c_int32), ("level", c_int32)]


class RateLimiter(Structure):
    _fields_ = [("samples_per_insert", c_double), ("min_size_to_sample", c_int64), ("min_diff", c_double),
                ("max_diff", c_double)]


class ServerOptions(Structure):
    _fields_ = [("struct_size", c_size_t), ("socket_path", c_char_p), ("config_path", c_char_p),
                ("config_toml", c_char_p), ("quiet", c_int32)]


class ConnectOptions(Structure):
    _fields_ = [("struct_size", c_size_t), ("socket_path", c_char_p), ("timeout_ms", c_int32)]


class TableOptions(Structure):
    _fields_ = [("struct_size", c_size_t), ("name", c_char_p), ("max_size", c_uint64), ("sampler", c_int32),
                ("remover", c_int32), ("priority_exponent", c_double), ("max_times_sampled", c_uint32),
                ("max_chunks_per_item", c_uint32), ("rate_limiter", RateLimiter), ("columns", POINTER(Column)),
                ("num_columns", c_uint32), ("compression", POINTER(Compression))]


class TableInfo(Structure):
    _fields_ = [("struct_size", c_size_t), ("name", c_char * (MAX_NAME + 1)), ("max_size", c_uint64),
                ("size", c_uint64), ("inserts", c_uint64), ("samples", c_uint64), ("deletes", c_uint64),
                ("updates", c_uint64), ("evictions", c_uint64), ("expirations", c_uint64),
                ("stale_requests", c_uint64), ("rate_limited", c_uint64), ("sampler", c_int32),
                ("remover", c_int32), ("max_times_sampled", c_uint32), ("num_columns", c_uint32),
                ("can_sample", c_int32), ("can_insert", c_int32), ("clients", c_uint32),
                ("rate_limiter", RateLimiter), ("bytes_raw", c_uint64), ("bytes_stored", c_uint64),
                ("max_priority", c_double), ("min_priority", c_double), ("shards", c_uint32),
                ("shards_present", c_uint32)]


class WriterOptions(Structure):
    _fields_ = [("struct_size", c_size_t), ("columns", POINTER(Column)), ("num_columns", c_uint32),
                ("chunk_length", c_uint32), ("max_item_steps", c_uint32), ("insert_timeout_ms", c_int32),
                ("keep_keys", c_int32), ("compression", POINTER(Compression))]


class SampleOptions(Structure):
    _fields_ = [("struct_size", c_size_t), ("batch_size", c_uint32), ("num_steps", c_uint32),
                ("timeout_ms", c_int32), ("flags", c_uint64)]


SAMPLE_NO_REPEATS = 1


class SampleInfo(Structure):
    _fields_ = [("key", c_uint64), ("priority", c_double), ("probability", c_double), ("times_sampled", c_uint32),
                ("table_size", c_uint32)]


class Item(Structure):
    _fields_ = [("key", c_uint64), ("priority", c_double), ("inserted", c_uint64), ("times_sampled", c_uint32),
                ("num_steps", c_uint32)]


BY_INSERTION, BY_PRIORITY = 0, 1

PROGRESS = ctypes.CFUNCTYPE(c_int, c_void_p, c_uint64, c_uint64)


class TransferOptions(Structure):
    _fields_ = [("struct_size", c_size_t), ("progress", PROGRESS), ("progress_ctx", c_void_p),
                ("insert_timeout_ms", c_int32)]


class View(Structure):
    _fields_ = [("data", c_void_p), ("steps", c_uint32)]


# Opaque handles are plain pointers here.
Server = Client = Table = Writer = Batch = Items = c_void_p

_P = POINTER
_SIGNATURES = {
    "engram_version": (c_uint, []),
    "engram_version_string": (c_char_p, []),
    "engram_strerror": (c_char_p, [c_int]),
    "engram_last_error": (c_char_p, []),
    "engram_rate_limiter_min_size": (c_int, [_P(RateLimiter), c_int64]),
    "engram_rate_limiter_sample_to_insert_ratio": (c_int, [_P(RateLimiter), c_double, c_int64, c_double]),
    "engram_rate_limiter_queue": (c_int, [_P(RateLimiter), c_int64]),
    "engram_connect_options_init": (None, [_P(ConnectOptions)]),
    "engram_connect": (c_int, [_P(ConnectOptions), _P(Client)]),
    "engram_disconnect": (None, [Client]),
    "engram_client_interrupt": (None, [Client]),
    "engram_table_options_init": (None, [_P(TableOptions)]),
    "engram_table_create": (c_int, [Client, _P(TableOptions)]),
    "engram_table_open": (c_int, [Client, c_char_p, _P(Table)]),
    "engram_table_close": (None, [Table]),
    "engram_table_drop": (c_int, [Client, c_char_p]),
    "engram_table_reset": (c_int, [Client, c_char_p]),
    "engram_table_set_rate_limiter": (c_int, [Client, c_char_p, _P(RateLimiter)]),
    "engram_table_info_init": (None, [_P(TableInfo)]),
    "engram_table_info_get": (c_int, [Client, c_char_p, _P(TableInfo)]),
    "engram_items_open": (c_int, [Client, c_char_p, c_int32, _P(Items)]),
    "engram_items_count": (c_uint64, [Items]),
    "engram_items_next": (c_int, [Items, _P(Item), c_uint32, _P(c_uint32)]),
    "engram_items_close": (None, [Items]),
    "engram_transfer_options_init": (None, [_P(TransferOptions)]),
    "engram_table_export": (c_int, [Table, c_char_p, _P(TransferOptions), _P(c_uint64)]),
    "engram_table_import": (c_int, [Table, c_char_p, _P(TransferOptions), _P(c_uint64)]),
    "engram_table_columns": (c_int, [Table, _P(Column), c_uint32, _P(c_uint32)]),
    "engram_table_compression": (c_int, [Table, _P(Compression), c_uint32, _P(c_uint32)]),
    "engram_checkpoint": (c_int, [Client, c_int32, c_char_p, c_size_t]),
    "engram_writer_options_init": (None, [_P(WriterOptions)]),
    "engram_writer_open": (c_int, [Client, _P(WriterOptions), _P(Writer)]),
    "engram_writer_append": (c_int, [Writer, _P(c_void_p)]),
    "engram_writer_append_batch": (c_int, [Writer, _P(c_void_p), c_uint32]),
    "engram_writer_append_items": (c_int, [Writer, _P(c_void_p), c_uint32, Table, c_uint32, _P(c_double)]),
    "engram_writer_create_item": (c_int, [Writer, Table, c_uint32, c_double]),
    "engram_writer_create_item_at_max": (c_int, [Writer, Table, c_uint32]),
    "engram_writer_end_episode": (c_int, [Writer]),
    "engram_writer_flush": (c_int, [Writer, c_int32]),
    "engram_writer_take_keys": (c_int, [Writer, _P(c_uint64), c_size_t, _P(c_size_t)]),
    "engram_writer_close": (None, [Writer]),
    "engram_sample_options_init": (None, [_P(SampleOptions)]),
    "engram_sample": (c_int, [Table, _P(SampleOptions), _P(c_void_p), _P(SampleInfo), _P(c_uint32)]),
    "engram_sample_begin": (c_int, [Table, _P(SampleOptions)]),
    "engram_sample_end": (c_int, [Table, _P(c_void_p), _P(SampleInfo), _P(c_uint32)]),
    "engram_sample_view": (c_int, [Table, _P(SampleOptions), _P(Batch)]),
    "engram_batch_size": (c_uint32, [Batch]),
    "engram_batch_info": (c_int, [Batch, c_uint32, _P(SampleInfo)]),
    "engram_batch_views": (c_int, [Batch, c_uint32, c_uint32, _P(View), c_uint32, _P(c_uint32)]),
    "engram_batch_release": (None, [Batch]),
    "engram_update_priorities": (c_int, [Table, _P(c_uint64), _P(c_double), c_size_t, _P(c_int32)]),
    "engram_update_priorities_async": (c_int, [Table, _P(c_uint64), _P(c_double), c_size_t]),
    "engram_delete_items": (c_int, [Table, _P(c_uint64), c_size_t, _P(c_int32)]),
}

lib = _load(_find_library(), "libengram", "libengram0", "ENGRAM_LIBRARY", _SIGNATURES)

_SERVER_SIGNATURES = {
    "engram_server_options_init": (None, [_P(ServerOptions)]),
    "engram_server_start": (c_int, [_P(ServerOptions), _P(Server)]),
    "engram_server_stop": (c_int, [Server]),
}
_server_lib = None


def _find_server_library():
    env = os.environ.get("ENGRAM_SERVER_LIBRARY")
    if env:
        return env
    client_dir = os.path.dirname(os.path.abspath(lib._name)) if os.sep in lib._name else None
    for d in ([client_dir, os.path.join(client_dir, "..", "embedded")] if client_dir else []):
        path = os.path.join(d, "libengram-server.so.0")
        if os.path.exists(path):
            return os.path.normpath(path)
    return "libengram-server.so.0"


def server_lib():
    """libengram-server.so.0, with its functions typed; loaded once."""
    global _server_lib
    if _server_lib is None:
        _server_lib = _load(_find_server_library(), "libengram-server", "libengram-server0", "ENGRAM_SERVER_LIBRARY",
                            _SERVER_SIGNATURES, ", which engram.Server needs (clients do not)")
    return _server_lib
