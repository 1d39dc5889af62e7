#!/usr/bin/env python3
"""What engram-apex and engram-impala say to a careless command line: every
bad flag value is refused before anything starts (exit 2), naming the flag
and what it takes, and a model --eval cannot load is one line naming the
file (exit 1), not LibTorch's backtrace.
Usage: command_lines.py ENGRAM_APEX ENGRAM_IMPALA"""
import os
import signal
import socket
import subprocess
import sys
import tempfile

# (arguments, exit status, what stderr must contain)
COMMON = [
    (["--actors", "1.5"], 2, "--actors takes a whole number"),
    (["--actors", "1e20"], 2, "--actors takes a whole number"),
    (["--steps", "0"], 2, "--steps takes a whole number from 1"),
    (["--steps", "1e6x"], 2, "--steps takes a whole number"),
    (["--seed", "-5"], 2, "--seed takes a whole number from 0"),
    (["--lr", "nan"], 2, "--lr takes a finite number above 0"),
    (["--lr", "-1"], 2, "--lr takes a finite number above 0"),
    (["--batch", "0"], 2, "--batch takes a whole number from 1"),
    (["--bogus", "3"], 2, "unknown flag --bogus"),
    (["--steps"], 2, "--steps has no value after it"),
    (["--env", "pong"], 2, "--env is cartpole or breakout"),
    # Across machines: the flags that only go together.
    (["--role", "boss"], 2, "--role is learner (the default), actor or actors"),
    (["--listen", "127.0.0.1:7000", "--socket", "/tmp/x.sock"], 2, "with --socket, set [remote] listen"),
    (["--upstream", "127.0.0.1:7000"], 2, "--upstream goes with --role actors"),
    (["--role", "actors"], 2, "--role actors takes --upstream HOST:PORT"),
    (["--role", "actors", "--upstream", "h:1", "--socket", "/tmp/x.sock"], 2, "not both"),
    (["--listen", "127.0.0.1:7000", "--tls-cert", "a.pem"], 2, "all three or none"),
    (["--insecure", "1"], 2, "--tls-* and --insecure are for --listen or --upstream"),
    (["--role", "actors", "--upstream", "h:1", "--actor-id", "3", "--actors", "2", "--all-actors", "4"], 2,
     "--actor-id plus --actors is more than --all-actors"),
    (["--all-actors", "0"], 2, "--all-actors takes a whole number from 1"),
    # Checkpoints and resuming (agents/README.md).
    (["--checkpoint-every", "-1"], 2, "--checkpoint-every takes a finite number of at least 0"),
    (["--resume", "/tmp", "--out", "/nonexistent/other"], 2, "--resume goes on in its run's directory (/tmp)"),
    (["--role", "actors", "--upstream", "h:1", "--resume", "/tmp"], 2, "--resume is the learner's"),
    (["--resume", "/nonexistent/run"], 1, "/nonexistent/run: No such file or directory (--resume takes a run's"),
    (["--resume", "/"], 1, "no learner state (checkpoints/learner-N.state) in /: was the run started with --checkpoint-every?"),
    # An actor process's --actors is its learner's: actor 1 of 2 is let
    # through to connect (refused as "more than --all-actors" before, so
    # every learner's second actor exited at once).
    (["--role", "actor", "--actors", "2", "--actor-id", "1", "--all-actors", "2", "--socket", "/nonexistent/s.sock"],
     3, "no engram server listens on /nonexistent/s.sock"),
]
APEX = [
    (["--target-every", "0"], 2, "--target-every takes a whole number from 1"),  # divided by zero in the learner
    (["--samples-per-insert", "0"], 2, "--samples-per-insert takes a finite number above 0"),
    (["--learner", "2"], 2, "--learner takes a whole number from 0 to 1"),
]
IMPALA = [
    (["--actors", "0"], 2, "--actors must be at least 1"),
    (["--reproducible", "1", "--listen", "127.0.0.1:7000"], 2, "run it on one machine"),
    (["--entropy-cost", "-1"], 2, "--entropy-cost takes a finite number of at least 0"),
    (["--envs-per-actor", "4096", "--actors", "4096"], 2, "is more than 1048576 envs"),
]


def check(binary, cases, failures):
    for args, status, words in cases:
        r = subprocess.run([binary, *args], capture_output=True, text=True, timeout=60)
        if r.returncode != status or words not in r.stderr:
            failures.append(f"{binary} {' '.join(args)}: exit {r.returncode} (want {status}), stderr {r.stderr!r} "
                            f"(want {words!r})")
        elif r.stdout:
            failures.append(f"{binary} {' '.join(args)}: refused, but printed {r.stdout!r} first")


def main():
    apex, impala = sys.argv[1:3]
    failures = []
    with tempfile.NamedTemporaryFile(suffix=".pt") as junk:
        junk.write(b"not a model")
        junk.flush()
        bad_models = [(["--eval", "/nonexistent/model.pt"], 1, "cannot load the model /nonexistent/model.pt"),
                      (["--eval", junk.name], 1, f"cannot load the model {junk.name}")]
        check(apex, COMMON + APEX + bad_models, failures)
        check(impala, COMMON + IMPALA + bad_models, failures)
    # The last --env wins whole: breakout's defaults (a batch of 64) did not
    # stay under a later --env cartpole (128), as scripts/train.sh passes
    # --env cartpole before the user's flags.
    with tempfile.TemporaryDirectory() as out:
        r = subprocess.run([apex, "--env", "breakout", "--env", "cartpole", "--steps", "1", "--out", out],
                           capture_output=True, text=True, timeout=120)
        if r.returncode != 0 or "cartpole, 1 actors x 16 envs, learner batch 128" not in r.stdout:
            failures.append(f"--env breakout --env cartpole: exit {r.returncode}, {r.stdout!r}")
    for binary in (apex, impala):
        r = subprocess.run([binary, "--eval", "/nonexistent/model.pt"], capture_output=True, text=True, timeout=60)
        if "frame #" in r.stderr or r.stderr.count("\n") > 2:
            failures.append(f"{binary} --eval of a missing file printed a backtrace: {r.stderr!r}")
    # A socket left by a killed server is an outage, not a mistake: an
    # actor that first meets it waits for the server to come back (and
    # stops cleanly if told to first), where /nonexistent/s.sock above is
    # said at once. Such actors exited 3, and a run whose server was
    # killed while its actors started lost them (impala_engramd-restart).
    with tempfile.TemporaryDirectory() as out:
        stale = os.path.join(out, "s.sock")
        lone = socket.socket(socket.AF_UNIX)
        lone.bind(stale)
        lone.close()  # the file stays, nothing listens: as after kill -9
        for binary in (apex, impala):
            p = subprocess.Popen([binary, "--role", "actor", "--actors", "2", "--actor-id", "1", "--all-actors", "2",
                                  "--socket", stale, "--out", out], stderr=subprocess.PIPE, text=True)
            try:
                p.wait(timeout=3)
                failures.append(f"{binary} actor on a stale socket exited {p.returncode} instead of waiting: "
                                f"{p.stderr.read()!r}")
            except subprocess.TimeoutExpired:
                p.send_signal(signal.SIGTERM)
                if p.wait(timeout=30) != 0:
                    failures.append(f"{binary} actor waiting out an outage exited {p.returncode} on SIGTERM: "
                                    f"{p.stderr.read()!r}")
    for f in failures:
        print("FAIL", f)
    print(f"command lines: {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
