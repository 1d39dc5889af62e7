#!/usr/bin/env bash
# The PyTorch Ape-X learner (agents/python/apex_learner.py) against the C++
# one (engram-apex) on the same C++ actors (2 processes of 8 CartPole envs),
# in one run, seeds 1-3: env steps and wall seconds to solve (trailing-100
# mean of the envs with epsilon <= 0.01 >= 475, at most 400k steps), and
# the learner's time in engram calls, getting its batches with the
# prefetcher and without (--prefetch 0): its thread's CPU in them (what
# they cost it), and their wall time (waits included: a rate limiter
# holding the learner back for its actors, the CPU busy with them).
# JSON: bench/results/pytorch-apex.json.
# Usage: bench/pytorch_apex.sh [SEEDS...]
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=${ENGRAM_BUILD_DIR:-$src/build/release}
seeds=("$@")
[ $# -eq 0 ] && seeds=(1 2 3)
cmake --build "$build" --target engram-apex engram engram_embedded >/dev/null
tmp=$(mktemp -d /tmp/engram-pytorch-apex-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
export ENGRAM_LIBRARY=$build/capi/libengram.so.0 ENGRAM_SERVER_LIBRARY=$build/embedded/libengram-server.so.0
for seed in "${seeds[@]}"; do
  for run in cpp pytorch pytorch-noprefetch; do
    d=$tmp/$run-$seed
    case $run in
      cpp) "$build/agents/engram-apex" --env cartpole --actors 2 --envs-per-actor 8 --steps 400000 --seed "$seed" \
             --out "$d" | tail -2 ;;
      pytorch) /usr/bin/python3 "$src/agents/python/apex_learner.py" --actors 2 --envs-per-actor 8 --steps 400000 \
                 --seed "$seed" --out "$d" --engram-apex "$build/agents/engram-apex" | tail -2 ;;
      pytorch-noprefetch) /usr/bin/python3 "$src/agents/python/apex_learner.py" --actors 2 --envs-per-actor 8 \
                 --steps 400000 --seed "$seed" --out "$d" --engram-apex "$build/agents/engram-apex" --prefetch 0 | tail -2 ;;
    esac
  done
done
python3 - "$tmp" "$src/bench/results/pytorch-apex.json" "$(git -C "$src" rev-parse --short HEAD)" "${seeds[@]}" <<'PY'
import json, os, sys
tmp, out, git, seeds = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
runs = []
share = lambda v: None if v is None else round(v, 4)
pct = lambda v: "-" if v is None else f"{100 * v:.1f}%"
for seed in seeds:
    for run in ("cpp", "pytorch", "pytorch-noprefetch"):
        s = json.load(open(os.path.join(tmp, f"{run}-{seed}", "summary.json")))
        runs.append({"run": run, "seed": int(seed), "solved": s["solved"], "env_steps": s["env_steps"],
                     "wall_s": round(s["wall_s"], 2), "updates": s["updates"],
                     "mean100": s["mean100_low_epsilon"],
                     "engram_wall_share": round(s["learner_engram_wall_share"], 4),
                     "engram_cpu_share": round(s["learner_engram_cpu_share"], 4),
                     # null for the C++ learner, whose summary does not split its share
                     "batch_wall_share": share(s.get("learner_batch_wall_share")),
                     "calls_wall_share": share(s.get("learner_calls_wall_share"))})
json.dump({"git": git, "actors": "2 x 8 envs (C++)", "runs": runs}, open(out, "w"), indent=1)
print(f"{'learner':20} {'seed':>4} {'solved':>6} {'env steps':>10} {'wall s':>7} {'updates/s':>9} "
      f"{'engram CPU':>10} {'engram wall':>11} {'batches':>8} {'calls':>6}")
for r in runs:
    print(f"{r['run']:20} {r['seed']:>4} {str(r['solved']):>6} {r['env_steps']:>10,} {r['wall_s']:>7.1f} "
          f"{r['updates'] / r['wall_s']:>9,.0f} {pct(r['engram_cpu_share']):>10} {pct(r['engram_wall_share']):>11} "
          f"{pct(r['batch_wall_share']):>8} {pct(r['calls_wall_share']):>6}")
print(f"pytorch_apex: wrote {out}")
PY
