"""Convolution lowerings (issue 4, section 5): forward+backward time of every lowering in ``lazyflow.ops.nn``
against torch eager, on the conv shapes of ResNet-18/50 (batch 2 at 224x224, batch 8 at 64x64) and the small
CNN (batch 32 at 32x32); then whole networks compiled with each lowering forced against torch eager.

Run: ``python -m benchmarks.bench_conv [--quick] [--only shapes,nets]``. Each lowering is timed as one jitted
``value_and_grad`` (what a compiled training step runs); ``auto`` is the per-shape choice the op makes.
Rows: ``ratio = lazyflow / torch`` (below 1.00x lazyflow is faster). ``op`` is the conv op itself (the auto
lowering plus its backward rule, whose weight gradient is chosen per shape: ``op's dw`` is ``shift`` or the
lowering whose own VJP gives it); the lowering columns
differentiate each lowering alone, so ``op`` against the ``auto picks`` column is the backward rule's effect.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from benchmarks._util import fmt_ms, table

# (name, N, C_in, H, C_out, kernel, stride, padding)
SHAPES = [
    ("r18@224 stem 7x7/2", 2, 3, 224, 64, 7, 2, 3),
    ("r18@224 3x3 64@56", 2, 64, 56, 64, 3, 1, 1),
    ("r18@224 3x3 128@28", 2, 128, 28, 128, 3, 1, 1),
    ("r18@224 3x3/2 128->256@28", 2, 128, 28, 256, 3, 2, 1),
    ("r18@224 3x3 256@14", 2, 256, 14, 256, 3, 1, 1),
    ("r18@224 3x3 512@7", 2, 512, 7, 512, 3, 1, 1),
    ("r18@224 1x1/2 256->512@14", 2, 256, 14, 512, 1, 2, 0),
    ("r50@224 1x1 256->64@56", 2, 256, 56, 64, 1, 1, 0),
    ("r50@224 1x1 64->256@56", 2, 64, 56, 256, 1, 1, 0),
    ("r18@64 stem 7x7/2", 8, 3, 64, 64, 7, 2, 3),
    ("r18@64 3x3 64@16", 8, 64, 16, 64, 3, 1, 1),
    ("r18@64 3x3 128@8", 8, 128, 8, 128, 3, 1, 1),
    ("r18@64 3x3 256@4", 8, 256, 4, 256, 3, 1, 1),
    ("r18@64 3x3 512@2", 8, 512, 2, 512, 3, 1, 1),
    ("r50@64 1x1 1024->256@4", 8, 1024, 4, 256, 1, 1, 0),
    ("cnn 3x3 3->32@32", 32, 3, 32, 32, 3, 1, 1),
    ("cnn 3x3 32->64@32", 32, 32, 32, 64, 3, 1, 1),
]
QUICK = {"r18@64 3x3 512@2", "r18@64 3x3 256@4", "r50@224 1x1 256->64@56", "cnn 3x3 32->64@32"}
# (name, model, input shape); forward+backward of the whole network, compiled with each lowering forced
NETS = [
    ("resnet18 b8@64", "resnet18", (8, 3, 64, 64)),
    ("small_cnn b32@32", "small_cnn", (32, 3, 32, 32)),
    ("resnet18 b2@224", "resnet18", (2, 3, 224, 224)),
]


def _min_time(fn, reps: int) -> float:
    fn()
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def _shape_row(name, n, c, h, o, k, s, p, reps) -> dict:
    import jax
    import jax.numpy as jnp
    import torch

    import lazyflow as lf
    from lazyflow.ops import conv_grad
    from lazyflow.ops import nn as opsnn
    from lazyflow.ops.table import REGISTRY, specialize

    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, c, h, h)).astype(np.float32)
    w = (rng.standard_normal((o, c, k, k)) / np.sqrt(c * k * k)).astype(np.float32)
    xt, wt = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)

    def torch_step():
        xt.grad = wt.grad = None
        (torch.nn.functional.conv2d(xt, wt, stride=s, padding=p) ** 2).sum().backward()

    t_torch = _min_time(torch_step, reps)
    kw = dict(stride=(s, s), padding=((p, p), (p, p)), dilation=(1, 1), groups=1)
    chosen = opsnn.conv_lowering(x.shape, w.shape, (s, s), kw["padding"], (1, 1), 1)
    dw_how = conv_grad.dw_formulation(x.shape, w.shape, **kw) if chosen == "xla" else chosen
    xj, wj = jnp.asarray(x), jnp.asarray(w)
    impls = dict(opsnn.CONV_LOWERINGS)
    # the conv op as every mode runs it: auto lowering plus its backward rule (dw per shape)
    descs = ((x.shape, lf.float32, 0), (w.shape, lf.float32, 0), type(None))
    op_fn = specialize(REGISTRY["conv"], (kw["stride"], kw["padding"], (1, 1), 1, "auto"), descs)
    impls["op"] = lambda x, w, **_: op_fn(x, w, None)
    times = {}
    for low, impl in impls.items():

        def loss(x, w, impl=impl):
            return (impl(x, w, **kw) ** 2).sum()

        step = jax.jit(jax.value_and_grad(loss, (0, 1)))
        times[low] = _min_time(lambda step=step: jax.block_until_ready(step(xj, wj)), reps)
    return dict(shape=name, torch=t_torch, chosen=chosen, dw=dw_how, **times)


def bench_shapes(quick: bool) -> list[dict]:
    return [_shape_row(*sh, reps=3 if quick else 7) for sh in SHAPES if not quick or sh[0] in QUICK]


def _net_row(name, model, shape, reps) -> dict:
    import torch

    import lazyflow as lf
    from benchmarks.models import build
    from lazyflow.ops import nn as opsnn

    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    torch.manual_seed(0)
    tm = build(torch.nn, model)
    xt = torch.tensor(x)

    def torch_step():
        tm.zero_grad()
        tm(xt).sum().backward()

    res = dict(net=name, torch=_min_time(torch_step, reps))
    xl = lf.tensor(x)
    for low in ("xla", "xla_nhwc", "im2col", "auto"):
        opsnn.CONV_LOWERING = low
        lm = build(lf.nn, model)
        cm = lf.compile(lm)

        def lf_step(cm=cm, lm=lm):
            lm.zero_grad()
            cm(xl).sum().backward()
            next(iter(lm.parameters())).grad.jax().block_until_ready()

        t0 = time.perf_counter()
        lf_step()
        res[f"compile_{low}"] = time.perf_counter() - t0
        res[low] = _min_time(lf_step, reps)
    opsnn.CONV_LOWERING = "auto"
    return res


def bench_nets(quick: bool) -> list[dict]:
    return [_net_row(*net, reps=2 if quick else 5) for net in (NETS[:1] if quick else NETS)]


def run(quick: bool = False, only: list[str] | None = None) -> list[dict]:
    out = []
    lowers = ["xla", "xla_nhwc", "im2col"]
    if not only or "shapes" in only:
        rows = bench_shapes(quick)
        print("Conv forward+backward (jitted value_and_grad; torch eager), best of repeats")
        print(
            table(
                [
                    (
                        r["shape"],
                        fmt_ms(r["torch"]),
                        *(fmt_ms(r[lo]) for lo in lowers),
                        r["chosen"],
                        f"{r[r['chosen']] / r['torch']:.2f}x",
                        fmt_ms(r["op"]),
                        r["dw"],
                        f"{r['op'] / r['torch']:.2f}x",
                    )
                    for r in rows
                ],
                ["shape", "torch", *lowers, "auto picks", "auto/torch", "op", "op's dw", "op/torch"],
            )
        )
        for r in rows:
            best = min(lowers, key=lambda lo: r[lo])
            out.append(
                dict(
                    case=f"conv fwd+bwd {r['shape']} (auto={r['chosen']}, dw={r['dw']})",
                    versus="torch eager",
                    lf=r["op"],
                    ref=r["torch"],
                    note=f"fastest lowering {best}: "
                    + ", ".join(f"{lo} {r[lo] * 1e3:.1f} ms" for lo in lowers)
                    + f"; auto lowering's own VJP {r[r['chosen']] * 1e3:.1f} ms",
                )
            )
    if not only or "nets" in only:
        rows = bench_nets(quick)
        print("\nWhole network forward+backward, lf.compile with each conv lowering forced (torch eager)")
        lows = ["xla", "xla_nhwc", "im2col", "auto"]
        print(
            table(
                [
                    (
                        r["net"],
                        fmt_ms(r["torch"]),
                        *(fmt_ms(r[lo]) for lo in lows),
                        f"{r['auto'] / r['torch']:.2f}x",
                        f"{r['compile_auto']:.1f} s",
                    )
                    for r in rows
                ],
                ["net", "torch", *lows, "auto/torch", "compile(auto)"],
            )
        )
        for r in rows:
            out.append(
                dict(
                    case=f"{r['net']} fwd+bwd compiled, conv lowering auto",
                    versus="torch eager",
                    lf=r["auto"],
                    ref=r["torch"],
                    note="forced: " + ", ".join(f"{lo} {r[lo] * 1e3:.0f} ms" for lo in lows[:3]),
                )
            )
    return out


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", default="", help="comma list of: shapes, nets")
    a = ap.parse_args()
    run(a.quick, [s for s in a.only.split(",") if s] or None)
