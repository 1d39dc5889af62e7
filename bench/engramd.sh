# Sourced by the bench drivers that run engram_bench_throughput against an
# engramd of their own (throughput.sh, thread_cpu.sh): one way to start it,
# stop it, and name the revision a result came from.
#   $build  the build directory (set by the driver)
#   $dir    the driver's scratch directory: engramd's config, socket and log

engramd_pid=""

# Starts engramd on $dir/engram.sock with config $1 and waits for its
# socket; says why and exits if it does not come up.
engramd_start() {
  "$build/programs/engramd/engramd" --config "$1" --socket "$dir/engram.sock" --log-level warn 2>"$dir/engramd.log" &
  engramd_pid=$!
  for _ in $(seq 100); do
    [ -S "$dir/engram.sock" ] && return 0
    sleep 0.05
  done
  cat "$dir/engramd.log"
  echo "$(basename "$0"): engramd did not start" >&2
  exit 1
}

# Stops it (SIGTERM) and waits; nothing if none runs. Safe in an EXIT trap.
engramd_stop() {
  [ -n "$engramd_pid" ] && kill "$engramd_pid" 2>/dev/null && wait "$engramd_pid" 2>/dev/null
  engramd_pid=""
  rm -f "$dir/engram.sock"
}

# The short revision, with +dirty when the tree has changes.
git_revision() {
  local rev
  rev=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
  git diff --quiet 2>/dev/null || rev="$rev+dirty"
  echo "$rev"
}
