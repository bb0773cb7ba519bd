"""Optimizer step (issue 3, section 7): lf.optim vs torch.optim (foreach) on ResNet-50-shaped parameters.

Run: ``python -m benchmarks.bench_optim [--quick]``.

161 float32 parameters with ResNet-50's shapes (25.6 M values; the list is written below, no torch needed),
gradients set once. Cases: SGD(lr=0.1, momentum=0.9) and Adam(lr=1e-3). ``step()`` times are medians over
repeats, measured alternately for lazyflow and torch in the same process; torch runs its ``foreach``
implementation (the target: lazyflow <= 1.0x its time) and, for reference, its default single-tensor loop
(the CPU default). torch's reference time is its faster of 1 and 2 intra-op threads (on a busy 2-core
machine its second thread can make it several times slower). lazyflow's first step (tracing + XLA
compilation of the group's update, paid once per process and shape set) is reported separately.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import time

import numpy as np

from benchmarks._util import table


def resnet50_shapes() -> list[tuple[int, ...]]:
    """The 161 parameter shapes of torchvision's ResNet-50, in ``named_parameters()`` order."""
    shapes = [(64, 3, 7, 7), (64,), (64,)]  # conv1, bn1
    inplanes = 64
    for planes, blocks in zip((64, 128, 256, 512), (3, 4, 6, 3)):
        for b in range(blocks):
            shapes += [
                (planes, inplanes, 1, 1),
                (planes,),
                (planes,),
                (planes, planes, 3, 3),
                (planes,),
                (planes,),
                (planes * 4, planes, 1, 1),
                (planes * 4,),
                (planes * 4,),
            ]
            if b == 0:  # downsample: conv + bn
                shapes += [(planes * 4, inplanes, 1, 1), (planes * 4,), (planes * 4,)]
            inplanes = planes * 4
    shapes += [(1000, 2048), (1000,)]  # fc
    return shapes


def _block(t) -> None:
    import jax

    jax.block_until_ready(t._value)


def _median_step(step, sync, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        step()
        sync()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def run(quick: bool = False) -> dict:
    """Time one ``step()`` of SGD-momentum and Adam over ResNet-50-shaped parameters.

    Args:
        quick: fewer repeats (smoke runs).
    Returns:
        ``{"cases": [{"case", "lf", "torch_foreach", "torch_single", "ratio", "lf_first_step"}], ...}``,
        times in seconds per step.
    """
    import jax
    import torch

    import lazyflow as lf

    shapes = resnet50_shapes()
    assert len(shapes) == 161
    if quick:  # a smoke run (the suite's time): the first 32 tensors, the same code paths
        shapes = shapes[:32]
    rng = np.random.default_rng(0)
    init = [rng.standard_normal(s, dtype=np.float32) * 0.05 for s in shapes]
    grads = [rng.standard_normal(s, dtype=np.float32) * 1e-3 for s in shapes]
    repeat = 3 if quick else 15
    cases = []
    for name, kwargs in (("SGD", {"lr": 0.1, "momentum": 0.9}), ("Adam", {"lr": 1e-3})):
        lp = [lf.tensor(a, requires_grad=True) for a in init]
        for p, g in zip(lp, grads):
            p.grad = lf.tensor(g)
        lo = getattr(lf.optim, name)(lp, **kwargs)
        t0 = time.perf_counter()
        lo.step()
        jax.block_until_ready(lp[-1]._value)
        first = time.perf_counter() - t0
        lo.step()  # the steady-state program (SGD's second step has momentum buffers)
        tp = [torch.tensor(a, requires_grad=True) for a in init]
        for p, g in zip(tp, grads):
            p.grad = torch.tensor(g)
        tf = getattr(torch.optim, name)(tp, foreach=True, **kwargs)
        ts = getattr(torch.optim, name)(tp, foreach=False, **kwargs)  # same tensors: only the timing matters
        for opt in (tf, tf, ts, ts):
            opt.step()
        lf_times, ts_times = [], []
        tf_times: dict[int, list] = {1: [], 2: []}
        sync = functools.partial(_block, lp[-1])
        for _ in range(3):  # alternate in rounds so both see the same machine load
            lf_times.append(_median_step(lo.step, sync, repeat))
            for threads in tf_times:
                torch.set_num_threads(threads)
                tf_times[threads].append(_median_step(tf.step, lambda: None, repeat))
            torch.set_num_threads(1)
            ts_times.append(_median_step(ts.step, lambda: None, max(1, repeat // 3)))
        foreach = {t: statistics.median(v) for t, v in tf_times.items()}
        best = min(foreach, key=foreach.get)
        row = {
            "case": f"{name}({', '.join(f'{k}={v}' for k, v in kwargs.items())}) step, ResNet-50 params",
            "lf": statistics.median(lf_times),
            "torch_foreach": foreach[best],
            "torch_foreach_threads": best,
            "torch_foreach_1_thread": foreach[1],
            "torch_foreach_2_threads": foreach[2],
            "torch_single": statistics.median(ts_times),
            "lf_first_step": first,
        }
        row["ratio"] = row["lf"] / row["torch_foreach"]
        cases.append(row)
        del lo, lp, tf, ts, tp, sync
    rows = [
        (
            c["case"],
            f"{c['lf'] * 1e3:.1f} ms",
            f"{c['torch_foreach'] * 1e3:.1f} ms ({c['torch_foreach_threads']} thr)",
            f"{c['torch_single'] * 1e3:.1f} ms",
            f"{c['ratio']:.2f}x",
            f"{c['lf_first_step']:.2f} s",
        )
        for c in cases
    ]
    print(
        table(
            rows,
            ["case", "lazyflow", "torch foreach", "torch single-tensor", "lf / foreach", "lf first step (compile)"],
        )
    )
    print("(target: lf / torch foreach <= 1.0x; medians of per-step times)")
    return {
        "cases": cases,
        "num_params": len(shapes),
        "numel": int(sum(np.prod(s) for s in shapes)),
        "target_ratio_at_most": 1.0,
    }


def _main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    run(parser.parse_args().quick)


if __name__ == "__main__":
    _main()
