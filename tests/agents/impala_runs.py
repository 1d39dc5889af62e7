#!/usr/bin/env python3
"""Runs engram-impala (agents/impala) as a user would and checks the outcome.

Usage: impala_runs.py ENGRAM_IMPALA CASE, where CASE is one of
  cartpole-learns   400k env steps: trailing-100 mean >= 120 (random: ~22) in
                    one of up to three seeds
  breakout-learns   1M frames: trailing-100 mean >= 3 (random: ~0.5)
  reproducible      --reproducible: the parameter hashes of the first 20
                    updates are the same for K = 1, 2 and 4 actor processes
                    (8 envs), and for two runs with K = 2
  queue             against an engramd of the test's own: while the learner
                    is stopped (SIGSTOP) the queue stays full and no actor
                    inserts; then one of two actors is SIGKILLed mid-unroll
                    and training goes on (the learner refuses any item that
                    is not one env's whole unroll, so a half unroll fails
                    the run)
Needs ENGRAM_BUILD_DIR (for engramd and engramctl in the queue case)."""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from processes import actor_pids, finished


def run(binary, args, out, timeout=600):
    p = subprocess.run([binary, *args, "--out", out], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=timeout)
    print(p.stdout)
    return finished("engram-impala", p.returncode, out), p.stdout


def hashes(out):
    with open(os.path.join(out, "param_hashes.txt")) as f:
        return [line.split()[1] for line in f if line.strip()]


def table_info(ctl, socket, name):
    p = subprocess.run([ctl, "--socket", socket, "info", name, "--json"], capture_output=True, text=True, timeout=30)
    if p.returncode != 0:
        sys.exit(f"engramctl info {name}: {p.stderr}")
    return json.loads(p.stdout)


def queue_case(binary, out):
    build = os.environ["ENGRAM_BUILD_DIR"]
    engramd, ctl = os.path.join(build, "daemon", "engramd"), os.path.join(build, "daemon", "engramctl")
    socket = os.path.join(out, "engramd.sock")
    config = os.path.join(out, "engramd.toml")
    with open(config, "w") as f:  # room for the unrolls' chunks, the episodes and the parameters
        f.write("[arena]\nclasses = [ { block_size = 512, count = 20000 }, { block_size = 2048, count = 4096 },"
                " { block_size = 131072, count = 16 } ]\n")
    daemon = subprocess.Popen([engramd, "--config", config, "--socket", socket, "--log-level", "warn"])
    try:
        for _ in range(200):
            if os.path.exists(socket):
                break
            time.sleep(0.05)
        learner = subprocess.Popen([binary, "--env", "cartpole", "--actors", "2", "--envs", "16", "--batch", "8",
                                    "--steps", "400000", "--seed", "3", "--socket", socket, "--out", out],
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        # Until the learner is training (its tables exist, unrolls flow),
        # however long a loaded machine takes to start it.
        for _ in range(600):
            p = subprocess.run([ctl, "--socket", socket, "info", "unrolls", "--json"], capture_output=True, text=True)
            if p.returncode == 0 and json.loads(p.stdout)["counters"]["samples"] > 0:
                break
            time.sleep(0.1)
        time.sleep(1)
        learner.send_signal(signal.SIGSTOP)
        time.sleep(1.5)  # the queue fills; then the actors wait
        a = table_info(ctl, socket, "unrolls")
        time.sleep(1.5)
        b = table_info(ctl, socket, "unrolls")
        learner.send_signal(signal.SIGCONT)
        print("queue while the learner is stopped:", a, b, sep="\n")
        if a["size"] != a["max_size"] or b["counters"]["inserts"] != a["counters"]["inserts"]:
            learner.kill()
            sys.exit(f"the queue did not hold the actors back: size {a['size']} of {a['max_size']}, "
                     f"inserts {a['counters']['inserts']} then {b['counters']['inserts']}")
        # Kill as soon as the actors write again, not after a fixed time: at
        # 100k env steps/s a run solved 1.7 s after SIGCONT, and a kill 1.5 s
        # after it found its actors nearly done.
        for _ in range(300):
            if table_info(ctl, socket, "unrolls")["counters"]["inserts"] > b["counters"]["inserts"]:
                break
            time.sleep(0.01)
        victims = actor_pids(learner.pid)
        if len(victims) != 2:
            learner.kill()
            sys.exit(f"expected 2 actor processes, found {victims}")
        os.kill(victims[0], signal.SIGKILL)
        log, _ = learner.communicate(timeout=600)
        print(log)
        s = finished("engram-impala", learner.returncode, out)
        if f"actor pid {victims[0]} ended" not in log:
            sys.exit(f"the learner did not notice actor {victims[0]}'s death")
        # Training goes on to its end: the step limit, or CartPole solved
        # (since the learner keeps its heap, some runs solve before 400k).
        if not s["solved"] and s["env_steps"] < 400000:
            sys.exit(f"training stopped at {s['env_steps']} steps after the kill, unsolved")
    finally:
        daemon.terminate()
        daemon.wait(timeout=30)


def main():
    binary, case = sys.argv[1], sys.argv[2]
    out = tempfile.mkdtemp(prefix="engram-impala-test-")
    try:
        if case == "cartpole-learns":
            # Runs of one seed differ (actors and learner race), and early on
            # a run may dip before it climbs. Counted by hand on 2026-11-27's
            # host (a shell loop of engram-impala runs, not recorded): at 300k
            # steps 10 of 18 runs (seeds 1-3) reached 120, and all three seeds
            # of a CI run missed (98.7, 20.9, 88.0); at 400k 18 of 20 (seeds
            # 1-5, the misses at 96.5 and 9.6); eight runs of seed 2 to 1.5M
            # all solved, by 0.73M-1.19M.
            for seed in ("1", "2", "3"):
                s, _ = run(binary, ["--env", "cartpole", "--steps", "400000", "--seed", seed], out)
                if s["mean100"] >= 120:
                    break
                print(f"seed {seed}: trailing-100 mean {s['mean100']:.1f} after 400k steps")
            else:
                sys.exit("no seed of three reached a trailing-100 mean of 120 within 400k steps")
        elif case == "breakout-learns":
            s, _ = run(binary, ["--env", "breakout", "--steps", "1000000", "--seed", "1"], out)
            if s["mean100"] < 3:
                sys.exit(f"trailing-100 mean {s['mean100']:.2f} after 1M frames; want >= 3")
        elif case == "reproducible":
            runs = {}
            for name, k in (("K=1", 1), ("K=2", 2), ("K=4", 4), ("K=2 again", 2)):
                d = os.path.join(out, name.replace(" ", "_"))
                run(binary, ["--env", "cartpole", "--reproducible", "1", "--actors", str(k), "--envs", "8",
                             "--micro-batch", "2", "--updates", "20", "--seed", "5"], d)
                runs[name] = hashes(d)[:21]  # the initial parameters and 20 updates
                print(name, runs[name])
                if len(runs[name]) != 21:
                    sys.exit(f"{name}: {len(runs[name]) - 1} updates logged, want 20")
            if len(set(runs["K=1"][1:])) < 20:
                sys.exit("the parameters did not change with every update")
            for name, h in runs.items():
                if h != runs["K=1"]:
                    first = next(i for i in range(21) if h[i] != runs["K=1"][i])
                    sys.exit(f"{name} differs from K=1 from update {first} on")
        elif case == "queue":
            queue_case(binary, out)
        else:
            sys.exit(f"unknown case {case}")
    finally:
        shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    main()
