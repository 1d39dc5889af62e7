#!/usr/bin/env bash
# Fails if LIB needs a library not named after it (its ELF NEEDED entries):
# libengram.so.0 must load nothing of the server (liburing, toml++,
# xxhash), and, with gRPC coming to engramd, nothing of that either.
# The dynamic loader (ld-linux-*.so, needed for thread-local storage) counts
# as part of libc.
#   check-needed.sh LIB ALLOWED...
set -euo pipefail
lib=${1:?usage: check-needed.sh LIB ALLOWED...}
shift
have=$(readelf -d "$lib" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | grep -v '^ld-linux')
extra=$(printf '%s\n' $have | grep -vxF -f <(printf '%s\n' "$@") || true)
if [ -n "$extra" ]; then
  echo "check-needed: $(basename "$lib") needs $(echo $extra), beyond what it may: $*"
  exit 1
fi
echo "check-needed: $(basename "$lib") needs $(echo $have)"
