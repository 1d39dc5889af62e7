#!/usr/bin/env bash
# Installs what is missing, builds the release preset, and runs the main job:
# Ape-X-style actors and a learner through engram's C API, with the server
# embedded in the demo process (about 20 seconds; --seconds S to change,
# --socket PATH to use a running engramd instead).
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/setup.sh
cmake --preset release >/dev/null
cmake --build --preset release --target engram_demo engramd engramctl
exec ./build/release/demo/engram_demo "$@"
