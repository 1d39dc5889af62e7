#!/usr/bin/env python3
"""Writes seed inputs for fuzz_ring_record: byte 0 = 0 (keep the valid chunk
headers), then 192-byte request records (core/ring_record.hpp) that insert
items over the client's blocks (one by one and several to a record), sample
them, update, remove, release, drop."""
import os
import struct
import sys

INSERT, SAMPLE, RELEASE, DROP, UPDATE, REMOVE, INSERT_ITEMS = 1, 2, 3, 4, 5, 6, 8


def record(op, count, rid, payload=b""):
    head = struct.pack("<IIIIQq", 0, op, count, 0, rid, 0)  # ring word, op, count, reserved, id, deadline
    body = payload.ljust(160, b"\0")
    return head + body


def insert(rid, refs, priority=1.0):
    payload = struct.pack("<dQ", priority, 0)
    for block, offset, length in refs:
        payload += struct.pack("<IIII", block, 1, offset, length)  # generation 1
    return record(INSERT, len(refs), rid, payload)


def insert_items(rid, items, chunk_steps=2, want_spare=0):
    """items: (priority, block, offset, length), one chunk slice each."""
    payload = struct.pack("<II", chunk_steps, want_spare)
    for priority, block, offset, length in items:
        payload += struct.pack("<dIIII", priority, block, 1, offset, length)  # generation 1
    return record(INSERT_ITEMS, len(items), rid, payload)


def key(slot, generation=1):
    return generation << 32 | slot


out = sys.argv[1]
os.makedirs(out, exist_ok=True)
seeds = {
    "insert_sample_release": [insert(1, [(0, 0, 2)]), insert(2, [(1, 1, 1), (2, 0, 2)]),
                              record(SAMPLE, 2, 3), record(RELEASE, 0, 3)],
    "update_remove": [insert(1, [(0, 0, 1)], 2.0), insert(2, [(3, 0, 2)], 0.5),
                      record(UPDATE, 2, 3, struct.pack("<QdQd", key(0), 4.0, key(1), 0.0)),
                      record(REMOVE, 2, 4, struct.pack("<QQ", key(0), key(7)))],
    "insert_items": [insert_items(1, [(1.0, 0, 0, 1), (2.0, 0, 1, 1), (0.5, 1, 0, 2), (1.0, 2, 1, 1)], want_spare=5),
                     record(SAMPLE, 3, 5), record(RELEASE, 0, 5)],
    "drop": [insert(1, [(0, 0, 2)]), record(DROP, 2, 2, struct.pack("<IIII", 0, 1, 1, 1))],
}
for name, records in seeds.items():
    with open(os.path.join(out, name), "wb") as f:
        f.write(b"\0" + b"".join(records))
