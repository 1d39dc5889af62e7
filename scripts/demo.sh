#!/usr/bin/env bash
# Installs what is missing, builds the release preset, and runs the main job:
# the demo of engram's core structures across processes (about 6 seconds).
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/setup.sh
cmake --preset release >/dev/null
cmake --build --preset release --target engram_demo
exec ./build/release/demo/engram_demo "$@"
