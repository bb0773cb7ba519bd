"""``python -m benchmarks.func_transforms``: per-sample gradients and custom-Function overhead (issue 12).

Not part of the suite (``python -m benchmarks``): a hand measurement for BENCHMARKS.md. Per-sample gradients of an
MLP (32 -> 64 -> 10, batch 64) by ``lf.func.vmap(lf.func.grad(loss))`` with ``functional_call`` -- eagerly (traced
and run op by op by JAX on every call) and inside ``lf.compile`` -- against ``torch.func`` and against a Python loop
of 64 eager backwards. Then fwd+bwd of ``exp`` as an ``lf.autograd.Function`` against the built-in op. torch runs
with one thread (``torch.set_num_threads(1)``); the machine's 2 cores are shared.
"""

from __future__ import annotations

import statistics
import time

import numpy as np
import torch

import lazyflow as lf

B, D_IN, D_H, D_OUT = 64, 32, 64, 10


def _median_ms(f, n: int) -> float:
    f()
    f()
    ts = []
    for _ in range(n):
        t = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts) * 1e3


def _mlp(lib):
    return lib.nn.Sequential(lib.nn.Linear(D_IN, D_H), lib.nn.Tanh(), lib.nn.Linear(D_H, D_OUT))


def per_sample(n: int) -> list[tuple[str, float]]:
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((B, D_IN)).astype(np.float32), rng.standard_normal((B, D_OUT)).astype(np.float32)
    rows = []
    for lib in (lf, torch):
        model = _mlp(lib)
        params = {k: v.detach() for k, v in model.named_parameters()}
        xs, ys = lib.tensor(x), lib.tensor(y)

        def loss(p, xb, yb, lib=lib, model=model):
            return ((lib.func.functional_call(model, p, (xb.unsqueeze(0),)) - yb) ** 2).mean()

        def step(p, xs, ys, lib=lib, loss=loss):
            return lib.func.vmap(lib.func.grad(loss), in_dims=(None, 0, 0))(p, xs, ys)

        name = "lf" if lib is lf else "torch"
        rows.append((f"{name}.func vmap(grad) eager", _median_ms(lambda s=step, p=params: s(p, xs, ys), n)))
        if lib is lf:
            comp = lf.compile(step)
            rows.append(("lf.compile(vmap(grad))", _median_ms(lambda: comp(params, xs, ys), n)))

            def loop(model=model):
                out = []
                for i in range(B):
                    model.zero_grad()
                    ((model(xs[i : i + 1]) - ys[i]) ** 2).mean().backward()
                    out.append([p.grad for p in model.parameters()])
                return out

            rows.append(("lf eager loop of 64 backwards", _median_ms(loop, max(3, n // 4))))
    return rows


class _Exp(lf.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = x.exp()
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g * y


def function_overhead(n: int) -> list[tuple[str, float]]:
    a = np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32)

    def run(f):
        x = lf.tensor(a, requires_grad=True)
        f(x).sum().backward()
        return x.grad

    return [
        ("lf built-in exp fwd+bwd (64x64)", _median_ms(lambda: run(lambda x: x.exp()), n)),
        ("lf.autograd.Function exp fwd+bwd (64x64)", _median_ms(lambda: run(_Exp.apply), n)),
    ]


def main(n: int = 20) -> None:
    torch.set_num_threads(1)
    print("| case | median ms |")
    print("|---|---|")
    for name, ms in per_sample(n) + function_overhead(n * 5):
        print(f"| {name} | {ms:.2f} |")


if __name__ == "__main__":
    main()
