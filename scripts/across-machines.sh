#!/usr/bin/env bash
# The README's "Across machines" demo on one host: installs what is missing,
# builds, and runs engram-apex (or, with a first argument `impala`,
# engram-impala) on three "machines" made of network namespaces joined by
# veth pairs with mutual TLS: the learner, whose embedded server listens,
# on one; an actor machine (--role actors: replay upstream, parameters
# mirrored) on each of the other two, one of them with the Python and Rust
# example actors. Prints the learner's progress every 5 s and a JSON line
# at the end, and keeps the learner's curve, plot and model in
# ./AGENT-across-out (ENGRAM_NETNS_OUT to change); the namespaces go at
# exit. As root (network namespaces); about a minute after the build. The
# same run is CI's netns_apex and netns_impala test.
set -euo pipefail
cd "$(dirname "$0")/.."

agent=apex
if [ "${1:-}" = impala ] || [ "${1:-}" = apex ]; then agent=$1; shift; fi
[ "$(id -u)" -eq 0 ] || { echo "across-machines.sh: network namespaces need root: sudo $0 $agent" >&2; exit 1; }
./scripts/setup.sh
cmake --preset release >/dev/null
cmake --build --preset release --target "engram-$agent" engramctl engram engram_embedded
ENGRAM_NETNS_OUT=${ENGRAM_NETNS_OUT:-$PWD/$agent-across-out} exec tests/netns/run.sh build/release "$agent"
