"""One rank of the launcher tests (started by lazyflow.distributed.run). ``argv[1]`` picks the scenario:

* ``exit``: rank 1 exits with status 3; rank 0 sleeps (the launcher must stop it).
* ``raise``: after ``init_process_group``, rank 1 raises; rank 0 waits in a barrier rank 1 never reaches.
* ``gather``: every rank joins; the ranks are all-gathered over the devices, and Python objects are
  broadcast from rank 1 and all-gathered through the coordination service (multi-host flags test).
"""

from __future__ import annotations

import os
import sys
import time

scenario = sys.argv[1]
rank = int(os.environ["RANK"])
print(f"pid {os.getpid()}", flush=True)
print(f"hello from rank {rank} of {os.environ['WORLD_SIZE']}", flush=True)

if scenario == "exit":
    if rank == 1:
        time.sleep(0.5)
        sys.exit(3)
    time.sleep(300)
    sys.exit(0)

import lazyflow as lf

lf.distributed.init_process_group()
if scenario == "raise":
    if rank == 1:
        raise RuntimeError("rank 1 failed on purpose")
    lf.distributed.barrier()
    print("rank 0 passed a barrier rank 1 never reached", flush=True)
    sys.exit(0)

import numpy as np
from jax.experimental import multihost_utils

got = multihost_utils.process_allgather(np.array([rank * 10 + 1], np.int32), tiled=True)
print(
    f"gathered {np.asarray(got).tolist()} world {lf.distributed.get_world_size()} rank "
    f"{lf.distributed.get_rank()} node {os.environ['NODE_RANK']}",
    flush=True,
)
objs = [{"from": rank}, "x"]
lf.distributed.broadcast_object_list(objs, src=1)
slots = [None, None]
lf.distributed.all_gather_object(slots, ("rank", rank))
print(f"objects {objs} {slots}", flush=True)
lf.distributed.barrier()
