#!/usr/bin/env bash
# The README's C snippet, compiled (C99, warnings as errors) against this
# build's libengram and run against an engramd: it cannot rot. (The Python
# and Rust snippets are run and compiled by their bindings' tests.)
# Usage: tests/readme_c_snippet.sh BUILD_DIR
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:?usage: tests/readme_c_snippet.sh BUILD_DIR}" && pwd)
tmp=$(mktemp -d /tmp/engram-snippet-XXXXXX)
awk '/^```c$/{on=1; next} /^```$/{on=0} on' "$src/README.md" >"$tmp/snippet.c"
[ -s "$tmp/snippet.c" ] || { echo "README.md has no \`\`\`c block" >&2; exit 1; }
cc -std=c99 -Wall -Wextra -Werror -I"$src/capi/include" "$tmp/snippet.c" -L"$build/capi" -lengram \
  -Wl,-rpath,"$build/capi" -o "$tmp/snippet"
"$build/daemon/engramd" --socket "$tmp/s.sock" >"$tmp/engramd.log" 2>&1 &
daemon=$!
trap 'kill $daemon 2>/dev/null; wait $daemon 2>/dev/null; rm -rf "$tmp"' EXIT
for _ in $(seq 1 100); do [ -S "$tmp/s.sock" ] && break; sleep 0.05; done
out=$(ENGRAM_SOCKET=$tmp/s.sock "$tmp/snippet")
echo "$out"
[ "$out" = "sampled 32 items: success" ] || { echo "unexpected output" >&2; exit 1; }
