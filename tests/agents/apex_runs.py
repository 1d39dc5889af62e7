#!/usr/bin/env python3
"""Runs of engram-apex that must show learning, real processes and real
engram (issue 26's smoke tests). Usage: apex_runs.py ENGRAM_APEX CASE, CASE
one of:
  cartpole-learns   50k env steps: trailing-100 mean >= 100 (random: ~22),
                    in seed 1 or else seed 2
  cartpole-solves   solved (>= 475) within 500k env steps in one of up to
                    three seeds, and the saved model plays greedily for a
                    mean return >= 150 (the 300k-step target is measured by
                    bench/apex.sh, not here)
  breakout-learns   100k frames: trailing-100 mean >= 1.5 (random: ~0.5)
  killed-actor      one of two actors SIGKILLed mid-run; the learner goes on
  engramd-restart   against an external engramd (--socket, checkpoints every
                    second), SIGKILLed mid-run and started again (it restores
                    its newest checkpoint): the learner and the actor each
                    say the outage once, reconnect, and the run solves
                    within cartpole-solves' 500k steps; its env steps never
                    go back
  python-actor      the learner with no actor of its own (--actors 0) and the
                    Python binding's numpy actor (bindings/python/examples/
                    apex_actor.py): 50k env steps, trailing-100 mean >= 100
  rust-python-actors  the same with two actors: Python's (actor 0) and the
                    Rust binding's (bindings/rust/engram/examples/
                    apex_actor.rs, actor 1, built here with cargo --release);
                    each writes at least a quarter of the frames
  learner-resume    the learner (--checkpoint-every 1) SIGKILLed at 60k env
                    steps and run again with --resume: it goes on from its
                    state, its curve never goes back and marks the resume,
                    and it solves within cartpole-solves' 500k steps
  actors-reconnect  those two actors against an external engramd, SIGKILLed
                    at 20k steps and started again: each actor says the
                    outage once, reconnects, and counts on (their frames
                    add up to the learner's env steps)
The trailing-100 mean is of the envs with epsilon <= 0.01."""
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from processes import Engramd, actor_pids, curve_rows, finished, said_outage_once


ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def rust_actor():
    """Builds the Rust actor (release) into the build tree; its path."""
    build = os.environ["ENGRAM_BUILD_DIR"]
    env = dict(os.environ, ENGRAM_LIB_DIR=os.path.join(build, "capi"), CARGO_TARGET_DIR=os.path.join(build, "rust"))
    subprocess.run(["cargo", "build", "--offline", "--quiet", "--release", "--example", "apex_actor"],
                   cwd=os.path.join(ROOT, "bindings", "rust"), env=env, check=True)
    return os.path.join(build, "rust", "release", "examples", "apex_actor")


def run(binary, args, out, kill_actor_at=None, python_actor=False, rust_actor_path=None, at_steps=None,
        socket=None):
    """at_steps: (N, action(learner pid)) to do once the progress shows N
    env steps; socket: the server's (an engramd's) if not the learner's."""
    if kill_actor_at is not None:
        at_steps = (kill_actor_at, kill_one_actor)
    cmd = [binary, *args, "--out", out]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    killed = None
    actor = None
    socket = socket or os.path.join(out, "engram.sock")
    if python_actor:
        # The actors wait for the learner's tables and first parameters, and
        # are stopped (SIGTERM) once the learner has ended.
        for _ in range(600):
            if os.path.exists(socket):
                break
            time.sleep(0.05)
        env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "bindings", "python"), PYTHONDONTWRITEBYTECODE="1")
        # 16 envs in all, as the C++ runs have: one actor of 16, or two of 8.
        actors, envs = ("2", "8") if rust_actor_path else ("1", "16")
        actor = subprocess.Popen([os.environ.get("ENGRAM_PYTHON", "/usr/bin/python3"),
                                  os.path.join(ROOT, "bindings", "python", "examples", "apex_actor.py"),
                                  "--socket", socket, "--envs-per-actor", envs,
                                  "--actor-id", "0", "--actors", actors], env=env, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
        if rust_actor_path:
            rust = subprocess.Popen([rust_actor_path, "--socket", socket,
                                     "--envs-per-actor", envs, "--actor-id", "1", "--actors", actors],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    before = ""
    if at_steps is not None:
        # Act once the progress line shows that many env steps: a time
        # would race the run's speed (at 20k steps/s a 60k-step run ended
        # before a kill at 4 s, and the test failed).
        for line in p.stdout:
            before += line
            m = re.search(r"\bsteps\s+(\d+)\s", line)
            if m and int(m.group(1)) >= at_steps[0]:
                killed = at_steps[1](p.pid)
                break
        else:
            sys.exit(f"the run ended before {at_steps[0]} env steps:\n{before}")
    log, _ = p.communicate(timeout=600)
    log = before + log
    if p.returncode == -signal.SIGKILL and killed == p.pid:  # at_steps' action was to kill the learner
        print(log)
        return None, log, killed
    frames = {}  # the bindings' actors' frames, from their last line ("... N frames ...")
    for name, proc in (("Python", actor), ("Rust", rust if rust_actor_path else None)):
        if proc is None:
            continue
        proc.terminate()
        said, err = proc.communicate(timeout=60)
        print(said, end="")
        print(err, end="")
        log += err
        if proc.returncode != 0:
            sys.exit(f"the {name} actor exited with {proc.returncode}")
        counted = re.findall(r"(\d+) frames", said)
        frames[name] = int(counted[-1]) if counted else 0
    print(log)
    summary = finished("engram-apex", p.returncode, out)
    summary["binding_frames"] = frames
    return summary, log, killed


def kill_one_actor(learner):
    """SIGKILLs one actor process of the learner."""
    pids = actor_pids(learner)
    if not pids:
        sys.exit("found no actor process to kill")
    os.kill(pids[0], signal.SIGKILL)
    return pids[0]


def kill_learner(learner):
    """SIGKILLs the learner (its actors get SIGTERM from the kernel)."""
    os.kill(learner, signal.SIGKILL)
    return learner


def learns(run_seed):
    """The 50k-step bar: trailing-100 mean >= 100, in seed 1 or, if it falls
    short, seed 2. Runs race (actors against the learner), so one seed's
    result spreads: 20 runs here ended at 114-167 (mean 137), and one CI
    run at 94.6. Returns the summary of the run that passed."""
    for seed in ("1", "2"):
        s = run_seed(seed)
        if s["mean100_low_epsilon"] >= 100:
            return s
        print(f"seed {seed}: trailing-100 mean {s['mean100_low_epsilon']:.1f} after 50k steps")
    sys.exit("trailing-100 mean < 100 after 50k steps in both seeds; want >= 100")


def solves(run_seed, across):
    """Solved (>= 475) within 500k env steps in seed 1, 2 or 3, tried in
    that order until one does: runs of one seed differ (actors and learner
    race). Returns the summary of the run that solved."""
    for seed in ("1", "2", "3"):
        s = run_seed(seed)
        if s["solved"]:
            return s
        print(f"seed {seed}: not solved within 500k steps (trailing-100 mean {s['mean100_low_epsilon']:.1f})")
    sys.exit(f"no seed of three solved CartPole within 500k steps{across}")


def main():
    binary, case = sys.argv[1], sys.argv[2]
    out = tempfile.mkdtemp(prefix="engram-apex-test-")
    try:
        if case == "cartpole-learns":
            learns(lambda seed: run(binary, ["--env", "cartpole", "--steps", "50000", "--seed", seed], out)[0])
        elif case == "cartpole-solves":
            # This asks whether Ape-X learns CartPole at all; the target (300k
            # steps in 4 of 5 seeds) is bench/apex.sh's to measure. Runs of
            # one seed differ (actors and learner race), and on another
            # machine's CI two seeds that solve here within 300k both peaked
            # near 470 and fell back: hence 500k steps and up to three seeds.
            solves(lambda seed: run(binary, ["--env", "cartpole", "--steps", "500000", "--seed", seed], out)[0], "")
            for f in ("curve.csv", "curve.png", "model.pt"):
                if not os.path.getsize(os.path.join(out, f)):
                    sys.exit(f"{f} is missing or empty")
            # The saved model is a trained network and plays greedily
            # (random play: about 22). The network at the solve may be in
            # a dip the trailing-100 mean does not show yet: of 18 models
            # saved at a solve, 14 played 500 over 5 greedy episodes, the
            # others 402, 279, 249 and 167 (bench/results/apex-cartpole-
            # saved-models.json), and two CI runs saved ones under 100. So
            # the learner saves the best, by a short greedy evaluation on
            # other seeds, of the final network and the last five progress
            # lines' (learner.cpp, best_network); 150 stays the bar.
            ev = subprocess.run([binary, "--env", "cartpole", "--eval", os.path.join(out, "model.pt"), "--episodes", "5"],
                                capture_output=True, text=True, timeout=120)
            print(ev.stdout, ev.stderr)
            mean = float(ev.stdout.rsplit(":", 1)[1])
            if ev.returncode != 0 or mean < 150:
                sys.exit(f"the saved model's greedy mean return is {mean}; want >= 150")
        elif case == "breakout-learns":
            s, _, _ = run(binary, ["--env", "breakout", "--steps", "100000", "--seed", "1"], out)
            if s["mean100_low_epsilon"] < 1.5:
                sys.exit(f"trailing-100 mean {s['mean100_low_epsilon']:.2f} after 100k frames; want >= 1.5")
        elif case == "killed-actor":
            s, log, killed = run(binary, ["--env", "cartpole", "--actors", "2", "--envs-per-actor", "8",
                                          "--steps", "60000", "--seed", "2"], out, kill_actor_at=15000)
            if f"actor pid {killed} ended" not in log:
                sys.exit(f"the learner did not notice actor {killed}'s death")
            if s["env_steps"] < 60000:
                sys.exit(f"training stopped at {s['env_steps']} steps after the kill")
        elif case == "engramd-restart":
            d = Engramd(out)

            def across_restart(seed):
                s, log, restored = run(binary, ["--env", "cartpole", "--steps", "500000", "--seed", seed,
                                                "--socket", d.socket],
                                       os.path.join(out, "run"), at_steps=(40000, d.restart))
                if not restored:
                    sys.exit("engramd restored no checkpoint: the test would not show a restore")
                said_outage_once(log, ("engram-apex", "engram-apex actor 0"))
                curve_rows(os.path.join(out, "run"))
                return s
            try:
                solves(across_restart, " across engramd's restart")
            finally:
                d.stop()
        elif case == "actors-reconnect":
            # The bindings' actors (Python's and Rust's) across an engramd
            # restart: each says the outage once and goes on counting. 150k
            # steps (some 5 s): the learner's first progress line, at 1 s,
            # is the cue, and the run must outlast the restart that follows
            # (60k steps ended before the learner saw it, in a CI run).
            d = Engramd(out)
            try:
                s, log, restored = run(binary, ["--env", "cartpole", "--actors", "0", "--steps", "150000", "--seed", "1",
                                         "--socket", d.socket], os.path.join(out, "run"), python_actor=True,
                                rust_actor_path=rust_actor(), at_steps=(20000, d.restart), socket=d.socket)
            finally:
                d.stop()
            if not restored:
                sys.exit("engramd restored no checkpoint of the learner's tables")
            said_outage_once(log, ("engram-apex", "apex_actor 0", "apex_actor 1"))
            f = s["binding_frames"]
            if sum(f.values()) < 0.95 * s["env_steps"]:
                sys.exit(f"the actors counted {f} frames, the learner {s['env_steps']} env steps: a count began anew")
        elif case == "learner-resume":
            # The learner saves its state every second; SIGKILLed at 60k
            # env steps (its actors go with it), it is run again with
            # --resume and must solve within cartpole-solves' 500k steps,
            # its curve going on from the state.
            def resumed(seed):
                d = os.path.join(out, f"seed{seed}")
                args = ["--env", "cartpole", "--steps", "500000", "--seed", seed, "--checkpoint-every", "1"]
                run(binary, args, d, at_steps=(60000, kill_learner))
                states = [f for f in os.listdir(os.path.join(d, "checkpoints")) if f.endswith(".state")]
                if not states:
                    sys.exit("the learner saved no state before it was killed")
                s, log, _ = run(binary, args + ["--resume", d], d)
                if not re.search(r"^engram-apex: resuming from .*learner-\d+\.state: [1-9]\d* updates", log, re.M):
                    sys.exit("the run did not say it resumed from a state of some updates")
                rows = curve_rows(d)
                wall, steps = [float(r[0]) for r in rows], [int(r[1]) for r in rows]
                marks = [i for i, r in enumerate(rows) if r[6] == "1"]
                if any(b <= a for a, b in zip(wall, wall[1:])):
                    sys.exit(f"the resumed curve's wall seconds go back: {wall}")
                if len(marks) != 1 or marks[0] == 0 or steps[marks[0] - 1] > 60000 + 40000:
                    sys.exit(f"want one resumed row after the rows before the kill; resumed rows at {marks} of {steps}")
                return s
            solves(resumed, " across a resume")
        elif case == "python-actor":
            learns(lambda seed: run(binary, ["--env", "cartpole", "--actors", "0", "--steps", "50000", "--seed", seed],
                                    out, python_actor=True)[0])
        elif case == "rust-python-actors":
            path = rust_actor()
            s = learns(lambda seed: run(binary, ["--env", "cartpole", "--actors", "0", "--steps", "50000", "--seed", seed],
                                        out, python_actor=True, rust_actor_path=path)[0])
            # Writers held by one rate limiter take turns: each actor writes
            # a fair share (32k-40k against 37k-44k in three runs; the Python
            # actor wrote 8% of the frames before they took turns).
            f = s["binding_frames"]
            if min(f.values()) < sum(f.values()) / 4:
                sys.exit(f"the actors' frames {f}: one wrote less than a quarter")
        else:
            sys.exit(f"unknown case {case}")
    finally:
        shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    main()
