"""Eager collectives and DDP across 2 local processes (issue 13), through ``lazyflow.distributed.run``.

Run: ``python -m benchmarks.bench_collectives [--quick]``. Every number is a median over repeats, timed in rank 0
(each repeat waits for the result).

* ``all_reduce`` of 1 float and of 4M floats: lazyflow (signature check + program + in-place rebind) vs the bare
  jitted ``shard_map``/``lax.psum`` program on the same global array (JAX without lazyflow's checks), and vs
  torch.distributed's gloo ``all_reduce`` in the same two processes.
* A DDP training step (MLP 512x3, SGD, 64 rows per rank) vs the same step without DDP (no communication), and vs
  torch's DDP over gloo: the cost of averaging the gradients.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from benchmarks._util import table


def _median(fn, repeats: int) -> float:
    fn()
    fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _child(quick: bool) -> None:
    import lazyflow as lf

    lf.distributed.init_process_group()
    import jax
    import jax.numpy as jnp
    import numpy as np
    import torch
    import torch.distributed as td
    from jax import lax
    from jax.sharding import PartitionSpec as P

    from lazyflow import nn
    from lazyflow.distributed.groups import AXIS, new_group

    D = lf.distributed
    rank, world = D.get_rank(), D.get_world_size()
    port = int(os.environ["MASTER_PORT"]) + 1
    td.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    torch.set_num_threads(1)
    reps = 10 if quick else 40
    g = new_group()
    bare = jax.jit(
        jax.shard_map(lambda x: lax.psum(x, AXIS), mesh=g.mesh, in_specs=P(AXIS), out_specs=P(AXIS), check_vma=False)
    )
    out: dict = {}
    for name, n in (("1 float", 1), ("4M floats", 4 << 20)):
        x = lf.ones(n)
        a = np.ones(n, np.float32)
        tt = torch.ones(n)

        def lazy():
            D.all_reduce(x)
            x.jax().block_until_ready()

        placed = jax.device_put(jnp.asarray(a), g.device)  # the tensor's value: already on the device

        def plain():
            local = placed[None]
            arr = jax.make_array_from_single_device_arrays((world, n), g.sharding, [local])
            bare(arr).block_until_ready()

        out[name] = {
            "lf": _median(lazy, reps),
            "jax": _median(plain, reps),
            "torch": _median(lambda: td.all_reduce(tt), reps),
        }

    rng = np.random.default_rng(rank)
    xb, yb = rng.standard_normal((64, 512)).astype(np.float32), rng.standard_normal((64, 10)).astype(np.float32)

    def lf_step(model):
        opt = lf.optim.SGD(model.parameters(), lr=1e-3)
        x, y = lf.tensor(xb), lf.tensor(yb)

        def step():
            opt.zero_grad()
            ((model(x) - y) ** 2).mean().backward()
            opt.step()
            next(model.parameters()).jax().block_until_ready()

        return step

    def mlp():
        lf.manual_seed(0)
        return nn.Sequential(nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))

    tm = torch.nn.Sequential(
        torch.nn.Linear(512, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10)
    )
    tddp = torch.nn.parallel.DistributedDataParallel(tm)
    topt = torch.optim.SGD(tddp.parameters(), lr=1e-3)
    tx, ty = torch.from_numpy(xb), torch.from_numpy(yb)

    def torch_step():
        topt.zero_grad()
        ((tddp(tx) - ty) ** 2).mean().backward()
        topt.step()

    out["ddp step"] = {
        "lf": _median(lf_step(nn.parallel.DistributedDataParallel(mlp())), reps),
        "local": _median(lf_step(mlp()), reps),
        "torch": _median(torch_step, reps),
    }
    td.destroy_process_group()
    if rank == 0:
        print("RESULT " + json.dumps(out), flush=True)


def run(quick: bool = False) -> list[dict]:
    """Launch 2 processes; returns the rows and prints a table."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, JAX_PLATFORMS="cpu", XLA_FLAGS="--xla_force_host_platform_device_count=1")
    cmd = [sys.executable, "-m", "lazyflow.distributed.run", "--nproc", "2", os.path.abspath(__file__), "--child"]
    p = subprocess.run(
        cmd + (["--quick"] if quick else []), env=env, capture_output=True, text=True, cwd=root, timeout=1800
    )
    if p.returncode:
        raise RuntimeError(f"bench_collectives failed:\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    line = next(ln for ln in p.stdout.splitlines() if "] RESULT " in ln)
    res = json.loads(line.split("] RESULT ", 1)[1])
    note = f"2 processes x 1 CPU device, gloo over loopback, {os.cpu_count()} cores"
    rows = []
    for name in ("1 float", "4M floats"):
        r = res[name]
        rows.append(
            {"case": f"all_reduce {name}", "versus": "bare jitted psum", "lf": r["lf"], "ref": r["jax"], "note": note}
        )
        rows.append(
            {"case": f"all_reduce {name}", "versus": "torch gloo", "lf": r["lf"], "ref": r["torch"], "note": note}
        )
    r = res["ddp step"]
    rows.append(
        {"case": "DDP step MLP 512", "versus": "same step, no DDP", "lf": r["lf"], "ref": r["local"], "note": note}
    )
    rows.append(
        {"case": "DDP step MLP 512", "versus": "torch DDP gloo", "lf": r["lf"], "ref": r["torch"], "note": note}
    )
    headers = ["case", "versus", "lazyflow ms", "reference ms", "ratio"]
    body = [
        [r["case"], r["versus"], f"{r['lf'] * 1e3:.2f}", f"{r['ref'] * 1e3:.2f}", f"{r['lf'] / r['ref']:.2f}x"]
        for r in rows
    ]
    print(table(body, headers))
    return rows


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--child", action="store_true")
    a = ap.parse_args()
    if a.child:
        sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        _child(a.quick)
    else:
        run(a.quick)
