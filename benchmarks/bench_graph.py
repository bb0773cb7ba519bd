"""Training-step benchmarks (issues 3 and 4): lazyflow eager and lf.nn.Graph against torch eager, torch.compile and
a hand-written jax.jit step, on the same model code (benchmarks/models.py) and data, measured in one run. The MLP's
jax.jit step is written here (``_jax_mlp_step``, also timed for its first call); every other model's is
benchmarks/jax_models.py (checked against torch by tests/test_bench_references.py).

Run: ``python -m benchmarks.bench_graph [--quick] [--only mlp,small_cnn,...]``.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import time

import numpy as np

from benchmarks._util import fmt_ms, interleaved, table, timeit
from benchmarks.models import build

# model -> (batch shapes, optimizer, number of classes / vocab)
CASES = {
    "mlp_b1": ("mlp", (1, 784), "sgd", 10),
    "mlp_b64": ("mlp", (64, 784), "sgd", 10),
    "small_cnn": ("small_cnn", (32, 3, 32, 32), "sgd", 10),
    "transformer": ("transformer", (8, 128), "adamw", 1000),
    "resnet18_224": ("resnet18", (2, 3, 224, 224), "sgd", 1000),
    "resnet18_64": ("resnet18", (8, 3, 64, 64), "sgd", 1000),
    "resnet50_224": ("resnet50", (2, 3, 224, 224), "sgd", 1000),
    "resnet50_64": ("resnet50", (8, 3, 64, 64), "sgd", 1000),
}


def _inputs(shape, classes, rng):
    if len(shape) == 2 and classes == 1000 and shape[1] == 128:  # token ids
        x = rng.integers(0, classes, shape)
        y = rng.integers(0, classes, shape)
    else:
        x = rng.standard_normal(shape).astype(np.float32)
        y = rng.integers(0, classes, shape[0])
    return x, y


def _torch_step(name, xs, ys, opt_name):
    import torch

    torch.manual_seed(0)
    m = build(torch.nn, name)
    opt = (
        torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9)
        if opt_name == "sgd"
        else torch.optim.AdamW(m.parameters(), lr=1e-4)
    )
    x, y = torch.from_numpy(xs), torch.from_numpy(ys)

    def step(model=m):
        out = model(x)
        loss = torch.nn.functional.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad()

    return m, opt, step, x, y


def _lf_steps(name, xs, ys, opt_name):
    import lazyflow as lf

    lf.manual_seed(0)
    m = build(lf.nn, name)
    mk = (
        (lambda p: lf.optim.SGD(p, lr=0.01, momentum=0.9))
        if opt_name == "sgd"
        else (lambda p: lf.optim.AdamW(p, lr=1e-4))
    )
    opt = mk(m.parameters())
    x, y = lf.tensor(xs), lf.tensor(ys)
    F = lf.nn.functional

    def eager():
        out = m(x)
        loss = F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad()

    class Step(lf.nn.Graph):
        def __init__(self, model, o):
            super().__init__()
            self.model = model
            self.add_optimizer(o)

        def build(self, x, y):
            out = self.model(x)
            loss = F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))
            loss.backward()
            return loss

    gm = build(lf.nn, name)
    gopt = mk(gm.parameters())
    g = Step(gm, gopt)

    def graph():
        g(x, y).jax().block_until_ready()

    return eager, graph


def _jax_mlp_step(xs, ys, compile_now: bool = True):
    """A hand-written jax.jit MLP step (the reference lazyflow's Graph is held to), and the seconds its ahead-of-time
    compile took (``compile_now``; else 0: the first call compiles)."""
    import jax
    import jax.numpy as jnp

    rng = np.random.default_rng(0)
    params = {
        "w1": jnp.asarray(rng.standard_normal((256, 784)).astype(np.float32) * 0.03),
        "b1": jnp.zeros(256, jnp.float32),
        "w2": jnp.asarray(rng.standard_normal((10, 256)).astype(np.float32) * 0.06),
        "b2": jnp.zeros(10, jnp.float32),
    }
    mom = jax.tree_util.tree_map(jnp.zeros_like, params)

    def loss_fn(p, x, y):
        h = jnp.maximum(x @ p["w1"].T + p["b1"], 0)
        logits = h @ p["w2"].T + p["b2"]
        return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), y[:, None], 1))

    @jax.jit
    def step(p, m, x, y):
        loss, g = jax.value_and_grad(loss_fn)(p, x, y)
        m = jax.tree_util.tree_map(lambda a, b: 0.9 * a + b, m, g)
        p = jax.tree_util.tree_map(lambda a, b: a - 0.01 * b, p, m)
        return p, m, loss

    x, y = jnp.asarray(xs), jnp.asarray(ys)
    state = {"p": params, "m": mom}

    def run():
        state["p"], state["m"], loss = step(state["p"], state["m"], x, y)
        loss.block_until_ready()

    if not compile_now:
        return run, 0.0
    t0 = time.perf_counter()
    step.lower(params, mom, x, y).compile()
    compile_s = time.perf_counter() - t0
    return run, compile_s


def _mlp_forwards(xs):
    """The MLP's forward (inference, no gradients) as ``lf.compile(model)`` and as ``jax.jit`` of the same function
    of the same arrays: the per-call overhead of a compiled forward (issue 14: <= 1.1x)."""
    import jax
    import jax.numpy as jnp

    import lazyflow as lf

    lf.manual_seed(0)
    m = build(lf.nn, "mlp")
    cm = lf.compile(m)
    x = lf.tensor(xs)
    w1, b1, w2, b2 = (p.jax() for p in m.parameters())
    xj = x.jax()
    jf = jax.jit(lambda w1, b1, w2, b2, x: jnp.maximum(x @ w1.T + b1, 0) @ w2.T + b2)

    def lf_fwd():
        with lf.no_grad():
            cm(x).jax().block_until_ready()

    def jax_fwd():
        jf(w1, b1, w2, b2, xj).block_until_ready()

    return lf_fwd, jax_fwd


def bench_case(key, quick: bool, with_torch_compile: bool) -> dict:
    name, shape, opt_name, classes = CASES[key]
    rng = np.random.default_rng(0)
    xs, ys = _inputs(shape, classes, rng)
    heavy = name.startswith("resnet") or name == "transformer"
    number, repeat = (1, 3) if (quick or heavy) else (20, 7)
    if quick:
        repeat = 2
    elif name == "mlp":
        repeat = 15  # ~1 ms per call: more rounds cost little and steady the medians
    res = {"case": key}
    tmodel, _, tstep, _, _ = _torch_step(name, xs, ys, opt_name)
    eager, graph = _lf_steps(name, xs, ys, opt_name)
    t0 = time.perf_counter()
    graph()
    res["lf_graph_first_call_s"] = time.perf_counter() - t0
    fns = {"torch": tstep, "lf_graph": graph}
    if not heavy or not quick:
        fns["lf_eager"] = eager
    if name == "mlp":
        jrun, jcompile = _jax_mlp_step(xs, ys)
        res["jax_jit_compile_s"] = jcompile
        lf_fwd, jax_fwd = _mlp_forwards(xs)
        fns.update(jax_jit=jrun, lf_compile_fwd=lf_fwd, jax_jit_fwd=jax_fwd)
    else:  # the hand-written jax.jit step of the same model (benchmarks/jax_models.py), on the torch model's weights
        from benchmarks.jax_models import jit_step

        fns["jax_jit"], res["jax_jit_aot_compile_s"] = jit_step(name, opt_name, tmodel, xs, ys)
    # every contestant in one process, in alternating rounds (benchmarks._util.interleaved): each round is preceded
    # by the contestant's own untimed calls, so torch's OpenMP threads spinning after its last op, or another
    # model's data in the caches, cost whoever runs next nothing in its timing
    res.update(
        interleaved(fns, number=number, repeat=repeat, warmup=1 if heavy else 3, settle_s=None if heavy else 0.01)
    )
    if with_torch_compile:
        # last, and alone: once torch.compile has run, the process is not the same for the others (measured here:
        # lf.compile's and jax.jit's MLP forward took 1.3-1.6x longer afterwards, process CPU above wall clock)
        import torch

        tm, _, tstep2, _, _ = _torch_step(name, xs, ys, opt_name)
        ctm = torch.compile(tm)
        t0 = time.perf_counter()
        tstep2(ctm)
        if name == "mlp":  # compared with the first Graph call, which only the MLP measures in fresh processes
            res["torch_compile_first_call_s"] = time.perf_counter() - t0
        res["torch_compile"] = timeit(lambda: tstep2(ctm), number=number, repeat=repeat)
    return res


def _first_call(which: str, key: str) -> float:
    """Seconds of the first training step in this (fresh) process: trace + compile + run, lazyflow's ``nn.Graph``
    (``which="lf"``) or the hand-written ``jax.jit`` step (``"jit"``); models, data and optimizer state are built
    (and construction's background work done) before the clock starts."""
    name, shape, opt_name, classes = CASES[key]
    xs, ys = _inputs(shape, classes, np.random.default_rng(0))
    if which == "lf":
        _, run = _lf_steps(name, xs, ys, opt_name)
        from lazyflow import _sample

        for f in _sample._COMPILING:  # model construction's background compile (its init sampler) ends first
            f.result()
    else:
        run, _ = _jax_mlp_step(xs, ys, compile_now=False)
    t0 = time.perf_counter()
    run()
    return time.perf_counter() - t0


def _first_calls(key: str, rounds: int = 3) -> tuple[float, float]:
    """Medians of :func:`_first_call` for lazyflow and jax.jit, each in its own fresh process with every compile
    cache off (lazyflow's and JAX's), in alternating order: a compile in a process where another compile already ran
    is cheaper (XLA's and LLVM's one-time start-up is paid), so the two must never share one."""
    env = {"LAZYFLOW_COMPILE_CACHE": "0", "JAX_ENABLE_COMPILATION_CACHE": "false"}
    saved = {k: os.environ.get(k) for k in (*env, "JAX_COMPILATION_CACHE_DIR")}
    os.environ.update(env)
    os.environ.pop("JAX_COMPILATION_CACHE_DIR", None)
    times: dict[str, list[float]] = {"lf": [], "jit": []}
    try:
        for i in range(rounds):
            for which in ("lf", "jit") if i % 2 == 0 else ("jit", "lf"):
                with multiprocessing.get_context("spawn").Pool(1) as pool:
                    times[which].append(pool.apply(_first_call, (which, key)))
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return statistics.median(times["lf"]), statistics.median(times["jit"])


def _fresh(key: str, quick: bool, with_torch_compile: bool) -> dict:
    """:func:`bench_case` in a fresh interpreter (spawned: forking a process that runs JAX hangs), so no case runs
    in a process an earlier case changed (torch.compile's compiler loaded, caches, allocator state)."""
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        return pool.apply(bench_case, (key, quick, with_torch_compile))


def run(quick: bool = False, only=None, with_torch_compile: bool = True) -> list[dict]:
    keys = [k for k in CASES if only is None or k in only or CASES[k][0] in only]
    if quick:
        keys = [k for k in keys if k in ("mlp_b1", "mlp_b64", "small_cnn")] or keys[:1]
    # a smoke run (quick) stays in this process: its numbers are not compared, and CI runs it
    rows = [(bench_case if quick else _fresh)(k, quick, with_torch_compile and not quick) for k in keys]
    if not quick:  # first calls: each in a fresh process of its own, no compile cache (see _first_calls)
        for r in rows:
            if "jax_jit_compile_s" in r:
                r["lf_graph_first_call_s"], r["jax_jit_compile_s"] = _first_calls(r["case"])
                r["first_calls_fresh"] = True
    out = []
    for r in rows:
        t = r["torch"]
        out.append(
            (
                r["case"],
                fmt_ms(t),
                fmt_ms(r.get("lf_eager", float("nan"))),
                fmt_ms(r["lf_graph"]),
                fmt_ms(r.get("jax_jit", float("nan"))),
                fmt_ms(r.get("torch_compile", float("nan"))),
                f"{t / r['lf_graph']:.2f}x",
                f"{t / r.get('lf_eager', float('nan')):.2f}x",
                f"{r['lf_graph'] / r['jax_jit']:.2f}x" if "jax_jit" in r else "-",
            )
        )
    print("Training step, median time (speed-up = torch eager time / lazyflow time)")
    print(
        table(
            out,
            [
                "case",
                "torch eager",
                "lf eager",
                "lf Graph",
                "jax.jit",
                "torch.compile",
                "Graph speed-up",
                "eager speed-up",
                "Graph/jax.jit",
            ],
        )
    )
    for r in rows:
        if "jax_jit_compile_s" in r:
            print(
                f"{r['case']}: first Graph call {r['lf_graph_first_call_s']:.2f} s (trace+compile+run) vs jax.jit "
                f"{'first call' if r.get('first_calls_fresh') else 'compile'} {r['jax_jit_compile_s']:.2f} s"
                + (" (each in a fresh process, no compile cache)" if r.get("first_calls_fresh") else "")
                + (
                    f" vs torch.compile first call {r['torch_compile_first_call_s']:.2f} s"
                    if "torch_compile_first_call_s" in r
                    else ""
                )
            )
    return rows


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--quick", action="store_true")
    p.add_argument("--only", default=None)
    p.add_argument("--no-torch-compile", action="store_true")
    a = p.parse_args()
    run(a.quick, a.only.split(",") if a.only else None, not a.no_torch_compile)
