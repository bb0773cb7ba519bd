"""Distributed benchmarks (issue 7), on 8 virtual CPU devices in one process (a subprocess with XLA_FLAGS set).

Run: ``python -m benchmarks.bench_distributed [--quick]``. Every number is a median over repeats.

* Training step: an MLP + Adam ``lf.nn.Graph`` step on one device vs ``config.data_parallel`` over 8 devices
  vs ``config.shard_parameters`` (FSDP-style) over 8, same global batch. On a CPU host the 8 "devices" share
  the same cores, so no speed-up is expected: the ratio is the overhead of partitioning (per-device kernels,
  all-reduces/all-gathers between virtual devices), and the losses are checked to agree.
* Checkpoints: a state of sharded tensors (each split over the 8 devices) saved with ``lf.save`` shard by shard
  vs gathered into one host array per tensor first and saved unsharded; loaded back onto the mesh
  (``lf.load(..., sharding=...)``) vs loaded onto one device and then placed on the mesh.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from benchmarks._util import table

DEVICES = 8


def _child(quick: bool) -> dict:
    import jax
    import numpy as np
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    import lazyflow as lf
    from lazyflow import nn

    assert len(jax.devices()) == DEVICES, jax.devices()
    F = nn.functional
    D = lf.distributed
    mesh = D.Mesh((DEVICES,), ("data",))
    out: dict = {"steps": {}, "ckpt": {}}

    # ------------------------------------------------------------------ training step
    width, batch = (256, 256) if quick else (1024, 1024)
    steps = 10 if quick else 30
    rng = np.random.default_rng(0)
    data = [
        (lf.tensor(rng.standard_normal((batch, width)).astype(np.float32)), lf.tensor(rng.integers(0, 10, batch)))
        for _ in range(4)
    ]

    class Step(nn.Graph):
        def __init__(self, m, o):
            super().__init__()
            self.m = m
            self.add_optimizer(o)

        def build(self, x, y):
            loss = F.cross_entropy(self.m(x), y)
            loss.backward()
            return loss

    losses = {}
    for mode in ("single", "data_parallel", "shard_parameters"):
        lf.manual_seed(0)
        m = nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(), nn.Linear(width, 10))
        st = Step(m, lf.optim.Adam(m.parameters(), lr=1e-3))
        if mode != "single":
            st.config.data_parallel(mesh, "data")
        if mode == "shard_parameters":
            st.config.shard_parameters(mesh, "data")
        losses[mode] = [st(*data[0]).item()]  # compile
        times = []
        for i in range(steps):
            t0 = time.perf_counter()
            loss = st(*data[i % len(data)])
            loss.jax().block_until_ready()
            times.append(time.perf_counter() - t0)
            losses[mode].append(loss.item())
        out["steps"][mode] = statistics.median(times)
    ref = np.array(losses["single"])
    rel = [np.abs(np.array(v) - ref) / np.abs(ref) for v in losses.values()]
    # float32 sums in another order: ~1e-7 per step at first, amplified by Adam as the loss falls
    out["rel_diff_10"] = max(float(r[:10].max()) for r in rel)
    out["rel_diff_all"] = max(float(r.max()) for r in rel)
    out["step_config"] = f"MLP {width}x3 + Adam, batch {batch}, {steps} steps"

    # ------------------------------------------------------------------ checkpoints
    n, rows = (8, 512) if quick else (16, 2048)
    cols = 1024
    arrays = {f"w{i}": rng.standard_normal((rows, cols)).astype(np.float32) for i in range(n)}
    sharded = {k: D.shard(lf.tensor(v), mesh, ("data", None)) for k, v in arrays.items()}
    target = NamedSharding(mesh, P("data", None))
    mb = sum(v.nbytes for v in arrays.values()) / 2**20
    root = tempfile.mkdtemp(prefix="lf-bench-dist-")
    reps = 3 if quick else 5

    def timed(fn):
        ts = []
        for _ in range(reps):
            t0 = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t0)
        return statistics.median(ts)

    try:
        p_sh, p_g = os.path.join(root, "sharded"), os.path.join(root, "gathered")
        out["ckpt"]["save_sharded"] = timed(lambda: lf.save(sharded, p_sh))
        out["ckpt"]["save_gathered"] = timed(
            lambda: lf.save({k: lf.tensor(np.asarray(v.jax())) for k, v in sharded.items()}, p_g)
        )

        def load_sharded():
            got = lf.load(p_sh, sharding=target)
            for v in got.values():
                v.jax().block_until_ready()
            return got

        def load_gathered():
            got = {k: D.shard(v, mesh, ("data", None)) for k, v in lf.load(p_g).items()}
            for v in got.values():
                v.jax().block_until_ready()
            return got

        out["ckpt"]["load_sharded"] = timed(load_sharded)
        out["ckpt"]["load_gathered"] = timed(load_gathered)
        for k, v in load_sharded().items():
            assert v.sharding == target and np.array_equal(v.numpy(), arrays[k])
    finally:
        shutil.rmtree(root, ignore_errors=True)
    out["ckpt_config"] = f"{n} tensors of {rows}x{cols} float32 ({mb:.0f} MB), split over {DEVICES} devices"
    return out


def run(quick: bool = False) -> list[dict]:
    """Measure in a subprocess with 8 virtual CPU devices; returns the rows (lazyflow = the distributed way,
    reference = the single-device / gathered way) and prints a table."""
    env = dict(os.environ, XLA_FLAGS=f"--xla_force_host_platform_device_count={DEVICES}", JAX_PLATFORMS="cpu")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    cmd = [sys.executable, "-m", "benchmarks.bench_distributed", "--child"] + (["--quick"] if quick else [])
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=root, timeout=1800)
    if p.returncode:
        raise RuntimeError(f"bench_distributed child failed:\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    res = json.loads(p.stdout.strip().splitlines()[-1])
    s, c = res["steps"], res["ckpt"]
    note_s = (
        f"{res['step_config']}; max rel. loss diff vs one device {res['rel_diff_10']:.1e} over the first 10 "
        f"steps, {res['rel_diff_all']:.1e} over all; 8 virtual devices on {os.cpu_count()} cores: no speed-up "
        "expected"
    )
    rows = [
        {
            "case": "train step, data_parallel(8)",
            "versus": "one device",
            "lf": s["data_parallel"],
            "ref": s["single"],
            "note": note_s,
        },
        {
            "case": "train step, shard_parameters(8)",
            "versus": "one device",
            "lf": s["shard_parameters"],
            "ref": s["single"],
            "note": note_s,
        },
        {
            "case": "save, sharded (shard by shard)",
            "versus": "gather + save unsharded",
            "lf": c["save_sharded"],
            "ref": c["save_gathered"],
            "note": res["ckpt_config"],
        },
        {
            "case": "load onto the mesh",
            "versus": "load on one device + shard",
            "lf": c["load_sharded"],
            "ref": c["load_gathered"],
            "note": res["ckpt_config"],
        },
    ]
    print(
        table(
            [
                [
                    r["case"],
                    r["versus"],
                    f"{r['lf'] * 1e3:.2f} ms",
                    f"{r['ref'] * 1e3:.2f} ms",
                    f"{r['lf'] / r['ref']:.2f}x",
                ]
                for r in rows
            ],
            ["case", "versus", "distributed", "reference", "ratio"],
        )
    )
    print(note_s)
    print(res["ckpt_config"])
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        print(json.dumps(_child(a.quick)))
    else:
        run(a.quick)


if __name__ == "__main__":
    main()
