"""The agents' processes and their results as the test scripts see them."""
import json
import os
import re
import subprocess
import sys
import time


def finished(program, returncode, out):
    """The run's OUT/summary.json, after checking that PROGRAM exited 0."""
    if returncode != 0:
        sys.exit(f"{program} exited with {returncode}")
    with open(os.path.join(out, "summary.json")) as f:
        summary = json.load(f)
    print("summary:", summary)
    return summary


def said_outage_once(log, who):
    """Each of WHO said one outage (reconnect.hpp's line) in LOG."""
    for w in who:
        said = re.findall(rf"^{w}: the server went away at .*$", log, re.M)
        if len(said) != 1:
            sys.exit(f"{w} said the outage {len(said)} times; want once")


def curve_rows(out):
    """OUT/curve.csv's rows (header dropped), each a list of fields; exits
    if its env steps ever go back."""
    with open(os.path.join(out, "curve.csv")) as f:
        rows = [line.strip().split(",") for line in list(f)[1:]]
    steps = [int(r[1]) for r in rows]
    if any(b < a for a, b in zip(steps, steps[1:])):
        sys.exit(f"the curve's env steps go back: {steps}")
    return rows


def actor_pids(learner):
    """The pids of the learner's actor processes (children whose command
    line has the word "actor")."""
    pids = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{pid}/cmdline") as f:
                cmdline = f.read().split("\0")
        except OSError:
            continue
        if ppid == learner and "actor" in cmdline:
            pids.append(int(pid))
    return pids


class Engramd:
    """An engramd of the test's own in DIR (ENGRAMD, ENGRAMCTL: the binaries), with a
    checkpoint every second, restored when it starts. Its arena: `classes`
    (TOML), by default the one the README gives for Ape-X CartPole."""

    APEX = ('{ block_size = 512, count = 120000 }, { block_size = 1024, count = 16384 }, '
            '{ block_size = "128KiB", count = 64 }')

    def __init__(self, d, classes=APEX):
        self.dir, self.socket, self.proc = d, os.path.join(d, "engram.sock"), None
        self.config = os.path.join(d, "engramd.toml")
        with open(self.config, "w") as f:
            f.write(f'socket = "{self.socket}"\n[arena]\nclasses = [ {classes} ]\n'
                    f'[checkpoint]\ndir = "{d}/checkpoints"\ninterval_s = 1\n')
        self.start()

    def start(self):
        n = len([f for f in os.listdir(self.dir) if f.startswith("engramd-")])
        self.log = os.path.join(self.dir, f"engramd-{n}.log")
        self.proc = subprocess.Popen([os.environ["ENGRAMD"], "--config", self.config],
                                     stdout=open(self.log, "w"), stderr=subprocess.STDOUT)
        for _ in range(600):
            if "serving " in open(self.log).read():
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        sys.exit(f"engramd did not come up:\n{open(self.log).read()}")

    def restart(self, _learner):
        """SIGKILL, then start again: what a crash under systemd looks like.
        First a checkpoint asked for (engramctl checkpoint, which returns
        once it is on disk), so that the one restored holds what the run
        wrote until now, and the kill lands within a fraction of a second
        of the caller's cue, while the run goes on (waiting for the
        periodic one let a fast run end first)."""
        ctl = os.environ["ENGRAMCTL"]
        p = subprocess.run([ctl, "--socket", self.socket, "checkpoint"], capture_output=True, text=True, timeout=60)
        if p.returncode != 0:
            sys.exit(f"engramctl checkpoint: {p.stdout}{p.stderr}")
        self.proc.kill()
        self.proc.wait()
        self.start()
        restored = re.search(r"restored checkpoint .*: 3 tables.*", open(self.log).read())
        print("engramd restarted;", restored.group(0) if restored else "no checkpoint of the 3 tables restored:\n" +
              open(self.log).read())
        return restored is not None

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=30)
