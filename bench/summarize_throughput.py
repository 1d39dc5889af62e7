#!/usr/bin/env python3
"""Summarizes bench/results/throughput*.json (written by bench/throughput.sh).

  summarize_throughput.py FILE                 table of results and ratios; exits 1 if
                                               a result is missing or not positive
  summarize_throughput.py --targets FILE       also checks the targets of issue 5
  summarize_throughput.py --gnuplot-data FILE  columns for bench/throughput.gp
  summarize_throughput.py --ab A1 B1 [A2 B2 ...]
                                               two revisions run alternately on one host
                                               (A, B, A, B): each engram scenario's items/s
                                               per run, and B/A per round beside what the
                                               baselines moved meanwhile (host drift)
"""
import json
import sys

PAYLOADS = [400, 4000, 40000, 400000]
# As kBusyWarning in bench/throughput/machine.hpp: more than 0.8 of one of two CPUs
# went to something else just before a repetition.
BUSY_WARNING = 0.4
# (label, system, op, table, processes)
ROWS = [
    ("insert, 1 proc", "insert", "uniform", 1),
    ("insert, 2 procs", "insert", "uniform", 2),
    ("sample, 1 proc", "sample", "prioritized", 1),
    ("sample, 2 procs", "sample", "prioritized", 2),
]
ENGRAM_ONLY = [
    ("sample uniform, 1 proc", "sample", "uniform", 1),
    ("zero-copy prioritized, 1 proc", "sample_zero_copy", "prioritized", 1),
    ("zero-copy prioritized, 2 procs", "sample_zero_copy", "prioritized", 2),
    ("zero-copy uniform, 1 proc", "sample_zero_copy", "uniform", 1),
    ("both: inserts", "both_insert", "prioritized", 1),
    ("both: samples", "both_sample", "prioritized", 1),
    ("queue, end to end", "queue", "queue", 1),
]


def find(results, system, op, table, payload, procs):
    for r in results:
        if (r["system"], r["op"], r["table"], r["payload_bytes"], r["processes"]) == (system, op, table, payload, procs):
            return r
    return None


def baseline(results, system, op, payload, procs):
    base_op = {"insert": "insert", "sample": "sample"}[op]
    return find(results, system, base_op, "none", payload, procs)


def fmt(r):
    if r is None:
        return "-"
    return f"{r['items_per_s'] / 1e6:8.3f}M/s {r['mb_per_s']:8.0f} MB/s"


def ab(paths):
    """B over A for every engram scenario, per round, and the baselines' own drift between the two runs of a
    round: a B/A outside the baselines' spread is the code's, not the host's."""
    docs = [json.load(open(f)) for f in paths]
    print("runs: " + ", ".join(f"{'AB'[i % 2]}{i // 2 + 1} git {d['git']}" for i, d in enumerate(docs)))
    rounds = len(docs) // 2
    head = "".join(f"   A{k + 1}/B{k + 1} items/s  B/A" for k in range(rounds))
    scenarios = [("engram", op, table, procs, label) for label, op, table, procs in ROWS + ENGRAM_ONLY]
    scenarios += [("redis", "insert", "none", 1, "redis SET (baseline)"), ("memcpy", "insert", "none", 1, "memcpy in (baseline)"),
                  ("memcpy", "sample", "none", 1, "memcpy gather (baseline)")]
    for p in PAYLOADS:
        print(f"\npayload {p} B{'':24}{head}")
        for system, op, table, procs, label in scenarios:
            cells = []
            for k in range(rounds):
                a = find(docs[2 * k]["results"], system, op, table, p, procs)
                b = find(docs[2 * k + 1]["results"], system, op, table, p, procs)
                if not a or not b or a["items_per_s"] <= 0:
                    cells.append(f"{'-':>26}")
                    continue
                cells.append(f"  {a['items_per_s'] / 1e6:6.3f}M/{b['items_per_s'] / 1e6:6.3f}M {b['items_per_s'] / a['items_per_s']:5.2f}")
            print(f"  {label:34}" + "".join(cells))
        lat = []
        for k in range(rounds):
            a = find(docs[2 * k]["results"], "engram", "queue", "queue", p, 1)
            b = find(docs[2 * k + 1]["results"], "engram", "queue", "queue", p, 1)
            lat.append(f"{a['p99_us']:>11.0f} us/{b['p99_us']:.0f} us" if a and b and "p99_us" in a and "p99_us" in b
                       else f"{'-':>26}")
        print(f"  {'queue p99 latency':34}" + "".join(f"{c:<26}" for c in lat))
    return 0


def main(argv):
    mode = None
    if argv and argv[0] == "--ab":
        if len(argv) < 3 or len(argv) % 2 == 0:
            print(__doc__, file=sys.stderr)
            return 2
        return ab(argv[1:])
    if argv and argv[0] in ("--targets", "--gnuplot-data"):
        mode = argv.pop(0)
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    doc = json.load(open(argv[0]))
    results = doc["results"]
    if mode == "--gnuplot-data":
        print("# payload engram_insert redis_insert memcpy_insert engram_sample redis_sample memcpy_gather engram_zero_copy"
              " (items/s; MB/s = items/s * payload / 1e6)")
        for p in PAYLOADS:
            cells = [find(results, "engram", "insert", "uniform", p, 1), find(results, "redis", "insert", "none", p, 1),
                     find(results, "memcpy", "insert", "none", p, 1), find(results, "engram", "sample", "prioritized", p, 1),
                     find(results, "redis", "sample", "none", p, 1), find(results, "memcpy", "sample", "none", p, 1),
                     find(results, "engram", "sample_zero_copy", "prioritized", p, 1)]
            print(p, " ".join(f"{c['items_per_s']:.1f}" if c else "NaN" for c in cells))
        return 0

    missing = []
    m = doc["machine"]
    damon = f", DAMON {m['damon']}" if "damon" in m else ""
    if "shm_huge_pages" in m:
        damon += f", {m['shm_huge_pages']}"
    print(f"machine: {m['cores']} cores, {m['cpu']}, {m['kernel']}{damon}; git {doc['git']}; "
          f"{doc['config']['statistic']} of {doc['config']['repetitions']}, {doc['config']['seconds']} s each")
    trips = sorted(t for r in results for t in r.get("round_trip_ns", []) if t > 0)
    if trips:
        print(f"core-to-core round trip before each scenario: {trips[0]}-{trips[-1]} ns, "
              f"median {trips[len(trips) // 2]} (per repetition in the JSON: round_trip_ns)")
    busy = [(b, r) for r in results for b in r.get("busy_before", []) if b >= 0]
    if busy:
        values = sorted(b for b, _ in busy)
        print(f"machine busy just before each repetition: {values[0]:.0%}-{values[-1]:.0%} of all CPUs, "
              f"median {values[len(values) // 2]:.0%} (busy_before)")
        hot = [f"{r['system']} {r['op']} {r['table']} {r['payload_bytes']} B x{r['processes']} ({b:.0%})"
               for b, r in busy if b > BUSY_WARNING]
        if hot:
            print(f"warning: {len(hot)} repetitions began on a machine more than {BUSY_WARNING:.0%} busy "
                  f"(another process was using the CPU; their numbers may be low): " + "; ".join(hot))
    damon_ms = sorted(k for r in results for k in r.get("kdamond_ms", []) if k >= 0)
    if damon_ms:
        print(f"kernel's DAMON threads (kdamond) during each repetition: {damon_ms[0]:.0f}-{damon_ms[-1]:.0f} ms "
              f"of CPU, median {damon_ms[len(damon_ms) // 2]:.0f} (kdamond_ms; their bursts stall the queue's items)")
    for p in PAYLOADS:
        print(f"\npayload {p} B")
        print(f"  {'':32} {'engram':>24} {'redis':>24} {'memcpy':>24}   engram/redis engram/memcpy")
        for label, op, table, procs in ROWS:
            e = find(results, "engram", op, table, p, procs)
            r = baseline(results, "redis", op, p, procs)
            c = baseline(results, "memcpy", op, p, procs)
            for name, x in (("engram", e), ("redis", r), ("memcpy", c)):
                if x is None and not (name == "memcpy" and op == "sample" and procs == 2):
                    missing.append(f"{name} {op} {p} B x{procs}")
            ratio = lambda a, b: f"{a['items_per_s'] / b['items_per_s']:10.2f}x" if a and b and b["items_per_s"] > 0 else "         -"
            print(f"  {label:32} {fmt(e):>24} {fmt(r):>24} {fmt(c):>24}   {ratio(e, r)}   {ratio(e, c)}")
        for label, op, table, procs in ENGRAM_ONLY:
            e = find(results, "engram", op, table, p, procs)
            if e is None:
                missing.append(f"engram {op} {table} {p} B x{procs}")
            extra = ""
            if e and "p99_us" in e:
                extra = f"   p50 {e['p50_us']:.0f} us, p99 {e['p99_us']:.0f} us"
                if "p999_us" in e:  # older runs have p50 and p99 only
                    extra += f", p99.9 {e['p999_us']:.0f} us, max {e['max_us']:.0f} us"
                extra += f" (paced, one item per {e['pace_us']:.0f} us)" if "pace_us" in e else " (paced)"
                if e.get("wake_up_p99_us", -1) >= 0:
                    extra += f"; a futex wake-up here: p50 {e['wake_up_p50_us']:.0f} us, p99 {e['wake_up_p99_us']:.0f} us"
                if any(k >= 0 for k in e.get("kdamond_ms", [])):
                    extra += f", kdamond {'/'.join(f'{k:.0f}' for k in e['kdamond_ms'])} ms"
            print(f"  {label:32} {fmt(e):>24}{extra}")
    bad = [f"{r['system']} {r['op']} {r['table']} {r['payload_bytes']} B x{r['processes']}" for r in results
           if not r["items_per_s"] > 0]
    if missing or bad:
        print(f"\nmissing results: {missing}; non-positive: {bad}", file=sys.stderr)
        return 1
    if mode == "--targets":
        return check_targets(results)
    return 0


def check_targets(results):
    """The targets of issue 5, each printed as met or missed."""
    ok = True

    def verdict(name, value, target, unit="x"):
        nonlocal ok
        met = value >= target
        ok = ok and met
        print(f"  {'met   ' if met else 'MISSED'} {name}: {value:.2f}{unit} (target >= {target}{unit})")

    def ips(system, op, table, p, procs):
        r = find(results, system, op, table, p, procs)
        return r["items_per_s"] if r else 0.0

    print("\ntargets")
    verdict("inserts at 400 B, engram/redis", ips("engram", "insert", "uniform", 400, 1) / ips("redis", "insert", "none", 400, 1), 10)
    verdict("samples at 400 B, engram/redis", ips("engram", "sample", "prioritized", 400, 1) / ips("redis", "sample", "none", 400, 1), 5)
    for p in PAYLOADS[1:]:
        verdict(f"inserts at {p} B, engram/memcpy", ips("engram", "insert", "uniform", p, 1) / ips("memcpy", "insert", "none", p, 1), 0.5)
        verdict(f"samples at {p} B, engram/memcpy gather",
                ips("engram", "sample", "prioritized", p, 1) / ips("memcpy", "sample", "none", p, 1), 0.5)
    for p in PAYLOADS:
        if ips("memcpy", "insert", "none", p, 2) >= 1.6 * ips("memcpy", "insert", "none", p, 1):
            verdict(f"inserts at {p} B, 2 writers / 1", ips("engram", "insert", "uniform", p, 2) / ips("engram", "insert", "uniform", p, 1), 1.6)
        verdict(f"zero-copy samples at {p} B (M items/s)", ips("engram", "sample_zero_copy", "prioritized", p, 1) / 1e6, 3, "M")
        q = find(results, "engram", "queue", "queue", p, 1)
        if q:
            verdict(f"queue p99 latency at {p} B, 100 us minus it", 100 - q["p99_us"], 0, " us")
    return 0 if ok else 3


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
