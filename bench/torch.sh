#!/usr/bin/env bash
# Sampling into PyTorch tensors against C, in one run: N items of one step
# (a uint8 payload of 400 B, 4 KB or 40 KB) written, then N sampled in
# batches of 256 and copied out, by the C API into plain buffers
# (bindings/bench_c.c), by engram.torch into a reused TensorBatch, and by
# the numpy path followed by torch.from_numpy(...).clone() (what a user
# writes without engram.torch); each against one engramd, in rotating
# order, 5 rounds. The median samples/s of each, the ratios to C and the
# spread go to bench/results/torch.json.
# Usage: bench/torch.sh [--quick]   (quick: a few items, one round; CI)
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=${ENGRAM_BUILD_DIR:-$src/build/release}
quick=0
[ "${1:-}" = --quick ] && quick=1
rounds=5 out=$src/bench/results/torch.json
# Items written and sampled per run, and the tables' sizes: the writer
# makes a chunk of each step, so a table smaller than N evicts, and the
# arena's blocks are reused rather than all held.
declare -A n=([400]=102400 [4096]=51200 [40960]=10240) size=([400]=4000 [4096]=2000 [40960]=1000)
if [ $quick = 1 ]; then rounds=1 out=$build/torch-quick.json n=([400]=2048 [4096]=1024 [40960]=512); fi
cmake --build "$build" --target engram_bench_bindings_c engramd engramctl >/dev/null
tmp=$(mktemp -d /tmp/engram-torch-XXXXXX)
{
  echo "socket = \"$tmp/s.sock\""
  echo '[arena]'
  echo 'classes = [{ block_size = "4KiB", count = 16384 }, { block_size = "8KiB", count = 8192 }, { block_size = "64KiB", count = 2048 }]'
  for b in 400 4096 40960; do
    printf '[[table]]\nname = "b%s"\nmax_size = %s\n[[table.column]]\nname = "payload"\ndtype = "uint8"\nshape = [%s]\n' \
      "$b" "${size[$b]}" "$b"
  done
} >"$tmp/engramd.toml"
"$build/programs/engramd/engramd" --config "$tmp/engramd.toml" --log-level warn >"$tmp/engramd.log" 2>&1 &
daemon=$!
trap 'kill $daemon 2>/dev/null; wait $daemon 2>/dev/null; rm -rf "$tmp"' EXIT
for _ in $(seq 1 100); do [ -S "$tmp/s.sock" ] && break; sleep 0.05; done

run() {  # LANG BYTES
  case $1 in
    c) "$build/bench/engram_bench_bindings_c" "$tmp/s.sock" "b$2" "$2" "${n[$2]}" 256 ;;
    torch | numpy)
      PYTHONPATH=$src/bindings/python ENGRAM_LIBRARY=$build/capi/libengram.so.0 PYTHONDONTWRITEBYTECODE=1 \
        ${ENGRAM_PYTHON:-/usr/bin/python3} "$src/bench/bindings/bench_torch.py" "$tmp/s.sock" "b$2" "$2" "${n[$2]}" "$1" ;;
  esac
}
langs=(c torch numpy)
: >"$tmp/runs.jsonl"
for r in $(seq 1 $rounds); do
  for b in 400 4096 40960; do
    for k in 0 1 2; do
      lang=${langs[$(((k + r) % 3))]}
      "$build/programs/engramctl/engramctl" --socket "$tmp/s.sock" reset "b$b" >/dev/null
      run "$lang" "$b" | tee -a "$tmp/runs.jsonl"
    done
  done
done
python3 - "$tmp/runs.jsonl" "$out" "$rounds" "$(git -C "$src" rev-parse --short HEAD)" <<'PY'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
res = {}
for r in runs:
    res.setdefault((r["lang"], r["bytes"]), []).append(r["sample_per_s"])
want = {(l, b) for l in ("c", "torch", "numpy") for b in (400, 4096, 40960)}
assert set(res) == want, f"missing from the runs: {want - set(res)}"
assert all(v > 0 for vs in res.values() for v in vs)
summary = []
for (lang, nbytes), vs in sorted(res.items(), key=lambda kv: (kv[0][1], kv[0][0])):
    summary.append({"lang": lang, "bytes": nbytes, "sample_per_s": statistics.median(vs), "min": min(vs), "max": max(vs)})
for s in summary:
    c = next(x for x in summary if x["lang"] == "c" and x["bytes"] == s["bytes"])
    s["vs_c"] = round(s["sample_per_s"] / c["sample_per_s"], 3)
json.dump({"git": sys.argv[4], "rounds": int(sys.argv[3]), "batch": 256, "results": summary, "runs": runs},
          open(sys.argv[2], "w"), indent=1)
print(f"{'path':6} {'bytes':>6} {'samples/s':>11} {'vs C':>6} {'min..max':>23}")
for s in summary:
    print(f"{s['lang']:6} {s['bytes']:>6} {s['sample_per_s']:>11,.0f} {s['vs_c']:>6.2f} {s['min']:>11,.0f}..{s['max']:<11,.0f}")
print(f"torch: wrote {sys.argv[2]}")
PY
