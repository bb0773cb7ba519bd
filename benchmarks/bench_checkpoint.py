"""Checkpoint benchmarks (issue 5): lf.save/lf.load against torch.save/torch.load and the disk, in one run.

Run: ``python -m benchmarks.bench_checkpoint [--quick]``. Every number is a median over repeats; the
ratios compare measurements taken side by side in this process, on the same temporary directory.

* ResNet-50 parameters (161 arrays, 102 MB, shapes written below: no torch needed to build them) plus an
  SGD-momentum state dict (161 more): ``lf.save`` + ``lf.load`` vs ``torch.save`` + ``torch.load``
  (target <= 1.0x), and orbax's default ``StandardCheckpointer`` for reference;
* 1000 small tensors (1024 float32 each): save + load vs torch (target <= 2x);
* one 400 MB tensor: save bandwidth vs ``dd conv=fdatasync`` measured now (target >= 0.8x), load
  bandwidth (target >= 1 GB/s);
* async save: time the call blocks vs a synchronous save of the same state (target <= 10%).

Note ``torch.save`` does not fsync (its bytes may sit in the page cache when it returns) while ``lf.save``
fsyncs every file before switching the checkpoint in: the comparison is conservative for lazyflow.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import tempfile
import time
from collections import OrderedDict

import numpy as np

from benchmarks._util import table


def resnet50_shapes() -> OrderedDict:
    """Parameter names and shapes of torchvision's ResNet-50 (Bottleneck blocks [3, 4, 6, 3])."""
    s = OrderedDict([("conv1.weight", (64, 3, 7, 7)), ("bn1.weight", (64,)), ("bn1.bias", (64,))])
    inp = 64
    for li, (width, blocks) in enumerate(zip([64, 128, 256, 512], [3, 4, 6, 3]), 1):
        for b in range(blocks):
            p = f"layer{li}.{b}."
            s[p + "conv1.weight"] = (width, inp, 1, 1)
            s[p + "bn1.weight"], s[p + "bn1.bias"] = (width,), (width,)
            s[p + "conv2.weight"] = (width, width, 3, 3)
            s[p + "bn2.weight"], s[p + "bn2.bias"] = (width,), (width,)
            s[p + "conv3.weight"] = (4 * width, width, 1, 1)
            s[p + "bn3.weight"], s[p + "bn3.bias"] = (4 * width,), (4 * width,)
            if b == 0:
                s[p + "downsample.0.weight"] = (4 * width, inp, 1, 1)
                s[p + "downsample.1.weight"], s[p + "downsample.1.bias"] = (4 * width,), (4 * width,)
            inp = 4 * width
    s["fc.weight"], s["fc.bias"] = (1000, 2048), (1000,)
    return s


def _training_state(make, rng) -> dict:
    """{"model": params, "optim": SGD-momentum state dict} built with ``make(np_array)``."""
    shapes = resnet50_shapes()
    model = OrderedDict((k, make(rng.standard_normal(s, dtype=np.float32))) for k, s in shapes.items())
    state = {
        i: {"momentum_buffer": make(rng.standard_normal(s, dtype=np.float32))} for i, s in enumerate(shapes.values())
    }
    groups = [
        {
            "lr": 0.1,
            "momentum": 0.9,
            "dampening": 0,
            "weight_decay": 1e-4,
            "nesterov": False,
            "maximize": False,
            "foreach": None,
            "differentiable": False,
            "fused": None,
            "params": list(range(len(shapes))),
        }
    ]
    return {"model": model, "optim": {"state": state, "param_groups": groups}, "epoch": 3}


def _median(fn, repeat: int) -> float:
    runs = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - t0)
    return statistics.median(runs)


def _pair(save, load, repeat: int) -> tuple[float, float]:
    save()  # warm-up (first-call compilation/imports)
    load()
    return _median(save, repeat), _median(load, repeat)


def dd_bandwidth(directory: str, nbytes: int) -> float:
    """Bytes/s of ``dd if=/dev/zero ... conv=fdatasync`` writing ``nbytes`` into ``directory``."""
    target = os.path.join(directory, "dd.bin")
    out = subprocess.run(
        ["dd", "if=/dev/zero", f"of={target}", "bs=4M", f"count={nbytes >> 22}", "conv=fdatasync"],
        capture_output=True,
        text=True,
        check=True,
    ).stderr
    os.unlink(target)
    m = re.search(r"copied, ([\d.]+) s", out)
    return (nbytes >> 22 << 22) / float(m.group(1))


def _case_resnet(root: str, repeat: int) -> tuple[dict, dict]:
    import jax
    import orbax.checkpoint as ocp
    import torch

    import lazyflow as lf

    lp, tp, op = (os.path.join(root, n) for n in ("lf", "torch.pt", "orbax"))
    lf_state = _training_state(lf.tensor, np.random.default_rng(0))
    t_state = _training_state(lambda a: torch.from_numpy(a.copy()), np.random.default_rng(0))
    ls, ll = _pair(lambda: lf.save(lf_state, lp), lambda: lf.load(lp), repeat)
    ts, tl = _pair(lambda: torch.save(t_state, tp), lambda: torch.load(tp), repeat)

    jax_state = {
        "model": {k: t.jax() for k, t in lf_state["model"].items()},
        "optim": {str(k): v["momentum_buffer"].jax() for k, v in lf_state["optim"]["state"].items()},
    }
    ockpt = ocp.StandardCheckpointer()

    def orbax_save():
        ockpt.save(op, jax_state, force=True)
        ockpt.wait_until_finished()

    abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, jax_state)
    os_, ol = _pair(orbax_save, lambda: jax.block_until_ready(ockpt.restore(op, abstract)), repeat)
    resnet = dict(
        lf_save=ls,
        lf_load=ll,
        torch_save=ts,
        torch_load=tl,
        orbax_save=os_,
        orbax_load=ol,
        ratio=(ls + ll) / (ts + tl),
        target=1.0,
    )

    blocks = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        handle = lf.save(lf_state, lp, async_save=True)
        blocks.append(time.perf_counter() - t0)
        handle.wait()
    blocking = statistics.median(blocks)
    return resnet, dict(blocking=blocking, sync_save=ls, ratio=blocking / ls, target=0.10)


def _case_small(root: str, repeat: int) -> dict:
    import torch

    import lazyflow as lf

    lp, tp = os.path.join(root, "lf_small"), os.path.join(root, "torch_small.pt")
    arrays = [np.random.default_rng(i).standard_normal(1024, dtype=np.float32) for i in range(1000)]
    lf_small = {f"t{i}": lf.tensor(a) for i, a in enumerate(arrays)}
    t_small = {f"t{i}": torch.from_numpy(a.copy()) for i, a in enumerate(arrays)}
    ls, ll = _pair(lambda: lf.save(lf_small, lp), lambda: lf.load(lp), repeat)
    ts, tl = _pair(lambda: torch.save(t_small, tp), lambda: torch.load(tp), repeat)
    return dict(lf_save=ls, lf_load=ll, torch_save=ts, torch_load=tl, ratio=(ls + ll) / (ts + tl), target=2.0)


def _case_big(root: str, repeat: int, nbytes: int) -> dict:
    import torch

    import lazyflow as lf

    lp, tp = os.path.join(root, "lf_big"), os.path.join(root, "torch_big.pt")
    host = np.random.default_rng(0).standard_normal(nbytes // 4, dtype=np.float32)
    big, t_big = lf.tensor(host), torch.from_numpy(host)
    ls, ll = _pair(lambda: lf.save(big, lp), lambda: lf.load(lp), repeat)
    ts, tl = _pair(lambda: torch.save(t_big, tp), lambda: torch.load(tp), repeat)
    dd = statistics.median(dd_bandwidth(root, nbytes) for _ in range(3))
    return dict(
        nbytes=nbytes,
        lf_save=ls,
        lf_load=ll,
        torch_save=ts,
        torch_load=tl,
        dd_fdatasync_bw=dd,
        save_bw=nbytes / ls,
        load_bw=nbytes / ll,
        save_vs_dd=(nbytes / ls) / dd,
        save_target=0.8,
        load_target=1e9,
    )


CASES = ("resnet50_sgd", "small_1000", "big_400mb")  # async_save is measured with resnet50_sgd


def run(quick: bool = False, only: list[str] | None = None) -> dict:
    """Run the cases (``only``: a subset of :data:`CASES`); returns medians (seconds), bandwidths (bytes/s)
    and ratios. ``quick``: 1 repeat and a 32 MB big tensor (a smoke run, not a measurement)."""
    unknown = set(only or ()) - set(CASES)
    if unknown:
        raise ValueError(f"unknown checkpoint benchmark cases {sorted(unknown)}; expected some of {CASES}")
    wanted = set(only or CASES)
    repeat = 1 if quick else 7
    root = tempfile.mkdtemp(prefix="lf_bench_ckpt_")
    res: dict = {}
    try:
        if "resnet50_sgd" in wanted:
            res["resnet50_sgd"], res["async_save"] = _case_resnet(root, repeat)
        if "small_1000" in wanted:
            res["small_1000"] = _case_small(root, repeat)
        if "big_400mb" in wanted:
            res["big_400mb"] = _case_big(root, repeat, (32 if quick else 400) << 20)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return res


def report(res: dict) -> str:
    """The results as a table (the cases that ran)."""
    ms = lambda s: f"{s * 1e3:.1f} ms"
    gbs = lambda b: f"{b / 1e9:.2f} GB/s"
    rows = []
    if "resnet50_sgd" in res:
        r, a = res["resnet50_sgd"], res["async_save"]
        rows += [
            [
                "ResNet-50 + SGD momentum (322 arrays, 204 MB)",
                f"{ms(r['lf_save'])} + {ms(r['lf_load'])}",
                f"{ms(r['torch_save'])} + {ms(r['torch_load'])}",
                f"{r['ratio']:.2f}x (<= 1.0x)",
            ],
            ["  orbax StandardCheckpointer (reference)", f"{ms(r['orbax_save'])} + {ms(r['orbax_load'])}", "", ""],
            [
                "async save: blocking part",
                ms(a["blocking"]),
                f"sync save {ms(a['sync_save'])}",
                f"{a['ratio'] * 100:.1f}% (<= 10%)",
            ],
        ]
    if "small_1000" in res:
        s = res["small_1000"]
        rows.append(
            [
                "1000 small tensors (4 KB each)",
                f"{ms(s['lf_save'])} + {ms(s['lf_load'])}",
                f"{ms(s['torch_save'])} + {ms(s['torch_load'])}",
                f"{s['ratio']:.2f}x (<= 2x)",
            ]
        )
    if "big_400mb" in res:
        b = res["big_400mb"]
        rows += [
            [
                f"one {b['nbytes'] >> 20} MB tensor: save",
                f"{ms(b['lf_save'])} = {gbs(b['save_bw'])}",
                f"dd fdatasync {gbs(b['dd_fdatasync_bw'])}",
                f"{b['save_vs_dd']:.2f}x of dd (>= 0.8x)",
            ],
            [
                f"one {b['nbytes'] >> 20} MB tensor: load",
                f"{ms(b['lf_load'])} = {gbs(b['load_bw'])}",
                f"torch.load {ms(b['torch_load'])}",
                ">= 1 GB/s",
            ],
        ]
    return table(rows, ["case", "lazyflow (save + load)", "reference", "ratio (target)"])


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--quick", action="store_true", help="one repeat, a 32 MB big tensor")
    p.add_argument("--only", default=None, help=f"comma-separated subset of {','.join(CASES)}")
    a = p.parse_args()
    print(report(run(quick=a.quick, only=a.only.split(",") if a.only else None)))
