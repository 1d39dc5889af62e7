#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test: the release build's
# full suite, then core's suite under AddressSanitizer + UBSan.
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/setup.sh

echo "== release build =="
cmake --preset release -DENGRAM_BUILD_TESTS=ON >/dev/null
cmake --build --preset release
ctest --preset release -j2

echo "== asan + ubsan build =="
cmake --preset asan >/dev/null
cmake --build --preset asan
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --preset asan -j2 -L core
