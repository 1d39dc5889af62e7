#!/usr/bin/env bash
# Every man page through mandoc's linter (Debian's mandoc): any message,
# style included, fails.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v mandoc >/dev/null || { echo "lint-man: mandoc is missing; run scripts/setup.sh" >&2; exit 1; }
out=$(mandoc -T lint man/man*/*.? 2>&1 || true)
if [ -n "$out" ]; then
  echo "$out"
  exit 1
fi
echo "lint-man: $(ls man/man*/*.? | wc -l) pages, no message"
