#!/usr/bin/env bash
# Checks Engram.jl against engram.h without Julia (see check.js): installs
# the pinned grammar (npm ci) under BUILD_DIR, compiles a probe that prints
# every struct's sizeof and offsetof, runs the check, then runs it once more
# against a copy of engram.h with one signature changed, which must fail.
# Usage: bindings/julia/check/run.sh BUILD_DIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../../.." && pwd)
build=$(cd "${1:?usage: bindings/julia/check/run.sh BUILD_DIR}" && pwd)
work=$build/julia-check
mkdir -p "$work"
command -v node >/dev/null || { echo "node is missing (npm's Node.js)" >&2; exit 1; }
if ! cmp -s "$here/package-lock.json" "$work/package-lock.json" || [ ! -d "$work/node_modules" ]; then
  cp "$here/package.json" "$here/package-lock.json" "$work/"
  (cd "$work" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
fi
# Both public headers as one: the package wraps the client (engram.h) and
# the embedded server (engram/server.h, whose #include of engram.h the
# guard then skips).
header=$work/engram-all.h
cat "$src/capi/include/engram/engram.h" "$src/embedded/include/engram/server.h" >"$header"
probe() {  # HEADER OUT: the C layout of every struct typedef in HEADER
  local h=$1 out=$2 c=$work/layout.c
  {
    echo '#include <stdio.h>'
    echo '#include <stddef.h>'
    echo "#include \"$h\""
    echo 'int main(void) {'
    python3 - "$h" <<'PY'
import re, sys
text = re.sub(r"/\*.*?\*/", " ", open(sys.argv[1]).read(), flags=re.S)
for name, body in re.findall(r"typedef struct (engram_\w+) \{(.*?)\} \1;", text, re.S):
    print(f'printf("{name} size %zu\\n", sizeof({name}));')
    for decl in filter(None, (d.strip() for d in body.split(";"))):
        m = re.match(r"^(.*?[\w\*]+[\s\*]+)(\w+(?:\[[^\]]*\])?(?:\s*,\s*\w+(?:\[[^\]]*\])?)*)$", decl, re.S)
        for field in m.group(2).split(","):
            f = field.strip().split("[")[0]
            print(f'printf("{name}.{f} %zu\\n", offsetof({name}, {f}));')
PY
    echo 'return 0; }'
  } >"$c"
  cc -I "$src/capi/include" -o "$work/layout" "$c"
  "$work/layout" >"$out"
}
# The functions as the one header parser reads them (scripts/check-bindings.py).
functions() {  # HEADER OUT
  python3 "$src/scripts/check-bindings.py" --header "$1" --server-header "$src/embedded/include/engram/server.h" --dump "$2"
}
probe "$header" "$work/layout.txt"
functions "$src/capi/include/engram/engram.h" "$work/functions.json"
NODE_PATH=$work/node_modules node "$here/check.js" "$header" "$work/functions.json" "$src/bindings/julia/Engram" \
  "$work/layout.txt" "$src/README.md"

# The README check must be able to fail: a keyword the package does not take.
sed 's/max_size = 10_000, sampler = :prioritized/max_size = 10_000, sampler_kind = :prioritized/' "$src/README.md" >"$work/README-changed.md"
cmp -s "$src/README.md" "$work/README-changed.md" && { echo "julia check: the self-test's edit of README.md did not apply" >&2; exit 1; }
if NODE_PATH=$work/node_modules node "$here/check.js" "$header" "$work/functions.json" "$src/bindings/julia/Engram" \
  "$work/layout.txt" "$work/README-changed.md" >"$work/readme-changed.log"; then
  echo "julia check: a README snippet with a wrong keyword went unnoticed" >&2
  exit 1
fi
grep -q "create_table takes no keyword sampler_kind" "$work/readme-changed.log" ||
  { cat "$work/readme-changed.log"; echo "julia check: the wrong keyword was not the reason" >&2; exit 1; }

# The check must be able to fail: engram_batch_size returning uint64_t.
sed 's/ENGRAM_API uint32_t engram_batch_size(/ENGRAM_API uint64_t engram_batch_size(/' "$src/capi/include/engram/engram.h" \
  >"$work/changed-engram.h"
cmp -s "$src/capi/include/engram/engram.h" "$work/changed-engram.h" &&
  { echo "julia check: the self-test's edit of engram.h did not apply" >&2; exit 1; }
cat "$work/changed-engram.h" "$src/embedded/include/engram/server.h" >"$work/changed.h"
probe "$work/changed.h" "$work/layout-changed.txt"
functions "$work/changed-engram.h" "$work/functions-changed.json"
if NODE_PATH=$work/node_modules node "$here/check.js" "$work/changed.h" "$work/functions-changed.json" \
  "$src/bindings/julia/Engram" "$work/layout-changed.txt" >"$work/changed.log"; then
  echo "julia check: a changed signature in engram.h went unnoticed" >&2
  exit 1
fi
grep -q "engram_batch_size returns UInt32" "$work/changed.log" ||
  { cat "$work/changed.log"; echo "julia check: the changed signature was not the reason" >&2; exit 1; }
echo "julia check: a changed signature in engram.h fails the check, as it must"
