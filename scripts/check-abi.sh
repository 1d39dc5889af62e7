#!/usr/bin/env bash
# Compares a built library with its stored ABI baseline using abidiff from
# abigail-tools: libengram.so (capi/abi/libengram.so.0.abi, engram.h) or
# libengram-server.so (embedded/abi/libengram-server.so.0.abi, engram/server.h).
#   check-abi.sh LIB            fails on an incompatible change (exit 1);
#                               additions pass, with a note to update the baseline
#   check-abi.sh --update LIB   rewrites LIB's baseline from LIB
set -euo pipefail
cd "$(dirname "$0")/.."
update=0
if [ "${1:-}" = "--update" ]; then update=1; shift; fi
lib="$1"
case "$(basename "$lib")" in
  libengram.so*)
    baseline=capi/abi/libengram.so.0.abi header=capi/include/engram/engram.h
    dirs=(--headers-dir capi/include/engram) ;;
  libengram-server.so*)
    baseline=embedded/abi/libengram-server.so.0.abi header=embedded/include/engram/server.h
    dirs=(--headers-dir embedded/include/engram --headers-dir capi/include/engram) ;;
  *) echo "check-abi: $lib is neither libengram.so nor libengram-server.so" >&2; exit 2 ;;
esac
soname=$(basename "$baseline" .abi)

if (( update )); then
  abidw "${dirs[@]}" --drop-private-types --no-show-locs --no-corpus-path "$lib" >"$baseline"
  echo "check-abi: baseline $baseline updated from $lib"
  exit 0
fi
set +e
# Opaque handles are declaration-only in the baseline, so their private
# layout may change freely; every public struct and signature is compared.
report=$(abidiff "$baseline" "$lib")
rc=$?
set -e
# abidiff's exit status is a bit field: 1 error, 2 usage, 4 ABI change, 8 incompatible change.
if (( rc & 3 )); then
  echo "check-abi: abidiff failed (status $rc):"; echo "$report"; exit 1
fi
# abidiff flags removed symbols as incompatible (8), but a changed struct
# or signature only as a change (4): read its summary, and accept nothing
# but additions, and fields appended to the struct_size-first structs
# (callers built against the older header pass a smaller struct_size, and
# the library reads and writes only that far).
removed=$(echo "$report" | grep -E "changes summary: [1-9][0-9]* Removed" || true)
changed=$(echo "$report" | grep -E "changes summary: [0-9]+ Removed, [1-9][0-9]* Changed" || true)
growth_ok=1
if [ -n "$changed" ] && ! echo "$report" | python3 scripts/abi-growth.py "$header"; then growth_ok=0; fi
if (( rc & 8 )) || [ -n "$removed" ] || (( growth_ok == 0 )); then
  echo "check-abi: INCOMPATIBLE change to the $soname ABI:"; echo "$report"
  echo "check-abi: an existing function or struct changed; add new ones instead (see the conventions in engram.h)."
  exit 1
fi
if (( rc & 4 )); then
  echo "check-abi: compatible additions to the ABI:"; echo "$report"
  echo "check-abi: ok; record them with scripts/check-abi.sh --update $lib"
  exit 0
fi
echo "check-abi: $soname ABI unchanged"
