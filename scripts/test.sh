#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test: the release build's
# full suite (unit, multi-process, fault injection, ABI baseline), the same
# suites under AddressSanitizer + UBSan, then each libFuzzer target for a
# bounded time (ENGRAM_FUZZ_SECONDS, default 30).
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
  ctest --preset asan -j2 -L 'core|daemon'

echo "== fuzz (libFuzzer, ${ENGRAM_FUZZ_SECONDS:-30} s each, two at a time) =="
cmake --preset fuzz >/dev/null
cmake --build --preset fuzz
# fuzz TARGET: one target for its time, its log in build/fuzz/fuzz_TARGET.log.
fuzz() {
  local target=$1 corpus=build/fuzz/corpus/$1 seeds=()
  mkdir -p "$corpus"
  [ -d "tests/fuzz/corpus/$target" ] && seeds=("tests/fuzz/corpus/$target")
  ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    "build/fuzz/tests/fuzz/fuzz_$target" -max_total_time="${ENGRAM_FUZZ_SECONDS:-30}" -print_final_stats=0 \
    "$corpus" "${seeds[@]}" 2>"build/fuzz/fuzz_$target.log"
}
# The machine has two cores and each fuzzer takes one: pairs halve the wait.
targets=(ring_record config manifest control peer npz)
for target in "${targets[@]}"; do
  [ -x "build/fuzz/tests/fuzz/fuzz_$target" ] || { echo "fuzz_$target was not built (see the fuzz preset's targets)"; exit 1; }
done
for ((i = 0; i < ${#targets[@]}; i += 2)); do
  pair=("${targets[@]:i:2}") pids=()
  for target in "${pair[@]}"; do
    fuzz "$target" &
    pids+=($!)
  done
  for k in "${!pair[@]}"; do
    target=${pair[k]}
    wait "${pids[k]}" ||
      {
        kill "${pids[@]}" 2>/dev/null || true
        tail -40 "build/fuzz/fuzz_$target.log"
        echo "fuzz_$target found a crash (input saved in the working directory)"
        exit 1
      }
    echo "fuzz_$target: $(grep -o 'Done [0-9]* runs' "build/fuzz/fuzz_$target.log" | tail -1), no crash"
  done
done
