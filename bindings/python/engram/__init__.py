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
                obs = batch.view(0, "obs")               # pins the batch's data while obs lives

Every handle is a context manager and has close(); closing a client closes
its tables, writers and batches. Errors raise EngramError (or a subclass)
with .code (ENGRAM_E_*) and the library's message. A handle and its client
may be used by one thread at a time (the C rule); the binding serializes the
calls of one client with a lock, and Ctrl-C ends a blocking call
(KeyboardInterrupt) within about 100 ms.

The modules, one per concept (every public name is also here): errors,
client (connect, Client), table, writer, batch, server (the embedded
server, from libengram-server), rate_limiters.
"""
from ._ffi import lib
from .batch import Batch
from .client import Client, connect
from .errors import Closed, Disconnected, EngramError, Exists, Interrupted, Limit, NotFound, RateLimited, Timeout
from .rate_limiters import min_size, queue, sample_to_insert_ratio
from .server import Server
from .table import Table
from .writer import Writer

__all__ = ["EngramError", "Timeout", "RateLimited", "NotFound", "Exists", "Disconnected", "Interrupted", "Closed", "Limit",
           "Server", "Client", "Table", "Writer", "Batch", "connect", "min_size", "queue", "sample_to_insert_ratio",
           "version"]


def version():
    """The loaded libengram's version, "MAJOR.MINOR.PATCH"."""
    return lib.engram_version_string().decode()
