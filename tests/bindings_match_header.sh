#!/usr/bin/env bash
# The bindings' declarations against the headers (scripts/check-bindings.py):
# they match as the tree stands, and a copy of engram.h with one signature
# changed (an argument's type, the argument count, a result's type) fails
# the check for both Python and Rust, naming the function.
# Usage: tests/bindings_match_header.sh   (ENGRAM_LIBRARY: libengram.so.0)
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
check() { "${ENGRAM_PYTHON:-python3}" "$src/scripts/check-bindings.py" "$@"; }
check
mutant() {  # NAME SED: a copy of engram.h with SED applied must fail the check on NAME
  local name=$1 expr=$2
  cp "$src/capi/include/engram/engram.h" "$tmp/engram.h"
  sed -i "$expr" "$tmp/engram.h"
  cmp -s "$src/capi/include/engram/engram.h" "$tmp/engram.h" && { echo "FAIL: '$expr' changed nothing"; exit 1; }
  if check --header "$tmp/engram.h" >"$tmp/out" 2>&1; then
    cat "$tmp/out"
    echo "FAIL: a header with $name changed ('$expr') passed the check"
    exit 1
  fi
  for binding in python rust; do
    grep -q "$binding: $name " "$tmp/out" || { cat "$tmp/out"; echo "FAIL: $binding's $name was not named"; exit 1; }
  done
}
mutant engram_table_open 's/engram_table_open(engram_client\* c, const char\* name, engram_table\*\* out)/engram_table_open(engram_client* c, const char* name, engram_table* out)/'
mutant engram_rate_limiter_queue 's/engram_rate_limiter_queue(engram_rate_limiter\* out, int64_t size)/engram_rate_limiter_queue(engram_rate_limiter* out, int64_t size, int32_t spare)/'
mutant engram_batch_size 's/ENGRAM_API uint32_t engram_batch_size(/ENGRAM_API uint64_t engram_batch_size(/'
echo "bindings match the headers; each of three changed signatures was caught in Python and Rust"
