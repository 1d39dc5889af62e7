#!/usr/bin/env bash
# The bindings against C, in one run: the same work (N one-step items of a
# 400 B or 40 KB payload written, then N sampled in batches of 64, copied
# out) by a C program, the Rust binding (release build) and the Python
# binding (numpy: one call per step and item, and 64 steps with their items
# per call), each against one engramd, in rotating order, 3 rounds;
# the median of each, and its ratio to C, go to bench/results/bindings.json.
# Usage: bench/bindings.sh [--quick]   (quick: a few items, one round; CI)
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=${ENGRAM_BUILD_DIR:-$src/build/release}
quick=0
[ "${1:-}" = --quick ] && quick=1
rounds=3 n_small=40000 n_large=8000 out=$src/bench/results/bindings.json
if [ $quick = 1 ]; then rounds=1 n_small=2000 n_large=500 out=$build/bindings-quick.json; fi
cmake --build "$build" --target engram_bench_bindings_c engramd engramctl >/dev/null
(cd "$src/bindings/rust" && ENGRAM_LIB_DIR=$build/capi CARGO_TARGET_DIR=$build/rust \
  cargo build --offline --quiet --release --example bench)
tmp=$(mktemp -d /tmp/engram-bindings-XXXXXX)
cat >"$tmp/engramd.toml" <<TOML
socket = "$tmp/s.sock"
[arena]
classes = [{ block_size = "4KiB", count = 8192 }, { block_size = "64KiB", count = 2048 }]
[[table]]
name = "b400"
max_size = 4000
[[table.column]]
name = "payload"
dtype = "uint8"
shape = [400]
[[table]]
name = "b40k"
max_size = 1000
[[table.column]]
name = "payload"
dtype = "uint8"
shape = [40960]
TOML
"$build/programs/engramd/engramd" --config "$tmp/engramd.toml" --log-level warn >"$tmp/engramd.log" 2>&1 &
daemon=$!
trap 'kill $daemon 2>/dev/null; wait $daemon 2>/dev/null; rm -rf "$tmp"' EXIT
for _ in $(seq 1 100); do [ -S "$tmp/s.sock" ] && break; sleep 0.05; done

run() {  # LANG TABLE BYTES N
  case $1 in
    c) "$build/bench/engram_bench_bindings_c" "$tmp/s.sock" "$2" "$3" "$4" ;;
    rust) "$build/rust/release/examples/bench" "$tmp/s.sock" "$2" "$3" "$4" ;;
    python | python-batch)
      PYTHONPATH=$src/bindings/python ENGRAM_LIBRARY=$build/capi/libengram.so.0 PYTHONDONTWRITEBYTECODE=1 \
        ${ENGRAM_PYTHON:-/usr/bin/python3} "$src/bench/bindings/bench_py.py" "$tmp/s.sock" "$2" "$3" "$4" \
        "$([ "$1" = python ] && echo item || echo batch)" ;;
  esac
}
langs=(c rust python python-batch)
: >"$tmp/runs.jsonl"
for r in $(seq 1 $rounds); do
  for spec in "b400 400 $n_small" "b40k 40960 $n_large"; do
    set -- $spec
    for k in 0 1 2 3; do
      lang=${langs[$(((k + r) % 4))]}
      "$build/programs/engramctl/engramctl" --socket "$tmp/s.sock" reset "$1" >/dev/null
      run "$lang" "$1" "$2" "$3" | tee -a "$tmp/runs.jsonl"
    done
  done
done
python3 - "$tmp/runs.jsonl" "$out" "$rounds" "$(git -C "$src" rev-parse --short HEAD)" <<'PY'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
res = {}
for r in runs:
    res.setdefault((r["lang"], r["bytes"]), []).append(r)
assert {(r["lang"], r["bytes"]) for r in runs} == {(l, b) for l in ("c", "rust", "python", "python-batch")
                                                    for b in (400, 40960)}, \
    "a language or a size is missing from the runs"
assert all(r["insert_per_s"] > 0 and r["sample_per_s"] > 0 for r in runs)
summary = []
for (lang, nbytes), rs in sorted(res.items(), key=lambda kv: (kv[0][1], kv[0][0])):
    ins = statistics.median(r["insert_per_s"] for r in rs)
    smp = statistics.median(r["sample_per_s"] for r in rs)
    summary.append({"lang": lang, "bytes": nbytes, "insert_per_s": ins, "sample_per_s": smp})
for s in summary:
    c = next(x for x in summary if x["lang"] == "c" and x["bytes"] == s["bytes"])
    s["insert_vs_c"] = round(s["insert_per_s"] / c["insert_per_s"], 3)
    s["sample_vs_c"] = round(s["sample_per_s"] / c["sample_per_s"], 3)
json.dump({"git": sys.argv[4], "rounds": int(sys.argv[3]), "results": summary, "runs": runs}, open(sys.argv[2], "w"), indent=1)
print(f"{'lang':8} {'bytes':>6} {'inserts/s':>11} {'vs C':>6} {'samples/s':>11} {'vs C':>6}")
for s in summary:
    print(f"{s['lang']:8} {s['bytes']:>6} {s['insert_per_s']:>11,.0f} {s['insert_vs_c']:>6.2f} "
          f"{s['sample_per_s']:>11,.0f} {s['sample_vs_c']:>6.2f}")
print(f"bindings: wrote {sys.argv[2]}")
PY
