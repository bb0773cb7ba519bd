"""Activation checkpointing (issue 16): a 12-layer GPT training step with and without ``lf.utils.checkpoint``.

Run: ``python -m benchmarks.bench_checkpointing [--quick]``. Each GPT block runs under ``checkpoint`` in the
checkpointed model (the same parameters). Medians over repeats, both variants timed side by side in this process.

* eager: the step's time, the bytes the tape holds after the forward (every buffer a tape node keeps, parameters
  excluded) and the bytes of all live JAX arrays at that point (parameters included);
* compiled (``jax.jit(jax.value_and_grad(functional_call))``, the program ``lf.compile`` builds for the model): the
  step's time, the bytes JAX saves from the forward for the backward (``print_saved_residuals``, parameters
  excluded) and XLA's ``memory_analysis().temp_size_in_bytes``.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import io
import math
import re
import statistics
import time

import jax
import jax.numpy as jnp
from jax.ad_checkpoint import print_saved_residuals

import lazyflow as lf
from benchmarks.models import gpt
from lazyflow.func import functional_call
from lazyflow.utils.checkpoint import checkpoint
from lazyflow.utils.jax import to_jax
from lazyflow.utils.scan import ScanLayers


class Checkpointed(lf.nn.Module):
    def __init__(self, block):
        super().__init__()
        self.block = block

    def forward(self, x):
        return checkpoint(self.block, x, use_reentrant=False)


def build(ckpt: bool | str, cfg: dict):
    """``ckpt``: False (plain), True (every block checkpointed), "scan" / "scan_ckpt" (the blocks as one
    ``ScanLayers``, checkpointed or not; same state_dict keys)."""
    lf.manual_seed(0)
    model = gpt(lf.nn, **cfg)
    tr = model.transformer
    if ckpt is True:
        tr.h = lf.nn.ModuleList([Checkpointed(b) for b in tr.h])
    elif ckpt in ("scan", "scan_ckpt"):
        tr.h = ScanLayers(list(tr.h), checkpoint=ckpt == "scan_ckpt")

        def forward(idx):  # nanoGPT's forward, with the blocks called as one module
            pos = tr.wpe.weight[: idx.shape[1]]
            return model.lm_head(tr.ln_f(tr.h(tr.drop(tr.wte(idx) + pos))))

        object.__setattr__(model, "forward", forward)
    return model


def loss_fn(model, idx, tgt):
    logits = model(idx)
    return lf.nn.functional.cross_entropy(logits.view(-1, logits.shape[-1]), tgt.view(-1))


def tape_bytes(t) -> int:
    params = {id(p._value) for p in _model_params}
    seen, bufs, stack = set(), {}, [t.grad_fn]
    while stack:
        n = stack.pop()
        if n is None or id(n) in seen:
            continue
        seen.add(id(n))
        for a in n.inputs or ():
            v = getattr(a, "_value", None)
            if v is not None and id(v) not in params and hasattr(v, "nbytes"):
                bufs[id(v)] = v.nbytes
        stack.extend(e[0] for e in n.edges if e is not None)
    return sum(bufs.values())


_model_params: list = []


def eager_case(ckpt, cfg, idx, tgt, repeat):
    global _model_params
    model = build(ckpt, cfg)
    _model_params = list(model.parameters())
    opt = lf.optim.SGD(model.parameters(), lr=1e-3)
    times, held, live = [], 0, 0
    for i in range(repeat + 1):
        gc.collect()
        t0 = time.perf_counter()
        opt.zero_grad()
        loss = loss_fn(model, idx, tgt)
        if i == 0:
            held = tape_bytes(loss)
            gc.collect()
            live = sum(a.nbytes for a in jax.live_arrays())
        loss.backward()
        opt.step()
        loss.item()
        if i:
            times.append(time.perf_counter() - t0)
    del model, opt, loss
    _model_params = []
    gc.collect()
    return statistics.median(times), held, live


def residual_bytes(f, *args) -> int:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        print_saved_residuals(f, *args)
    total = 0
    for line in buf.getvalue().splitlines():
        m = re.match(r"(f32|f64|i32|i64|bool|u32)\[([\d,]*)\]", line)
        if m and "argument" not in line:
            n = math.prod(int(d) for d in m.group(2).split(",") if d)
            total += n * {"f64": 8, "i64": 8, "bool": 1}.get(m.group(1), 4)
    return total


def graph_case(ckpt, cfg, idx, tgt, repeat):
    model = build(ckpt, cfg)
    p = to_jax(dict(model.named_parameters()))
    ji, jt = idx.jax(), tgt.jax()

    def loss(p, i, t):
        logits = functional_call(model, p, (i,))
        logp = jax.nn.log_softmax(logits.reshape(-1, logits.shape[-1]))
        return -jnp.take_along_axis(logp, t.reshape(-1, 1), 1).mean()

    def step(p, i, t):
        val, g = jax.value_and_grad(loss)(p, i, t)
        return val, jax.tree_util.tree_map(lambda a, b: a - 1e-3 * b, p, g)

    t0 = time.perf_counter()
    compiled = jax.jit(step).lower(p, ji, jt).compile()  # trace + lower + XLA compile
    compile_s = time.perf_counter() - t0
    temp = compiled.memory_analysis().temp_size_in_bytes
    saved = residual_bytes(loss, p, ji, jt)
    times = []
    for i in range(repeat + 1):
        t0 = time.perf_counter()
        val, p = compiled(p, ji, jt)
        val.block_until_ready()
        if i:
            times.append(time.perf_counter() - t0)
    return statistics.median(times), saved, temp, compile_s


def compile_times(variant, cfg, idx, tgt):
    """(trace + lower seconds, XLA compile seconds) of the compiled step, the compile cache off."""
    model = build(variant, cfg)
    p = to_jax(dict(model.named_parameters()))

    def step(p, i, t):
        def loss(p):
            logits = functional_call(model, p, (i,))
            logp = jax.nn.log_softmax(logits.reshape(-1, logits.shape[-1]))
            return -jnp.take_along_axis(logp, t.reshape(-1, 1), 1).mean()

        return jax.value_and_grad(loss)(p)

    t0 = time.perf_counter()
    lowered = jax.jit(step).lower(p, idx.jax(), tgt.jax())
    t1 = time.perf_counter()
    lowered.compile()
    return t1 - t0, time.perf_counter() - t1


def run(quick: bool = False):
    lf.config.set_compile_cache(False)  # every compile is a real one (a cache hit would time a disk read)
    cfg = dict(n_layer=12, n_head=4, n_embd=128, vocab_size=1024, block_size=256)
    if quick:  # a smoke run: a smaller model, the same code paths (the scanned step's run is skipped)
        cfg.update(n_layer=2, n_embd=16, vocab_size=64, block_size=16)
    b, t = (2, 8) if quick else (8, 256)
    repeat = 2 if quick else 5
    lf.manual_seed(1)
    idx = lf.randint(0, cfg["vocab_size"], (b, t))
    tgt = lf.randint(0, cfg["vocab_size"], (b, t))
    rows = []
    e_plain = eager_case(False, cfg, idx, tgt, repeat)
    e_ckpt = eager_case(True, cfg, idx, tgt, repeat)
    rows.append(
        dict(
            case=f"GPT {cfg['n_layer']}x{cfg['n_embd']} b{b}x{t} eager step, checkpointed blocks",
            versus="same step without checkpointing",
            lf=e_ckpt[0],
            ref=e_plain[0],
            note=(
                f"tape holds {e_ckpt[1] / 2**20:.1f} MiB vs {e_plain[1] / 2**20:.1f} MiB; live JAX arrays after the "
                f"forward {e_ckpt[2] / 2**20:.1f} MiB vs {e_plain[2] / 2**20:.1f} MiB"
            ),
        )
    )
    g_plain = graph_case(False, cfg, idx, tgt, repeat)
    g_ckpt = graph_case(True, cfg, idx, tgt, repeat)
    rows.append(
        dict(
            case=f"GPT {cfg['n_layer']}x{cfg['n_embd']} b{b}x{t} compiled step, checkpointed blocks",
            versus="same step without checkpointing",
            lf=g_ckpt[0],
            ref=g_plain[0],
            note=(
                f"saved residuals {g_ckpt[1] / 2**20:.1f} MiB vs {g_plain[1] / 2**20:.1f} MiB; XLA temp "
                f"{g_ckpt[2] / 2**20:.1f} MiB vs {g_plain[2] / 2**20:.1f} MiB; compile {g_ckpt[3]:.1f} s vs "
                f"{g_plain[3]:.1f} s"
            ),
        )
    )
    # compile time: the variants alternate, medians over rounds (the box is shared)
    # quick (the smoke test, the suite's time): the compile-time rows are left out (three cache-off compiles)
    variants = () if quick else (False, "scan", "scan_ckpt")
    timings: dict = {v: [] for v in variants}
    for _ in range(3):
        for v in variants:
            timings[v].append(compile_times(v, cfg, idx, tgt))
    med = {v: (statistics.median(a for a, _ in ts), statistics.median(b for _, b in ts)) for v, ts in timings.items()}
    for variant, label in (("scan", "ScanLayers"), ("scan_ckpt", "ScanLayers(checkpoint=True)")):
        if variant not in med:
            continue
        g_scan = graph_case(variant, cfg, idx, tgt, repeat)
        rows.append(
            dict(
                case=f"GPT {cfg['n_layer']}x{cfg['n_embd']} compiled step: trace+lower+compile, blocks as {label}",
                versus="the same with a ModuleList loop",
                lf=sum(med[variant]),
                ref=sum(med[False]),
                note=(
                    f"trace+lower {med[variant][0]:.1f} s vs {med[False][0]:.1f} s, "
                    f"XLA compile {med[variant][1]:.1f} s vs {med[False][1]:.1f} s; "
                    f"step {g_scan[0] * 1e3:.0f} ms vs {g_plain[0] * 1e3:.0f} ms; saved "
                    f"residuals {g_scan[1] / 2**20:.1f} MiB vs {g_plain[1] / 2**20:.1f} MiB; "
                    f"XLA temp {g_scan[2] / 2**20:.1f} MiB vs {g_plain[2] / 2**20:.1f} MiB"
                ),
            )
        )
    return rows


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    for r in run(a.quick):
        print(
            f"{r['case']}: {r['lf'] * 1e3:.1f} ms vs {r['ref'] * 1e3:.1f} ms ({r['lf'] / r['ref']:.2f}x); {r['note']}"
        )
