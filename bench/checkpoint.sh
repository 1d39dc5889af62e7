#!/usr/bin/env bash
# Checkpoint benchmark: writes bench/results/checkpoint.json (or
# checkpoint-quick.json with --quick). The checkpoint goes to a directory on
# the same disk as the repository (not tmpfs), next to the baseline.
#   bench/checkpoint.sh [--quick] [--buffered]
# --buffered writes the chunk file through the page cache instead of with
# O_DIRECT, into checkpoint-buffered.json, for comparison.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${ENGRAM_BUILD_DIR:-build/release}
mb=1024 seconds=3 out=bench/results/checkpoint.json extra=()
for a in "$@"; do
  case "$a" in
    --quick) mb=64 seconds=1 out=bench/results/checkpoint-quick.json ;;
    --buffered) extra=(--buffered) out=bench/results/checkpoint-buffered.json ;;
    *) echo "usage: bench/checkpoint.sh [--quick] [--buffered]" >&2; exit 2 ;;
  esac
done
dir="$build/bench-checkpoint.$$"
json=$("$build/bench/engram_bench_checkpoint" --mb "$mb" --dir "$dir" --seconds "$seconds" "${extra[@]}")
rev=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
echo "${json%\}}, \"git\": \"$rev\", \"cpu\": \"$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)\"}" >"$out"
cat "$out"
