"""The Python side of bench/bindings.sh (see bench_c.c): numpy arrays in,
numpy arrays out. MODE "item": one append and one create_item per item, as
the C program does; "batch": the numpy path, 64 steps and their items per
call (Writer.append_items, one call into libengram).
Usage: bench_py.py SOCKET TABLE BYTES N MODE"""
import json
import sys
import time

import numpy as np

import engram

socket, table_name, nbytes, n, mode = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
columns = [("payload", np.uint8, (nbytes,))]
step = np.full(nbytes, 7, np.uint8)
steps = np.full((64, nbytes), 7, np.uint8)
with engram.connect(socket) as client, client.table(table_name) as table, client.writer(columns) as writer:
    t0 = time.monotonic()
    if mode == "item":
        for _ in range(n):
            writer.append(step)
            writer.create_item(table, 1, 1.0)
    else:
        for _ in range(0, n, 64):
            writer.append_items(table, steps)
    writer.flush(30_000)
    t1 = time.monotonic()
    for _ in range(0, n, 64):
        table.sample(64, timeout_ms=10_000)
    t2 = time.monotonic()
print(json.dumps({"lang": "python" if mode == "item" else "python-batch", "bytes": nbytes, "insert_per_s": round(n / (t1 - t0)),
                  "sample_per_s": round(n / (t2 - t1))}))
