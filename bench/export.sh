#!/usr/bin/env bash
# Export benchmark: writes bench/results/export.json (export-quick.json with
# --quick, export-compressed.json with --compressed). The file goes to a
# directory on the same disk as the repository (not tmpfs), next to the
# baseline.
#   bench/export.sh [--quick] [--compressed]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${ENGRAM_BUILD_DIR:-build/release}
mb=1024 seconds=3 reps=3 out=bench/results/export.json extra=()
for a in "$@"; do
  case "$a" in
    --quick) mb=64 seconds=1 reps=1 out=bench/results/export-quick.json ;;
    --compressed) extra=(--compressed) out=bench/results/export-compressed.json ;;
    *) echo "usage: bench/export.sh [--quick] [--compressed]" >&2; exit 2 ;;
  esac
done
dir="$build/bench-export.$$"
json=$("$build/bench/engram_bench_export" --mb "$mb" --dir "$dir" --seconds "$seconds" --reps "$reps" "${extra[@]}")
rev=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
echo "${json%\}}, \"git\": \"$rev\", \"cpu\": \"$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)\"}" >"$out"
cat "$out"
