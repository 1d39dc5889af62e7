#!/usr/bin/env bash
# The reference IMPALA's targets (README, "Reference agents"), measured:
#   bench/impala.sh cartpole [SEEDS]   default 5 seeds, each to 1.5M steps or solved,
#                                      then the same seeds with --handoff 1
#   bench/impala.sh breakout [SEEDS]   default 3 seeds of 5M frames (about 8 min each),
#                                      then 1M frames of seed 1 with and without engram
#   bench/impala.sh reproducible       CartPole --reproducible with K = 1, 2 and 4
#                                      actor processes (32 envs), 1M steps each
# Each writes bench/results/impala-MODE.json (one record per run: the
# summary engram-impala writes, and its curve) and impala-MODE.png. The
# handoff runs are the baseline: the same actors as threads of the
# learner's process, handing unrolls over in memory (no engram), so that
# the cost of going through engram is a ratio of frames/s measured in the
# same sitting.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:?usage: bench/impala.sh cartpole|breakout|reproducible [SEEDS]}
build=${ENGRAM_BUILD_DIR:-build/release}
bin=$build/agents/engram-impala
[ -x "$bin" ] || { echo "impala: build first: cmake --build --preset release --target engram-impala" >&2; exit 1; }
work=$(mktemp -d /tmp/engram-impala-bench-XXXXXX)
trap 'rm -rf "$work"' EXIT
runs=()
train() {  # NAME ARGS...: one run into $work/NAME
  local name=$1; shift
  echo "== $name: $*"
  "$bin" "$@" --out "$work/$name" | tail -3
  runs+=("$name")
}
case $mode in
  cartpole)
    seeds=${2:-5}
    for s in $(seq 1 "$seeds"); do train "seed$s" --env cartpole --steps 1500000 --seed "$s"; done
    for s in $(seq 1 "$seeds"); do train "handoff$s" --env cartpole --steps 1500000 --seed "$s" --handoff 1; done ;;
  breakout)
    seeds=${2:-3}
    for s in $(seq 1 "$seeds"); do train "seed$s" --env breakout --steps 5000000 --seed "$s"; done
    train engram1M --env breakout --steps 1000000 --seed 1
    train handoff1M --env breakout --steps 1000000 --seed 1 --handoff 1 ;;
  reproducible)
    for k in 1 2 4; do
      train "K$k" --env cartpole --steps 1000000 --seed 1 --reproducible 1 --actors "$k" --envs 32 --micro-batch 8
    done ;;
  *) echo "impala: cartpole, breakout or reproducible, not $mode" >&2; exit 2 ;;
esac
python3 - "$mode" "$work" "${runs[@]}" <<'PY'
import csv, json, os, subprocess, sys
mode, work, names = sys.argv[1], sys.argv[2], sys.argv[3:]
runs = []
for n in names:
    d = os.path.join(work, n)
    with open(os.path.join(d, "summary.json")) as f:
        r = json.load(f)
    r["run"] = n
    with open(os.path.join(d, "curve.csv")) as f:
        r["curve"] = [[float(x) for x in row] for row in list(csv.reader(f))[1:]]
    if r["reproducible"]:
        with open(os.path.join(d, "param_hashes.txt")) as f:
            r["param_hashes_first_21"] = [line.split()[1] for line in f][:21]
    # Seconds and env steps at which the trailing-100 mean first reached 475.
    hit = next((row for row in r["curve"] if row[5] >= 475), None)
    r["solved_at_s"], r["solved_at_steps"] = (hit[0], hit[1]) if hit else (None, None)
    runs.append(r)
git = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
out = f"bench/results/impala-{mode}.json"
with open(out, "w") as f:
    json.dump({"mode": mode, "git": git, "runs": runs}, f, indent=1)
plotted = [r for r in runs if not r["handoff"] and not r["run"].endswith("1M")]
gp = os.path.join(work, "plot.gp")
with open(gp, "w") as f:
    f.write(f"set terminal png size 900,500\nset output 'bench/results/impala-{mode}.png'\n"
            "set datafile separator ','\nset key bottom right\nset xlabel 'env steps'\n"
            "set ylabel 'trailing-100 mean return'\nset grid\nplot ")
    f.write(", ".join(f"'{work}/{r['run']}/curve.csv' every ::1 using 2:6 with lines title '{r['run']}'"
                      for r in plotted) + "\n")
subprocess.run(["gnuplot", gp], check=False)
print(f"{'run':>10} {'solved':>6} {'steps':>9} {'seconds':>8} {'frames/s':>9} {'mean100':>8} {'engram learner':>15} {'actors':>7}")
for r in runs:
    print(f"{r['run']:>10} {str(r['solved']):>6} {r['env_steps']:>9} {r['wall_s']:>8.1f} {r['frames_per_s']:>9.0f} "
          f"{r['mean100']:>8.1f} {100*r['learner_engram_cpu_share']:>14.1f}% {100*r['actor_engram_cpu_share']:>6.1f}%")
eng = [r["frames_per_s"] for r in runs if not r["handoff"] and (mode == "cartpole" or r["run"] == "engram1M")]
hand = [r["frames_per_s"] for r in runs if r["handoff"]]
if eng and hand:
    med = lambda v: sorted(v)[len(v) // 2]
    print(f"frames/s, median: through engram {med(eng):.0f}, in-process handoff {med(hand):.0f}, ratio {med(eng) / med(hand):.2f}")
if mode == "reproducible":
    same = len({tuple(r["param_hashes_first_21"]) for r in runs}) == 1
    print("parameter hashes of the first 20 updates:", "identical for every K" if same else "DIFFER")
print(f"wrote {out} and bench/results/impala-{mode}.png")
PY
