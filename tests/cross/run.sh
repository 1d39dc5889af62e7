#!/usr/bin/env bash
# Cross-language: a C, a Python and a Rust writer write into one table of
# one engramd at the same time, and a C++ reader checks every byte of every
# item against what its writer wrote (and that none is lost or doubled).
# Usage: tests/cross/run.sh BUILD_DIR   (after the build: cross_writer, cross_check)
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:?usage: tests/cross/run.sh BUILD_DIR}" && pwd)
n=${ENGRAM_CROSS_ITEMS:-500}
tmp=$(mktemp -d /tmp/engram-cross-XXXXXX)
cat >"$tmp/engramd.toml" <<TOML
socket = "$tmp/s.sock"
[[table]]
name = "cross"
max_size = 10000
sampler = "fifo"
max_times_sampled = 1
[[table.column]]
name = "writer"
dtype = "int32"
[[table.column]]
name = "step"
dtype = "int64"
[[table.column]]
name = "payload"
dtype = "uint8"
shape = [48]
TOML
"$build/programs/engramd/engramd" --config "$tmp/engramd.toml" >"$tmp/engramd.log" 2>&1 &
daemon=$!
trap 'kill $daemon 2>/dev/null; wait $daemon 2>/dev/null; rm -rf "$tmp"' EXIT
for _ in $(seq 1 100); do [ -S "$tmp/s.sock" ] && break; sleep 0.05; done

(cd "$src/bindings/rust" && ENGRAM_LIB_DIR=$build/capi CARGO_TARGET_DIR=$build/rust \
  cargo build --offline --quiet --example cross_writer)
"$build/tests/cross_writer" "$tmp/s.sock" 1 "$n" &
c=$!
PYTHONPATH=$src/bindings/python ENGRAM_LIBRARY=$build/capi/libengram.so.0 PYTHONDONTWRITEBYTECODE=1 \
  ${ENGRAM_PYTHON:-/usr/bin/python3} "$src/tests/cross/cross_writer.py" "$tmp/s.sock" 2 "$n" &
py=$!
"$build/rust/debug/examples/cross_writer" "$tmp/s.sock" 3 "$n" &
rs=$!
status=0
for p in $c $py $rs; do wait "$p" || status=1; done
[ $status -eq 0 ] || { cat "$tmp/engramd.log"; echo "cross: a writer failed" >&2; exit 1; }
"$build/tests/cross_check" "$tmp/s.sock" "$n" 1 2 3
