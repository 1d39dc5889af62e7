"""engram.torch: batches sampled straight into PyTorch tensors, priority
updates and deletes from tensors, a background prefetcher and a
torch.utils.data.IterableDataset. Needs PyTorch (Debian: python3-torch);
the rest of the binding does not.

    import engram.torch as et
    with et.Prefetcher(sock, "replay", batch_size=256) as batches:
        for b in batches:                       # b.data["obs"]: [256, 1, *shape]
            loss = (b.importance_weights(beta=0.4) * td(b) ** 2).mean()
            ...
            batches.update_priorities(b.keys, td(b).abs())   # sent by the prefetcher

A TensorBatch owns its tensors: sampling copies each column once, from
shared memory into the tensors' own storage, so a tensor never reads
memory engram may reuse. Reusing one (sample(..., out=b)) samples into the
same storage again, without allocating.
"""
import ctypes
import queue
import threading

import numpy as np
import torch

from . import _ffi
from ._checks import _real
from ._handles import _Handle
from .client import Client
from .errors import Disconnected, Interrupted
from .table import _as_table

# engram's dtypes as torch's (in _columns._DTYPES' order); None where
# torch 1.13 has none (uint16, uint32, uint64).
_TORCH = {np.dtype(np.uint8): torch.uint8, np.dtype(np.int8): torch.int8, np.dtype(np.int16): torch.int16,
          np.dtype(np.int32): torch.int32, np.dtype(np.int64): torch.int64, np.dtype(np.float16): torch.float16,
          np.dtype(np.float32): torch.float32, np.dtype(np.float64): torch.float64, np.dtype(np.bool_): torch.bool}

# engram_sample_info as _ffi.SampleInfo lays it out (test_structs_match_
# the_c_compiler checks that against engram.h). The infos land in one byte
# tensor and each field is a strided view of it, at the field's offset: no
# copy, no Python loop.
_INFO_BYTES = ctypes.sizeof(_ffi.SampleInfo)
# The bytes of each info field's dtype, worked out once (torch 1.13's
# dtypes have no itemsize).
_ELEMENT_BYTES = {d: torch.empty((), dtype=d).element_size() for d in (torch.int64, torch.float64, torch.int32)}


def torch_dtype(table, column):
    """The torch dtype a column samples into, or TypeError naming the column
    when torch has none (uint16, uint32, uint64 in torch 1.13)."""
    for name, dtype, _ in table.columns:
        if name == column:
            t = _TORCH.get(np.dtype(dtype))
            if t is None:
                raise TypeError(f"column {name!r} of table {table.name!r} is {np.dtype(dtype)}, which torch "
                                f"{torch.__version__} has no dtype for: sample it with Table.sample (numpy), or "
                                "store it as a signed type that holds its values (int32, int64)")
            return t
    raise KeyError(f"table {table.name!r} has no column {column!r}")


def _empty(shape, dtype, pin_memory):
    """One home for every tensor a batch holds: pinned or not, the same path."""
    if pin_memory and not torch.cuda.is_available():
        raise RuntimeError(
            "pin_memory=True needs a CUDA build of PyTorch and a GPU (torch.cuda.is_available() is False: "
            f"torch {torch.__version__} here is {'a CPU build' if torch.version.cuda is None else 'without a GPU'}). "
            "Pinned memory only speeds copies to a GPU; on a CPU learner pass pin_memory=False, or install a "
            "CUDA build of PyTorch")
    return torch.empty(shape, dtype=dtype, pin_memory=pin_memory)


class TensorBatch:
    """Tensors for batches of one table: data[column] is [batch_size,
    num_steps, *shape] in the column's torch dtype; keys, priorities,
    probabilities, times_sampled and table_sizes are [size] views of the
    last sample's infos (size <= batch_size: fewer only when
    max_times_sampled emptied the table). Made by sample(), or here to be
    filled again and again by sample(..., out=batch)."""

    def __init__(self, table, batch_size, num_steps=1, pin_memory=False):
        if batch_size < 1 or num_steps < 1:
            raise ValueError(f"batch_size and num_steps must be at least 1, not {batch_size} and {num_steps}")
        self.table_name, self.batch_size, self.num_steps = _as_table(table).name, batch_size, num_steps
        self.pin_memory = pin_memory
        self._columns = [(name, torch_dtype(table, name), shape) for name, _, shape in table.columns]
        self.data = {name: _empty((batch_size, num_steps) + tuple(shape), dt, pin_memory)
                     for name, dt, shape in self._columns}
        self._info = _empty((batch_size * _INFO_BYTES,), torch.uint8, pin_memory)
        self._bufs = (ctypes.c_void_p * len(self._columns))(*[t.data_ptr() for t in self.data.values()])
        self.size = 0

    def _fits(self, table, batch_size, num_steps):
        return (table.name == self.table_name and batch_size == self.batch_size and num_steps == self.num_steps
                and [(n, s) for n, _, s in self._columns] == [(n, s) for n, _, s in table.columns])

    def _field(self, name, dtype):
        size = _ELEMENT_BYTES[dtype]
        offset, per = getattr(_ffi.SampleInfo, name).offset, _INFO_BYTES // size
        return self._info.view(dtype)[offset // size: self.size * per: per]

    @property
    def keys(self):
        """The items' keys, int64 (engram's uint64 keys, bit for bit: torch
        has no uint64); give them back as they are to update_priorities."""
        return self._field("key", torch.int64)

    @property
    def priorities(self):
        """The items' priorities when sampled, float64."""
        return self._field("priority", torch.float64)

    @property
    def probabilities(self):
        """The probability each item was drawn with, float64."""
        return self._field("probability", torch.float64)

    @property
    def times_sampled(self):
        """How often each item had been sampled, this time included (int32)."""
        return self._field("times_sampled", torch.int32)

    @property
    def table_sizes(self):
        """The table's size when each item was drawn (int32)."""
        return self._field("table_size", torch.int32)

    def importance_weights(self, beta, dtype=torch.float32):
        """Prioritized replay's weights (N P(i))^-beta / max_j (N P(j))^-beta
        from the probabilities and table sizes (Schaul et al. 2016), as a
        [size] tensor of `dtype`: multiply each item's loss by it."""
        beta = _real("beta", beta)
        if not 0 <= beta <= 1:
            raise ValueError(f"beta must be in 0..1, not {beta}")
        w = (self.table_sizes.to(torch.float64) * self.probabilities).pow(-beta)
        if w.numel() == 0:  # not sampled into yet: max() has nothing to reduce
            return w.to(dtype)
        return (w / w.max()).to(dtype)

    def __len__(self):
        return self.size


def sample(table, batch_size, num_steps=1, timeout_ms=-1, no_repeats=False, out=None, pin_memory=False):
    """Samples a batch of `table` (an engram.Table) into tensors: a
    TensorBatch, `out` when given (its tensors filled again, none
    allocated; it must be of this table, batch_size and num_steps).
    Blocks as Table.sample does (timeout_ms, rate limiters, Ctrl-C);
    no_repeats as there. pin_memory=True allocates pinned tensors, for
    asynchronous copies to a GPU (a CUDA build only: else RuntimeError)."""
    o = _as_table(table)._options(batch_size, num_steps, timeout_ms, no_repeats)  # checks every argument
    if out is None:
        out = TensorBatch(table, batch_size, num_steps, pin_memory)
    elif not isinstance(out, TensorBatch) or not out._fits(table, batch_size, num_steps):
        raise ValueError(f"out must be a TensorBatch of table {table.name!r}, batch_size {batch_size} and "
                         f"num_steps {num_steps}")
    infos = ctypes.cast(out._info.data_ptr(), ctypes.POINTER(_ffi.SampleInfo))
    out.size = 0
    out.size = table._sample_into(o, out._bufs, infos)
    return out


def _cpu(what, t):
    if not isinstance(t, torch.Tensor):
        t = torch.as_tensor(np.asarray(t))
    if t.device.type != "cpu":
        raise ValueError(f"{what} are on {t.device}; engram reads CPU memory: pass {what}.cpu()")
    return t.detach()


def _key_array(keys):
    """Keys as the uint64 array C takes: an integer tensor whose values fit
    (int64 holds a TensorBatch's keys bit for bit)."""
    k = _cpu("keys", keys)
    if _kind(k) != "int":
        raise TypeError(f"keys must be an integer tensor (a TensorBatch's keys are int64), not {k.dtype}")
    if k.dtype != torch.int64:
        if k.numel() and int(k.min()) < 0:
            raise ValueError(f"keys: negative values in a {k.dtype} tensor are not keys")
        k = k.to(torch.int64)
    return np.ascontiguousarray(k.reshape(-1).numpy()).view(np.uint64)


def _kind(t):
    """'int', 'float' or 'bool' for a tensor's dtype."""
    if t.dtype == torch.bool:
        return "bool"
    return "float" if t.dtype.is_floating_point else ("complex" if t.dtype.is_complex else "int")


def _priority_array(priorities, n, check=False):
    """Priorities as the float64 array C takes. check: refuse NaN, infinite
    and negative ones here, by index, as the library would (for updates
    that the library sees only later: Prefetcher.update_priorities)."""
    p = _cpu("priorities", priorities)
    if _kind(p) not in ("int", "float"):
        raise TypeError(f"priorities must be a real tensor, not {p.dtype}")
    p = np.ascontiguousarray(p.reshape(-1).to(torch.float64).numpy())
    if p.size != n:
        raise ValueError(f"{n} keys but {p.size} priorities")
    if check:
        bad = np.flatnonzero(~(np.isfinite(p) & (p >= 0)))
        if bad.size:
            raise ValueError(f"priority {bad[0]} is {p[bad[0]]}: priorities must be finite and >= 0")
    return p


def update_priorities(table, keys, priorities):
    """Sets priorities by key from tensors (keys: an integer tensor such as
    a TensorBatch's keys; priorities: any real dtype, on the CPU; neither
    needs to be contiguous or free of autograd) and waits until applied.
    NaN, infinite or negative priorities are refused by the library with
    their index. Returns per-key codes as a numpy int32 array (0, or
    E_STALE_KEY / E_UNKNOWN_KEY for items gone) (engram_update_priorities(3))."""
    k = _key_array(keys)
    return _as_table(table).update_priorities(k, _priority_array(priorities, k.size))


def update_priorities_async(table, keys, priorities):
    """As update_priorities, without waiting for the server's answer
    (engram_update_priorities_async(3)): what a learner does after each
    update."""
    k = _key_array(keys)
    _as_table(table).update_priorities_async(k, _priority_array(priorities, k.size))


def delete_items(table, keys):
    """Deletes items by key (an integer tensor) and waits; returns per-key
    codes as update_priorities does (engram_delete_items(3))."""
    return _as_table(table).delete_items(_key_array(keys))


class Prefetcher(_Handle):
    """Samples the next batches of a table in a background thread, on a
    connection of its own, while the learner trains on the current one.
    Iterating (or next()) hands out TensorBatches in the order they were
    sampled; up to `depth` wait ready. A batch handed out stays valid
    until the next next(), which samples into its tensors again: train on
    it and send its priorities before asking for the next, or clone what
    must live longer.

    The C rule is one thread per client, so the thread connects to
    `socket` itself (the learner's client stays the learner's); its
    blocking calls release the GIL, so the learner's Python runs
    meanwhile. close() (or leaving a with block) ends it, interrupting a
    sample that waits; Ctrl-C raises KeyboardInterrupt in the learner's
    thread, which should then close it. An error in the thread (the
    server gone: engram.Disconnected; a timeout with timeout_ms >= 0:
    engram.Timeout) is raised by the next next(), after the batches
    sampled before it; then the prefetcher is finished."""

    def __init__(self, socket, table, batch_size, num_steps=1, depth=2, timeout_ms=-1, no_repeats=False,
                 pin_memory=False):
        if depth < 1:
            raise ValueError(f"depth must be at least 1, not {depth}")
        self._client = Client(socket)
        try:
            self._table = self._client.table(table)
            self._args = (batch_size, num_steps, timeout_ms, no_repeats)
            # depth ready, one handed out, one being sampled into.
            self._free = queue.Queue()
            for _ in range(depth + 2):
                self._free.put(TensorBatch(self._table, batch_size, num_steps, pin_memory))
        except BaseException:
            self._client.close()
            raise
        self._ready = queue.Queue(maxsize=depth)
        self._updates = queue.SimpleQueue()  # (keys, priorities) for the thread to send
        self._handed = None  # the batch handed out last, given back at the next next()
        self._stop = threading.Event()
        self._finished = False
        self._thread = threading.Thread(target=self._run, name=f"engram-prefetch-{table}", daemon=True)
        self._thread.start()

    def _send_updates(self):
        keys, prios = [], []
        while True:
            try:
                k, p = self._updates.get_nowait()
            except queue.Empty:
                break
            keys.append(k)
            prios.append(p)
        if keys:
            self._table.update_priorities_async(np.concatenate(keys), np.concatenate(prios))

    def _run(self):
        try:
            while not self._stop.is_set():
                b = self._free.get()
                if b is None:
                    return
                self._send_updates()
                sample(self._table, *self._args, out=b)
                while not self._stop.is_set():
                    try:
                        self._ready.put(b, timeout=0.1)
                        break
                    except queue.Full:
                        pass
        except (Interrupted, KeyboardInterrupt):  # close(), or Ctrl-C (which ends every wait)
            if not self._stop.is_set():  # Ctrl-C: the learner's thread raises it
                self._put_final(KeyboardInterrupt())
        except BaseException as e:  # the server gone, a timeout: the learner's next() raises it
            self._put_final(e)

    def _put_final(self, e):
        while not self._stop.is_set():
            try:
                self._ready.put(e, timeout=0.1)
                return
            except queue.Full:
                pass

    def update_priorities(self, keys, priorities):
        """Queues new priorities by key (tensors, as update_priorities
        takes) for the prefetcher's thread, which sends them, with any
        queued since, just before its next sample, as one
        update_priorities_async: the learner's thread pays for the
        conversion and the checks (NaN, infinite and negative priorities
        are refused here, by index), not for waking the server. Keys of
        items gone meanwhile are skipped; an error the server reports is
        raised by a later next()."""
        k = _key_array(keys)
        self._updates.put((k, _priority_array(priorities, k.size, check=True)))

    def __iter__(self):
        return self

    def __next__(self):
        if self._finished:
            raise StopIteration
        if self._handed is not None:  # given back to be sampled into
            self._free.put(self._handed)
            self._handed = None
        while True:
            try:
                item = self._ready.get(timeout=0.1)  # a loop: Ctrl-C reaches this thread between waits
                break
            except queue.Empty:
                if not self._thread.is_alive() and self._ready.empty():
                    self._finished = True
                    raise StopIteration from None
        if isinstance(item, BaseException):
            self._finished = True
            raise item
        self._handed = item
        return item

    def close(self):
        """Stops the thread (interrupting a sample that waits) and closes
        its connection. Batches handed out stay readable."""
        if self._stop.is_set():
            return
        self._stop.set()
        self._free.put(None)
        self._client.interrupt()
        self._thread.join()
        try:
            self._send_updates()  # what the learner queued last
        except Exception:  # the server gone: nothing to send them to
            pass
        self._client.close()
        self._finished = True

    _finalize = close  # _Handle's finalizer: a prefetcher forgotten unclosed stops its thread


class Dataset(torch.utils.data.IterableDataset):
    """A table as a torch IterableDataset of TensorBatches (an endless
    stream: training decides when to stop). Use it with
    DataLoader(dataset, batch_size=None), since engram batches itself.
    With num_workers=0 (advised) it samples in the loading thread over a
    connection of its own (a Prefetcher of `depth`); each worker of
    num_workers > 0 is a process that connects on its own, samples on its
    own, and counts against the table's rate limiter as another sampler
    does (every worker's samples are counted, so a SampleToInsertRatio
    limiter holds them all together). A worker's batches travel to the
    learner through DataLoader's shared memory, pickled: each is a dict of
    tensors the worker cloned ("data", "keys", "probabilities",
    "table_sizes"), not a TensorBatch, one copy more than Prefetcher,
    which is why num_workers=0 is advised."""

    def __init__(self, socket, table, batch_size, num_steps=1, depth=2, timeout_ms=-1, no_repeats=False):
        super().__init__()
        self._args = (socket, table, batch_size, num_steps, depth, timeout_ms, no_repeats)

    def __iter__(self):
        socket, table, batch_size, num_steps, depth, timeout_ms, no_repeats = self._args
        with Prefetcher(socket, table, batch_size, num_steps, depth, timeout_ms, no_repeats) as p:
            for b in p:
                # A worker's batch is pickled to the learner: hand over
                # tensors it owns, not ones the prefetcher samples into again.
                if torch.utils.data.get_worker_info() is not None:
                    yield {"data": {k: v[: b.size].clone() for k, v in b.data.items()}, "keys": b.keys.clone(),
                           "probabilities": b.probabilities.clone(), "table_sizes": b.table_sizes.clone()}
                else:
                    yield b


__all__ = ["TensorBatch", "sample", "update_priorities", "update_priorities_async", "delete_items", "Prefetcher",
           "Dataset", "torch_dtype", "Disconnected"]
