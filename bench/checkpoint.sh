#!/usr/bin/env bash
# Checkpoint benchmark: writes bench/results/checkpoint.json (or
# checkpoint-quick.json with --quick). The checkpoint goes to a directory on
# the same disk as the repository (not tmpfs), next to the baseline.
#   bench/checkpoint.sh [--quick]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${ENGRAM_BUILD_DIR:-build/release}
mb=1024 seconds=3 out=bench/results/checkpoint.json
if [ "${1:-}" = "--quick" ]; then mb=64 seconds=1 out=bench/results/checkpoint-quick.json; fi
dir="$build/bench-checkpoint.$$"
json=$("$build/bench/engram_bench_checkpoint" --mb "$mb" --dir "$dir" --seconds "$seconds")
rev=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
echo "${json%\}}, \"git\": \"$rev\", \"cpu\": \"$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)\"}" >"$out"
cat "$out"
