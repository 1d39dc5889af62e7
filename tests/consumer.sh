#!/usr/bin/env bash
# Installs the build in BUILD_DIR into a temporary prefix, then builds and
# runs tests/consumer against it with find_package(engram CONFIG) and with
# pkg-config.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:?usage: tests/consumer.sh BUILD_DIR}
tmp=$(mktemp -d /tmp/engram-consumer-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
libdir=$(ls -d "$tmp"/prefix/lib*/ | head -1)
PKG_CONFIG_PATH="$libdir/pkgconfig" cmake -S "$src/tests/consumer" -B "$tmp/build" \
  -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
cmake --build "$tmp/build" >/dev/null
for exe in consumer_cmake consumer_pkgconfig; do
  LD_LIBRARY_PATH="$libdir" "$tmp/build/$exe" "$tmp/s.sock"
done
