#!/usr/bin/env python3
"""Splits a system-wide cpu-clock profile of the insert scenario by thread.

  thread_cpu.py --git REV --out FILE  PAYLOAD SAMPLES RUN_JSON  [PAYLOAD SAMPLES RUN_JSON ...]

SAMPLES is `perf script -F comm,pid,tid,time,ip,sym` of `perf record -a -e
cpu-clock` over one run of `engram_bench_throughput --only engram/insert
--reps 1` (one writer, then two); RUN_JSON is that run's --out. Written by
bench/thread_cpu.sh, which says what it measures.

The writers are the harness's worker processes: the one that ran first is
the one-writer scenario, the next two the two-writer one. Each scenario's
window is the time all of its writers were running, less its first 0.5 s
(warm-up, page loads) and its last 0.2 s. In it, a thread's share of a CPU
is its samples over the window's samples per CPU. The owner is engramd's
busiest thread; its samples in its wait (spinning for the next request:
cpu_relax, any_ready, the owner's run loop, the doorbell, and the
kernel's futex and scheduler paths on its way to sleep) are its waiting
share. A thread asleep takes no samples.
"""
import json
import os
import platform
import re
import sys
from collections import Counter

LINE = re.compile(r"\s*(.+?)\s+(\d+)/(\d+)\s+([\d.]+):\s*(?:[0-9a-f]+\s+)?(\S*)")
WAITING = re.compile(r"cpu_relax|any_ready|TableOwner::run\b|Doorbell::wait|futex|__schedule|schedule\b")
WORKER = "engram_bench_th"  # the harness's processes, as the kernel truncates its name


def read_samples(path):
    rows = []
    with open(path) as f:
        for line in f:
            m = LINE.match(line)
            if m:
                rows.append((m.group(1), int(m.group(2)), int(m.group(3)), float(m.group(4)), m.group(5)))
    return rows


def scenario(rows, writers, cpus):
    """Shares of a CPU in the window in which every one of `writers` ran."""
    span = {}
    for comm, pid, _, t, _ in rows:
        if pid in writers:
            lo, hi = span.get(pid, (t, t))
            span[pid] = (min(lo, t), max(hi, t))
    lo = max(span[p][0] for p in writers) + 0.5
    hi = min(span[p][1] for p in writers) - 0.2
    if hi - lo < 0.5:
        raise SystemExit(f"thread_cpu: a scenario ran too briefly to measure ({hi - lo + 0.7:.2f} s)")
    inside = [r for r in rows if lo <= r[3] <= hi]
    per_cpu = len(inside) / cpus
    engramd = Counter(tid for comm, _, tid, _, _ in inside if comm.startswith("engramd"))
    owner = engramd.most_common(1)[0][0] if engramd else None
    by_writer = Counter(pid for _, pid, _, _, _ in inside if pid in writers)
    owner_rows = [r for r in inside if r[2] == owner]
    waiting = sum(1 for r in owner_rows if WAITING.search(r[4]))
    idle = sum(1 for r in inside if r[0] == "swapper")
    return {
        "window_s": round(hi - lo, 2),
        "owner_cpu": round(len(owner_rows) / per_cpu, 3),
        "owner_waiting": round(waiting / len(owner_rows), 3) if owner_rows else 0.0,
        "writers_cpu": [round(by_writer[p] / per_cpu, 3) for p in writers],
        "idle_cpu": round(idle / per_cpu, 3),
    }


def one_payload(payload, samples_path, run_path, cpus):
    rows = read_samples(samples_path)
    run = json.load(open(run_path))
    rate = {r["processes"]: r["items_per_s"] for r in run["results"] if r["op"] == "insert"}
    count = Counter(pid for comm, pid, _, _, _ in rows if comm.startswith(WORKER))
    first = {}
    for comm, pid, _, t, _ in rows:
        if comm.startswith(WORKER):
            first.setdefault(pid, t)
    # The parent process samples little (it waits for its workers); a worker
    # runs flat out for its whole scenario.
    busiest = max(count.values())
    workers = sorted((p for p, n in count.items() if n > busiest / 4), key=lambda p: first[p])
    if len(workers) != 3 or 1 not in rate or 2 not in rate:
        raise SystemExit(f"thread_cpu: {payload} B: expected one writer then two, found {len(workers)} busy workers")
    one, two = scenario(rows, workers[:1], cpus), scenario(rows, workers[1:], cpus)
    one["items_per_s"], two["items_per_s"] = rate[1], rate[2]
    return {"payload_bytes": payload, "one_writer": one, "two_writers": two,
            "two_over_one": round(rate[2] / rate[1], 3)}


def main(argv):
    git, out = "unknown", None
    while argv and argv[0].startswith("--"):
        flag, value, argv = argv[0], argv[1], argv[2:]
        if flag == "--git":
            git = value
        elif flag == "--out":
            out = value
        else:
            print(__doc__, file=sys.stderr)
            return 2
    if not argv or len(argv) % 3 or not out:
        print(__doc__, file=sys.stderr)
        return 2
    cpus = os.cpu_count()
    results = [one_payload(int(argv[i]), argv[i + 1], argv[i + 2], cpus) for i in range(0, len(argv), 3)]
    doc = {"machine": {"cores": cpus, "kernel": platform.release()}, "git": git,
           "method": __doc__.split("\n\n", 2)[2].strip(), "results": results}
    with open(out, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    print("shares of one CPU, in the middle of each scenario (owner's share spent waiting in parentheses)")
    print(f"{'payload':>8}  {'one writer: owner / writer':>30}  {'two writers: owner / writers':>36}  two / one")
    for r in results:
        a, b = r["one_writer"], r["two_writers"]
        print(f"{r['payload_bytes']:>7}B  {a['owner_cpu']:>10.0%} ({a['owner_waiting']:.0%}) / {a['writers_cpu'][0]:.0%}"
              f"  {b['owner_cpu']:>14.0%} ({b['owner_waiting']:.0%}) / "
              f"{' + '.join(f'{w:.0%}' for w in b['writers_cpu']):>12}  {r['two_over_one']:.2f}x")
    print(f"thread_cpu: wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
