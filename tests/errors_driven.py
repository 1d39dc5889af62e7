#!/usr/bin/env python3
"""The main functions' man pages list no error that no test drives.

Runs the C API's test executables (tests/capi/test_capi_*), whose every
call tests/capi/listed_errors.hpp checks against its page (a code the page
does not list fails that test), with $ENGRAM_ERRORS_SEEN_DIR set so that
each leaves the (function, code) pairs it saw; then checks that each code
listed for the main functions below was seen at least once, but for the
few that no test in one process can bring about, each with the reason.

Usage: tests/errors_driven.py BUILD_DIR
"""
import glob
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The pages a new user reads first (issue 46's list).
MAIN = ["engram_connect", "engram_table_create", "engram_table_open", "engram_writer_open", "engram_writer_append",
        "engram_writer_create_item", "engram_writer_flush", "engram_sample", "engram_sample_view",
        "engram_sample_begin", "engram_sample_end", "engram_update_priorities", "engram_checkpoint",
        "engram_rate_limiter_min_size", "engram_rate_limiter_sample_to_insert_ratio", "engram_rate_limiter_queue",
        "engram_server_start", "engram_server_stop"]

# (function, code): why no test drives it here.
EXEMPT = {
    ("engram_connect", "ENGRAM_E_VERSION"): "needs a client of another layout; test_capi_protocol speaks the hello "
                                            "wrong by hand instead, below the C API",
    ("engram_connect", "ENGRAM_E_SYSTEM"): "socket(2) or mmap(2) failing for the client",
    ("engram_table_open", "ENGRAM_E_SYSTEM"): "mmap(2) of the channel failing for the client",
    ("engram_table_open", "ENGRAM_E_VERSION"): "a server whose open reply has another size",
    ("engram_table_open", "ENGRAM_E_CORRUPT"): "a server that describes a table out of range",
    ("engram_table_create", "ENGRAM_E_NOMEM"): "a server that cannot map a table's index",
    ("engram_server_stop", "ENGRAM_E_SYSTEM"): "the server's thread failing",
    ("engram_server_start", "ENGRAM_E_NOMEM"): "an arena larger than the machine's memory: test_engramd "
                                               "drives it through engramd, not in a test process",
    ("engram_server_start", "ENGRAM_E_SYSTEM"): "a socket or memfd the kernel refuses the server",
    ("engram_checkpoint", "ENGRAM_E_SYSTEM"): "a file system that refuses the write (full, read-only): root in "
                                              "a test cannot make one without a mount",
    ("engram_writer_flush", "ENGRAM_E_CORRUPT"): "a chunk written over between its append and its insert; "
                                                 "test_hostile writes over chunks below the C API",
    ("engram_sample_end", "ENGRAM_E_CORRUPT"): "a response the client cannot make sense of: another process "
                                               "writing over the channel; test_hostile and the fuzzers cover it",
    ("engram_update_priorities", "ENGRAM_E_CORRUPT"): "as engram_sample_end's",
}


def main():
    build = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build/release"))
    header = open(os.path.join(ROOT, "capi/include/engram/engram.h")).read()
    value = {c: int(v) for c, v in re.findall(r"#define (ENGRAM_E_[A-Z_]+) \((-\d+)\)", header)}
    name = {v: c for c, v in value.items()}
    listed = {}
    for line in open(os.path.join(ROOT, "tests/capi/listed_errors.inc")):
        m = re.match(r"ENGRAM_LISTED\((\w+)((?:, \w+)*)\)", line)
        if m:
            listed[m.group(1)] = [c.strip() for c in m.group(2).split(",") if c.strip()]
    exes = sorted(p for p in glob.glob(os.path.join(build, "tests/test_capi_*")) if os.access(p, os.X_OK) and "." not in os.path.basename(p))
    if not exes:
        sys.exit(f"errors_driven: no tests/test_capi_* under {build}")
    seen, unlisted, failed = set(), set(), []
    with tempfile.TemporaryDirectory() as d:
        env = dict(os.environ, ENGRAM_ERRORS_SEEN_DIR=d)
        for exe in exes:
            r = subprocess.run([exe, "--gtest_brief=1"], env=env, capture_output=True, text=True, timeout=900)
            found = re.findall(r"(engram_\w+) returned .*? \((-\d+)\), which its man page does not list; "
                               r"the message: (.*)", r.stdout)
            unlisted |= {(fn, name.get(int(rc), rc), msg) for fn, rc, msg in found}
            if r.returncode != 0 and not found:
                print(r.stdout[-4000:], r.stderr[-2000:])
                failed.append(os.path.basename(exe))
        for f in glob.glob(os.path.join(d, "*.seen")):
            for line in open(f):
                fn, rc = line.split()
                seen.add((fn, name.get(int(rc), rc)))
    if unlisted or failed:
        for fn, code, msg in sorted(unlisted):
            print(f"errors_driven: {fn} returned {code}, which its page does not list ({msg})")
        sys.exit("errors_driven: " + (f"{', '.join(failed)} failed; " if failed else "") +
                 "list each code where the function's Errors clause is (engram.h), or fix the function")
    missing, exempted = [], 0
    for fn in MAIN:
        if fn not in listed:
            sys.exit(f"errors_driven: {fn} has no ERRORS list")
        for code in listed[fn]:
            if (fn, code) in seen:
                continue
            if (fn, code) in EXEMPT:
                exempted += 1
                continue
            missing.append(f"{fn}: {code}")
    stale = [k for k in EXEMPT if k in seen or k[1] not in listed.get(k[0], [])]
    if stale:
        sys.exit("errors_driven: exemptions no longer needed (driven, or no longer listed): " +
                 ", ".join(f"{f} {c}" for f, c in stale))
    total = sum(len(listed[f]) for f in MAIN)
    if missing:
        print("errors_driven: listed on the main pages but driven by no test:\n  " + "\n  ".join(missing))
        return 1
    print(f"errors_driven: {total - exempted} of the {total} codes listed for {len(MAIN)} main functions driven "
          f"by a test, {exempted} exempt with their reasons; {len(seen)} (function, code) pairs seen in all")
    return 0


if __name__ == "__main__":
    sys.exit(main())
