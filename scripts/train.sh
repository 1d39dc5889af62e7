#!/usr/bin/env bash
# The main job: installs what is missing, builds, and trains the reference
# Ape-X DQN on CartPole-v1 through engram until it is solved (trailing-100
# mean return of the greedy actors >= 475) or 300k env steps, with a
# progress line a second; ends by printing where the curve, its plot and
# the model are. Arguments go to engram-apex (--help), e.g.
#   ./scripts/train.sh --env breakout --steps 1000000 --out breakout-out
# A first argument `impala` trains the reference IMPALA instead (arguments
# to engram-impala, --help), e.g.
#   ./scripts/train.sh impala --env cartpole
set -euo pipefail
cd "$(dirname "$0")/.."

agent=apex
if [ "${1:-}" = impala ] || [ "${1:-}" = apex ]; then agent=$1; shift; fi
./scripts/setup.sh
cmake --preset release >/dev/null
cmake --build --preset release --target "engram-$agent"
exec "./build/release/agents/engram-$agent" --env cartpole --out "$agent-out" "$@"
