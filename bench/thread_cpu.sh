#!/usr/bin/env bash
# Where the CPU goes when one and then two writers insert: runs the
# throughput harness's insert scenario (one repetition of one writer, then
# of two) against its own engramd under `perf record -a -e cpu-clock`, and
# prints for each payload the share of a CPU that the table's owner thread,
# each writer and the idle loop took in the middle of each scenario, the
# part of the owner's that went to waiting for requests, and items/s.
# Results go to bench/results/thread-cpu.json (see bench/thread_cpu.py).
#   bench/thread_cpu.sh [PAYLOAD ...]     default: 400 4000 40000 400000
# About 12 s per payload. Needs perf (Debian: linux-perf) and root, or a
# perf_event_paranoid that lets this user record every CPU.
set -euo pipefail
cd "$(dirname "$0")/.."

build=${ENGRAM_BUILD_DIR:-build/release}
bin=$build/bench/engram_bench_throughput
[ -x "$bin" ] && [ -x $build/programs/engramd/engramd ] ||
  { echo "thread_cpu: build first: cmake --build --preset release" >&2; exit 1; }
command -v perf >/dev/null || { echo "thread_cpu: perf is missing: apt-get install linux-perf" >&2; exit 1; }
payloads=("$@")
[ ${#payloads[@]} -gt 0 ] || payloads=(400 4000 40000 400000)

dir=$(mktemp -d /tmp/engram-thread-cpu-XXXXXX)
. bench/engramd.sh
cleanup() {
  engramd_stop || true
  [ -n "${THREAD_CPU_KEEP:-}" ] && echo "thread_cpu: kept $dir" >&2 || rm -rf "$dir"
}
trap cleanup EXIT

args=()
for p in "${payloads[@]}"; do
  [[ "$p" =~ ^[0-9]+$ ]] || { echo "thread_cpu: payload '$p' is not a number of bytes" >&2; exit 2; }
  "$bin" --print-config --payload "$p" >"$dir/engramd.toml"
  engramd_start "$dir/engramd.toml"
  echo "thread_cpu: $p B, one writer then two, 3 s each" >&2
  perf record -q -a -e cpu-clock -F 2000 -o "$dir/perf-$p.data" -- \
    "$bin" --engram-socket "$dir/engram.sock" --out "$dir/run-$p.json" --payload "$p" --only engram/insert \
    --reps 1 --seconds 3 --warmup 0.3 >"$dir/run-$p.log" 2>&1 ||
    { cat "$dir/run-$p.log"; echo "thread_cpu: the insert scenario failed" >&2; exit 1; }
  perf script -i "$dir/perf-$p.data" -F comm,pid,tid,time,ip,sym 2>/dev/null >"$dir/samples-$p.txt"
  engramd_stop || true
  args+=("$p" "$dir/samples-$p.txt" "$dir/run-$p.json")
done

mkdir -p bench/results
python3 bench/thread_cpu.py --git "$(git_revision)" --out bench/results/thread-cpu.json "${args[@]}"
