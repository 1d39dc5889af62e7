#!/usr/bin/env bash
# A same-host A/B of two revisions' replay: each build directory's own
# engramd and engram_bench_throughput, in turn (old, new, old, new, ...),
# so that a slow stretch of this machine lands on both. Redis is left out:
# the baselines belong to bench/throughput.sh's full runs; here the
# memcpy rows (unless --only leaves them out) show the machine's drift.
#   bench/ab.sh OLD_BUILD NEW_BUILD OUT_DIR [ROUNDS] [-- HARNESS ARGS...]
# e.g. bench/ab.sh /tmp/old/build/release build/release /tmp/ab 2 -- \
#        --only engram/insert --payload 400 --payload 4000 --reps 3
# writes OUT_DIR/{old,new}-N.json and prints the comparison
# (summarize_throughput.py --ab). A build directory from before the
# programs had their own folder (daemon/engramd) works too.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 3 ] || { sed -n 2,12p "$0" >&2; exit 2; }
old=$1 new=$2 out=$3
shift 3
rounds=2
if [ $# -gt 0 ] && [ "$1" != "--" ]; then rounds=$1; shift; fi
[ "${1:-}" = "--" ] && shift
mkdir -p "$out"

engramd_of() {  # BUILD: its engramd, wherever that tree kept it
  local b=$1
  for p in "$b/programs/engramd/engramd" "$b/daemon/engramd"; do
    [ -x "$p" ] && { echo "$p"; return; }
  done
  echo "ab: no engramd under $b (build it first)" >&2
  exit 1
}

dir=$(mktemp -d /tmp/engram-ab-XXXXXX)
pid=""
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT

run() {  # NAME BUILD
  local name=$1 b=$2 bin=$2/bench/engram_bench_throughput
  shift 2
  [ -x "$bin" ] || { echo "ab: no $bin (build it first)" >&2; exit 1; }
  "$bin" --print-config >"$dir/engramd.toml"
  "$(engramd_of "$b")" --config "$dir/engramd.toml" --socket "$dir/engram.sock" --log-level warn 2>"$dir/engramd.log" &
  pid=$!
  for _ in $(seq 100); do
    [ -S "$dir/engram.sock" ] && break
    sleep 0.05
  done
  [ -S "$dir/engram.sock" ] || { cat "$dir/engramd.log"; echo "ab: engramd of $b did not start" >&2; exit 1; }
  echo "ab: $name ($b) $(date -u +%H:%M:%S)" >&2
  "$bin" --engram-socket "$dir/engram.sock" --out "$out/$name.json" --git "$name" "$@" ||
    echo "ab: $name had worker failures (see above)" >&2
  kill "$pid" && wait "$pid" 2>/dev/null || true
  pid=""
  rm -f "$dir/engram.sock"
}

pairs=()
for r in $(seq "$rounds"); do
  run "old-$r" "$old" "$@"
  run "new-$r" "$new" "$@"
  pairs+=("$out/old-$r.json" "$out/new-$r.json")
done
python3 bench/summarize_throughput.py --ab "${pairs[@]}"
