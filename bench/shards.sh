#!/usr/bin/env bash
# Sampling a view over shards (engram(7), SHARDS) against sampling the same
# table locally, in one run: 1, 2 and 4 shard engramds, each in a network
# namespace of its own joined to the learner's by a veth pair (plaintext:
# the mechanism, not TLS, which bench/remote.sh measures), each holding
# 2000 items of SIZE bytes (400 B, 4 KB, 28 KB) in a prioritized table;
# a sampler on the learner's machine copies out batches of 256.
#   local   the sampler on shard 1's machine, sampling its table
#   view    the sampler on the learner's machine, sampling its view over
#           the first N shards (N = 1, 2, 4)
#   tcp     one TCP stream of 1 MiB writes from shard 1's machine to the
#           learner's (remote_bench tcp-send/recv): the link's own limit
# For each size: items/s of each, the view's as a fraction of local's, of
# N times local's (linear in shards would be 1), and its bytes/s as a
# fraction of the TCP stream's. Each runs
# ENGRAM_SHARDS_REPS times (default 3): the median and the spread. All
# the engramds and the sampler share this machine's cores, which bounds
# the view (bench/NOTES.md, "Shards"). Writes bench/results/shards.json;
# --quick: one size, small counts, one repetition, into a scratch file
# (CI runs it so that it does not rot). Exit 77 where namespaces cannot be
# made.
set -euo pipefail
cd "$(dirname "$0")/.."
src=$PWD
build=$(cd "${ENGRAM_BUILD_DIR:-build/release}" && pwd)
quick=0
[ "${1:-}" = --quick ] && quick=1
reps=${ENGRAM_SHARDS_REPS:-3}
sizes=${ENGRAM_SHARDS_SIZES:-400 4096 28672}
scale=1  # samples per run: about 2 GB of copied items, at most 2M
if [ $quick = 1 ]; then
  reps=1 sizes=4096 scale=100
fi
[ "$(id -u)" -eq 0 ] || {
  echo "SKIPPED: network namespaces need root"
  exit 77
}
tag=$(($$ % 100000))
lx=egblx$tag
ip netns add "$lx" 2>/dev/null || {
  echo "SKIPPED: this machine cannot make network namespaces"
  exit 77
}
dir=$(mktemp -d /tmp/engram-bench-shards-XXXXXX)
pids=()
cleanup() {
  for ns in "$lx" egbs1$tag egbs2$tag egbs3$tag egbs4$tag; do
    for p in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$p" 2>/dev/null || true; done
  done
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  for ns in "$lx" egbs1$tag egbs2$tag egbs3$tag egbs4$tag; do ip netns del "$ns" 2>/dev/null || true; done
  rm -rf "$dir"
}
trap cleanup EXIT
source "$src/tests/netns/veth.sh"
for k in 1 2 3 4; do
  ip netns add "egbs$k$tag"
  veth_link "$lx" "egbs$k$tag" "bl$k$tag" "bs$k$tag" "10.78.$k.1" "10.78.$k.2"
done
tool=$build/bench/engram_bench_remote
ctl() { "$build/programs/engramctl/engramctl" --socket "$1" "${@:2}"; }

# start NAME NS CONFIG: an engramd; its pid in pids.
start() {
  netns_engramd "$2" "$dir/$1.sock" "$dir/$1.log" --config "$dir/$1.toml" || {
    tail -20 "$dir/$1.log"
    echo "shards.sh: engramd $1 did not start" >&2
    exit 1
  }
  pids+=("$engramd_pid")
}
stop_all() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  pids=()
}
column() { printf '[[table.column]]\nname = "data"\ndtype = "uint8"\nshape = [%s]\n' "$1"; }

# The link's own limit, once: a TCP stream from shard 1's machine.
tcp=()
for _ in $(seq 1 "$reps"); do
  ip netns exec "$lx" "$tool" tcp-recv 7200 >"$dir/tcp.json" &
  recv=$!
  ip netns exec "egbs1$tag" "$tool" tcp-send 10.78.1.1 7200 $((2000000000 / scale)) >/dev/null
  wait "$recv"
  tcp+=("$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(round(d["bytes"] / d["seconds"]))' "$dir/tcp.json")")
done
echo "shards.sh: tcp ${tcp[*]} bytes/s" >&2

results=()
for size in $sizes; do
  for k in 1 2 3 4; do
    cat >"$dir/s$k.toml" <<TOML
socket = "$dir/s$k.sock"
[remote]
listen = "0.0.0.0:7000"
insecure = true
[[table]]
name = "replay"
max_size = 2000
sampler = "prioritized"
priority_exponent = 0.6
$(column "$size")
TOML
    start "s$k" "egbs$k$tag"
    "$tool" write "$dir/s$k.sock" replay "$size" 2000 1 >/dev/null
  done
  samples=$((2000000000 / size / scale))
  [ "$samples" -gt 2000000 ] && samples=2000000
  row="{\"size\": $size"
  for n in local 1 2 4; do
    if [ "$n" != local ]; then
      list=""
      for k in $(seq 1 "$n"); do list="$list${list:+, }\"10.78.$k.2:7000\""; done
      cat >"$dir/view$n.toml" <<TOML
socket = "$dir/view$n.sock"
[remote]
insecure = true
[[table]]
name = "replay"
max_size = $((n * 2 * 2 * 256))
shards = [$list]
shard_batch = 256
$(column "$size")
TOML
      start "view$n" "$lx"
    fi
    runs=()
    for _ in $(seq 1 "$reps"); do
      if [ "$n" = local ]; then
        out=$(ip netns exec "egbs1$tag" "$tool" sample "$dir/s1.sock" replay "$size" "$samples" 256)
      else
        out=$(ip netns exec "$lx" "$tool" sample "$dir/view$n.sock" replay "$size" "$samples" 256)
      fi
      runs+=("$(python3 -c 'import json,sys; d=json.loads(sys.argv[1]); print(round(d["items"] / d["seconds"]))' "$out")")
    done
    if [ "$n" != local ]; then
      kill -TERM "${pids[-1]}"
      wait "${pids[-1]}" 2>/dev/null || true
      unset 'pids[-1]'
    fi
    row="$row, \"$n\": [$(IFS=,; echo "${runs[*]}")]"
    echo "shards.sh: $size B, $n: ${runs[*]} items/s" >&2
  done
  results+=("$row}")
  stop_all
done

out=bench/results/shards.json
[ $quick = 1 ] && out=$build/shards-quick.json
python3 - "$out" "$(git rev-parse --short HEAD)" "$(IFS=,; echo "${tcp[*]}")" "${results[@]}" <<'PY'
import json, statistics, sys
out, rev, rows = sys.argv[1], sys.argv[2], [json.loads(r) for r in sys.argv[4:]]
tcp_runs = [int(v) for v in sys.argv[3].split(",")]
tcp = statistics.median(tcp_runs)
cases = []
for r in rows:
    local = statistics.median(r["local"])
    case = {"size": r["size"], "local_items_per_s": local, "local_spread": [min(r["local"]), max(r["local"])],
            "views": []}
    for n in (1, 2, 4):
        m = statistics.median(r[str(n)])
        case["views"].append({"shards": n, "items_per_s": m, "spread": [min(r[str(n)]), max(r[str(n)])],
                              "fraction_of_local": round(m / local, 3),
                              "fraction_of_linear": round(m / (n * local), 3),
                              "fraction_of_tcp": round(m * r["size"] / tcp, 3)})
    cases.append(case)
doc = {"bench": "shards", "revision": rev, "batch": 256, "items_per_shard": 2000,
       "tcp_bytes_per_s": tcp, "tcp_spread": [min(tcp_runs), max(tcp_runs)],
       "note": "shards in network namespaces on one 2-core host, plaintext; local: shard 1 sampled on its machine",
       "cases": cases}
with open(out, "w") as f:
    json.dump(doc, f, indent=1)
print(json.dumps(doc))
PY
