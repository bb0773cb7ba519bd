"""Eager per-call overhead, split (issue 14): cache-hit dispatch vs a bare ``jax.jit`` call, the setitem loop's
update vs a bare donated ``jax.jit`` update, and the Python part of each (the cached kernel replaced by a no-op).

Timings are calling-thread CPU time (``time.process_time`` on this single-threaded dispatch path), medians of
interleaved rounds in one process, with the median of per-round ratios beside them: on a shared box only in-process
ratios are comparable between runs. Run it once per checkout to compare two trees:

    PYTHONPATH=<tree> python -m benchmarks.ab_dispatch
"""

from __future__ import annotations

import statistics
import time

import numpy as np


def _per_call(fn, n: int) -> float:
    t0 = time.process_time()
    for _ in range(n):
        fn()
    return (time.process_time() - t0) / n * 1e6


def _rounds(cases: dict, n: int, rounds: int) -> dict:
    res = {k: [] for k in cases}
    for f in cases.values():
        _per_call(f, max(n // 10, 1))
    for _ in range(rounds):
        for k, f in cases.items():
            res[k].append(_per_call(f, n))
    return res


def dispatch(rounds: int = 15) -> None:
    import jax
    import jax.numpy as jnp

    import lazyflow as lf

    a_np = np.random.default_rng(0).standard_normal((16, 16)).astype(np.float32)
    a, b = lf.tensor(a_np), lf.tensor(a_np + 1)
    ja, jb = jnp.asarray(a_np), jnp.asarray(a_np + 1)
    jadd, jmul, jmm = jax.jit(lambda x, y: x + y), jax.jit(lambda x, y: x * y), jax.jit(jnp.matmul)
    jrelu, jsum = jax.jit(jax.nn.relu), jax.jit(jnp.sum)
    cases = {
        "add": (lambda: a + b, lambda: jadd(ja, jb)),
        "mul": (lambda: a * b, lambda: jmul(ja, jb)),
        "relu": (lambda: lf.relu(a), lambda: jrelu(ja)),
        "sum": (lambda: a.sum(), lambda: jsum(ja)),
        "matmul": (lambda: a @ b, lambda: jmm(ja, jb)),
    }
    print("cache-hit dispatch (16x16 float32), us per call: lazyflow / bare jax.jit / median of round ratios")
    for name, (lff, jf) in cases.items():
        r = _rounds({"lf": lff, "jit": jf}, 2000, rounds)
        ratio = statistics.median(x / y for x, y in zip(r["lf"], r["jit"]))
        print(f"  {name:7s} {statistics.median(r['lf']):6.2f} / {statistics.median(r['jit']):6.2f}  {ratio:.3f}x")


def setitem(rounds: int = 7, n: int = 10000) -> None:
    import jax
    import jax.numpy as jnp

    import lazyflow as lf

    total = 690_000
    v, o = lf.rand(total, 1), lf.ones(1)
    st = {"x": jnp.zeros((total, 1), jnp.float32)}
    jo = o.jax()
    upd = jax.jit(lambda x, i, y: jax.lax.dynamic_update_slice(x, y[None, :], (i, 0)), donate_argnums=0)
    pos = {"lf": 0, "jit": 0}

    def lf_loop():
        i = pos["lf"]
        v[i] = o
        pos["lf"] = (i + 1) % total

    def jit_loop():
        i = pos["jit"]
        st["x"] = upd(st["x"], i, jo)
        pos["jit"] = (i + 1) % total

    r = _rounds({"lf": lf_loop, "jit": jit_loop}, n, rounds)
    ratio = statistics.median(x / y for x, y in zip(r["lf"], r["jit"]))
    print(
        f"setitem v[i] = ones(1) into a {total}x1 tensor, us per update: lazyflow {statistics.median(r['lf']):.2f}"
        f" / bare donated jax.jit {statistics.median(r['jit']):.2f}  {ratio:.3f}x"
    )


def python_part(rounds: int = 9) -> None:
    """The eager cache-hit path with every cached kernel replaced by a no-op returning its first operand."""
    import lazyflow as lf
    from lazyflow.eager import cache as C

    v, o = lf.rand(1000, 1), lf.ones(1)
    a, b = lf.rand(16, 16), lf.rand(16, 16)
    v[0] = o
    a + b
    lf.relu(a)
    for table in C._tables.values():
        for k, e in table.items():
            if k[0].name in ("setitem", "add", "relu"):
                e.kernel = lambda x, *rest: x
    pos = [0]

    def set_one():
        i = pos[0]
        v[i] = o
        pos[0] = (i + 1) % 1000

    r = _rounds({"setitem": set_one, "add": lambda: a + b, "relu": lambda: lf.relu(a)}, 20000, rounds)
    print(
        "Python part alone (kernels stubbed), us per call: "
        + ", ".join(f"{k} {statistics.median(x):.2f}" for k, x in r.items())
    )


if __name__ == "__main__":
    dispatch()
    setitem()
    python_part()
