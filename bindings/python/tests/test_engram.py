"""The Python binding against a real server (embedded in this process
through engram_server_start; other processes could attach to it).

Run: python3 -m pytest bindings/python/tests (ENGRAM_LIBRARY may name the
libengram.so.0 to test; by default the tree's build/release)."""
import gc
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import engram  # noqa: E402
from engram import _ffi  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
DTYPES = [np.uint8, np.int8, np.uint16, np.int16, np.uint32, np.int32, np.uint64, np.int64, np.float16, np.float32,
          np.float64, np.bool_]


@pytest.fixture
def server(tmp_path):
    sock = str(tmp_path / "engram.sock")
    with engram.Server(socket=sock) as s:
        s.socket = sock
        yield s


@pytest.fixture
def client(server):
    with engram.connect(server.socket) as c:
        yield c


def values(dtype, shape, n, seed):
    rng = np.random.default_rng(seed)
    if dtype == np.bool_:
        return rng.integers(0, 2, size=(n,) + shape).astype(np.bool_)
    if np.issubdtype(dtype, np.floating):
        return rng.standard_normal(size=(n,) + shape).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, size=(n,) + shape, dtype=dtype, endpoint=True)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shape", [(), (3,), (2, 5)], ids=lambda s: "x".join(map(str, s)) or "scalar")
def test_every_dtype_and_shape_round_trips(client, dtype, shape):
    cols = [("x", dtype, shape), ("step", np.int64, ())]
    client.create_table("t", cols, max_size=100, sampler="fifo", max_times_sampled=1, rate_limiter=engram.queue(100))
    xs = values(dtype, shape, 20, seed=len(shape) * 100 + DTYPES.index(dtype))
    with client.table("t") as t, client.writer(cols) as w:
        for i in range(20):
            w.append(x=xs[i], step=i)
            w.create_item(t, 1, 1.0)
        w.flush()
        data, info = t.sample(batch_size=10)
        assert data["x"].shape == (10, 1) + shape and data["x"].dtype == np.dtype(dtype)
        steps = data["step"][:, 0]
        assert list(steps) == list(range(10)), "FIFO order"
        np.testing.assert_array_equal(data["x"][:, 0], xs[steps])
        assert list(info["times_sampled"]) == [1] * 10
        with t.sample_view(batch_size=10) as b:
            for k in range(len(b)):
                v = b.view(k, "x")
                step = int(b.view(k, "step")[0])
                assert v.shape == (1,) + shape and not v.flags.writeable
                np.testing.assert_array_equal(v[0], xs[step])


def test_positional_batches_and_items_over_several_steps(client):
    cols = [("obs", np.float32, (4,)), ("action", np.int32, ())]
    client.create_table("t", cols, max_size=100)
    obs = np.arange(40, dtype=np.float32).reshape(10, 4)
    with client.table("t") as t, client.writer(cols, chunk_length=5, max_item_steps=3, keep_keys=True) as w:
        w.append_batch(obs, np.arange(10, dtype=np.int32))
        w.create_item(t, num_steps=3, priority=2.0)
        w.flush()
        assert len(w.take_keys()) == 1
        data, info = t.sample(batch_size=1, num_steps=3)
        np.testing.assert_array_equal(data["obs"][0], obs[7:10])
        np.testing.assert_array_equal(data["action"][0], [7, 8, 9])
        assert info["priority"][0] == 2.0


def test_items_at_the_maximum_get_the_largest_priority_held(client):
    cols = [("x", np.float32, ())]
    client.create_table("t", cols, max_size=10, sampler="prioritized")
    with client.table("t") as t, client.writer(cols) as w:
        for i, p in enumerate([None, 3.0, None]):
            w.append(np.float32(i))
            if p is None:
                w.create_item_at_max(t, num_steps=1)
            else:
                w.create_item(t, num_steps=1, priority=p)
            w.flush()
    info = client.table_info("t")
    # 1.0 (an empty table's), 3.0, then 3.0 again (the largest held).
    assert (info["size"], info["max_priority"], info["min_priority"]) == (3, 3.0, 1.0)


def test_batches_without_repeats_hold_each_item_once(client):
    cols = [("x", np.float32, ())]
    client.create_table("t", cols, max_size=20, sampler="prioritized")
    with client.table("t") as t, client.writer(cols) as w:
        for i in range(12):
            w.append(np.float32(i))
            w.create_item(t, num_steps=1, priority=100.0 if i == 0 else 1.0)
        w.flush()
        for _ in range(200):
            data, info = t.sample(6, no_repeats=True)
            assert len(set(info["key"])) == 6
            assert sorted(set(data["x"][:, 0])) == sorted(data["x"][:, 0])
            # Item 0 outweighs its share (total / 6): in every batch, chance 1.
            assert 0.0 in data["x"][:, 0]
            assert info["probability"][data["x"][:, 0] == 0.0][0] == 1 / 6
        t.sample_begin(12, no_repeats=True)
        _, info = t.sample_end()
        assert len(set(info["key"])) == 12
        b = t.sample_view(3, no_repeats=True)
        assert len({b.info(i)["key"] for i in range(len(b))}) == 3
        b.close()
        with pytest.raises(engram.EngramError) as e:
            t.sample(13, no_repeats=True)
        assert e.value.code == _ffi.E_RANGE and "fewer than a batch of 13" in str(e.value)
        with pytest.raises(TypeError, match="no_repeats"):
            t.sample(2, no_repeats="yes")


def test_items_are_listed_oldest_or_highest_first(client):
    cols = [("x", np.float32, ())]
    client.create_table("t", cols, max_size=5, sampler="prioritized")
    with client.table("t") as t, client.writer(cols) as w:
        for i, p in enumerate([3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0]):
            w.append(np.float32(i))
            w.create_item(t, num_steps=1, priority=p)
        w.flush()
        _, info = t.sample(1)
    items = client.items("t")
    assert list(items["priority"]) == [4.0, 1.0, 5.0, 9.0, 2.0]  # the two oldest were evicted
    assert list(items["inserted"]) == sorted(items["inserted"])
    assert set(items["num_steps"]) == {1} and items["times_sampled"].sum() == 1
    by = client.items("t", by="priority")
    assert list(by["priority"]) == [9.0, 5.0, 4.0, 2.0, 1.0]
    assert set(by["key"]) == set(items["key"])
    with pytest.raises(engram.NotFound):
        client.items("nothing")
    with pytest.raises(ValueError, match="by must be"):
        client.items("t", by="age")


# Run by a fresh interpreter that cannot import engram (-I: no PYTHONPATH,
# no user site): numpy alone reads an export.
NUMPY_READER = textwrap.dedent("""
    import json, sys
    import numpy as np
    assert "engram" not in sys.modules
    d = np.load(sys.argv[1])
    assert int(d["engram/format"]) == 1, d["engram/format"]
    out = {"table": d["engram/table"].item().decode(), "items": []}
    for i in range(len(d["items/offset"])):
        rows = slice(int(d["items/offset"][i]), int(d["items/offset"][i] + d["items/length"][i]))
        out["items"].append({"priority": float(d["items/priority"][i]),
                             "obs": d["steps/obs"][rows].tolist(),
                             "reward": d["steps/reward"][rows].tolist()})
    assert d["steps/obs"].dtype == np.uint8 and d["steps/obs"].shape[1:] == (2, 3)
    assert list(d["items/inserted"]) == sorted(d["items/inserted"])
    print(json.dumps(out))
""")


def test_an_export_is_read_by_numpy_alone_and_imports_back(client, tmp_path):
    cols = [("obs", np.uint8, (2, 3)), ("reward", np.float32, ())]
    client.create_table("t", cols, max_size=100, compression={"obs": "delta_zstd"})
    written = []
    with client.table("t") as t, client.writer(cols, chunk_length=4, max_item_steps=5,
                                               compression={"obs": "delta_zstd"}) as w:
        step = 0
        for episode in range(3):
            for k in range(6):
                obs = np.full((2, 3), step % 256, np.uint8) + np.arange(6, dtype=np.uint8).reshape(2, 3)
                w.append(obs=obs, reward=np.float32(step / 4))
                step += 1
                if k >= 1:
                    n = min(k + 1, 5)
                    w.create_item(t, num_steps=n, priority=0.25 * step)
                    written.append((0.25 * step, list(range(step - n, step))))
            w.end_episode()
        w.flush()
        path = tmp_path / "t.npz"
        assert t.export(path) == len(written)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    r = subprocess.run([sys.executable, "-I", "-c", NUMPY_READER, str(path)], env=env, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    got = __import__("json").loads(r.stdout)
    assert got["table"] == "t"
    assert len(got["items"]) == len(written)
    for item, (priority, steps) in zip(got["items"], written):
        assert item["priority"] == priority
        assert item["reward"] == [s / 4 for s in steps]
        assert item["obs"] == [(np.full((2, 3), s % 256, np.uint8) + np.arange(6, dtype=np.uint8).reshape(2, 3))
                               .tolist() for s in steps]

    # A dataset made with numpy (np.savez) goes in; a compressed one and a
    # damaged one are refused by name and insert nothing.
    client.create_table("u", cols, max_size=100)
    d = np.load(path)
    mine = {"steps/obs": d["steps/obs"], "steps/reward": d["steps/reward"],
            "items/offset": d["items/offset"].astype(np.int64), "items/length": d["items/length"].astype(np.int32),
            "items/priority": d["items/priority"].astype(np.float32)}
    np.savez(tmp_path / "mine.npz", **mine)
    np.savez_compressed(tmp_path / "small.npz", **mine)
    np.savez(tmp_path / "future.npz", **mine, **{"engram/format": np.uint32(99)})
    damaged = bytearray((tmp_path / "mine.npz").read_bytes())
    damaged[len(damaged) // 3] ^= 0xFF
    (tmp_path / "damaged.npz").write_bytes(bytes(damaged))
    reports = []
    with client.table("u") as u:
        with pytest.raises(engram.EngramError, match="np.savez_compressed") as e:
            u.import_from(tmp_path / "small.npz")
        assert e.value.code == _ffi.E_INVALID
        # engram-export(5): a reader refuses versions it does not know (it
        # imported this one before).
        with pytest.raises(engram.EngramError, match="export format 99; this engram reads format 1") as e:
            u.import_from(tmp_path / "future.npz")
        assert e.value.code == _ffi.E_INVALID
        with pytest.raises(engram.EngramError, match="damaged") as e:
            u.import_from(tmp_path / "damaged.npz")
        assert e.value.code == _ffi.E_CORRUPT
        assert client.table_info("u")["size"] == 0
        assert u.import_from(tmp_path / "mine.npz", progress=lambda done, total: reports.append((done, total))) == \
            len(written)
        assert reports[-1] == (len(written), len(written))
        assert len(client.items("u")) == len(written)
        with pytest.raises(ZeroDivisionError):
            u.export(tmp_path / "never.npz", progress=lambda done, total: 1 / 0)
        assert not (tmp_path / "never.npz").exists()
    d2 = np.load(tmp_path / "mine.npz")
    back = tmp_path / "back.npz"
    with client.table("u") as u:
        u.export(back)
    d3 = np.load(back)
    for name in ("steps/obs", "steps/reward"):
        assert np.array_equal(d2[name], d3[name]), name
    assert np.array_equal(d3["items/priority"], d2["items/priority"].astype(np.float64))


def test_errors_carry_the_code_and_the_message(client):
    cols = [("x", np.float32, ())]
    with pytest.raises(engram.NotFound) as e:
        client.table("missing")
    assert e.value.code == _ffi.E_NOT_FOUND and "missing" in e.value.message
    client.create_table("t", cols, max_size=10)
    with pytest.raises(engram.Exists):
        client.create_table("t", cols, max_size=10)
    with pytest.raises(engram.EngramError) as e:
        client.create_table("bad name!", cols, max_size=10)
    assert e.value.code == _ffi.E_INVALID and "name" in e.value.message
    with pytest.raises(ValueError, match="dtype complex128"):
        client.create_table("c", [("z", np.complex128, ())], max_size=10)
    with client.table("t") as t, client.writer(cols) as w:
        with pytest.raises(ValueError, match="shape"):
            w.append(x=np.zeros(3, np.float32))
        with pytest.raises(engram.RateLimited):
            t.sample(batch_size=1, timeout_ms=0)
        start = time.monotonic()
        with pytest.raises(engram.Timeout):
            t.sample(batch_size=1, timeout_ms=100)
        assert time.monotonic() - start >= 0.1
        with pytest.raises(engram.EngramError) as e:
            t.update_priorities([1], [float("nan")])
        assert e.value.code == _ffi.E_PRIORITY
    with pytest.raises(engram.Closed):
        t.sample(batch_size=1)


def test_integers_that_do_not_fit_c_are_refused_by_name(client):
    # ctypes keeps an int's low bits: without the binding's check, -1 steps
    # reached the library as 4294967295 and 2**32 as 0 ("needs at least one
    # step"), and a batch's item 2**32 would have been item 0.
    cols = [("x", np.float32, (2,))]
    for bad, kind in ((-1, ValueError), (2**32, ValueError), (1.0, TypeError)):
        with pytest.raises(kind, match="max_size"):
            client.create_table("t", cols, max_size=bad if bad != 2**32 else 2**64)
    with pytest.raises(ValueError, match=r"shape\[0\] is -1"):
        client.create_table("t", [("x", np.float32, (-1,))], max_size=10)
    client.create_table("t", cols, max_size=10)
    with client.table("t") as t, client.writer(cols) as w:
        w.append(x=np.ones(2, np.float32))
        for bad in (-1, 2**32):
            with pytest.raises(ValueError, match=f"num_steps is {bad}"):
                w.create_item(t, num_steps=bad, priority=1.0)
            with pytest.raises(ValueError, match=f"batch_size is {bad}"):
                t.sample(batch_size=bad)
        with pytest.raises(TypeError, match="priority must be a number"):
            w.create_item(t, num_steps=1, priority="high")
        with pytest.raises(TypeError, match=r"table must be an engram.Table \(client.table\(name\) opens one\), "
                                            "not the str 't'"):  # was an AttributeError
            w.create_item("t", num_steps=1, priority=1.0)
        with pytest.raises(TypeError, match="table must be an engram.Table .*, not NoneType"):
            w.create_item_at_max(None, num_steps=1)
        with pytest.raises(ValueError, match="timeout_ms is"):
            w.flush(timeout_ms=2**31)
        w.create_item(t, num_steps=1, priority=1.0)
        w.flush()
        with t.sample_view(batch_size=1) as b:
            for bad in (1, 2**32, -2):
                with pytest.raises(IndexError, match=f"item {bad} is out of range"):
                    b.view(bad, "x")
            with pytest.raises(IndexError, match="column 3 is out of range"):
                b.view(0, 3)
            with pytest.raises(KeyError, match="no column 'y'"):
                b.view(0, "y")
            np.testing.assert_array_equal(b.view(-1, 0), b.view(0, "x"))  # as Python's sequences count


def test_careless_table_arguments_are_refused_by_name(client):
    cols = [("obs", np.float32, (4,)), ("action", np.int32, ())]
    for kwargs, kind, message in (
            (dict(compression={5: "zstd"}), IndexError, "compression: column 5 is out of range"),  # was "invalid index"
            (dict(compression={0: "zst"}), ValueError, "codec 'zst' is not one of none, zstd, delta_zstd"),  # KeyError
            (dict(compression={"act": "zstd"}), KeyError, "no column 'act'"),
            (dict(compression={0: ("zstd", "high")}), TypeError, "level must be an integer"),
            (dict(rate_limiter="queue"), TypeError, "rate_limiter must come from engram.min_size")):
        with pytest.raises(kind, match=message):
            client.create_table("t", cols, max_size=10, **kwargs)
    with pytest.raises(TypeError, match="a table name must be a str, got None"):  # was AttributeError
        client.create_table(None, cols, max_size=10)
    with pytest.raises(TypeError, match="column 0: its name must be a str, got 3"):
        client.create_table("t", [(3, np.float32, ())], max_size=10)
    with pytest.raises(TypeError, match="a table name must be a str"):
        client.table(None)
    with pytest.raises(TypeError, match="socket must be a str"):
        engram.connect(5)
    # A column named in compression, and a shape given as one int (as numpy takes it).
    client.create_table("t", [("obs", np.float32, 4), ("action", np.int32, ())], max_size=10,
                        compression={"obs": "zstd"})
    with client.table("t") as t:
        assert t.columns[0][2] == (4,)
    with pytest.raises(TypeError, match="rate_limiter must come from"):
        client.set_rate_limiter("t", None)


def test_conversions_that_would_change_values_are_refused(client):
    cols = [("frame", np.uint8, (2,)), ("action", np.int32, ()), ("done", np.bool_, ()), ("r", np.float32, ())]
    client.create_table("t", cols, max_size=10, sampler="fifo")
    good = dict(frame=[255, 0], action=3, done=True, r=1)  # ints into float, 0/1 into bool: exact
    with client.table("t") as t, client.writer(cols) as w:
        for column, bad, message in (("frame", np.array([0.5, 0.7]), "float64 values would be truncated"),
                                     ("frame", [300, 1], r"values 1\.\.300 do not fit uint8"),
                                     ("frame", [-1, 1], r"values -1\.\.1 do not fit uint8"),
                                     ("action", 1.5, "would be truncated"),
                                     ("action", 2**40, "values 1099511627776.* do not fit int32"),
                                     ("action", 2**70, "cannot be stored as int32"),
                                     ("action", None, "None cannot be stored"),
                                     ("done", 0.5, "would be truncated"),
                                     ("action", "3", "cannot be stored as int32")):
            with pytest.raises(ValueError, match=f"column '{column}': .*{message}"):
                w.append(**dict(good, **{column: bad}))
        w.append(**good)
        w.create_item(t, num_steps=1, priority=1.0)
        w.flush()
        data, _ = t.sample(batch_size=1)
        assert list(data["frame"][0, 0]) == [255, 0] and data["action"][0, 0] == 3 and data["r"][0, 0] == 1.0
        assert client.table_info("t")["inserts"] == 1
        # Keys too: 1.5 was key 1 and -1 was 2^64 - 1.
        for keys, kind, message in (([1.5], TypeError, "key must be an integer"), ([-1], ValueError, "key is -1"),
                                    (np.array([1.5]), ValueError, "keys: float64 values would be truncated"),
                                    (np.array([-1]), ValueError, "keys: values -1..-1 do not fit uint64")):
            with pytest.raises(kind, match=message):
                t.update_priorities(keys, [1.0])
            with pytest.raises(kind, match=message):
                t.delete_items(keys)
        assert len(t.update_priorities([], [])) == 0


def test_priority_updates_and_deletes_report_each_key(client):
    cols = [("x", np.float32, ())]
    client.create_table("t", cols, max_size=10, sampler="prioritized")
    with client.table("t") as t, client.writer(cols, keep_keys=True) as w:
        for i in range(3):
            w.append(x=i)
            w.create_item(t, 1, 1.0)
        w.flush()
        keys = w.take_keys()
        assert list(t.update_priorities(keys, [0.0, 0.0, 5.0])) == [0, 0, 0]
        assert list(t.delete_items([keys[0], 12345])) == [0, _ffi.E_UNKNOWN_KEY]
        assert list(t.update_priorities([keys[0]], [1.0])) == [_ffi.E_STALE_KEY]
        data, _ = t.sample(batch_size=8)
        assert set(data["x"].ravel()) == {2.0}, "zero priority is never drawn"
        t.update_priorities_async([keys[1], keys[2], 12345], [3.0, 0.0, 1.0])  # unknown key skipped
        data, _ = t.sample(batch_size=8)
        assert set(data["x"].ravel()) == {1.0}, "the next sample sees the async update"
        with pytest.raises(engram.EngramError) as e:
            t.update_priorities_async([keys[1]], [-1.0])
        assert e.value.code == _ffi.E_PRIORITY
        t.update_priorities([], [])  # waits for every async answer
        # Begun now, collected later: drawn after the update sent before it.
        t.update_priorities_async([keys[1], keys[2]], [0.0, 1.0])
        t.sample_begin(batch_size=8)
        with pytest.raises(engram.EngramError) as e:
            t.sample_begin(batch_size=8)
        assert e.value.code == _ffi.E_INVALID, "one at a time"
        t.update_priorities_async([keys[1], keys[2]], [1.0, 0.0])
        data, info = t.sample_end()
        assert set(data["x"].ravel()) == {2.0} and len(info) == 8
        with pytest.raises(ValueError):
            t.sample_end()
    info = client.table_info("t")
    assert info["size"] == 2
    assert (info["max_priority"], info["min_priority"]) == (1.0, 0.0), "the two items' priorities now"


def test_careless_numbers_are_refused_by_what_is_allowed(client):
    """Issue 64.5: batch_size=-1 said "must be in 0..4294967295" and 0 was
    then refused; a priority of '1' (a str) was taken for 1.0 while None
    was refused."""
    cols = [("x", np.float32, ())]
    client.create_table("t", cols, max_size=10)
    with client.table("t") as t, client.writer(cols) as w:
        for bad in (-1, 0):
            with pytest.raises(ValueError, match=r"batch_size is %d; it must be in 1\.\.4294967295" % bad):
                t.sample(batch_size=bad)
            with pytest.raises(ValueError, match=r"num_steps is %d; it must be in 1\.\." % bad):
                t.sample_view(batch_size=1, num_steps=bad)
        w.append(x=1.0)
        for bad in ("1", b"1", None):
            with pytest.raises(TypeError, match="priority must be a number"):
                w.create_item(t, 1, bad)
        w.create_item(t, 1, np.float32(2.5))  # numpy's numbers are numbers
        w.flush()
        assert client.items("t")[0]["priority"] == 2.5


def _write(sock, cols, first, n):
    with engram.connect(sock) as c, c.table("t") as t, c.writer(cols) as w:
        for i in range(first, first + n):
            w.append(obs=np.full(16, i))
            w.create_item(t, 1, 1.0)
        w.flush()


@pytest.mark.parametrize("how", ["with", "close", "del", "table_close", "client_close"])
def test_arrays_kept_past_their_batch_show_their_own_items(server, how):
    """The Quick start's pattern, carelessly: arrays of a zero-copy batch
    kept past its end, then every item evicted by new writes. The batch
    stays pinned while an array over it lives, so each still shows its
    own item's bytes (before, all of them showed other items' bytes)."""
    cols = [("obs", np.int64, (16,))]
    c = engram.connect(server.socket)
    c.create_table("t", cols, max_size=8)
    _write(server.socket, cols, 0, 8)
    t = c.table("t")
    if how == "with":
        with t.sample_view(batch_size=8, no_repeats=True) as b:
            kept = [(b.info(i)["key"], b.view(i, "obs")) for i in range(len(b))]
    else:
        b = t.sample_view(batch_size=8, no_repeats=True)
        kept = [(b.info(i)["key"], b.view(i, "obs")[:, 2:]) for i in range(len(b))]  # a slice keeps it too
        if how == "close":
            b.close()
            with pytest.raises(engram.EngramError):
                b.view(0, "obs")  # closed: no new views
        elif how == "del":
            del b
        elif how == "table_close":
            t.close()
        else:
            c.close()
        gc.collect()
    values = {key: int(v.flat[0]) for key, v in kept}
    assert sorted(values.values()) == sorted(set(values.values())) and len(values) == 8
    # Each of the 8 evicted, and every block of the arena's class written
    # again: their chunks are free but for the pins.
    _write(server.socket, cols, 100, 5000)
    with engram.connect(server.socket) as c2:
        assert c2.table_info("t")["evictions"] == 5000
    for key, v in kept:
        assert (v == values[key]).all(), f"item {key}'s array changed to {v.flat[0]}"
    del kept, v
    b = None
    gc.collect()
    if how in ("table_close", "client_close"):  # the handle's close, put off, came with the last array
        with engram.connect(server.socket) as c2:
            assert c2.table_info("t")["clients"] == 0
    c.close()


def test_views_outlive_every_python_reference_to_their_batch(server):
    cols = [("x", np.float64, (8,))]
    c = engram.connect(server.socket)
    c.create_table("t", cols, max_size=10)
    t = c.table("t")
    with c.writer(cols) as w:
        w.append(x=np.arange(8.0))
        w.create_item(t, 1, 1.0)
        w.flush()
    view = t.sample_view(batch_size=1).view(0, "x")  # the batch is referenced by the view only
    gc.collect()
    np.testing.assert_array_equal(view[0], np.arange(8.0))
    c.close()  # the connection waits for the last zero-copy batch to go
    gc.collect()
    np.testing.assert_array_equal(view[0], np.arange(8.0))
    assert view.flags.writeable is False
    del view, t
    gc.collect()
    with engram.connect(server.socket) as c2:
        assert c2.table_info("t")["clients"] == 0, "the first client is gone"


def test_a_finalizer_on_another_thread_waits_for_the_client(client):
    """A batch dropped on one thread while another blocks in a sample on
    the same client: its release is queued, not run concurrently."""
    cols = [("x", np.float32, ())]
    client.create_table("t", cols, max_size=10, rate_limiter=engram.min_size(2))
    t = client.table("t")
    with client.writer(cols) as w:
        w.append(x=1.0)
        w.create_item(t, 1, 1.0)
        w.flush()
        client.set_rate_limiter("t", engram.min_size(1))
        batch = t.sample_view(batch_size=1)
        client.set_rate_limiter("t", engram.min_size(2))
        errors = []

        def blocked():
            try:
                t.sample(batch_size=1, timeout_ms=-1)
            except engram.Interrupted:
                errors.append("interrupted")

        th = threading.Thread(target=blocked)
        th.start()
        time.sleep(0.2)
        del batch
        gc.collect()
        assert client._core.deferred, "the release waits for the lock"
        client.interrupt()
        th.join(5)
        assert errors == ["interrupted"]
        assert client.table_info("t")["size"] == 1  # the next call ran the queued release
        assert not client._core.deferred


def test_ctrl_c_ends_a_blocking_sample_promptly(client):
    client.create_table("t", [("x", np.float32, ())], max_size=10)
    with client.table("t") as t:
        threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT)).start()
        safety = threading.Timer(3.0, client.interrupt)  # so that a failure fails, not hangs
        safety.start()
        start = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            t.sample(batch_size=1, timeout_ms=-1)
        safety.cancel()
        assert time.monotonic() - start < 0.3 + 1.5, "within about 100 ms (1.5 s: a loaded machine)"
        # The client works on, and the cancelled sample took nothing.
        with client.writer([("x", np.float32, ())]) as w:
            w.append(x=7.0)
            w.create_item(t, 1, 1.0)
            w.flush()
        data, _ = t.sample(batch_size=1, timeout_ms=1000)
        assert data["x"][0, 0] == 7.0
        assert client.table_info("t")["samples"] == 1


def test_every_public_class_and_function_has_a_docstring():
    """help() on the binding tells a Python user what the man pages tell a
    C user: every public class, function and method says what it does."""
    import inspect
    missing = []
    for name in dir(engram):
        obj = getattr(engram, name)
        if name.startswith("_") or inspect.ismodule(obj) or not (inspect.isclass(obj) or callable(obj)):
            continue
        if not inspect.getdoc(obj):
            missing.append(name)
        if inspect.isclass(obj) and obj.__module__.startswith("engram"):
            for m, f in vars(obj).items():
                if m.startswith("_") or not (callable(f) or isinstance(f, property)):
                    continue
                if not (getattr(f, "__doc__", None) or "").strip():
                    missing.append(f"{name}.{m}")
    assert not missing, f"no docstring: {missing}"


def test_structs_match_the_c_compiler(tmp_path):
    """Every mirrored struct has the C layout: sizes and offsets as gcc
    computes them from engram.h and engram/server.h."""
    structs = {"engram_column": _ffi.Column, "engram_compression": _ffi.Compression,
               "engram_rate_limiter": _ffi.RateLimiter, "engram_server_options": _ffi.ServerOptions,
               "engram_connect_options": _ffi.ConnectOptions, "engram_table_options": _ffi.TableOptions,
               "engram_table_info": _ffi.TableInfo, "engram_writer_options": _ffi.WriterOptions,
               "engram_sample_options": _ffi.SampleOptions, "engram_sample_info": _ffi.SampleInfo,
               "engram_view": _ffi.View, "engram_item": _ffi.Item, "engram_transfer_options": _ffi.TransferOptions}
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        pytest.skip("no C compiler to compare layouts with")
    lines = ['#include <stdio.h>', '#include <stddef.h>', '#include "engram/engram.h"', '#include "engram/server.h"',
             "int main(void) {"]
    for cname, py in structs.items():
        lines.append(f'printf("{cname} size %zu\\n", sizeof({cname}));')
        for f, _ in py._fields_:
            lines.append(f'printf("{cname}.{f} %zu\\n", offsetof({cname}, {f}));')
    lines.append("return 0; }")
    src = tmp_path / "layout.c"
    src.write_text("\n".join(lines))
    exe = tmp_path / "layout"
    subprocess.run([cc, "-I", os.path.join(ROOT, "capi", "include"), "-I", os.path.join(ROOT, "embedded", "include"),
                    str(src), "-o", str(exe)], check=True)
    c = dict(line.rsplit(" ", 1) for line in subprocess.run([str(exe)], capture_output=True, text=True,
                                                            check=True).stdout.splitlines())
    for cname, py in structs.items():
        assert int(c[f"{cname} size"]) == __import__("ctypes").sizeof(py), cname
        for f, _ in py._fields_:
            assert int(c[f"{cname}.{f}"]) == getattr(py, f).offset, f"{cname}.{f}"


def test_pip_installs_the_package_offline(tmp_path):
    pip = [sys.executable, "-m", "pip"]
    if subprocess.run(pip + ["--version"], capture_output=True).returncode != 0:
        other = shutil.which("pip3") or shutil.which("pip")
        if not other:
            pytest.skip("no pip on this machine")
        pip = [other]
    target = tmp_path / "site"
    r = subprocess.run(pip + ["install", "--no-index", "--no-deps", "--target", str(target),
                              os.path.join(ROOT, "bindings", "python")], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    probe = textwrap.dedent("""
        import engram, sys
        assert engram.__file__.startswith(sys.argv[1]), engram.__file__
        print(engram.version())
    """)
    out = subprocess.run([sys.executable, "-c", probe, str(target)], env=dict(os.environ, PYTHONPATH=str(target)),
                         capture_output=True, text=True, cwd=str(tmp_path))
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == engram.version()


def test_the_examples_run(server):
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "bindings", "python"), PYTHONDONTWRITEBYTECODE="1")
    examples = os.path.join(ROOT, "bindings", "python", "examples")
    w = subprocess.run([sys.executable, os.path.join(examples, "writer.py"), server.socket], env=env,
                       capture_output=True, text=True, timeout=60)
    assert w.returncode == 0, w.stderr
    assert "the table holds 1000 items" in w.stdout
    s = subprocess.run([sys.executable, os.path.join(examples, "sampler.py"), server.socket], env=env,
                       capture_output=True, text=True, timeout=60)
    assert s.returncode == 0, s.stderr
    assert s.stdout.count("item 0x") == 4 and "zero-copy: [" in s.stdout
    assert "without repeats: 16 distinct of 16" in s.stdout and "listed: 1000 items" in s.stdout, s.stdout


def test_the_readme_snippet_runs(server):
    import re
    with open(os.path.join(ROOT, "README.md")) as f:
        blocks = re.findall(r"```python\n(.*?)```", f.read(), re.S)
    assert blocks, "README.md has a Python snippet"
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "bindings", "python"), ENGRAM_SOCKET=server.socket,
               PYTHONDONTWRITEBYTECODE="1")
    r = subprocess.run([sys.executable, "-c", blocks[0]], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    with engram.connect(server.socket) as c:
        assert c.table_info("py_replay")["size"] == 100


def test_append_items_writes_a_batch_in_one_call(client):
    cols = [("obs", np.float32, (4,)), ("step", np.int64, ())]
    client.create_table("t", cols, max_size=100, sampler="fifo", max_times_sampled=1)
    with client.table("t") as t, client.writer(cols, max_item_steps=2) as w:
        obs = np.arange(40, dtype=np.float32).reshape(10, 4)
        w.append_items(t, obs, np.arange(10), num_steps=2, priorities=np.full(10, 3.0))
        w.flush()
        data, info = t.sample(batch_size=9, num_steps=2)
        assert list(data["step"][:, 0]) == list(range(9)) and list(data["step"][:, 1]) == list(range(1, 10))
        assert set(info["priority"]) == {3.0}
        with pytest.raises(ValueError, match="priorities"):
            w.append_items(t, obs, np.arange(10), priorities=[1.0])


def test_reconnect_is_one_call_after_a_server_restart(tmp_path):
    sock = str(tmp_path / "r.sock")
    cols = [("x", np.float32, ())]
    server = engram.Server(socket=sock)
    client = engram.connect(sock)
    client.create_table("t", cols, max_size=10)
    table = client.table("t")
    server.close()
    with pytest.raises(engram.Disconnected):
        client.table_info("t")
    server = engram.Server(socket=sock)
    try:
        client.reconnect()
        with pytest.raises(engram.Closed):
            table.sample(1, timeout_ms=0)  # handles of before are closed
        client.create_table("t", cols, max_size=10)
        assert client.table_info("t")["size"] == 0
        client.close()
    finally:
        server.close()


def test_a_server_limit_is_its_own_error_naming_the_setting(tmp_path):
    sock = str(tmp_path / "l.sock")
    with engram.Server(socket=sock, config_toml="[server]\nmax_connections = 1\n") as server:
        with engram.connect(sock):
            with pytest.raises(engram.Limit) as e:
                engram.connect(sock)
            assert e.value.code == _ffi.E_LIMIT
            assert "[server] max_connections" in e.value.message
        # The first one's place is free again once the server has seen it
        # hang up, which it does on its own thread, a moment later.
        for attempt in range(200):
            try:
                with engram.connect(sock):
                    break
            except engram.Limit:
                time.sleep(0.01)
        else:
            pytest.fail("the first client's connection was never given back")
