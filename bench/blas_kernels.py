#!/usr/bin/env python3
"""OpenBLAS's kernels on this CPU: which ones it chooses by itself, and how
long a 128x128x128 sgemm (the size of the agents' hidden layers at batch
128) takes, one thread, with those and with each kernel named by
OPENBLAS_CORETYPE. Prints JSON and writes bench/results/blas-kernels.json.
See agents/common/nets/blas_setup.hpp and bench/NOTES.md, "OpenBLAS on an
unknown CPU".
  bench/blas_kernels.py [CORETYPE ...]   default: Haswell SkylakeX
"""
import ctypes
import json
import os
import statistics
import subprocess
import sys
import time

N, REPS, ROUNDS = 128, 2000, 5


def measure():
    """In a child whose environment names the kernels (or not)."""
    blas = ctypes.CDLL("libblas.so.3")
    blas.openblas_get_corename.restype = ctypes.c_char_p
    n, one, zero = ctypes.c_int(N), ctypes.c_float(1), ctypes.c_float(0)
    a = (ctypes.c_float * (N * N))(*([0.5] * (N * N)))
    b = (ctypes.c_float * (N * N))(*([0.25] * (N * N)))
    c = (ctypes.c_float * (N * N))()
    args = (ctypes.c_char_p(b"N"), ctypes.c_char_p(b"N"), ctypes.byref(n), ctypes.byref(n), ctypes.byref(n),
            ctypes.byref(one), a, ctypes.byref(n), b, ctypes.byref(n), ctypes.byref(zero), c, ctypes.byref(n))
    for _ in range(50):
        blas.sgemm_(*args)
    t0 = time.perf_counter()
    for _ in range(REPS):
        blas.sgemm_(*args)
    us = (time.perf_counter() - t0) / REPS * 1e6
    if abs(c[0] - 0.5 * 0.25 * N) > 1e-3:
        sys.exit(f"sgemm gave {c[0]}, not {0.5 * 0.25 * N}")
    print(json.dumps({"core": blas.openblas_get_corename().decode(), "sgemm_us": round(us, 1)}))


def main():
    if os.environ.get("BLAS_KERNELS_CHILD"):
        measure()
        return
    cores = [None] + (sys.argv[1:] or ["Haswell", "SkylakeX"])
    runs = {c: {"asked": c or "(OpenBLAS's own choice)", "sgemm_us": []} for c in cores}
    for _ in range(ROUNDS):  # the kernels in turn, so that the host's swings fall on each alike
        for core in cores:
            env = dict(os.environ, BLAS_KERNELS_CHILD="1", OPENBLAS_NUM_THREADS="1")
            env.pop("OPENBLAS_CORETYPE", None)
            if core:
                env["OPENBLAS_CORETYPE"] = core
            out = subprocess.run([sys.executable, __file__], env=env, capture_output=True, text=True,
                                 check=True).stdout
            r = json.loads(out)
            runs[core]["core"] = r["core"]
            runs[core]["sgemm_us"].append(r["sgemm_us"])
    for r in runs.values():
        r["median_us"] = statistics.median(r["sgemm_us"])
        print(f"{r['asked']:>24}: {r['core']:>10} kernels, {N}^3 sgemm median {r['median_us']} us of {r['sgemm_us']}")
    runs = list(runs.values())
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")), "")
    model = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model\t")), "")
    res = {"what": f"{N}x{N}x{N} sgemm through libblas.so.3, one thread, mean of {REPS} per run, {ROUNDS} rounds of the kernels in turn", "cpu": cpu,
           "cpu_model": model, "runs": runs}
    os.makedirs("bench/results", exist_ok=True)
    with open("bench/results/blas-kernels.json", "w") as f:
        json.dump(res, f, indent=1)
    print("wrote bench/results/blas-kernels.json")


if __name__ == "__main__":
    main()
