#!/usr/bin/env bash
# The Rust binding's checks against the libengram in BUILD_DIR: cargo test
# (an embedded server, no crates from crates.io), cargo doc with warnings as
# errors, and the examples against an engramd of that build.
# Usage: bindings/rust/test.sh BUILD_DIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:?usage: bindings/rust/test.sh BUILD_DIR}" && pwd)
command -v cargo >/dev/null || { echo "cargo is missing: scripts/setup.sh installs Debian's" >&2; exit 1; }
export ENGRAM_LIB_DIR=$build/capi ENGRAM_SERVER_LIB_DIR=$build/embedded CARGO_TARGET_DIR=$build/rust
echo "rust: $(cargo --version), $(rustc --version)"
cd "$here"
cargo test --offline --quiet
RUSTDOCFLAGS="-D warnings" cargo doc --offline --no-deps --quiet
# Every public type of the crate shows how it is used (a doc example,
# compiled by cargo test above).
python3 - engram/src/*.rs <<'PY'
import re, sys
missing = []
for path in sys.argv[1:]:
    lines = open(path).read().split("\n")
    for i, line in enumerate(lines):
        m = re.match(r"pub (struct|enum|trait|type) (\w+)", line)
        if not m:
            continue
        j, doc = i - 1, []
        while j >= 0 and (lines[j].startswith("///") or lines[j].startswith("#[")):
            doc.append(lines[j])
            j -= 1
        if not any("```" in d or "include_str!" in d for d in doc):  # ReadmeSnippets: the README
            missing.append(f"{path}: {m.group(2)}")
if missing:
    sys.exit("rust: public types without a doc example: " + ", ".join(missing))
PY
cargo build --offline --quiet --examples
tmp=$(mktemp -d /tmp/engram-rust-XXXXXX)
"$build/programs/engramd/engramd" --socket "$tmp/s.sock" >"$tmp/engramd.log" 2>&1 &
daemon=$!
trap 'kill $daemon 2>/dev/null; wait $daemon 2>/dev/null; rm -rf "$tmp"' EXIT
for _ in $(seq 1 100); do [ -S "$tmp/s.sock" ] && break; sleep 0.05; done
out=$("$CARGO_TARGET_DIR/debug/examples/writer" "$tmp/s.sock")
echo "$out"
[ "$out" = "wrote 1000 steps; the table holds 1000 items" ]
out=$("$CARGO_TARGET_DIR/debug/examples/sampler" "$tmp/s.sock")
echo "$out"
[ "$(echo "$out" | grep -c '^item 0x')" = 4 ] && echo "$out" | grep -q '^zero-copy: \['
echo "rust: ok"
