"""Per-call overhead of compiled calls (issue 14): an ``lf.nn.Graph`` MLP training step and an ``lf.compile``'d MLP
forward against hand-written ``jax.jit`` of the same computation.

Three measures, because a shared box makes wall clock swing 1.5x between runs of one script:

* Python calls per call (cProfile; deterministic).
* The Python part alone: CPU time of the calling thread (``time.thread_time``) with the XLA programs replaced by
  stubs that return the first call's outputs, so only lazyflow's own work per call is left.
* Real calls, interleaved repeats (each repeat runs every candidate once): medians of wall time, calling-thread CPU
  time and process CPU time, and their ratios to ``jax.jit``.

Run: ``python -m benchmarks.call_overhead`` (run it in two checkouts, one after the other, to compare them).
"""

from __future__ import annotations

import cProfile
import os
import pstats
import statistics
import sys
import time

import numpy as np

from benchmarks.bench_graph import _inputs, _jax_mlp_step, _lf_steps, _mlp_forwards


def _interleaved(fns: dict, number: int = 100, repeat: int = 15) -> dict:
    for f in fns.values():
        for _ in range(20):
            f()
    res = {k: ([], [], []) for k in fns}
    for _ in range(repeat):
        for k, f in fns.items():
            w, t, p = time.perf_counter(), time.thread_time(), time.process_time()
            for _ in range(number):
                f()
            res[k][0].append((time.perf_counter() - w) / number)
            res[k][1].append((time.thread_time() - t) / number)
            res[k][2].append((time.process_time() - p) / number)
    return {k: [statistics.median(v) * 1e6 for v in r] for k, r in res.items()}


def _calls(fn, n: int = 50) -> float:
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(n):
        fn()
    pr.disable()
    return pstats.Stats(pr).total_calls / n


def _stub(program) -> None:
    """Replace every variant's XLA programs by stubs returning the first call's outputs (no donation either)."""
    import jax.numpy as jnp

    compile_mod = sys.modules["lazyflow.graph.compile"]
    compile_mod.owned = lambda vals, holders=1: list(vals)
    for v in program._variants.values():
        if v.check is not None:
            ok = np.asarray(jnp.array([-1, 0], jnp.int32))
            v.check = (lambda *a: ok, v.check[1])
        held: dict = {}

        def kernel(*args, k=v.kernel, held=held):
            if "out" not in held:
                held["out"] = k(*args)
            return [list(x) if isinstance(x, list) else x for x in held["out"]]

        v.kernel = kernel


def _thread_median(fn, number: int = 300, repeat: int = 9) -> float:
    for _ in range(30):
        fn()
    runs = []
    for _ in range(repeat):
        t = time.thread_time()
        for _ in range(number):
            fn()
        runs.append((time.thread_time() - t) / number)
    return statistics.median(runs) * 1e6


def main() -> None:
    import lazyflow as lf

    print(f"load average at start: {os.getloadavg()}")
    for b in (1, 64):
        xs, ys = _inputs((b, 784), 10, np.random.default_rng(0))
        _, graph = _lf_steps("mlp", xs, ys, "sgd")
        jrun, _ = _jax_mlp_step(xs, ys)
        lf_fwd, jax_fwd = _mlp_forwards(xs)
        r = _interleaved({"jax.jit step": jrun, "Graph step": graph, "jax.jit fwd": jax_fwd, "lf.compile fwd": lf_fwd})
        for k, (w, t, p) in r.items():
            base = r["jax.jit step" if "step" in k else "jax.jit fwd"]
            print(
                f"mlp_b{b} {k:15s} wall {w:8.1f} us ({w / base[0]:.2f}x)  thread {t:7.1f} us ({t / base[1]:.2f}x)  "
                f"process {p:7.1f} us ({p / base[2]:.2f}x)"
            )
        print(f"mlp_b{b} Python calls per call: Graph step {_calls(graph):.0f}, lf.compile fwd {_calls(lf_fwd):.0f}")
        cells = {c.cell_contents for c in (graph.__closure__ or ()) if hasattr(c.cell_contents, "_program")}
        g = next(iter(cells))
        x, y = lf.tensor(xs), lf.tensor(ys)
        _stub(g._program)
        print(f"mlp_b{b} Graph step, Python part only (XLA stubbed): {_thread_median(lambda: g(x, y)):.1f} us")
    print(f"load average at end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
