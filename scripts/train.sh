#!/usr/bin/env bash
# The main job: installs what is missing, builds, and trains the reference
# Ape-X DQN on CartPole-v1 through engram until it is solved (trailing-100
# mean return of the greedy actors >= 475) or 300k env steps, with a
# progress line a second; ends by printing where the curve, its plot and
# the model are. Arguments go to engram-apex (--help), e.g.
#   ./scripts/train.sh --env breakout --steps 1000000 --out breakout-out
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/setup.sh
cmake --preset release >/dev/null
cmake --build --preset release --target engram-apex
exec ./build/release/agents/engram-apex --env cartpole --out apex-out "$@"
