#!/usr/bin/env bash
# The reference Ape-X's targets (README, "Reference agents"), measured: trains
# each seed in turn and writes bench/results/apex-ENV.json (one record per
# seed: solved, env steps, wall seconds, frames/s, trailing-100 means,
# shares of time in engram calls) and bench/results/apex-ENV.png (every
# seed's curve).
#   bench/apex.sh cartpole [SEEDS]     default 5 seeds, each to 300k steps or solved
#   bench/apex.sh breakout [SEEDS]     default 3 seeds of 1M frames each (about 8 min each)
#   bench/apex.sh actors [RUNS]        actors alone (--learner 0: no training, no rate
#                                      limiter), CartPole: transitions inserted per second
#                                      for K actors x M envs = 1x16, 1x64, 2x32, RUNS each
#                                      (default 3), into bench/results/apex-actors.json
set -euo pipefail
cd "$(dirname "$0")/.."
env=${1:?usage: bench/apex.sh cartpole|breakout [SEEDS], or bench/apex.sh actors [RUNS]}
build=${ENGRAM_BUILD_DIR:-build/release}
bin=$build/agents/engram-apex
[ -x "$bin" ] || { echo "apex: build first: cmake --build --preset release --target engram-apex" >&2; exit 1; }
if [ "$env" = actors ]; then
  runs=${2:-3}
  work=$(mktemp -d /tmp/engram-apex-bench-XXXXXX)
  trap 'rm -rf "$work"' EXIT
  for shape in 1x16 1x64 2x32; do
    for r in $(seq 1 "$runs"); do
      echo "== actors alone, $shape, run $r =="
      "$bin" --env cartpole --learner 0 --actors "${shape%x*}" --envs-per-actor "${shape#*x}" --steps 3000000 \
        --seed "$r" --out "$work/$shape-$r" | tail -2
    done
  done
  python3 - "$work" "$runs" <<'PY'
import csv, json, subprocess, sys
work, runs = sys.argv[1], int(sys.argv[2])
out = {"git": subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip(),
       "what": "CartPole transitions inserted per second by actors alone (engram-apex --learner 0), "
               "from the progress lines after the first second (start-up excluded)", "configs": {}}
for shape in ("1x16", "1x64", "2x32"):
    rates = []
    for r in range(1, runs + 1):
        with open(f"{work}/{shape}-{r}/curve.csv") as f:
            rows = [[float(x) for x in row] for row in list(csv.reader(f))[1:]]
        if len(rows) < 3:
            sys.exit(f"{shape} run {r}: {len(rows)} progress lines; the rate needs two after the first second")
        first, last = rows[1], rows[-1]  # from the end of the first second
        rates.append(round((last[1] - first[1]) / (last[0] - first[0])))
    with open(f"{work}/{shape}-1/summary.json") as f:
        share = json.load(f)["actor_engram_cpu_share"]
    out["configs"][shape] = {"transitions_per_s": rates, "actor_engram_cpu_share_run1": share}
    print(f"{shape}: {rates} transitions/s; actors' CPU in engram (run 1) {100 * share:.0f}%")
with open("bench/results/apex-actors.json", "w") as f:
    json.dump(out, f, indent=1)
print("wrote bench/results/apex-actors.json")
PY
  exit 0
fi
case $env in
  cartpole) seeds=${2:-5}; steps=300000 ;;
  breakout) seeds=${2:-3}; steps=1000000 ;;
  *) echo "apex: cartpole or breakout, not $env" >&2; exit 2 ;;
esac
work=$(mktemp -d /tmp/engram-apex-bench-XXXXXX)
trap 'rm -rf "$work"' EXIT
for s in $(seq 1 "$seeds"); do
  echo "== $env seed $s =="
  "$bin" --env "$env" --steps "$steps" --seed "$s" --out "$work/seed$s" | tail -3
done
python3 - "$env" "$work" "$seeds" <<'PY'
import csv, json, os, subprocess, sys
env, work, seeds = sys.argv[1], sys.argv[2], int(sys.argv[3])
runs = []
for s in range(1, seeds + 1):
    d = os.path.join(work, f"seed{s}")
    with open(os.path.join(d, "summary.json")) as f:
        r = json.load(f)
    with open(os.path.join(d, "curve.csv")) as f:
        r["curve"] = [[float(x) for x in row] for row in list(csv.reader(f))[1:]]
    r["frames_per_s"] = r["env_steps"] / r["wall_s"] if r["wall_s"] else 0
    runs.append(r)
git = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
out = f"bench/results/apex-{env}.json"
with open(out, "w") as f:
    json.dump({"env": env, "git": git, "runs": runs}, f, indent=1)
gp = os.path.join(work, "plot.gp")
with open(gp, "w") as f:
    f.write(f"set terminal png size 900,500\nset output 'bench/results/apex-{env}.png'\n"
            "set datafile separator ','\nset key bottom right\nset xlabel 'env steps'\n"
            "set ylabel 'trailing-100 mean return, epsilon <= 0.01'\nset grid\nplot ")
    f.write(", ".join(f"'{work}/seed{s}/curve.csv' every ::1 using 2:5 with lines title 'seed {s}'"
                      for s in range(1, seeds + 1)) + "\n")
subprocess.run(["gnuplot", gp], check=False)
print(f"{'seed':>4} {'solved':>6} {'steps':>9} {'seconds':>8} {'frames/s':>9} {'mean100':>8} {'engram learner':>15} {'engram actors':>14}")
for r in runs:
    print(f"{r['seed']:>4} {str(r['solved']):>6} {r['env_steps']:>9} {r['wall_s']:>8.1f} {r['frames_per_s']:>9.0f} "
          f"{r['mean100_low_epsilon']:>8.1f} {100*r['learner_engram_cpu_share']:>14.1f}% {100*r['actor_engram_cpu_share']:>13.1f}%")
print(f"wrote {out} and bench/results/apex-{env}.png")
PY
