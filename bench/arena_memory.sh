#!/usr/bin/env bash
# Arena memory per item, the old default arena against the new, in one run:
# against an engramd with each arena (the old four classes, 4 KiB to 8 MiB,
# given as [arena]; the new default classes), a table made at run time
# (so that nothing is sized from a config) is filled with one-step items (a
# writer's defaults) of 140 B, 400 B, 1000 B and 4000 B until the arena has
# no block left for the next. Reported per case: the items the arena held,
# the arena bytes their chunks' blocks take per item (engramctl status'
# sealed blocks by class) and the bytes of step per item, to
# bench/results/arena-memory.json.
# Usage: bench/arena_memory.sh [--quick]   (quick: 140 B and 4000 B only)
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=${ENGRAM_BUILD_DIR:-$src/build/release}
dir=$(mktemp -d /tmp/engram-arena-XXXXXX)
. "$src/bench/engramd.sh"
trap 'engramd_stop; rm -rf "$dir"' EXIT
sizes=(140 400 1000 4000)
out=$src/bench/results/arena-memory.json
if [ "${1:-}" = --quick ]; then sizes=(140 4000) out=$build/arena-memory-quick.json; fi
cmake --build "$build" --target engram engramd engramctl >/dev/null
printf '[arena]\nclasses = [{ block_size = "4KiB", count = 4096 }, { block_size = "64KiB", count = 256 },
  { block_size = "1MiB", count = 24 }, { block_size = "8MiB", count = 2 }]\n' >"$dir/old.toml"
# The new default classes held at what they start with: growth on demand
# (grow_to, a quarter of memory without [arena]) would fill that instead,
# and the bytes per item are the classes', whatever their count.
printf '[arena]\ngrow_to = "232MiB"\n' >"$dir/new.toml"
: >"$dir/runs.jsonl"
for arena in old new; do
  for bytes in "${sizes[@]}"; do
    engramd_start "$dir/$arena.toml"
    PYTHONPATH=$src/bindings/python ENGRAM_LIBRARY=$build/capi/libengram.so.0 PYTHONDONTWRITEBYTECODE=1 \
      ${ENGRAM_PYTHON:-/usr/bin/python3} "$src/bench/arena/fill.py" "$dir/engram.sock" "$bytes" >"$dir/fill.json"
    "$build/programs/engramctl/engramctl" --socket "$dir/engram.sock" status --json >"$dir/status.json"
    python3 - "$arena" "$bytes" "$dir/fill.json" "$dir/status.json" >>"$dir/runs.jsonl" <<'PY'
import json, sys
arena, step, fill, status = sys.argv[1], int(sys.argv[2]), json.load(open(sys.argv[3])), json.load(open(sys.argv[4]))
held = sum(c["sealed"] * c["block_size"] for c in status["classes"])
print(json.dumps({"arena": arena, "step_bytes": step, "items": fill["items"], "arena_bytes": status["arena_bytes"],
                  "block_bytes_per_item": round(held / fill["items"], 1), "stopped_by": fill["stopped_by"]}))
PY
    engramd_stop
  done
done
python3 - "$dir/runs.jsonl" "$out" "$(git_revision)" <<'PY'
import json, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
by = {(r["arena"], r["step_bytes"]): r for r in runs}
cases = []
for (arena, step), r in sorted(by.items()):
    if arena != "new":
        continue
    old = by[("old", step)]
    cases.append({"step_bytes": step, "old": old, "new": r,
                  "memory_per_item_old_over_new": round(old["block_bytes_per_item"] / r["block_bytes_per_item"], 2),
                  "items_new_over_old": round(r["items"] / old["items"], 2)})
doc = {"bench": "arena_memory", "revision": sys.argv[3], "cases": cases}
json.dump(doc, open(sys.argv[2], "w"), indent=1)
print(json.dumps(doc, indent=1))
PY
