"""One rank of a 2-process data-parallel training run (started by lazyflow.distributed.run; 2 virtual CPU devices
per process, so the mesh spans 4 devices in 2 processes and gradients are all-reduced over gloo/TCP).

Each rank feeds only its half of every global batch. The same rank then trains the same model on one local device
with the whole global batch, and computes a plain-JAX reference (jax.grad + torch's Adam/SGD rules), and prints
one JSON line per run: the losses, and every final parameter gathered from all processes.
"""

from __future__ import annotations

import json
import os
import sys

import lazyflow as lf

lf.distributed.init_process_group()  # after `import lazyflow`, before any tensor

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import multihost_utils

from lazyflow import nn

F = nn.functional
D = lf.distributed
RANK, WORLD = D.get_rank(), D.get_world_size()
B, STEPS = 16, 4
RNG = np.random.default_rng(1)
DATA = [(RNG.standard_normal((B, 8)).astype(np.float32), RNG.integers(0, 3, B)) for _ in range(STEPS)]
KEYS = ["0.weight", "0.bias", "2.weight", "2.bias"]


def model():
    lf.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 3))


class Step(nn.Graph):
    def __init__(self, m, o):
        super().__init__()
        self.m = m
        self.add_optimizer(o)

    def build(self, x, y):
        loss = F.cross_entropy(self.m(x), y)
        loss.backward()
        return loss


def optimizer(opt, params):
    if opt == "sgd":
        return lf.optim.SGD(params, lr=0.1, momentum=0.9)
    return lf.optim.Adam(params, lr=1e-2)


def full(t) -> list:
    """A parameter's value gathered from every process (it may be sharded across them)."""
    a = t.jax()
    if not a.is_fully_addressable:
        a = multihost_utils.process_allgather(a, tiled=True)
    return np.asarray(a).tolist()


def train(opt, mode):
    m = model()
    o = optimizer(opt, m.parameters())
    st = Step(m, o)
    if mode != "local":
        mesh = D.Mesh((2 * WORLD,), ("data",))  # every process's devices
        st.config.data_parallel(mesh, "data")
        if mode == "fsdp":
            st.config.shard_parameters(mesh, "data")
    losses = []
    for x, y in DATA:
        if mode == "local":
            xs, ys = x, y  # one device, the whole global batch
        else:
            h = B // WORLD
            xs, ys = x[RANK * h : (RANK + 1) * h], y[RANK * h : (RANK + 1) * h]  # this rank's half only
        losses.append(st(lf.tensor(xs), lf.tensor(ys)).item())
    sd = m.state_dict()
    info = {k: str(sd[k].sharding.spec) if hasattr(sd[k].sharding, "spec") else "single" for k in KEYS}
    return {
        "losses": losses,
        "params": {k: full(sd[k]) for k in KEYS},
        "specs": info,
        "compiles": st.cache_info().compiles,
    }


def reference(opt):
    p = {k: jnp.asarray(v.numpy()) for k, v in model().state_dict().items()}

    def loss_fn(p, x, y):
        z = jnp.tanh(x @ p["0.weight"].T + p["0.bias"]) @ p["2.weight"].T + p["2.bias"]
        return -jnp.mean(jax.nn.log_softmax(z)[jnp.arange(len(y)), y])

    buf = {k: None for k in p}
    m = {k: jnp.zeros_like(v) for k, v in p.items()}
    v2 = {k: jnp.zeros_like(v) for k, v in p.items()}
    losses = []
    for t, (x, y) in enumerate(DATA, 1):
        loss, g = jax.value_and_grad(loss_fn)(p, x, y)
        losses.append(float(loss))
        for k in p:
            if opt == "sgd":
                buf[k] = g[k] if buf[k] is None else 0.9 * buf[k] + g[k]
                p[k] = p[k] - 0.1 * buf[k]
            else:
                m[k] = 0.9 * m[k] + 0.1 * g[k]
                v2[k] = 0.999 * v2[k] + 0.001 * g[k] ** 2
                p[k] = p[k] - (1e-2 / (1 - 0.9**t)) * m[k] / (jnp.sqrt(v2[k]) / np.sqrt(1 - 0.999**t) + 1e-8)
    return {"losses": losses, "params": {k: np.asarray(v).tolist() for k, v in p.items()}}


if __name__ == "__main__":
    assert WORLD == 2 and len(jax.local_devices()) == 2 and len(jax.devices()) == 4, jax.devices()
    assert os.environ["LOCAL_RANK"] == str(RANK)
    runs = sys.argv[1:] or ["adam/dp"]  # e.g. adam/dp adam/fsdp sgd/dp
    out = {"rank": RANK}
    for run in runs:
        opt, mode = run.split("/")
        out[run] = train(opt, mode)
    for opt in sorted({r.split("/")[0] for r in runs}):
        out[f"{opt}/local"] = train(opt, "local")
        out[f"{opt}/reference"] = reference(opt)
    D.barrier()
    print("RESULT " + json.dumps(out), flush=True)
