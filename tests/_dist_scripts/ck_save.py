"""One rank of the multi-process checkpoint tests (lazyflow.distributed.run, 2 processes x 4 virtual devices).

``ck_save.py train PATH``: FSDP-style data-parallel Graph training over the 8 devices of both processes (each rank
feeds its half of the batch), then ``lf.save`` of the model and optimizer state dicts. While saving, gathering a
multi-device array to the host raises, and every open-for-writing of the metadata file is counted. Prints one
``RESULT`` JSON line: the losses, the metadata writes, and the saved values (gathered after the save).

``ck_save.py loop PATH``: save two states A and B to PATH alternately, forever (printing ``saved A``/``saved B``),
for the crash test to kill a rank at a random instant.
"""

from __future__ import annotations

import builtins
import json
import os
import sys

import lazyflow as lf

lf.distributed.init_process_group()

import jax
import numpy as np
from jax._src.array import ArrayImpl
from jax.experimental import multihost_utils
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from lazyflow import nn

F = nn.functional
D = lf.distributed
RANK = D.get_rank()
mode, path = sys.argv[1], sys.argv[2]
assert D.get_world_size() == 2 and len(jax.devices()) == 8 and len(jax.local_devices()) == 4
mesh = D.Mesh((8,), ("data",))


def model():
    lf.manual_seed(0)
    return nn.Sequential(nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 3))


def batches(n, b=16):
    rng = np.random.default_rng(2)
    return [(rng.standard_normal((b, 64)).astype(np.float32), rng.integers(0, 3, b)) for _ in range(n)]


class Step(nn.Graph):
    def __init__(self, m, o):
        super().__init__()
        self.m = m
        self.add_optimizer(o)

    def build(self, x, y):
        loss = F.cross_entropy(self.m(x), y)
        loss.backward()
        return loss


def full(t):
    a = t.jax()
    if not a.is_fully_addressable:
        a = multihost_utils.process_allgather(a, tiled=True)
    return np.asarray(a).tolist()


class Watch:
    """Count writes of the metadata file, and forbid host gathers of multi-device arrays, while active."""

    def __init__(self):
        self.meta_writes = 0
        self._open, self._os_open, self._array = builtins.open, os.open, ArrayImpl.__array__

    def __enter__(self):
        watch = self

        def opened(file, mode="r", *a, **k):
            if str(file).endswith("metadata.lfpkl") and any(c in mode for c in "wax+"):
                watch.meta_writes += 1
            return watch._open(file, mode, *a, **k)

        def os_opened(file, flags, *a, **k):
            if str(file).endswith("metadata.lfpkl") and flags & (os.O_WRONLY | os.O_RDWR):
                watch.meta_writes += 1
            return watch._os_open(file, flags, *a, **k)

        def no_gather(arr, *a, **k):
            if len(arr.sharding.device_set) > 1:
                raise AssertionError("a multi-device array was gathered to the host during lf.save")
            return watch._array(arr, *a, **k)

        builtins.open, os.open, ArrayImpl.__array__ = opened, os_opened, no_gather
        return self

    def __exit__(self, *exc):
        builtins.open, os.open, ArrayImpl.__array__ = self._open, self._os_open, self._array


if mode == "train":
    m = model()
    o = lf.optim.Adam(m.parameters(), lr=1e-2)
    st = Step(m, o)
    st.config.data_parallel(mesh, "data")
    st.config.shard_parameters(mesh, "data")
    losses = []
    for x, y in batches(3):
        h = len(x) // 2
        losses.append(st(lf.tensor(x[RANK * h : (RANK + 1) * h]), lf.tensor(y[RANK * h : (RANK + 1) * h])).item())
    sd, osd = m.state_dict(), o.state_dict()
    assert sd["0.weight"].sharding == NamedSharding(mesh, P("data", None))
    assert not sd["0.weight"].jax().is_fully_addressable  # spans both processes
    with Watch() as w:
        lf.save({"model": sd, "optim": osd, "step": 3, "losses": losses}, path)
    D.barrier()
    params = {k: full(v) for k, v in sd.items()}
    opt = {f"{i}.{n}": full(v) for i, s in osd["state"].items() for n, v in s.items() if n != "step"}
    print(
        "RESULT "
        + json.dumps(
            {
                "rank": RANK,
                "meta_writes": w.meta_writes,
                "losses": losses,
                "params": params,
                "optim": opt,
                "devices": [d.id for d in jax.devices()],
            }
        ),
        flush=True,
    )
elif mode == "loop":

    def state(tag, v):
        glob = lambda shape, spec: lf.from_jax(
            jax.make_array_from_callback(
                shape, NamedSharding(mesh, spec), lambda idx: np.full(shape, v, np.float32)[idx]
            )
        )
        return {
            "tag": tag,
            "w": glob((64, 32), P("data", None)),
            "e": glob((16, 64), P(None, "data")),
            "small": lf.full((5,), v),
            "step": int(v),
        }

    states = [state("A", 1.0), state("B", 2.0)]
    print("pid", os.getpid(), flush=True)
    i = 0
    while True:
        s = states[i % 2]
        lf.save(s, path)
        print("saved", s["tag"], flush=True)
        i += 1
else:
    raise SystemExit(f"unknown mode {mode}")
