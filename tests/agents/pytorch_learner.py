#!/usr/bin/env python3
"""The PyTorch Ape-X learner (agents/python/apex_learner.py) fed by two of
engram-apex's C++ actors, a smoke run: 50k env steps reach a trailing-100
mean of at least 100 (random play: about 22) in seed 1 or else seed 2, as
apex_runs.py's 50k-step cases ask of the C++ learner; the actors act with
its parameters (they could not learn otherwise) and wrote every frame the
learner counted. First, careless command lines are refused in a line that
says what to do, not a traceback. Usage: pytorch_learner.py ENGRAM_APEX
(ENGRAM_LIBRARY and ENGRAM_SERVER_LIBRARY: this build's)."""
import json
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


LEARNER = os.path.join(ROOT, "agents", "python", "apex_learner.py")

# (arguments, exit status, what stderr's last line says)
REFUSED = [
    (["--lr", "nan"], 2, "--lr must be a finite number above 0, not nan"),
    (["--samples-per-insert", "0"], 2, "--samples-per-insert must be a finite number above 0"),
    (["--seed", "-1"], 2, "--seed must be at least 0"),
    (["--steps", "0"], 2, "--steps must be at least 1"),
    (["--engram-apex", "/nonexistent"], 2, "--engram-apex /nonexistent is not an executable file: build the tree"),
    (["--socket", "/nonexistent.sock"], 1, "apex_learner: no engram server listens on /nonexistent.sock"),
]


def refusals(out):
    for args, status, said in REFUSED:
        p = subprocess.run([sys.executable, LEARNER, *args, "--out", out], capture_output=True, text=True, timeout=120)
        last = p.stderr.strip().splitlines()[-1] if p.stderr.strip() else ""
        if p.returncode != status or said not in last or "Traceback" in p.stderr:
            sys.exit(f"apex_learner.py {' '.join(args)}: exit {p.returncode}, want {status} saying {said!r}; "
                     f"stderr:\n{p.stderr}")


def main():
    binary = sys.argv[1]
    out = tempfile.mkdtemp(prefix="engram-pytorch-learner-")
    try:
        refusals(os.path.join(out, "refused"))
        for seed in ("1", "2"):
            d = os.path.join(out, f"seed{seed}")
            p = subprocess.run([sys.executable, LEARNER,
                                "--actors", "2", "--steps", "50000", "--seed", seed, "--out", d,
                                "--engram-apex", binary], capture_output=True, text=True, timeout=600)
            print(p.stdout, p.stderr)
            if p.returncode != 0:
                sys.exit(f"apex_learner.py exited with {p.returncode}")
            with open(os.path.join(d, "summary.json")) as f:
                s = json.load(f)
            print("summary:", s)
            if s["actor_frames"] < s["env_steps"]:
                sys.exit(f"the actors wrote {s['actor_frames']} frames, the learner counted {s['env_steps']}")
            if s["mean100_low_epsilon"] >= 100:
                return
            print(f"seed {seed}: trailing-100 mean {s['mean100_low_epsilon']:.1f} after 50k steps")
        sys.exit("trailing-100 mean < 100 after 50k steps in both seeds; want >= 100")
    finally:
        shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    main()
