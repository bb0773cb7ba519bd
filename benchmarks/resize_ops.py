"""``python -m benchmarks.resize_ops``: medians of interpolate / unfold / fold / adaptive_max_pool2d (issue 12).

Not part of the suite (``python -m benchmarks``): a hand measurement for BENCHMARKS.md. Each op is built from
existing ops (gather of host-computed taps, weighted sum); this measures forward + backward of ``(y * g).sum()``
per call, lazyflow eager, ``lf.compile`` of the same function, and torch eager on the same input (torch limited
to one thread per ``torch.set_num_threads(1)``; the machine's 2 cores are shared).
"""

from __future__ import annotations

import statistics
import time

import numpy as np
import torch
import torch.nn.functional as TF

import lazyflow as lf
import lazyflow.nn.functional as F

CASES = [
    ("bilinear 2x up (8,16,64,64)", (8, 16, 64, 64), lambda m, x: m.interpolate(x, scale_factor=2, mode="bilinear")),
    ("bicubic to 0.5x (8,16,64,64)", (8, 16, 64, 64), lambda m, x: m.interpolate(x, scale_factor=0.5, mode="bicubic")),
    (
        "bilinear antialias 0.25x (8,16,64,64)",
        (8, 16, 64, 64),
        lambda m, x: m.interpolate(x, scale_factor=0.25, mode="bilinear", antialias=True),
    ),
    ("nearest 2x up (8,16,64,64)", (8, 16, 64, 64), lambda m, x: m.interpolate(x, scale_factor=2, mode="nearest")),
    ("unfold k3 p1 (8,16,32,32)", (8, 16, 32, 32), lambda m, x: m.unfold(x, 3, padding=1)),
    ("adaptive_max_pool2d 7x7 (8,16,32,32)", (8, 16, 32, 32), lambda m, x: m.adaptive_max_pool2d(x, 7)),
]


def _median_ms(f, n: int) -> float:
    f()
    f()
    ts = []
    for _ in range(n):
        t = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts) * 1e3


def main(n: int = 20) -> None:
    torch.set_num_threads(1)
    print("| op (fwd+bwd) | lf eager ms | lf.compile ms | torch ms | eager/torch | compile/torch |")
    print("|---|---|---|---|---|---|")
    for name, shape, fn in CASES:
        a = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
        g_shape = tuple(fn(TF, torch.tensor(a)).shape)
        g = np.random.default_rng(1).standard_normal(g_shape).astype(np.float32)
        gl, gt = lf.tensor(g), torch.tensor(g)

        def lf_step(x, gl=gl, fn=fn):
            return (fn(F, x) * gl).sum()

        comp = lf.compile(lf_step)

        def run_lf(step):
            x = lf.tensor(a, requires_grad=True)
            step(x).backward()
            return np.asarray(x.grad)

        def run_torch():
            x = torch.tensor(a, requires_grad=True)
            (fn(TF, x) * gt).sum().backward()
            return x.grad.numpy()

        e = _median_ms(lambda: run_lf(lf_step), n)
        c = _median_ms(lambda: run_lf(comp), n)
        t = _median_ms(run_torch, n)
        print(f"| {name} | {e:.2f} | {c:.2f} | {t:.2f} | {e / t:.2f}x | {c / t:.2f}x |")


if __name__ == "__main__":
    main()
