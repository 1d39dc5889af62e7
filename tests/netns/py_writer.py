"""The Python writer of the network-namespace tests (run.sh): the same
items as netns_tool's writer (x = [ID, i], 48 pad bytes of (ID * 31 + i)
& 0xff, priority 1 + i % 7), written 1000 at a time with append_items.

    python3 py_writer.py SOCKET TABLE ID N [RATE]

RATE > 0 caps items per second.
"""
import sys
import time

import numpy as np

import engram

PAD, BATCH = 48, 1000


def main():
    socket, table_name, wid, n = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    rate = float(sys.argv[5]) if len(sys.argv) > 5 else 0.0
    client = engram.connect(socket)
    table = client.table(table_name)
    writer = client.writer([("x", "int64", (2,)), ("pad", "uint8", (PAD,))], chunk_length=32, max_item_steps=1)
    t0 = time.monotonic()
    for first in range(0, n, BATCH):
        i = np.arange(first, min(first + BATCH, n), dtype=np.int64)
        x = np.stack([np.full_like(i, wid), i], axis=1)
        pad = np.repeat(((wid * 31 + i) & 0xFF).astype(np.uint8)[:, None], PAD, axis=1)
        writer.append_items(table, x, pad, priorities=(1.0 + (i % 7)).astype(np.float64))
        if rate > 0:
            ahead = (first + len(i)) / rate - (time.monotonic() - t0)
            if ahead > 0:
                time.sleep(ahead)
        if (first // BATCH) % max(1, n // BATCH // 10) == 0:
            print(f"py_writer {wid}: {first + len(i)} of {n} items ({time.monotonic() - t0:.1f} s)",
                  file=sys.stderr, flush=True)
    writer.flush()
    writer.close()
    client.close()


if __name__ == "__main__":
    main()
