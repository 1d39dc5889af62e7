"""engram.torch against a real server: tensors straight from shared memory,
updates from tensors, the prefetcher and the IterableDataset. Needs
PyTorch (Debian: python3-torch, which scripts/setup.sh installs)."""
import faulthandler
import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import engram  # noqa: E402
import engram.torch as et  # noqa: E402

from test_engram import DTYPES, ROOT, client, server, values  # noqa: E402,F401 (client, server: fixtures)


def fill(client, table, columns, rows, priorities=None):
    """Writes one item of one step per row of `rows` ({column: array})
    into `table`, a name or an open engram.Table."""
    if isinstance(table, str):
        with client.table(table) as t:
            return fill(client, t, columns, rows, priorities)
    with client.writer(columns) as w:
        n = len(next(iter(rows.values())))
        for i in range(n):
            w.append(**{k: v[i] for k, v in rows.items()})
            w.create_item(table, 1, 1.0 if priorities is None else priorities[i])
        w.flush()


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_every_column_dtype_samples_into_its_torch_dtype_or_is_refused_by_name(client, dtype):
    cols = [("x", dtype, (2, 3)), ("y", np.float32, ())]
    client.create_table("t", cols, max_size=10, sampler="fifo", max_times_sampled=1)
    x = values(dtype, (2, 3), 4, seed=1)
    fill(client, "t", cols, {"x": x, "y": np.arange(4, dtype=np.float32)})
    with client.table("t") as t:
        if np.dtype(dtype) in (np.dtype(np.uint16), np.dtype(np.uint32), np.dtype(np.uint64)):
            with pytest.raises(TypeError, match=f"column 'x' of table 't' is {np.dtype(dtype)}, which torch"):
                et.sample(t, 4)
            return
        b = et.sample(t, 4, num_steps=1)
        assert b.data["x"].dtype == et.torch_dtype(t, "x")
        assert tuple(b.data["x"].shape) == (4, 1, 2, 3)
        assert tuple(b.data["y"].shape) == (4, 1)
        assert np.array_equal(b.data["x"][:, 0].numpy(), x), "FIFO: the items in order, each value as written"
        assert b.data["y"][:, 0].tolist() == [0, 1, 2, 3]


def test_a_reused_batch_is_sampled_into_in_place_and_its_infos_are_tensors(client):
    cols = [("obs", np.float32, (4,)), ("a", np.int64, ())]
    client.create_table("t", cols, max_size=100, sampler="fifo", max_times_sampled=1)
    fill(client, "t", cols, {"obs": np.arange(40, dtype=np.float32).reshape(10, 4), "a": np.arange(10)})
    with client.table("t") as t:
        b = et.TensorBatch(t, 5)
        ptrs = {k: v.data_ptr() for k, v in b.data.items()}
        info_ptr = b._info.data_ptr()
        for first in (0, 5):
            assert et.sample(t, 5, out=b) is b
            assert {k: v.data_ptr() for k, v in b.data.items()} == ptrs, "no tensor allocated per batch"
            assert b._info.data_ptr() == info_ptr
            assert b.data["a"][:, 0].tolist() == list(range(first, first + 5))
            assert b.keys.dtype == torch.int64 and len(b.keys) == 5 and len(set(b.keys.tolist())) == 5
            assert b.table_sizes.tolist() == [10 - first - i for i in range(5)], "max_times_sampled: the table shrinks"
            assert b.times_sampled.tolist() == [1] * 5
        with pytest.raises(ValueError, match="out must be a TensorBatch of table 't', batch_size 4"):
            et.sample(t, 4, out=b)


def test_pinned_memory_is_refused_on_a_cpu_build_saying_why(client):
    client.create_table("t", [("x", np.float32, ())], max_size=10)
    with client.table("t") as t:
        if torch.cuda.is_available():
            assert et.TensorBatch(t, 2, pin_memory=True).data["x"].is_pinned()
            return
        with pytest.raises(RuntimeError, match=r"pin_memory=True needs a CUDA build of PyTorch and a GPU"):
            et.TensorBatch(t, 2, pin_memory=True)
        with pytest.raises(RuntimeError, match="pass pin_memory=False"):
            et.sample(t, 2, timeout_ms=0, pin_memory=True)


def test_importance_weights_are_those_computed_by_hand(client):
    cols = [("x", np.float32, ())]
    client.create_table("t", cols, max_size=10, sampler="prioritized", priority_exponent=1.0)
    fill(client, "t", cols, {"x": np.arange(4, dtype=np.float32)}, priorities=[1.0, 2.0, 3.0, 4.0])
    with client.table("t") as t:
        b = et.sample(t, 64)
        x = b.data["x"][:, 0].to(torch.int64)
        # P(i) = p_i / 10, N = 4: w_i = (4 P(i))^-0.5 / max_j (4 P(j))^-0.5.
        p = (x + 1).to(torch.float64) / 10
        assert torch.allclose(b.probabilities, p)
        want = (4 * p) ** -0.5
        want = want / want.max()
        assert torch.allclose(b.importance_weights(0.5).to(torch.float64), want, atol=1e-6)
        assert b.importance_weights(0.5).dtype == torch.float32
        assert torch.equal(b.importance_weights(0.0), torch.ones(64))
        with pytest.raises(ValueError, match="beta must be in 0..1"):
            b.importance_weights(1.5)
        with pytest.raises(TypeError, match="beta must be a number"):  # was a bare TypeError of <=
            b.importance_weights("x")
        empty = et.TensorBatch(t, 4).importance_weights(0.5)  # not sampled into: was a RuntimeError of max()
        assert empty.shape == (0,) and empty.dtype == torch.float32


@pytest.mark.parametrize("pdtype", [torch.float32, torch.float64, torch.float16, torch.int64, torch.int32],
                         ids=str)
def test_priorities_are_updated_from_tensors_of_several_dtypes(client, pdtype):
    cols = [("x", np.float32, ())]
    client.create_table("t", cols, max_size=10, sampler="prioritized")
    fill(client, "t", cols, {"x": np.arange(5, dtype=np.float32)})
    with client.table("t") as t:
        b = et.sample(t, 5, no_repeats=True)
        new = (b.data["x"][:, 0] * 2 + 1).to(pdtype).requires_grad_(pdtype.is_floating_point)
        codes = et.update_priorities(t, b.keys, new[:, None] if pdtype == torch.int32 else new)
        assert codes.tolist() == [0] * 5
        items = client.items("t")
        by_x = {int(k): float(p) for k, p in zip(items["key"], items["priority"])}
        for key, x in zip(b.keys.numpy().view(np.uint64), b.data["x"][:, 0].tolist()):
            assert by_x[int(key)] == 2 * x + 1
        et.update_priorities_async(t, b.keys, torch.ones(5, dtype=pdtype))
        et.update_priorities(t, torch.zeros(0, dtype=torch.int64), torch.zeros(0))  # waits for the async ones
        assert client.items("t")["priority"].tolist() == [1.0] * 5
        assert et.delete_items(t, b.keys[:2]).tolist() == [0, 0]
        assert client.table_info("t")["size"] == 3


def test_careless_tensor_arguments_are_refused_by_name(client):
    cols = [("x", np.float32, ())]
    client.create_table("t", cols, max_size=10, sampler="prioritized")
    fill(client, "t", cols, {"x": np.arange(3, dtype=np.float32)})
    with client.table("t") as t:
        b = et.sample(t, 3, no_repeats=True)
        with pytest.raises(engram.EngramError, match="NaN"):
            et.update_priorities(t, b.keys, torch.tensor([1.0, float("nan"), 1.0]))
        with pytest.raises(engram.EngramError, match="negative|-1"):
            et.update_priorities(t, b.keys, torch.tensor([1.0, -1.0, 1.0]))
        with pytest.raises(ValueError, match="3 keys but 2 priorities"):
            et.update_priorities(t, b.keys, torch.ones(2))
        with pytest.raises(TypeError, match="keys must be an integer tensor"):
            et.update_priorities(t, b.keys.to(torch.float64), torch.ones(3))
        with pytest.raises(ValueError, match="negative values in a torch.int32 tensor are not keys"):
            et.delete_items(t, torch.tensor([-1], dtype=torch.int32))
        with pytest.raises(TypeError, match="priorities must be a real tensor"):
            et.update_priorities(t, b.keys, torch.ones(3, dtype=torch.bool))
        with pytest.raises(ValueError, match=r"priorities are on meta; engram reads CPU memory: pass priorities.cpu\(\)"):
            et.update_priorities(t, b.keys, torch.empty(3, device="meta"))
        with pytest.raises(ValueError, match="batch_size is -1"):
            et.sample(t, -1)
        with pytest.raises(TypeError, match="table must be an engram.Table .*, not the str 't'"):
            et.sample("t", 2)
        with pytest.raises(TypeError, match="table must be an engram.Table"):
            et.update_priorities("t", b.keys, torch.ones(3))
        assert client.items("t")["priority"].tolist() == [1.0] * 3, "nothing refused was applied"


def test_a_tensor_never_reads_memory_engram_reuses(client):
    """Sampled (each item once: then gone), then the table written again
    (the blocks reused for new data, evicted and reused again) and sampled: the first tensors still
    hold the first bytes. They own their storage."""
    cols = [("x", np.float32, (256,))]
    client.create_table("t", cols, max_size=4, sampler="fifo", max_times_sampled=1)
    first = np.random.default_rng(1).standard_normal((4, 256)).astype(np.float32)
    fill(client, "t", cols, {"x": first})
    with client.table("t") as t:
        a = et.sample(t, 4)
        kept = a.data["x"].clone()
        fill(client, t, cols, {"x": np.full((8, 256), 7.0, np.float32)})
        b = et.sample(t, 4)
        assert torch.all(b.data["x"] == 7.0), "the table was overwritten"
        assert torch.equal(a.data["x"], kept)
        assert torch.equal(a.data["x"][:, 0], torch.from_numpy(first))


def test_the_prefetcher_hands_out_batches_in_order_and_releases_the_gil(client, server, capfd):
    cols = [("x", np.int64, ())]
    client.create_table("t", cols, max_size=1000, sampler="fifo", max_times_sampled=1)
    fill(client, "t", cols, {"x": np.arange(100)})

    def count(seconds):
        n, end = 0, time.monotonic() + seconds
        while time.monotonic() < end:
            n += 1
        return n
    alone = count(0.3)  # no prefetcher yet
    # A wait that held the GIL would stop this thread for good once the
    # table is empty (seen: with the sample called through ctypes.PyDLL the
    # test hangs): faulthandler's watchdog, a C thread that needs no GIL,
    # then ends the process with every thread's traceback rather than
    # leaving it to ctest's timeout (pytest's capture set aside: it would
    # keep what the watchdog writes).
    with capfd.disabled():
        faulthandler.dump_traceback_later(30, exit=True)
        try:
            with et.Prefetcher(server.socket, "t", batch_size=10, depth=2) as p:
                got = [next(p).data["x"][:, 0].tolist() for _ in range(10)]
                assert got == [list(range(i, i + 10)) for i in range(0, 100, 10)]
                # The table is empty: the thread waits inside libengram for
                # the next batch, and Python's own work goes on meanwhile. A
                # wait that held the GIL in part would slow the count: a
                # tenth of the count without it, room for a loaded machine.
                time.sleep(0.2)
                beside = count(0.3)
                assert beside > alone / 10, f"{beside} counts beside the waiting prefetcher, {alone} alone"
                start = time.monotonic()
        finally:
            faulthandler.cancel_dump_traceback_later()
    assert time.monotonic() - start < 2, "close() ends a sample that waits, at once"


def test_priorities_given_to_the_prefetcher_are_sent_with_its_next_sample(client, server):
    cols = [("x", np.int64, ())]
    client.create_table("t", cols, max_size=100, sampler="prioritized")
    fill(client, "t", cols, {"x": np.arange(8)})
    with et.Prefetcher(server.socket, "t", batch_size=8, no_repeats=True) as p:
        b = next(p)
        keys = b.keys.clone()  # b is sampled into again after the next next()
        p.update_priorities(b.keys, b.data["x"][:, 0].to(torch.float32) + 10)
        with pytest.raises(ValueError, match=r"priority 1 is nan: priorities must be finite and >= 0"):
            p.update_priorities(b.keys[:2], torch.tensor([1.0, float("nan")]))
        with pytest.raises(ValueError, match="priority 0 is -2.0"):
            p.update_priorities(b.keys[:1], torch.tensor([-2.0]))
        # Sent before the thread's next sample, which waits for a batch to
        # be given back (next()), and applied by the table soon after.
        want = [10.0 + x for x in range(8)]
        for _ in range(100):
            next(p)
            if sorted(client.items("t")["priority"].tolist()) == want:
                break
            time.sleep(0.02)
        assert sorted(client.items("t")["priority"].tolist()) == want
        p.update_priorities(keys, torch.ones(8))
    # close() sends what was queued last (on its own connection: looked
    # for until it is applied).
    for _ in range(100):
        if client.items("t")["priority"].tolist() == [1.0] * 8:
            break
        time.sleep(0.02)
    assert client.items("t")["priority"].tolist() == [1.0] * 8


def test_the_prefetcher_waits_for_a_rate_limiter_then_goes_on(client, server):
    cols = [("x", np.int64, ())]
    client.create_table("t", cols, max_size=100, rate_limiter=engram.min_size(20))
    fill(client, "t", cols, {"x": np.arange(10)})
    with et.Prefetcher(server.socket, "t", batch_size=4) as p:
        got = []
        threading.Thread(target=lambda: got.append(next(p))).start()
        time.sleep(0.5)
        assert not got, "held: the table holds fewer than min_size items"
        fill(client, "t", cols, {"x": np.arange(10, 20)})
        for _ in range(100):
            if got:
                break
            time.sleep(0.05)
        assert got and len(got[0]) == 4


def test_ctrl_c_reaches_a_learner_waiting_for_the_prefetcher(client, server):
    client.create_table("t", [("x", np.float32, ())], max_size=10)
    with et.Prefetcher(server.socket, "t", batch_size=1) as p:
        threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT)).start()
        start = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            next(p)
        assert time.monotonic() - start < 0.3 + 1.5
    assert not p._thread.is_alive()


def test_the_server_killed_under_the_prefetcher_is_an_error_in_the_learner(tmp_path):
    sock = str(tmp_path / "s.sock")
    env = dict(os.environ, PYTHONPATH=os.path.join(os.path.dirname(__file__), ".."))
    srv = subprocess.Popen([sys.executable, "-c", "import engram, sys, time\n"
                            f"s = engram.Server(socket={sock!r}); print('up', flush=True); time.sleep(600)"],
                           env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert srv.stdout.readline().strip() == "up"
        with engram.connect(sock) as c:
            c.create_table("t", [("x", np.float32, ())], max_size=10)
            with et.Prefetcher(sock, "t", batch_size=1) as p:
                threading.Timer(0.3, srv.kill).start()
                start = time.monotonic()
                with pytest.raises(engram.Disconnected):
                    next(p)
                assert time.monotonic() - start < 5
                with pytest.raises(StopIteration):
                    next(p)
    finally:
        srv.kill()
        srv.wait()


def test_a_dataloader_over_the_dataset_yields_batches(client, server):
    cols = [("x", np.int64, ())]
    client.create_table("t", cols, max_size=1000, sampler="fifo", max_times_sampled=1)
    fill(client, "t", cols, {"x": np.arange(30)})
    loader = torch.utils.data.DataLoader(et.Dataset(server.socket, "t", batch_size=10), batch_size=None)
    it = iter(loader)
    assert [next(it).data["x"][:, 0].tolist() for _ in range(3)] == [list(range(i, i + 10)) for i in (0, 10, 20)]
    del it


def test_table_info_names_its_sampler_and_remover(client):
    client.create_table("t", [("x", np.float32, ())], max_size=10, sampler="prioritized", remover="lifo")
    info = client.table_info("t")
    assert (info["sampler"], info["remover"]) == ("prioritized", "lifo")


def test_every_public_name_has_a_docstring():
    import inspect
    missing = [n for n in et.__all__ if not inspect.getdoc(getattr(et, n))]
    for cls in (et.TensorBatch, et.Prefetcher, et.Dataset):
        missing += [f"{cls.__name__}.{m}" for m, f in vars(cls).items()
                    if not m.startswith("_") and (callable(f) or isinstance(f, property))
                    and not (getattr(f, "__doc__", None) or "").strip()]
    assert not missing, f"no docstring: {missing}"


def test_the_readme_learner_snippet_runs(server):
    """README's "Learners in Python", after its Python snippet made the table."""
    import re
    with open(os.path.join(ROOT, "README.md")) as f:
        blocks = re.findall(r"```python\n(.*?)```", f.read(), re.S)
    assert len(blocks) >= 2, "README.md has the Python snippet and the learner's"
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "bindings", "python"), ENGRAM_SOCKET=server.socket,
               PYTHONDONTWRITEBYTECODE="1")
    for block in blocks[:2]:
        r = subprocess.run([sys.executable, "-c", block], env=env, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
    with engram.connect(server.socket) as c:
        assert c.table_info("py_replay")["samples"] >= 32 * 100 + 32, "the learner sampled 100 batches"
        assert len(set(c.items("py_replay")["priority"].tolist())) > 2, "and sent priorities back"
