"""The linear op's lowering and the eager MLP step's Python work (issue 14, session 9).

1. ``matmul(x, w.T) + b`` (lazyflow's linear before session 9) against one ``dot_general`` contracting x's last dim
   with the weight's dim 1 (after), as bare ``jax.jit`` kernels: forward, and the backward for (w, b) and (x, w, b),
   wall time per call with the result awaited, medians of interleaved rounds in one process.
2. Python calls per phase (forward, backward, optimizer step, zero_grad) of the eager MLP 784-256-10 SGD step,
   counted with cProfile (the count includes the profiler's own ``disable`` call).

    PYTHONPATH=<tree> python -m benchmarks.ab_linear
"""

from __future__ import annotations

import cProfile
import pstats
import statistics
import time

import numpy as np


def lowering(batch: int, rounds: int = 9, n: int = 50) -> None:
    import jax
    import jax.numpy as jnp
    from jax import lax

    rng = np.random.default_rng(0)
    x, w, b, g = (
        jnp.asarray(rng.standard_normal(s).astype(np.float32)) for s in ((batch, 784), (256, 784), (256,), (batch, 256))
    )

    def old(x, w, b):
        return jnp.matmul(x, w.T) + b

    def new(x, w, b):
        return lax.dot_general(x, w, (((x.ndim - 1,), (1,)), ((), ()))) + b

    fns = {}
    for name, f in (("matmul(x, w.T)", old), ("dot_general", new)):
        fns[(name, "forward")] = (jax.jit(f), (x, w, b))
        fns[(name, "backward w,b")] = (
            jax.jit(lambda x, w, b, g, f=f: jax.vjp(lambda w, b: f(x, w, b), w, b)[1](g)),
            (x, w, b, g),
        )
        fns[(name, "backward x,w,b")] = (jax.jit(lambda x, w, b, g, f=f: jax.vjp(f, x, w, b)[1](g)), (x, w, b, g))

    def per(f, args, k):
        t0 = time.perf_counter()
        for _ in range(k):
            r = f(*args)
        jax.block_until_ready(r)
        return (time.perf_counter() - t0) / k * 1e6

    res = {key: [] for key in fns}
    for f, args in fns.values():
        per(f, args, 5)
    for _ in range(rounds):
        for key, (f, args) in fns.items():
            res[key].append(per(f, args, n))
    for part in ("forward", "backward w,b", "backward x,w,b"):
        o, nw = statistics.median(res[("matmul(x, w.T)", part)]), statistics.median(res[("dot_general", part)])
        print(f"  batch {batch:3d} {part:15s} matmul(x, w.T) {o:7.1f} us  dot_general {nw:7.1f} us  {nw / o:.2f}x")


def python_calls() -> None:
    import lazyflow as lf
    from benchmarks.models import build

    for batch in (1, 64):
        rng = np.random.default_rng(0)
        lx = lf.tensor(rng.standard_normal((batch, 784)).astype(np.float32))
        ly = lf.tensor(rng.integers(0, 10, batch))
        model = build(lf.nn, "mlp")
        opt = lf.optim.SGD(model.parameters(), lr=0.01)
        for _ in range(5):
            lf.nn.functional.cross_entropy(model(lx), ly).backward()
            opt.step()
            opt.zero_grad()
        counts = []
        loss = None
        for phase in ("forward", "backward", "step", "zero_grad"):
            pr = cProfile.Profile()
            pr.enable()
            if phase == "forward":
                loss = lf.nn.functional.cross_entropy(model(lx), ly)
            elif phase == "backward":
                assert loss is not None
                loss.backward()
            elif phase == "step":
                opt.step()
            else:
                opt.zero_grad()
            pr.disable()
            counts.append(pstats.Stats(pr).total_calls)  # pyright: ignore[reportAttributeAccessIssue]
        print(f"  batch {batch:3d} forward/backward/step/zero_grad {counts}, total {sum(counts)}")


if __name__ == "__main__":
    print("linear kernels, 784 -> 256, float32 (wall us per call, medians):")
    lowering(1)
    lowering(64)
    print("Python calls per eager MLP step phase:")
    python_calls()
