"""The agents' processes and their results as the test scripts see them."""
import json
import os
import sys


def finished(program, returncode, out):
    """The run's OUT/summary.json, after checking that PROGRAM exited 0."""
    if returncode != 0:
        sys.exit(f"{program} exited with {returncode}")
    with open(os.path.join(out, "summary.json")) as f:
        summary = json.load(f)
    print("summary:", summary)
    return summary


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
