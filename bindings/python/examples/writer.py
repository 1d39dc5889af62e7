"""Writes 1000 steps of a random walk into table "walk" of a running server,
each step an item. Run sampler.py beside it.

    python3 bindings/python/examples/writer.py [SOCKET]
"""
import sys

import numpy as np

import engram

COLUMNS = [("position", np.float32, (2,)), ("step", np.int64, ())]

with engram.connect(sys.argv[1] if len(sys.argv) > 1 else None) as client:
    try:
        client.create_table("walk", COLUMNS, max_size=10_000)
    except engram.Exists:
        pass
    with client.table("walk") as table, client.writer(COLUMNS) as writer:
        position = np.zeros(2, np.float32)
        for step in range(1000):
            position += np.random.default_rng(step).standard_normal(2).astype(np.float32)
            writer.append(position=position, step=step)
            writer.create_item(table, num_steps=1, priority=1.0)
        writer.flush()
    print(f"wrote 1000 steps; the table holds {client.table_info('walk')['size']} items")
