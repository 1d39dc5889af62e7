#!/usr/bin/env bash
# The throughput harness: starts engramd and redis-server (Unix sockets,
# no persistence), runs engram_bench_throughput against both and the memcpy
# baseline, stops both by pid, writes bench/results/throughput.json (or
# throughput-quick.json) and plots it (gnuplot) to bench/results/throughput.png.
#   bench/throughput.sh            full run (a few minutes)
#   bench/throughput.sh --quick    under a minute; the test command runs it
set -euo pipefail
cd "$(dirname "$0")/.."

quick=()
name=throughput
if [ "${1:-}" = "--quick" ]; then quick=(--quick); name=throughput-quick; fi
build=${ENGRAM_BUILD_DIR:-build/release}
bin=$build/bench/engram_bench_throughput
[ -x "$bin" ] && [ -x $build/programs/engramd/engramd ] ||
  { echo "throughput: build first: cmake --build --preset release" >&2; exit 1; }
for tool in redis-server gnuplot; do
  command -v $tool >/dev/null || { echo "throughput: $tool is missing; run scripts/setup.sh" >&2; exit 1; }
done

dir=$(mktemp -d /tmp/engram-throughput-XXXXXX)
. bench/engramd.sh
redis_pid=""
cleanup() {
  engramd_stop || true
  [ -n "$redis_pid" ] && kill "$redis_pid" 2>/dev/null && wait "$redis_pid" 2>/dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT

redis-server --port 0 --unixsocket "$dir/redis.sock" --unixsocketperm 700 --save "" --appendonly no \
  --bind 127.0.0.1 --protected-mode yes --daemonize no --loglevel warning >"$dir/redis.log" 2>&1 &
redis_pid=$!
"$bin" --print-config "${quick[@]}" >"$dir/engramd.toml"
engramd_start "$dir/engramd.toml"
for _ in $(seq 100); do
  [ -S "$dir/redis.sock" ] && break
  sleep 0.05
done
[ -S "$dir/redis.sock" ] || { cat "$dir/redis.log"; echo "throughput: redis-server did not start" >&2; exit 1; }

mkdir -p bench/results
out=bench/results/$name.json
"$bin" --engram-socket "$dir/engram.sock" --redis-socket "$dir/redis.sock" --out "$out" --git "$(git_revision)" "${quick[@]}"
python3 bench/summarize_throughput.py "$out"
if [ ${#quick[@]} -eq 0 ]; then
  python3 bench/summarize_throughput.py --gnuplot-data "$out" >"$dir/plot.dat"
  gnuplot -e "data='$dir/plot.dat'; out='bench/results/throughput.png'" bench/throughput.gp
  echo "throughput: wrote $out and bench/results/throughput.png"
fi
