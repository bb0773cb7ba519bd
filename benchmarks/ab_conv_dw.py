"""A convolution's weight gradient alone, per shape (issue 14): XLA's filter convolution (``jax.vjp`` of
``lax.conv_general_dilated``) against ``conv_grad.dw_shift`` with per-sample dots and with one dot per kernel offset,
and the im2col form, each jitted, called in turn (rotating) in one process; medians of wall and process CPU time
(user+sys, all threads), so a shared box's load shows up as wall above CPU. Checks each result against XLA's first.

Run: ``python -m benchmarks.ab_conv_dw [--rounds 9] [--shapes "2,64,64,56,3,1;2,3,64,224,7,2"]`` -- a shape is
``N,C,O,H,K,S`` (square input H, square kernel K, stride S, padding K//2). A standalone tool, not a suite module;
BENCHMARKS.md "session 8, cnn helper" has its numbers.
"""

from __future__ import annotations

import argparse
import os
import resource
import time

import numpy as np

SHAPES = "32,32,64,32,3,1;2,64,64,56,3,1;2,128,128,28,3,1;2,256,256,14,3,1;2,3,64,224,7,2;8,64,64,16,3,1;8,3,64,64,7,2"


def _formulations(n, c, o, h, k, s):
    import jax
    import jax.numpy as jnp
    from jax import lax

    from lazyflow.ops import conv_grad

    pads = ((k // 2, k // 2),) * 2
    kw = dict(stride=(s, s), padding=pads, dilation=(1, 1), groups=1)
    ws = (o, c, k, k)

    def xla(x, dy):
        w = jnp.zeros(ws, x.dtype)
        f = lambda w: lax.conv_general_dilated(x, w, (s, s), pads, dimension_numbers=("NCHW", "OIHW", "NCHW"))
        return jax.vjp(f, w)[1](dy)[0]

    def shift(per_sample_max):
        def f(x, dy):
            old, conv_grad._PER_SAMPLE_MAX = conv_grad._PER_SAMPLE_MAX, per_sample_max  # read at trace time
            try:
                return conv_grad.dw_shift(x, dy, ws, **kw)
            finally:
                conv_grad._PER_SAMPLE_MAX = old

        return f

    def im2col(x, dy):
        cols, _ = conv_grad.patches(x, (k, k), (s, s), pads, (1, 1))
        return jnp.einsum("nop,nkp->ok", dy.reshape(n, o, -1), cols.reshape(n, c * k * k, -1)).reshape(ws)

    # dw_shift's own per-sample choice also needs few channels or many positions: force both forms here
    fns = {"xla": xla, "shift (one dot)": shift(0), "im2col": im2col}
    if c < 16 or conv_grad.conv_out_size(h, k, s, k // 2, k // 2, 1) ** 2 >= 2048:
        fns["shift (per sample)"] = shift(1 << 40)
    return {name: jax.jit(f) for name, f in fns.items()}


def bench_shape(spec: str, rounds: int) -> str:
    from lazyflow.ops.conv_grad import conv_out_size, dw_formulation

    n, c, o, h, k, s = (int(v) for v in spec.split(","))
    rng = np.random.default_rng(0)
    ho = conv_out_size(h, k, s, k // 2, k // 2, 1)
    x = rng.standard_normal((n, c, h, h)).astype(np.float32)
    dy = rng.standard_normal((n, o, ho, ho)).astype(np.float32)
    fns = _formulations(n, c, o, h, k, s)
    want = np.asarray(fns["xla"](x, dy))
    for name, f in fns.items():
        err = np.abs(np.asarray(f(x, dy)) - want).max() / max(np.abs(want).max(), 1e-6)
        assert err < 1e-4, (spec, name, err)
    times: dict = {name: [] for name in fns}
    names = list(fns)
    for r in range(rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            fns[name](x, dy).block_until_ready()  # untimed call first: what ran before costs this one nothing
            r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
            fns[name](x, dy).block_until_ready()
            t1, r1 = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)
            times[name].append((t1 - t0, r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime))
    chosen = dw_formulation((n, c, h, h), (o, c, k, k), (s, s), ((k // 2, k // 2),) * 2, (1, 1), 1)
    cells = [
        f"{name} {np.median([t[0] for t in v]) * 1e3:.1f}/{np.median([t[1] for t in v]) * 1e3:.1f}"
        for name, v in times.items()
    ]
    return f"{spec} (chosen: {chosen}; load {os.getloadavg()[0]:.1f}) wall/cpu ms: " + ", ".join(cells)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--shapes", default=SHAPES)
    a = ap.parse_args()
    for spec in a.shapes.split(";"):
        print(bench_shape(spec, a.rounds), flush=True)
