#!/usr/bin/env bash
# The C examples cannot rot: each examples/c/*.c (shown on the man pages of
# the functions its first comment names, see scripts/gen-man3.py) is
# compiled as C99 with warnings as errors against this build, installed,
# run against an engramd, and its output checked for what it must say.
# They run in name order: actor.c writes the items learner.c samples.
# Usage: tests/c_examples.sh BUILD_DIR
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:?usage: tests/c_examples.sh BUILD_DIR}" && pwd)
tmp=$(mktemp -d /tmp/engram-examples-XXXXXX)
daemon=
trap '[ -n "$daemon" ] && kill $daemon 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"' EXIT
fail() { echo "c_examples: $*" >&2; exit 1; }

# Built as a user builds them (engram-tutorial(7)): against the installed
# headers and libraries, found by pkg-config.
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
libdir=$(ls -d "$tmp"/prefix/lib*/ | head -1)
export PKG_CONFIG_PATH=$libdir/pkgconfig
read -ra client < <(pkg-config --cflags --libs engram)
read -ra server < <(pkg-config --cflags --libs engram-server)

"$build/programs/engramd/engramd" --socket "$tmp/s.sock" >"$tmp/engramd.log" 2>&1 &
daemon=$!
for _ in $(seq 1 100); do [ -S "$tmp/s.sock" ] && break; sleep 0.05; done
# The table actor.c and learner.c use, made as engram-tutorial(7) makes it.
cat >"$tmp/replay.toml" <<'TOML'
name = "replay"
max_size = 100000
sampler = "prioritized"
priority_exponent = 0.6
[[column]]
name = "obs"
dtype = "float32"
shape = [4]
[[column]]
name = "action"
dtype = "int32"
shape = []
TOML
"$build/programs/engramctl/engramctl" --socket "$tmp/s.sock" create-table "$tmp/replay.toml" >/dev/null ||
  fail "engramctl create-table replay"
# What each example must print (a line matched as an extended regex).
declare -A must=(
  [actor]='^actor: wrote 10 episodes, 480 items$'
  [embedded]='^embedded: checkpoint written$'
  [learner]='^learner: 10 batches of 32; the table holds 480 items, 320 samples so far$'
  [export_import]='^imported 100 items into table loaded$'
  [see_inside]='^a batch of 8 without repeats; item [0-9]+ was in it with probability 1$'
)
n=0
for f in "$src"/examples/c/*.c; do
  name=$(basename "$f" .c)
  [ -n "${must[$name]:-}" ] || fail "examples/c/$name.c has no expected output in tests/c_examples.sh"
  libs=("${client[@]}") arg=$tmp/s.sock
  # An example that embeds the server links its library too, and gets a directory.
  grep -q '#include <engram/server.h>' "$f" && { libs=("${server[@]}"); arg=$tmp/$name.d; mkdir -p "$arg"; }
  cc -std=c99 -Wall -Wextra -Werror "$f" "${libs[@]}" -Wl,-rpath,"$libdir" -o "$tmp/$name" ||
    fail "examples/c/$name.c does not compile"
  out=$(cd "$tmp" && "./$name" "$arg") || { echo "$out"; fail "examples/c/$name.c failed"; }
  echo "$out" | sed "s/^/$name: /"
  echo "$out" | grep -Eq "${must[$name]}" || fail "examples/c/$name.c did not print /${must[$name]}/"
  n=$((n + 1))
done
[ $n -ge 5 ] || fail "found $n examples"
echo "c_examples: $n examples compiled and ran"
