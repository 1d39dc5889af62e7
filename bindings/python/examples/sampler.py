"""Samples table "walk" (see writer.py): a copied batch, then a zero-copy one,
a batch without repeats, and the table's newest items, listed.

    python3 bindings/python/examples/sampler.py [SOCKET]
"""
import sys

import engram

with engram.connect(sys.argv[1] if len(sys.argv) > 1 else None) as client, client.table("walk") as table:
    data, info = table.sample(batch_size=4)  # copies: data["position"] is [4, 1, 2]
    for position, step, key in zip(data["position"][:, 0], data["step"][:, 0], info["key"]):
        print(f"item {key:#x}: step {step}, position {position}")
    with table.sample_view(batch_size=4) as batch:  # read-only arrays over shared memory
        print("zero-copy:", [batch.view(i, "step")[0] for i in range(len(batch))])
    _, info = table.sample(batch_size=16, no_repeats=True)  # no item twice
    print("without repeats:", len(set(info["key"])), "distinct of", len(info))
    items = client.items("walk")  # oldest first; by="priority" for highest first
    print("listed:", len(items), "items, newest key", hex(items["key"][-1]))
