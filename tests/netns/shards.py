"""The shards phase's writer and sampler (run.sh shards), through the
Python binding. A shard K's items are x = [K, i] with 48 pad bytes of
(K * 31 + i) & 0xff and priority 1 + K * N + i: every item of every shard
has its own priority, so a sample names its item.

    python3 shards.py write SOCKET TABLE K N
    python3 shards.py sample SOCKET TABLE SHARDS N SAMPLES [--zero K:M] [--from K,...]

sample waits (30 s at most) until batches come from the shards in --from
(default all) alone, then draws SAMPLES items in batches of 64 from a view over SHARDS
shards of N items each; checks every item's bytes, that its probability
is its priority over the total of the shards in --from (default all) to
1e-9 and its table size theirs, and the chi-square of the counts against
priority (p > 1e-4). --zero K:M first sets the first M items of shard K
to priority 0 through the view and then checks that none of them comes
once the draws made before are spent. Prints one JSON line.
"""
import json
import math
import sys
import time

import numpy as np

import engram

PAD, BATCH = 48, 64


def write(socket, table_name, k, n):
    client = engram.connect(socket)
    table = client.table(table_name)
    writer = client.writer([("x", "int64", (2,)), ("pad", "uint8", (PAD,))], chunk_length=8, max_item_steps=1)
    i = np.arange(n, dtype=np.int64)
    x = np.stack([np.full_like(i, k), i], axis=1)
    pad = np.repeat(((k * 31 + i) & 0xFF).astype(np.uint8)[:, None], PAD, axis=1)
    writer.append_items(table, x, pad, priorities=(1.0 + k * n + i).astype(np.float64))
    writer.flush()
    writer.close()
    client.close()


def chi_square_p(chi2, df):
    """Wilson-Hilferty: the chi-square's upper tail through a normal one."""
    z = ((chi2 / df) ** (1 / 3) - (1 - 2 / (9 * df))) / math.sqrt(2 / (9 * df))
    return 0.5 * math.erfc(z / math.sqrt(2))


def batch(table, n_per):
    data, info = table.sample(BATCH, timeout_ms=20000)
    x, pad = data["x"][:, 0, :], data["pad"][:, 0, :]
    k, i = x[:, 0], x[:, 1]
    want = ((k * 31 + i) & 0xFF).astype(np.uint8)
    if not (pad == want[:, None]).all():
        raise SystemExit("shards.py: an item's bytes are not its own")
    if not (info["priority"] == 1.0 + k * n_per + i).all():
        raise SystemExit("shards.py: an item's priority is not its own")
    return k, i, info


def sample(socket, table_name, shards, n_per, samples, zero=None, present=None):
    present = present if present is not None else list(range(shards))
    client = engram.connect(socket)
    table = client.table(table_name)
    out = {"samples": samples}
    # Settled: five batches in a row from exactly the shards present (a
    # shard's link joins, or notices a loss, within a round trip or two;
    # batches split before come from the shards as they were).
    t0, calm = time.monotonic(), 0
    while calm < 5:
        if time.monotonic() - t0 > 30:
            raise SystemExit(f"shards.py: batches did not come from shards {present} alone within 30 s")
        k, _, info = batch(table, n_per)
        ok = set(k.tolist()) <= set(present) and (info["table_size"] == n_per * len(present)).all()
        calm = calm + 1 if ok else 0
    out["settle_s"] = round(time.monotonic() - t0, 2)
    if zero:
        zk, zm = zero
        keys = {}
        while len(keys) < zm:
            k, i, info = batch(table, n_per)
            for j in np.flatnonzero((k == zk) & (i < zm)):
                keys[int(i[j])] = int(info["key"][j])
        table.update_priorities(np.array(list(keys.values()), dtype=np.uint64), np.zeros(len(keys)))
        # Spent: the draws made before (at most 2 x prefetch x shard_batch
        # per shard, at its share of each batch).
        spent = 0
        t0 = time.monotonic()
        while time.monotonic() - t0 < 30:
            k, i, _ = batch(table, n_per)
            spent += 1
            if spent > 100 and not ((k == zk) & (i < zm)).any():
                break
        out["batches_to_follow_the_update"] = spent
    prio = {kk: 1.0 + kk * n_per + np.arange(n_per) for kk in present}
    total = sum(p.sum() for p in prio.values())
    counts = {kk: np.zeros(n_per) for kk in present}
    drawn = 0
    t0 = time.monotonic()
    while drawn < samples:
        k, i, info = batch(table, n_per)
        for kk in set(k.tolist()):
            if kk not in counts:
                raise SystemExit(f"shards.py: an item of shard {kk}, which should be left out")
        want = (1.0 + k * n_per + i) / total
        if zero:
            hit = (k == zero[0]) & (i < zero[1])
            if hit.any():
                raise SystemExit("shards.py: an item of priority 0 on its shard was drawn")
        elif np.abs(info["probability"] - want).max() > 1e-9:
            raise SystemExit(f"shards.py: probabilities off by {np.abs(info['probability'] - want).max()}")
        if not zero and (info["table_size"] != n_per * len(present)).any():
            raise SystemExit("shards.py: a table size that is not the shards'")
        for kk, ii in zip(k.tolist(), i.tolist()):
            counts[kk][ii] += 1
        drawn += len(k)
    out["samples_per_s"] = round(drawn / (time.monotonic() - t0))
    if not zero:
        chi2, df = 0.0, -1
        for kk in present:
            expect = drawn * prio[kk] / total
            chi2 += float(((counts[kk] - expect) ** 2 / expect).sum())
            df += n_per
        out["chi2"] = round(chi2, 1)
        out["p"] = chi_square_p(chi2, df)
        if out["p"] < 1e-4:
            raise SystemExit(f"shards.py: chi-square {chi2:.1f} on {df} degrees of freedom (p {out['p']:.2g})")
    client.close()
    print(json.dumps(out))


def main():
    a = sys.argv[1:]
    if a[0] == "write":
        write(a[1], a[2], int(a[3]), int(a[4]))
        return
    zero, present = None, None
    rest = a[6:]
    while rest:
        if rest[0] == "--zero":
            zero = tuple(int(v) for v in rest[1].split(":"))
        elif rest[0] == "--from":
            present = [int(v) for v in rest[1].split(",")]
        rest = rest[2:]
    sample(a[1], a[2], int(a[3]), int(a[4]), int(a[5]), zero, present)


if __name__ == "__main__":
    main()
