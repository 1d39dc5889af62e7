"""The PyTorch side of bench/torch.sh (see bench_c.c, which it is compared
with in the same run): N items of one step (a uint8 payload of BYTES)
written 64 at a time, then N sampled in batches of 256 into tensors.
MODE "torch": engram.torch.sample into one reused TensorBatch (one copy,
shared memory to the tensor's storage); "numpy": what a user writes
without engram.torch, Table.sample then torch.from_numpy(...).clone() per
column (two copies, and new arrays each batch).
Usage: bench_torch.py SOCKET TABLE BYTES N MODE"""
import json
import sys
import time

import numpy as np
import torch

import engram
import engram.torch as et

torch.set_num_threads(1)
socket, table_name, nbytes, n, mode = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
columns = [("payload", np.uint8, (nbytes,))]
steps = np.full((64, nbytes), 7, np.uint8)
with engram.connect(socket) as client, client.table(table_name) as table, client.writer(columns) as writer:
    for _ in range(0, n, 64):
        writer.append_items(table, steps)
    writer.flush(30_000)
    reused = et.TensorBatch(table, 256)
    t0 = time.monotonic()
    for _ in range(0, n, 256):
        if mode == "torch":
            b = et.sample(table, 256, timeout_ms=10_000, out=reused)
            assert b.data["payload"][0, 0, 0] == 7
        else:
            data, info = table.sample(256, timeout_ms=10_000)
            tensors = {k: torch.from_numpy(v).clone() for k, v in data.items()}
            keys = torch.from_numpy(info["key"].view(np.int64)).clone()
            assert tensors["payload"][0, 0, 0] == 7
    t1 = time.monotonic()
print(json.dumps({"lang": mode, "bytes": nbytes, "sample_per_s": round(n / (t1 - t0))}))
