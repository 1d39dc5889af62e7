#!/usr/bin/env bash
# Every man page through mandoc's linter (Debian's mandoc) and groff's
# warnings (man --warnings): any message, style included, fails.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v mandoc >/dev/null || { echo "lint-man: mandoc is missing; run scripts/setup.sh" >&2; exit 1; }
out=$(mandoc -T lint man/man*/*.? man/man3/*.3type 2>&1 || true)
if [ -n "$out" ]; then
  echo "$out"
  exit 1
fi
# groff's own warnings, as man(1) renders each page.
for page in man/man*/*.? man/man3/*.3type; do
  warn=$(man --warnings -l -Tutf8 "$page" 2>&1 >/dev/null || true)
  [ -z "$warn" ] || { echo "$page: $warn"; exit 1; }
done
# apropos (man -k engram) finds every page by its NAME line once indexed.
pages=$(ls man/man*/*.? man/man3/*.3type | wc -l)
index=$(mktemp -d /tmp/engram-man-XXXXXX)
cp -r man/man* "$index/"
mandb -q -c "$index" >/dev/null 2>&1 || true
found=$(apropos -M "$index" engram 2>/dev/null | wc -l)
rm -rf "$index"
[ "$found" -eq "$pages" ] || { echo "lint-man: apropos finds $found of the $pages pages"; exit 1; }
echo "lint-man: $pages pages, no message from mandoc -T lint or groff; apropos finds each"
