"""The conv op's backward rule A/B inside one process (issue 14): an ``lf.nn.Graph`` training step with the rule
(``on``: the weight gradient per shape, ``conv_grad.dw_formulation``) against the same step with the rule removed
(``off``: ``jax.vjp`` of the lowering, what lazyflow did before), and torch eager, called in turn (the order
rotating each round) -- so a shared, noisy machine slows all three alike. Per-shape: one conv's jitted forward+backward,
the op against its auto lowering's own VJP, interleaved the same way.

Run: ``python -m benchmarks.ab_conv_rule [--rounds N] [--only small_cnn,resnet18_64,...] [--shapes S,... [--dw-only]]``.
Reports medians and the median of the per-round ratios on/off and on/torch. A standalone A/B tool (not a
suite module: the suite's conv rows time the op itself, bench_conv.py).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from benchmarks import bench_conv, bench_graph


def _interleaved(fns: dict, rounds: int) -> dict:
    for f in fns.values():  # warm (compile) every side first
        f()
        f()
    times: dict = {k: [] for k in fns}
    keys = list(fns)
    for r in range(rounds):
        # rotate the order each round: whatever runs right after torch meets its spinning OpenMP threads
        for k in keys[r % len(keys) :] + keys[: r % len(keys)]:
            t0 = time.perf_counter()
            fns[k]()
            times[k].append(time.perf_counter() - t0)
    return {k: np.asarray(v) for k, v in times.items()}


def _summary(name: str, t: dict) -> dict:
    med = {k: float(np.median(v)) for k, v in t.items()}
    r_off = float(np.median(t["on"] / t["off"]))
    r_torch = float(np.median(t["on"] / t["torch"])) if "torch" in t else float("nan")
    r_off_torch = float(np.median(t["off"] / t["torch"])) if "torch" in t else float("nan")
    print(
        f"{name:26s} on {med['on'] * 1e3:9.2f} ms  off {med['off'] * 1e3:9.2f} ms"
        + (f"  torch {med['torch'] * 1e3:9.2f} ms" if "torch" in t else "")
        + f"  on/off {r_off:.2f}x  on/torch {r_torch:.2f}x  off/torch {r_off_torch:.2f}x",
        flush=True,
    )
    return dict(case=name, **med, on_off=r_off, on_torch=r_torch, off_torch=r_off_torch)


def bench_models(keys, rounds: int) -> list[dict]:
    from lazyflow.graph import trace
    from lazyflow.ops.table import REGISTRY

    conv = REGISTRY["conv"]
    rule = conv.bwd
    rows = []
    for key in keys:
        name, shape, opt_name, classes = bench_graph.CASES[key]
        xs, ys = bench_graph._inputs(shape, classes, np.random.default_rng(0))
        _, _, tstep, _, _ = bench_graph._torch_step(name, xs, ys, opt_name)
        steps = {}
        for side in ("on", "off"):
            conv.bwd = rule if side == "on" else None
            trace._specialized.cache_clear()
            steps[side] = bench_graph._lf_steps(name, xs, ys, opt_name)[1]
            steps[side]()  # the trace reads the record's rule now
        conv.bwd = rule
        trace._specialized.cache_clear()
        steps["torch"] = tstep
        rows.append(_summary(f"{key} Graph step", _interleaved(steps, rounds)))
    return rows


def bench_shapes(rounds: int, only=None, dw_only: bool = False) -> list[dict]:
    import jax
    import jax.numpy as jnp
    import torch

    import lazyflow as lf
    from lazyflow.ops import nn as opsnn
    from lazyflow.ops.table import REGISTRY, specialize

    rows = []
    for name, n, c, h, o, k, s, p in bench_conv.SHAPES:
        if only and name not in only:
            continue
        rng = np.random.default_rng(0)
        x = rng.standard_normal((n, c, h, h)).astype(np.float32)
        w = (rng.standard_normal((o, c, k, k)) / np.sqrt(c * k * k)).astype(np.float32)
        kw = dict(stride=(s, s), padding=((p, p), (p, p)), dilation=(1, 1), groups=1)
        low = opsnn.CONV_LOWERINGS[opsnn.conv_lowering(x.shape, w.shape, (s, s), kw["padding"], (1, 1), 1)]
        descs = ((x.shape, lf.float32, 0), (w.shape, lf.float32, 0), type(None))
        op_fn = specialize(REGISTRY["conv"], (kw["stride"], kw["padding"], (1, 1), 1, "auto"), descs)
        xj, wj = jnp.asarray(x), jnp.asarray(w)
        fns = {}
        for side, f in (("on", lambda x, w: op_fn(x, w, None)), ("off", lambda x, w: low(x, w, **kw))):
            # dw_only: a network's first conv, whose input needs no gradient
            step = jax.jit(jax.value_and_grad(lambda x, w, f=f: (f(x, w) ** 2).sum(), (1,) if dw_only else (0, 1)))
            fns[side] = lambda step=step: jax.block_until_ready(step(xj, wj))
        xt, wt = torch.tensor(x, requires_grad=not dw_only), torch.tensor(w, requires_grad=True)

        def torch_step(xt=xt, wt=wt, s=s, p=p):
            xt.grad = wt.grad = None
            (torch.nn.functional.conv2d(xt, wt, stride=s, padding=p) ** 2).sum().backward()

        fns["torch"] = torch_step
        rows.append(_summary(name + (" (dw only)" if dw_only else ""), _interleaved(fns, rounds)))
    return rows


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--only", default="small_cnn,resnet18_64")
    ap.add_argument("--shapes", default="", help="comma list of bench_conv shape names, or 'all'")
    ap.add_argument("--dw-only", action="store_true", help="per-shape: differentiate the weight only")
    a = ap.parse_args()
    if a.shapes:
        bench_shapes(a.rounds, None if a.shapes == "all" else a.shapes.split(","), a.dw_only)
    if a.only:
        bench_models(a.only.split(","), a.rounds)
