#!/usr/bin/env bash
# The README's snippets cannot rot: its C snippet is compiled (C99, warnings
# as errors) and its C++ snippet (C++17) against this build's libengram and
# both are run against an engramd; every ```toml block of the README and
# of the pages it sends configs to (docs/RECIPES.md, docs/ACROSS_MACHINES.md)
# is a complete engramd.toml that `engramd --check-config` accepts. (The Python snippet
# is run by the Python binding's tests, the Rust one compiled as a doctest,
# the Julia one parsed and checked by bindings/julia/check.)
# Usage: tests/readme_snippets.sh BUILD_DIR
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:?usage: tests/readme_snippets.sh BUILD_DIR}" && pwd)
tmp=$(mktemp -d /tmp/engram-snippet-XXXXXX)
daemon=
trap '[ -n "$daemon" ] && kill $daemon 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"' EXIT
fail() { echo "readme_snippets: $*" >&2; exit 1; }

# Block N (0-based) of language LANG in FILE (default README.md), or nothing.
block() { awk -v lang="$1" -v want="$2" '$0 == "```" lang {n++; on = (n - 1 == want); next} /^```/{on=0} on' "$src/${3:-README.md}"; }

block c 0 >"$tmp/snippet.c"
[ -s "$tmp/snippet.c" ] || fail "README.md has no \`\`\`c block"
cc -std=c99 -Wall -Wextra -Werror -I"$src/capi/include" "$tmp/snippet.c" -L"$build/capi" -lengram \
  -Wl,-rpath,"$build/capi" -o "$tmp/snippet_c"
block cpp 0 >"$tmp/snippet.cpp"
[ -s "$tmp/snippet.cpp" ] || fail "README.md has no \`\`\`cpp block"
c++ -std=c++17 -Wall -Wextra -Werror -I"$src/capi/include" "$tmp/snippet.cpp" -L"$build/capi" -lengram \
  -Wl,-rpath,"$build/capi" -o "$tmp/snippet_cpp"

"$build/programs/engramd/engramd" --socket "$tmp/s.sock" >"$tmp/engramd.log" 2>&1 &
daemon=$!
for _ in $(seq 1 100); do [ -S "$tmp/s.sock" ] && break; sleep 0.05; done
out=$(ENGRAM_SOCKET=$tmp/s.sock "$tmp/snippet_c")
echo "C:   $out"
[ "$out" = "sampled 32 items: success" ] || fail "the C snippet printed something unexpected"
out=$(ENGRAM_SOCKET=$tmp/s.sock "$tmp/snippet_cpp")
echo "C++: $out"
[[ "$out" =~ ^"sampled 32 items; the first obs starts "[0-9]+\.[0-9]$ ]] || fail "the C++ snippet printed something unexpected"

total=0
for page in README.md docs/RECIPES.md docs/ACROSS_MACHINES.md; do
  n=0
  while :; do
    block toml $n "$page" >"$tmp/recipe.toml"
    [ -s "$tmp/recipe.toml" ] || break
    "$build/programs/engramd/engramd" --check-config --config "$tmp/recipe.toml" >"$tmp/check.log" 2>&1 ||
      { cat "$tmp/recipe.toml" "$tmp/check.log" >&2; fail "$page's toml block $((n + 1)) is not a valid engramd.toml"; }
    n=$((n + 1))
  done
  total=$((total + n))
done
[ "$(block toml 0 docs/RECIPES.md)" ] && [ "$(block toml 1 docs/ACROSS_MACHINES.md)" ] ||
  fail "docs/RECIPES.md and docs/ACROSS_MACHINES.md lost their toml blocks"
[ $total -ge 6 ] || fail "found $total toml blocks; the recipes have 4 and the two machines' configs 2"
echo "toml: $total blocks, each a valid engramd.toml"
