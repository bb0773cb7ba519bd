"""Eager-mode benchmarks (issue 2): per-op dispatch on a cache hit, the MLP training step, the setitem loop.

Run: ``python -m benchmarks.bench_eager [--quick]``. Prints medians and ratios measured side by side.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from benchmarks._util import fmt_us, interleaved, table


def bench_dispatch(quick: bool) -> list[dict]:
    import jax
    import jax.numpy as jnp
    import torch

    import lazyflow as lf

    n, rep = (200, 5) if quick else (2000, 15)
    a_np = np.random.default_rng(0).standard_normal((16, 16)).astype(np.float32)
    a, b = lf.tensor(a_np), lf.tensor(a_np + 1)
    ja, jb = jnp.asarray(a_np), jnp.asarray(a_np + 1)
    ta, tb = torch.tensor(a_np), torch.tensor(a_np + 1)
    cases = {
        "add": (lambda: a + b, jax.jit(lambda x, y: x + y), lambda: ja + jb, lambda: ta + tb),
        "mul": (lambda: a * b, jax.jit(lambda x, y: x * y), lambda: ja * jb, lambda: ta * tb),
        "relu": (lambda: lf.relu(a), jax.jit(jax.nn.relu), lambda: jax.nn.relu(ja), lambda: torch.relu(ta)),
        "sum": (lambda: a.sum(), jax.jit(jnp.sum), lambda: jnp.sum(ja), lambda: ta.sum()),
        "matmul": (lambda: a @ b, jax.jit(jnp.matmul), lambda: ja @ jb, lambda: ta @ tb),
    }
    rows = []
    for name, (lff, jitf, jnpf, tf) in cases.items():
        unary = name in ("relu", "sum")
        jit_call = (lambda f=jitf: f(ja)) if unary else (lambda f=jitf: f(ja, jb))
        t = interleaved(dict(lazyflow=lff, jit=jit_call, jnp=jnpf, torch=tf), number=n, repeat=rep)
        rows.append(dict(op=name, **t))
    return rows


def bench_setitem(quick: bool) -> dict:
    import torch

    import lazyflow as lf

    total = 60_000 if quick else 690_000
    chunk = 10_000
    vectors, ones = lf.rand(total, 1), lf.ones(1)
    chunks = []
    t_start = time.perf_counter()
    t0 = t_start
    for i in range(total):
        if i and i % chunk == 0:
            t1 = time.perf_counter()
            chunks.append(t1 - t0)
            t0 = t1
        vectors[i] = ones
    chunks.append(time.perf_counter() - t0)
    lf_total = time.perf_counter() - t_start
    tv, to = torch.rand(total, 1), torch.ones(1)
    t0 = time.perf_counter()
    for i in range(total):
        tv[i] = to
    torch_total = time.perf_counter() - t0
    assert float(vectors.sum().item()) == total
    return dict(
        total=total,
        first_chunk=chunks[0],
        last_chunk=chunks[-2] if len(chunks) > 1 else chunks[-1],
        lf_total=lf_total,
        torch_total=torch_total,
        entries=lf.eager.cache_info().currsize,
    )


def mlp_steps(batch: int):
    """``(lazyflow step, torch step, lazyflow model)``: one eager MLP 784-256-10 SGD training step (forward, backward,
    step, zero_grad) each, same model code and data."""
    import torch

    import lazyflow as lf
    from benchmarks.models import build

    rng = np.random.default_rng(0)
    xs = rng.standard_normal((batch, 784)).astype(np.float32)
    ys = rng.integers(0, 10, batch)

    def one(lib, tensor):  # the same step code for either library
        m = build(lib.nn, "mlp")
        opt = lib.optim.SGD(m.parameters(), lr=0.01)
        x, y = tensor(xs), tensor(ys)

        def step():
            lib.nn.functional.cross_entropy(m(x), y).backward()
            opt.step()
            opt.zero_grad()

        return step, m

    tstep, _ = one(torch, torch.from_numpy)
    lstep, lm = one(lf, lf.tensor)
    return lstep, tstep, lm


def bench_mlp_step(quick: bool) -> list[dict]:
    """Eager MLP 784-256-10 training step (forward, backward, SGD step) at batch 1 and 64, same model code."""
    import torch

    torch.set_num_threads(2)
    n, rep = (20, 3) if quick else (200, 9)
    rows = []
    for batch in (1, 64):
        lstep, tstep, _ = mlp_steps(batch)
        t = interleaved(dict(lazyflow=lstep, torch=tstep), number=n, repeat=rep, warmup=5)
        rows.append(dict(batch=batch, **t))
    return rows


def run(quick: bool = False) -> dict:
    rows = bench_dispatch(quick)
    print("Per-op dispatch on a cache hit (16x16 float32), median per call")
    print(
        table(
            [
                (
                    r["op"],
                    fmt_us(r["lazyflow"]),
                    fmt_us(r["jit"]),
                    fmt_us(r["jnp"]),
                    fmt_us(r["torch"]),
                    f"{r['lazyflow'] / r['jit']:.2f}x",
                    f"{r['lazyflow'] / r['jnp']:.2f}x",
                    f"{r['lazyflow'] / r['torch']:.2f}x",
                )
                for r in rows
            ],
            ["op", "lazyflow", "bare jax.jit", "jnp eager", "torch", "lf/jit", "lf/jnp", "lf/torch"],
        )
    )
    mlp = bench_mlp_step(quick)
    print("\nEager MLP 784-256-10 training step (forward, backward, SGD step), median")
    print(
        table(
            [
                (r["batch"], fmt_us(r["lazyflow"]), fmt_us(r["torch"]), f"{r['lazyflow'] / r['torch']:.2f}x")
                for r in mlp
            ],
            ["batch", "lazyflow", "torch", "lf/torch"],
        )
    )
    s = bench_setitem(quick)
    print(
        f"\nsetitem loop, {s['total']} updates: first 10k chunk {s['first_chunk'] * 1e3:.1f} ms, last "
        f"{s['last_chunk'] * 1e3:.1f} ms (last/first {s['last_chunk'] / s['first_chunk']:.2f}x); total "
        f"{s['lf_total']:.2f} s vs torch {s['torch_total']:.2f} s ({s['lf_total'] / s['torch_total']:.2f}x)"
    )
    return dict(dispatch=rows, mlp_step=mlp, setitem=s)


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--quick", action="store_true")
    run(p.parse_args().quick)
