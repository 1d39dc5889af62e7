#!/usr/bin/env python3
"""Reads engram_bench_sumtree's JSON and prints, per operation and N, each
implementation's items/s and its ratio to the baseline measured in the same run.
Usage: bench/summarize_sumtree.py bench/results/sumtree.json [--check]
--check exits 1 unless the best K-ary tree is >= 2x the baseline on the mixed
workload at N = 1e6 and no K-ary tree of the production arity is slower than
the baseline anywhere."""
import json
import sys

PRODUCTION = "kary16"  # core/selector.hpp: kPrioritizedArity


def main():
    path = sys.argv[1]
    check = "--check" in sys.argv
    with open(path) as f:
        data = json.load(f)
    rate = {}
    for b in data["benchmarks"]:
        parts = b["name"].split("/")
        if len(parts) < 4 or parts[0] != "sumtree":
            continue
        _, op, impl, n = parts[:4]
        rate[(op, impl, int(n))] = b["items_per_second"]
    impls = sorted({k[1] for k in rate if k[1] != "baseline"}, key=lambda s: int(s[4:]))
    ns = sorted({k[2] for k in rate})
    failures = []
    print("op      N          baseline M/s  " + "  ".join(f"{i:>14}" for i in impls))
    for op in ("update", "sample", "mixed"):
        for n in ns:
            base = rate.get((op, "baseline", n))
            if base is None:
                continue
            cells = []
            for i in impls:
                r = rate.get((op, i, n))
                cells.append(f"{r / 1e6:7.1f} ({r / base:4.2f}x)" if r else " " * 14)
                if i == PRODUCTION and r and r < base:
                    failures.append(f"{PRODUCTION} slower than baseline: {op} N={n} ({r / base:.2f}x)")
            print(f"{op:7} {n:<10} {base / 1e6:12.1f}  " + "  ".join(cells))
    key = ("mixed", 1_000_000)
    if ("mixed", "baseline", 1_000_000) in rate:
        best = max(impls, key=lambda i: rate.get((key[0], i, key[1]), 0))
        ratio = rate[(key[0], best, key[1])] / rate[(key[0], "baseline", key[1])]
        print(f"\nmixed workload, N=1e6: best is {best} at {ratio:.2f}x the baseline")
        if ratio < 2.0:
            failures.append(f"mixed N=1e6: best K-ary tree is only {ratio:.2f}x the baseline (target 2x)")
    # The priority range (max and min) that every priority change also pays.
    lines = []
    for b in data["benchmarks"]:
        parts = b["name"].split("/")
        if len(parts) >= 4 and parts[0] == "range":
            n = int(parts[3])
            prod = rate.get(("update", PRODUCTION, n))
            r = b["items_per_second"]
            share = f", {prod / r:4.2f}x the time of a {PRODUCTION} update" if prod else ""
            lines.append(f"range   {n:<10} {r / 1e6:12.1f} M/s{share}")
    if lines:
        print("\npriority range (max and min), update:")
        print("\n".join(lines))
    for f in failures:
        print("MISSED:", f)
    return 1 if (check and failures) else 0


if __name__ == "__main__":
    sys.exit(main())
