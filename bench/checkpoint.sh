#!/usr/bin/env bash
# Checkpoint benchmark: writes bench/results/checkpoint.json (or
# checkpoint-quick.json with --quick). The checkpoint goes to a directory on
# the same disk as the repository (not tmpfs), next to the baseline.
#   bench/checkpoint.sh [--quick] [--buffered] [--unpaced]
# For comparison with the defaults (O_DIRECT, paced at 512 MB/s):
# --buffered writes the chunk file through the page cache
# (checkpoint-buffered.json); --unpaced lifts the pace
# (checkpoint-unpaced.json).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${ENGRAM_BUILD_DIR:-build/release}
mb=1024 seconds=3 reps=3 out=bench/results/checkpoint.json extra=()
for a in "$@"; do
  case "$a" in
    --quick) mb=64 seconds=1 reps=1 out=bench/results/checkpoint-quick.json ;;
    --buffered) extra=(--buffered) out=bench/results/checkpoint-buffered.json ;;
    --unpaced) extra=(--max-mb-per-s 0) out=bench/results/checkpoint-unpaced.json ;;
    *) echo "usage: bench/checkpoint.sh [--quick] [--buffered] [--unpaced]" >&2; exit 2 ;;
  esac
done
dir="$build/bench-checkpoint.$$"
json=$("$build/bench/engram_bench_checkpoint" --mb "$mb" --dir "$dir" --seconds "$seconds" --reps "$reps" "${extra[@]}")
rev=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
echo "${json%\}}, \"git\": \"$rev\", \"cpu\": \"$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)\"}" >"$out"
cat "$out"
