#!/usr/bin/env python3
"""Writes seed inputs for fuzz_ring_record: byte 0 = 0 (keep the valid chunk
headers), then 192-byte request records (core/ring_record.hpp) that insert
items over the client's blocks (one by one and several to a record), sample
them, update, remove, release, drop; and, with byte 0's bit 4 (the table a
view over 2 shards), report shards, insert their draws, sample and update
them, and report a shard away."""
import os
import struct
import sys

INSERT, SAMPLE, RELEASE, DROP, UPDATE, REMOVE, INSERT_ITEMS, SHARD = 1, 2, 3, 4, 5, 6, 8, 9
INSERT_DRAW = 2
VIEW = 0x10  # byte 0: the table is a view over 2 shards


def record(op, count, rid, payload=b"", flags=0):
    head = struct.pack("<IIIIQq", 0, op, count, flags, rid, 0)  # ring word, op, count, flags, id, deadline
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


def shard(rid, index, present, mass, size, wait_below=0):
    return record(SHARD, 10, rid, struct.pack("<IIdQII", index, present, mass, size, wait_below, 0))


def draw(rid, block, offset, remote_key, probability, priority=1.0):
    """A shard's draw: its key in the shard and its probability there in
    the producer and sequence slots."""
    payload = struct.pack("<dIIQd", priority, 2, 0, remote_key, probability)
    payload += struct.pack("<IIII", block, 1, offset, 1)
    return record(INSERT, 1, rid, payload, INSERT_DRAW)


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
view_seeds = {
    "view_draws": [shard(1, 0, 1, 2.0, 2), draw(2, 0, 0, 77, 0.5), draw(3, 0, 1, 78, 0.5),
                   record(SAMPLE, 2, 4), record(UPDATE, 1, 5, struct.pack("<Qd", key(0), 3.0)),
                   record(RELEASE, 0, 4), shard(6, 0, 1, 2.0, 2, 1), shard(7, 0, 0, 0.0, 0)],
}
for mask, group in ((0, seeds), (VIEW, view_seeds)):
    for name, records in group.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(bytes([mask]) + b"".join(records))
