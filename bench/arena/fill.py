# Fills a fresh table with one-step items of N bytes until the arena has no
# block for the next (insert_timeout_ms 0: ENGRAM_E_NOMEM at once), then
# prints {"items": ..., "stopped_by": ...}. Used by bench/arena_memory.sh.
import json
import sys

import numpy as np

import engram

sock, step = sys.argv[1], int(sys.argv[2])
cols = [("x", "uint8", (step,))]
c = engram.connect(sock)
c.create_table("fill", cols, max_size=1_000_000)
t = c.table("fill")
w = c.writer(cols, insert_timeout_ms=0)
x = np.zeros(step, np.uint8)
stopped_by = "nothing"
for i in range(1 << 30):
    try:
        w.append(x)
        w.create_item(t, 1, 1.0)
    except engram.EngramError as e:
        stopped_by = str(e).split(";")[0]
        break
try:
    w.flush(10000)
except engram.EngramError:
    pass
print(json.dumps({"items": c.table_info("fill")["size"], "stopped_by": stopped_by}))
