"""The Python writer of the cross-language test (see cross_writer.c).
Usage: cross_writer.py SOCKET WRITER_ID N"""
import sys

import numpy as np

import engram

PAYLOAD = 48
socket, wid, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
columns = [("writer", np.int32, ()), ("step", np.int64, ()), ("payload", np.uint8, (PAYLOAD,))]
with engram.connect(socket) as client, client.table("cross") as table, client.writer(columns) as writer:
    for k in range(n):
        payload = ((wid * 31 + k * 7 + np.arange(PAYLOAD)) & 0xFF).astype(np.uint8)
        writer.append(wid, k, payload)
        writer.create_item(table, 1, 1.0)
    writer.flush(10_000)
print(f"python writer {wid}: {n} items")
