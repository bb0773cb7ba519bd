"""Transformer-step A/B inside one process (issue 14): the ``lf.nn.Graph`` training step of the Transformer encoder
(and a small GPT) as lazyflow runs it (``on``), with lazyflow's glibc malloc defaults switched back to glibc's
(``malloc_off``, switched with ``mallopt`` around each of its steps), with an experimental backward rule for linear
(``wgrad_copy``: the weight gradient ``g^T @ x`` as a plain product of a materialised ``g^T``, which XLA:CPU runs
faster single-threaded but not on 2 threads -- BENCHMARKS.md, session 7), and torch eager -- called in turn, in a
fresh random order each round, so a shared, noisy machine slows all of them alike. Wall and process CPU time (user +
system) per step.

Run: ``python -m benchmarks.ab_transformer [--rounds N] [--only transformer,gpt] [--threads N]``
(``--threads 1`` also sets torch to one thread; pin the process with ``taskset -c 0`` to compare single-core work).
A standalone A/B tool, not a suite module.
"""

from __future__ import annotations

import argparse
import ctypes
import resource
import time

import numpy as np

from benchmarks import models

GPT_SMALL = dict(n_layer=2, n_head=4, n_embd=256, vocab_size=1024, block_size=128)
CASES = {"transformer": ("transformer", (8, 128), 1000), "gpt": ("gpt", (8, 128), 1024)}


def _build(nn, name):
    return models.gpt(nn, **GPT_SMALL) if name == "gpt" else models.build(nn, name)


def _graph_step(name, xs, ys):
    import lazyflow as lf

    F = lf.nn.functional
    lf.manual_seed(0)
    m = _build(lf.nn, name)

    class Step(lf.nn.Graph):
        def __init__(self):
            super().__init__()
            self.model = m
            self.add_optimizer(lf.optim.AdamW(m.parameters(), lr=1e-4))

        def build(self, x, y):
            out = self.model(x)
            loss = F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))
            loss.backward()
            return loss

    g, x, y = Step(), lf.tensor(xs), lf.tensor(ys)
    g(x, y)  # traced and compiled now, with the op table as it is at this moment
    return lambda: g(x, y).jax().block_until_ready()


def _torch_step(name, xs, ys):
    import torch

    torch.manual_seed(0)
    m = _build(torch.nn, name)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    x, y = torch.from_numpy(xs), torch.from_numpy(ys)

    def step():
        out = m(x)
        torch.nn.functional.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1)).backward()
        opt.step()
        opt.zero_grad()

    return step


def _wgrad_copy_rule(xs, out, g):
    import jax
    import jax.numpy as jnp
    from jax import lax

    x, w, b = xs
    if jnp.iscomplexobj(g) or w.ndim != 2:
        return jax.vjp(lambda x, w, b: jnp.matmul(x, w.T) + (0 if b is None else b), x, w, b)[1](g)
    g2 = g.reshape(-1, w.shape[0])
    dw = jnp.matmul(lax.optimization_barrier(g2.T), x.reshape(-1, w.shape[1]))
    return jnp.matmul(g, w), dw, (None if b is None else jnp.sum(g2, axis=0))


def _malloc_switch():
    from lazyflow._core import malloc

    applied = malloc.MALLOC_DEFAULTS_APPLIED
    libc = ctypes.CDLL("libc.so.6") if applied else None

    def glibc_defaults(on: bool):
        if libc is not None:  # glibc's own values (65536 mmaps, a 128 KiB trim threshold) or lazyflow's
            libc.mallopt(malloc.M_MMAP_MAX, 65536 if on else 0)
            libc.mallopt(malloc.M_TRIM_THRESHOLD, 128 * 1024 if on else applied["M_TRIM_THRESHOLD"])

    return glibc_defaults


def bench_case(key: str, rounds: int) -> dict:
    from lazyflow.graph import trace
    from lazyflow.ops.table import REGISTRY

    name, shape, vocab = CASES[key]
    rng = np.random.default_rng(0)
    xs, ys = rng.integers(0, vocab, shape), rng.integers(0, vocab, shape)
    linear = REGISTRY["linear"]
    rule = linear.bwd
    trace._specialized.cache_clear()  # the trace reads the record's rule when it specializes an op
    fns = {"on": _graph_step(name, xs, ys)}
    linear.bwd = _wgrad_copy_rule
    trace._specialized.cache_clear()
    try:
        fns["wgrad_copy"] = _graph_step(name, xs, ys)
    finally:
        linear.bwd = rule
        trace._specialized.cache_clear()
    switch = _malloc_switch()
    on_step = fns["on"]

    def malloc_off():
        switch(True)
        try:
            on_step()
        finally:
            switch(False)

    fns["malloc_off"] = malloc_off
    fns["torch"] = _torch_step(name, xs, ys)
    for f in fns.values():
        f()
        f()
    wall: dict = {k: [] for k in fns}
    cpu: dict = {k: [] for k in fns}
    keys = list(fns)
    order = np.random.default_rng(0)
    for _ in range(rounds):
        # a fresh order each round: a fixed cycle (even rotated) always puts the same variant right after torch,
        # whose OpenMP threads are still spinning then -- and process CPU time counts their spinning
        for k in order.permutation(keys):
            time.sleep(0.05)
            r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
            fns[k]()
            r1 = resource.getrusage(resource.RUSAGE_SELF)
            wall[k].append(time.perf_counter() - t0)
            cpu[k].append(r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime)
    w = {k: np.asarray(v) for k, v in wall.items()}
    c = {k: np.asarray(v) for k, v in cpu.items()}
    row: dict = {"case": key}
    for k in keys:
        row[k] = float(np.median(w[k]))
        row[k + "_cpu"] = float(np.median(c[k]))
    for k in ("on", "wgrad_copy", "malloc_off"):
        row[k + "/torch"] = float(np.median(w[k] / w["torch"]))
        row[k + "/torch_cpu"] = float(np.median(c[k] / c["torch"]))
    print(
        f"{key:12s} "
        + "  ".join(f"{k} {row[k] * 1e3:7.1f} ms (cpu {row[k + '_cpu'] * 1e3:6.1f})" for k in keys)
        + "\n             "
        + "  ".join(
            f"{k}/torch {row[k + '/torch']:.2f}x (cpu {row[k + '/torch_cpu']:.2f}x)"
            for k in ("on", "wgrad_copy", "malloc_off")
        ),
        flush=True,
    )
    return row


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=9)
    p.add_argument("--only", default="transformer,gpt")
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    a = p.parse_args()
    if a.threads:
        import torch

        torch.set_num_threads(a.threads)
    for key in a.only.split(","):
        bench_case(key, a.rounds)


if __name__ == "__main__":
    main()
