#!/usr/bin/env python3
"""Runs engram-impala (agents/impala) as a user would and checks the outcome.

Usage: impala_runs.py ENGRAM_IMPALA CASE, where CASE is one of
  cartpole-learns   400k env steps: trailing-100 mean >= 120 (random: ~22) in
                    one of up to three seeds
  breakout-learns   1M frames: trailing-100 mean >= 3 (random: ~0.5)
  reproducible      --reproducible: the parameter hashes of the first 20
                    updates are the same for K = 1, 2 and 4 actor processes
                    (8 envs), and for two runs with K = 2
  engramd-restart   against an engramd of the test's own, SIGKILLed at its
                    first progress line and started again (restoring its
                    checkpoint): the learner and both actors say the outage
                    once, reconnect and go on; the curve's steps never go
                    back, and the run learns (120 within 1M steps)
  reproducible-resume  --reproducible, SIGKILLed at a random update and
                    resumed (--resume): the parameter hashes of 600 updates
                    equal an uninterrupted run's for K = 1, 2 and 4; a
                    damaged (K = 2) or foreign (K = 4) newest state is
                    refused by name and the one before it used; and a run
                    stopped by SIGTERM saves its state as it ends and
                    resumes from it to the same hashes
  queue             against an engramd of the test's own: while the learner
                    is stopped (SIGSTOP) the queue stays full and no actor
                    inserts; then one of two actors is SIGKILLed mid-unroll
                    and training goes on (the learner refuses any item that
                    is not one env's whole unroll, so a half unroll fails
                    the run)
Needs ENGRAM_BUILD_DIR (for engramd and engramctl in the queue case) and
ENGRAMD (engramd-restart)."""
import json
import random
import re
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from processes import Engramd, actor_pids, curve_rows, finished, said_outage_once


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
    engramd, ctl = os.path.join(build, "programs", "engramd", "engramd"), os.path.join(build, "programs", "engramctl", "engramctl")
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


def killed_at_random_update(binary, args, out, rng, sig=signal.SIGKILL):
    """Runs ARGS with a state saved every 0.1 s and SIGKILLs it once a
    state of at least a random number of updates is on disk, a random
    fraction of a second later; the updates of the newest state then.
    With SIGTERM, the learner saves its state and ends the run (status 0)."""
    at = rng.randrange(20, 300)
    p = subprocess.Popen([binary, *args, "--checkpoint-every", "0.1", "--out", out], stdout=subprocess.DEVNULL,
                         stderr=subprocess.STDOUT)
    states = os.path.join(out, "checkpoints")
    newest = lambda: max([int(f[8:-6]) for f in os.listdir(states) if f.endswith(".state")] or [-1])
    while p.poll() is None and not (os.path.isdir(states) and newest() >= at):
        time.sleep(0.01)
    if p.poll() is not None:
        sys.exit(f"the run ended (status {p.returncode}) before a state of {at} updates")
    time.sleep(rng.uniform(0, 0.1))
    p.send_signal(sig)
    if p.wait() != (0 if sig == signal.SIGTERM else -sig):
        sys.exit(f"the run ended with status {p.returncode} after signal {sig} (or before it: more --updates?)")
    if sig == signal.SIGTERM:
        with open(os.path.join(out, "summary.json")) as f:
            ended = json.load(f)["updates"]
        if ended != newest() or ended >= 600:
            sys.exit(f"stopped by SIGTERM after {ended} updates; its newest state is of {newest()}")
    print(f"killed after a state of {newest()} updates (waited for {at})")
    return newest()


def reproducible_resume(binary, out):
    """Cleanba's mode across a SIGKILL: resumed, a run ends with the
    parameter hashes of an uninterrupted one for K = 1, 2 and 4 actor
    processes. With K = 2 the newest state is damaged first, with K = 4 a
    foreign file is the newest: each is refused by name and the one
    before it is used, with the same result. Last, a run with K = 2 is
    stopped by SIGTERM instead: it saves its state as it ends (status 0),
    and resumed from it ends with the same hashes too."""
    rng = random.Random()
    seed = rng.randrange(1 << 30)
    print(f"random seed of the kill points: {seed}")
    rng.seed(seed)
    base = ["--env", "cartpole", "--reproducible", "1", "--envs", "8", "--micro-batch", "2", "--updates", "600",
            "--seed", "5"]
    whole = os.path.join(out, "whole")
    run(binary, base + ["--actors", "1"], whole)
    want = hashes(whole)
    if len(want) != 601 or len(set(want)) < 600:
        sys.exit(f"the uninterrupted run logged {len(want)} hashes, {len(set(want))} distinct; want 601")
    for k, spoil in ((1, None), (2, "damaged"), (4, "foreign"), (2, "sigterm")):
        d = os.path.join(out, f"K{k}{spoil or ''}")
        args = base + ["--actors", str(k)]
        at = killed_at_random_update(binary, args, d, rng, signal.SIGTERM if spoil == "sigterm" else signal.SIGKILL)
        if spoil == "sigterm":
            spoil = None  # its newest state is the one it saved as it stopped
        newest = os.path.join(d, "checkpoints", f"learner-{at:012d}.state")
        if spoil == "damaged":
            with open(newest, "r+b") as f:
                f.seek(os.path.getsize(newest) // 2)
                b = f.read(1)
                f.seek(-1, 1)
                f.write(bytes([b[0] ^ 0x01]))
        elif spoil == "foreign":
            newest = os.path.join(d, "checkpoints", f"learner-{at + 1:012d}.state")
            with open(newest, "w") as f:
                f.write("not a learner state\n")
        s, log = run(binary, args + ["--resume", d], d)
        if spoil:
            said = f"engram-impala: refusing {newest}: "
            if said not in log or "trying the one before it" not in log:
                sys.exit(f"K={k}: the {spoil} state {newest} was not refused by name")
        m = re.search(r"^engram-impala: resuming from .*learner-(\d+)\.state: (\d+) updates", log, re.M)
        if not m or (spoil is None and int(m.group(2)) != at) or (spoil and int(m.group(2)) >= at + (spoil == "foreign")):
            sys.exit(f"K={k}: resumed from {m and m.group(0)}; want the state of {at} updates"
                     f"{' or one before it' if spoil else ''}")
        if int(m.group(2)) == 0:
            print(f"K={k}: resumed from update 0 (the kill came early)")
        got = hashes(d)
        if got != want:
            first = next((i for i in range(min(len(got), len(want))) if got[i] != want[i]), min(len(got), len(want)))
            sys.exit(f"K={k}, killed after update {at}: the hashes differ from the uninterrupted run's from update "
                     f"{first} on ({len(got)} lines, want {len(want)})")
        print(f"K={k}: killed after update {at}, resumed from {m.group(2)}: the same {len(got)} hashes")


def engramd_restart(binary, out):
    """Against an engramd of the test's own, SIGKILLed at the run's first
    progress line (a second in: some 250k env steps on this machine) and
    started again (restoring the checkpoint taken just before): the learner
    and each actor say the outage once, reconnect and go on; the run
    reaches its end (1M steps, or solved) with its env steps never going
    back, and learns (120 within those 1M steps, in one of three seeds).
    1M, not cartpole-learns' 400k: a run of 400k steps can end before the
    reconnected learner has said its outage."""
    d = Engramd(out, classes="{ block_size = 512, count = 20000 }, { block_size = 2048, count = 4096 }, "
                             "{ block_size = 131072, count = 16 }")
    try:
        for seed in ("1", "2", "3"):
            run_out = os.path.join(out, f"seed{seed}")
            p = subprocess.Popen([binary, "--env", "cartpole", "--actors", "2", "--envs", "16", "--steps", "1000000",
                                  "--seed", seed, "--socket", d.socket, "--out", run_out],
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            before, restored = "", None
            for line in p.stdout:
                before += line
                m = re.search(r"\bsteps\s+(\d+)\s", line)
                if m and int(m.group(1)) > 0:
                    restored = d.restart(p.pid)
                    break
            log, _ = p.communicate(timeout=600)
            log = before + log
            print(log)
            if restored is None:
                sys.exit("the run ended before its first progress line")
            if not restored:
                sys.exit("engramd restored no checkpoint of the learner's tables")
            s = finished("engram-impala", p.returncode, run_out)
            said_outage_once(log, ("engram-impala", "engram-impala actor 0", "engram-impala actor 1"))
            curve_rows(run_out)
            if not s["solved"] and s["env_steps"] < 1000000:
                sys.exit(f"training stopped at {s['env_steps']} steps after the restart, unsolved")
            if s["mean100"] >= 120:
                break
            print(f"seed {seed}: trailing-100 mean {s['mean100']:.1f} after 1M steps")
        else:
            sys.exit("no seed of three reached a trailing-100 mean of 120 within 1M steps across the restart")
    finally:
        d.stop()


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
        elif case == "engramd-restart":
            engramd_restart(binary, out)
        elif case == "reproducible-resume":
            reproducible_resume(binary, out)
        elif case == "queue":
            queue_case(binary, out)
        else:
            sys.exit(f"unknown case {case}")
    finally:
        shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    main()
