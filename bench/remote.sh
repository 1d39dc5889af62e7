#!/usr/bin/env bash
# engramds across a veth pair (two network namespaces, as root), measured
# against a plain TCP stream on the same pair in the same run:
#   tcp       one TCP stream of 1 MiB writes (remote_bench tcp-send/recv):
#             bytes/s, and CPU seconds per GB of sender and receiver
#   tls       one mutual-TLS stream the same way, with the engramds'
#             certificates and gRPC's TLS library (tls_stream.c): the TLS
#             link's own limit, which TLS rows are measured against too
#   grpc      gRPC's own stream, per item size and security: engram's peer
#             messages of 1 MiB with nothing of engram behind them
#             (grpc_stream.cpp); what the link loses to gRPC, and what
#             engram loses against it (each row's fraction_of_grpc_stream)
#   upstream  items of 400 B, 4 KB, 28 KB and 400 KB written on tx into an
#             upstream table, drained from rx's table by a learner, in
#             plaintext and with mutual TLS: items/s, bytes/s as a fraction
#             of TCP's, each engramd's CPU seconds per GB against TCP's,
#             and the writer's and the learner's (the clients' share); each
#             at chunk lengths 1 (the writer's default) and 16 (the agents')
#   mirror    parameters of CartPole's size (70 KB) and Breakout's (530 KB)
#             published on rx every 20 ms, read on tx from a mirrored table
#             by a reader polling every 50 us: publish-to-read latency p50
#             and p99, and bytes per version on the link
# Each measurement runs ENGRAM_REMOTE_REPS times (default 3) and reports the
# median and the spread. Writes bench/results/remote.json and its plot,
# remote.png (bench/remote.gp); --quick: small counts, one repetition, into
# scratch files (CI runs it so that it does not rot). ENGRAM_REMOTE_SIZES,
# ENGRAM_REMOTE_CHUNKS and ENGRAM_REMOTE_SECURITY narrow the upstream runs
# (for a look at one case; the plot wants plain and tls). Exit 77
# (skipped) where namespaces cannot be made.
set -euo pipefail
cd "$(dirname "$0")/.."
src=$PWD
build=$(cd "${ENGRAM_BUILD_DIR:-build/release}" && pwd)
quick=0
[ "${1:-}" = --quick ] && quick=1
reps=${ENGRAM_REMOTE_REPS:-3}
[ $quick = 1 ] && reps=1
[ "$(id -u)" -eq 0 ] || {
  echo "SKIPPED: network namespaces need root"
  exit 77
}
tag=$(($$ % 100000))
tx=egbtx$tag rx=egbrx$tag
ip netns add "$rx" 2>/dev/null || {
  echo "SKIPPED: this machine cannot make network namespaces"
  exit 77
}
dir=$(mktemp -d /tmp/engram-bench-remote-XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}" $(ip netns pids "$rx" 2>/dev/null) $(ip netns pids "$tx" 2>/dev/null); do
    kill -9 "$p" 2>/dev/null || true
  done
  wait 2>/dev/null || true
  ip netns del "$rx" 2>/dev/null || true
  ip netns del "$tx" 2>/dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT
source "$src/bench/engramd.sh"
source "$src/tests/netns/veth.sh"
ip netns add "$tx"
veth_link "$rx" "$tx" "br$tag" "bt$tag" 10.78.0.1 10.78.0.2
"$src/tests/remote/make_certs.sh" "$dir/certs" 10.78.0.1 10.78.0.2
bench=$build/bench/engram_bench_remote tls_bench=$build/bench/engram_bench_tls_stream
grpc_bench=$build/bench/engram_bench_grpc_stream
out=$src/bench/results/remote.json
[ $quick = 1 ] && out=$dir/remote.json
say() { echo "remote.sh: $*" >&2; }

cpu_s() { awk -v hz="$(getconf CLK_TCK)" '{print ($14 + $15) / hz}' "/proc/$1/stat"; }
# start NAME NS: engramd with $dir/NAME.toml in NS; sets pid_NAME.
start() {
  if ! netns_engramd "$2" "$dir/$1.sock" "$dir/$1.log" --config "$dir/$1.toml" --log-level warn; then
    cat "$dir/$1.log" >&2
    say "engramd $1 did not start"
    exit 1
  fi
  pids+=($engramd_pid)
  eval "pid_$1=$engramd_pid"
}
stop() {
  local p
  eval "p=\$pid_$1"
  kill "$p" 2>/dev/null && wait "$p" 2>/dev/null || true
}
security() {  # tls|plain
  if [ "$1" = tls ]; then
    printf 'tls_cert = "%s"\ntls_key = "%s"\ntls_ca = "%s"\n' "$dir/certs/a.crt" "$dir/certs/a.key" "$dir/certs/ca.crt"
  else
    echo "insecure = true"
  fi
}
pow2_at_least() {
  local b=4096
  while [ $b -lt "$1" ]; do b=$((b * 2)); done
  echo $b
}
median_spread() {  # values...: "median, min, max" as JSON fields
  python3 -c "import sys, statistics as s; v=sorted(float(x) for x in sys.argv[1:]); print(f'\"median\": {s.median(v):.6g}, \"min\": {v[0]:.6g}, \"max\": {v[-1]:.6g}')" "$@"
}
field() { python3 -c "import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])" "$1" "$2"; }

# --- the link's limits: plain TCP, and TLS on its own ---
stream_bytes=$((2 << 30))
[ $quick = 1 ] && stream_bytes=$((200 << 20))
certs=("$dir/certs/a.crt" "$dir/certs/a.key" "$dir/certs/ca.crt")
# stream tcp|tls: one stream of $stream_bytes from tx to rx, $reps times;
# sets <kind>_median (bytes/s) and json_<kind>.
stream() {
  local kind=$1 rate=() send_cpu=() recv_cpu=() s rcv recv
  for r in $(seq "$reps"); do
    if [ "$kind" = tcp ]; then
      ip netns exec "$rx" "$bench" tcp-recv 7100 >"$dir/stream-recv.json" &
    else
      ip netns exec "$rx" "$tls_bench" recv 7100 "${certs[@]}" >"$dir/stream-recv.json" &
    fi
    recv=$!
    sleep 0.2
    if [ "$kind" = tcp ]; then
      s=$(ip netns exec "$tx" "$bench" tcp-send 10.78.0.1 7100 "$stream_bytes")
    else
      s=$(ip netns exec "$tx" "$tls_bench" send 10.78.0.1 7100 "$stream_bytes" "${certs[@]}")
    fi
    wait $recv
    rcv=$(cat "$dir/stream-recv.json")
    rate+=("$(python3 -c "print($stream_bytes / $(field "$rcv" seconds))")")
    send_cpu+=("$(python3 -c "print($(field "$s" cpu_s) / ($stream_bytes / 1e9))")")
    recv_cpu+=("$(python3 -c "print($(field "$rcv" cpu_s) / ($stream_bytes / 1e9))")")
  done
  local median cipher=""
  median=$(python3 -c "import sys, statistics; print(statistics.median(float(x) for x in sys.argv[1:]))" "${rate[@]}")
  if [ "$kind" = tls ]; then cipher=", \"protocol\": \"$(field "$rcv" protocol)\", \"cipher\": \"$(field "$rcv" cipher)\""; fi
  say "$kind stream: $(python3 -c "print(f'{$median / 1e9:.2f}')") GB/s"
  local j="{\"bytes_per_s\": {$(median_spread "${rate[@]}")}, \"cpu_s_per_gb\": {\"send\": {$(median_spread "${send_cpu[@]}")}, \"recv\": {$(median_spread "${recv_cpu[@]}")}}$cipher}"
  printf -v "${kind}_median" '%s' "$median"
  printf -v "json_$kind" '%s' "$j"
}
stream tcp
json_tls=null tls_median=0
case " ${ENGRAM_REMOTE_SECURITY:-plain tls} " in *" tls "*) stream tls ;; esac

# grpc_stream SIZE tls|plain: gRPC's own stream of 1 MiB requests of
# SIZE-byte chunks, engram's messages and credentials with nothing of
# engram behind them (grpc_stream.cpp), $reps times; sets grpc_median
# (bytes/s) and appends to json_grpc.
json_grpc=""
grpc_stream() {
  local size=$1 sec=$2 rate=() send_cpu=() recv_cpu=() s rcv recv tls_args=() bytes
  [ "$sec" = tls ] && tls_args=("${certs[@]}")
  for r in $(seq "$reps"); do
    ip netns exec "$rx" "$grpc_bench" recv 7100 "${tls_args[@]}" >"$dir/stream-recv.json" &
    recv=$!
    sleep 0.3
    s=$(ip netns exec "$tx" "$grpc_bench" send 10.78.0.1:7100 "$stream_bytes" "$size" "${tls_args[@]}")
    wait $recv
    rcv=$(cat "$dir/stream-recv.json")
    bytes=$(field "$rcv" bytes)
    rate+=("$(python3 -c "print($bytes / $(field "$rcv" seconds))")")
    send_cpu+=("$(python3 -c "print($(field "$s" cpu_s) / ($bytes / 1e9))")")
    recv_cpu+=("$(python3 -c "print($(field "$rcv" cpu_s) / ($bytes / 1e9))")")
  done
  grpc_median=$(python3 -c "import sys, statistics; print(statistics.median(float(x) for x in sys.argv[1:]))" "${rate[@]}")
  say "gRPC stream $sec, $size B chunks: $(python3 -c "print(f'{$grpc_median / 1e9:.2f}')") GB/s"
  json_grpc+="${json_grpc:+, }{\"item_bytes\": $size, \"security\": \"$sec\", \"bytes_per_s\": {$(median_spread "${rate[@]}")}, \"cpu_s_per_gb\": {\"send\": {$(median_spread "${send_cpu[@]}")}, \"recv\": {$(median_spread "${recv_cpu[@]}")}}}"
}

# --- upstream items ---
upstream_run() {  # size, tls|plain, items, chunk length: "items/s send_cpu_s recv_cpu_s writer_cpu_s learner_cpu_s" into $dir/run.txt
  local size=$1 sec=$2 n=$3 chunk=$4 block
  block=$(pow2_at_least $((chunk * size + 4096)))
  cat >"$dir/rx.toml" <<TOML
socket = "$dir/rx.sock"
[arena]
classes = [ { block_size = $block, count = $(((512 << 20) / block)) } ]
[remote]
listen = "0.0.0.0:7000"
$(security "$sec")
[[table]]
name = "replay"
max_size = 100000
sampler = "fifo"
max_times_sampled = 1
rate_limiter = { kind = "queue", size = 100000 }
[[table.column]]
name = "data"
dtype = "uint8"
shape = [$size]
TOML
  sed -e "s|$dir/rx.sock|$dir/tx.sock|" -e 's|^listen = .*|name = "tx"|' -e "s|^max_times_sampled = 1|&\nupstream = \"10.78.0.1:7000\"|" \
    "$dir/rx.toml" >"$dir/tx.toml"
  start rx "$rx"
  start tx "$tx"
  local c_rx c_tx d
  c_rx=$(cpu_s "$pid_rx") c_tx=$(cpu_s "$pid_tx")
  ip netns exec "$rx" "$bench" drain "$dir/rx.sock" replay "$size" "$n" >"$dir/drain.json" &
  d=$!
  ip netns exec "$tx" "$bench" write "$dir/tx.sock" replay "$size" "$n" "$chunk" >"$dir/write.json"
  wait $d || {
    "$build/programs/engramctl/engramctl" --socket "$dir/tx.sock" status >&2
    say "upstream $sec $size B: the learner gave up"
    exit 1
  }
  local secs
  secs=$(field "$(cat "$dir/drain.json")" seconds)
  python3 -c "print($n / $secs, $(cpu_s "$pid_tx") - $c_tx, $(cpu_s "$pid_rx") - $c_rx, \
    $(field "$(cat "$dir/write.json")" cpu_s), $(field "$(cat "$dir/drain.json")" cpu_s))" >"$dir/run.txt"
  stop tx
  stop rx
}
json_up=""
for sec in ${ENGRAM_REMOTE_SECURITY:-plain tls}; do
  for size in ${ENGRAM_REMOTE_SIZES:-400 4096 28672 409600}; do
  grpc_stream "$size" "$sec"
  for chunk in ${ENGRAM_REMOTE_CHUNKS:-1 16}; do
    bytes=$((1 << 30))
    [ $quick = 1 ] && bytes=$((16 << 20))
    n=$((bytes / size))
    [ $n -gt 2000000 ] && n=2000000
    [ $n -lt 1000 ] && n=1000
    rates=() fractions=() tls_fractions=() grpc_fractions=() scpu=() rcpu=() wcpu=() lcpu=()
    for r in $(seq "$reps"); do
      upstream_run "$size" "$sec" "$n" "$chunk"
      read -r rate s_cpu r_cpu w_cpu l_cpu <"$dir/run.txt"
      rates+=("$rate")
      fractions+=("$(python3 -c "print($rate * $size / $tcp_median)")")
      [ "$sec" = tls ] && tls_fractions+=("$(python3 -c "print($rate * $size / $tls_median)")")
      grpc_fractions+=("$(python3 -c "print($rate * $size / $grpc_median)")")
      scpu+=("$(python3 -c "print($s_cpu / ($n * $size / 1e9))")")
      rcpu+=("$(python3 -c "print($r_cpu / ($n * $size / 1e9))")")
      wcpu+=("$(python3 -c "print($w_cpu / ($n * $size / 1e9))")")
      lcpu+=("$(python3 -c "print($l_cpu / ($n * $size / 1e9))")")
    done
    say "upstream $sec $size B, chunk_length $chunk: ${rates[*]} items/s"
    json_up+="${json_up:+, }{\"item_bytes\": $size, \"chunk_length\": $chunk, \"security\": \"$sec\", \"items\": $n, \"items_per_s\": {$(median_spread "${rates[@]}")}, \"fraction_of_tcp\": {$(median_spread "${fractions[@]}")}, $([ "$sec" = tls ] && echo "\"fraction_of_tls_stream\": {$(median_spread "${tls_fractions[@]}")}, ")\"fraction_of_grpc_stream\": {$(median_spread "${grpc_fractions[@]}")}, \"engramd_cpu_s_per_gb\": {\"send\": {$(median_spread "${scpu[@]}")}, \"recv\": {$(median_spread "${rcpu[@]}")}}, \"client_cpu_s_per_gb\": {\"writer\": {$(median_spread "${wcpu[@]}")}, \"learner\": {$(median_spread "${lcpu[@]}")}}}"
  done
  done
done

# --- parameter mirrors ---
json_mirror=""
versions=500
[ $quick = 1 ] && versions=50
for floats in 17922 132612; do  # CartPole's 70 KB, Breakout's 530 KB (agents/README.md)
  block=$(pow2_at_least $((floats * 4 + 4096)))
  for side in rx tx; do
    cat >"$dir/$side.toml" <<TOML
socket = "$dir/$side.sock"
[arena]
classes = [ { block_size = $block, count = 64 } ]
[remote]
$([ $side = rx ] && echo 'listen = "0.0.0.0:7000"' || echo 'name = "tx"')
$(security tls)
[[table]]
name = "params"
max_size = 1
$([ $side = tx ] && echo 'mirror = "10.78.0.1:7000"')
[[table.column]]
name = "stamp"
dtype = "int64"
shape = [2]
[[table.column]]
name = "params"
dtype = "float32"
shape = [$floats]
TOML
  done
  p50=() p99=() per_version=()
  for r in $(seq "$reps"); do
    start rx "$rx"
    start tx "$tx"
    sleep 0.5
    ip netns exec "$tx" "$bench" follow "$dir/tx.sock" params "$floats" "$versions" >"$dir/follow.json" &
    f=$!
    # more readers of the same mirror, as more actors: the link carries a version once
    for k in 1 2; do
      ip netns exec "$tx" "$bench" follow "$dir/tx.sock" params "$floats" "$versions" >/dev/null &
      pids+=($!)
    done
    ip netns exec "$rx" "$bench" publish "$dir/rx.sock" params "$floats" "$versions" 20000
    wait $f
    fo=$(cat "$dir/follow.json")
    p50+=("$(field "$fo" p50_us)")
    p99+=("$(field "$fo" p99_us)")
    st=$("$build/programs/engramctl/engramctl" --socket "$dir/tx.sock" status --json)
    per_version+=("$(python3 -c "import json,sys; m=json.loads(sys.argv[1])['remote']['mirrors'][0]; print(m['bytes'] / max(1, m['items']))" "$st")")
    stop tx
    stop rx
  done
  say "mirror $floats floats: p50 ${p50[*]} us, p99 ${p99[*]} us"
  json_mirror+="${json_mirror:+, }{\"floats\": $floats, \"versions\": $versions, \"readers\": 3, \"latency_us\": {\"p50\": {$(median_spread "${p50[@]}")}, \"p99\": {$(median_spread "${p99[@]}")}}, \"bytes_per_version\": {$(median_spread "${per_version[@]}")}, \"param_bytes\": $((floats * 4 + 16))}"
done

cat >"$out" <<JSON
{"bench": "remote", "revision": "$(git_revision)", "date": "$(date -u +%FT%TZ)", "quick": $([ $quick = 1 ] && echo true || echo false),
 "host": "$(nproc) cores, $(uname -r)", "repetitions": $reps, "link": "veth pair between two network namespaces",
 "tcp": $json_tcp,
 "tls_stream": $json_tls,
 "grpc_stream": [$json_grpc],
 "upstream": [$json_up],
 "mirror": [$json_mirror]}
JSON
python3 -m json.tool "$out" >/dev/null
png=${out%.json}.png
python3 - "$out" >"$dir/plot.dat" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
up = {(u["item_bytes"], u["security"], u["chunk_length"]): u for u in d["upstream"]}
tcp = d["tcp"]
tls = d["tls_stream"] or {"bytes_per_s": {"median": float("nan")}}
for size in sorted({k[0] for k in up}):
    chunks = sorted({k[2] for k in up if k[0] == size})
    lo, hi = chunks[0], chunks[-1]  # 1 and 16 unless ENGRAM_REMOTE_CHUNKS said otherwise
    row = lambda sec, chunk: up.get((size, sec, chunk))
    gbps = lambda u: u["items_per_s"]["median"] * size / 1e9 if u else float("nan")
    cpu = lambda u, side: u["engramd_cpu_s_per_gb"][side]["median"] if u else float("nan")
    p, t = row("plain", hi), row("tls", hi)
    print(size, gbps(p), gbps(t), tcp["bytes_per_s"]["median"] / 1e9, cpu(p, "send"), cpu(p, "recv"),
          cpu(t, "send"), cpu(t, "recv"), tcp["cpu_s_per_gb"]["send"]["median"], tcp["cpu_s_per_gb"]["recv"]["median"],
          gbps(row("plain", lo)), gbps(row("tls", lo)), tls["bytes_per_s"]["median"] / 1e9)
PY
gnuplot -e "data='$dir/plot.dat'; out='$png'" "$src/bench/remote.gp"
say "wrote $out and $png"
