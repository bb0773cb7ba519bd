"""Load time of foreign checkpoint files (issue 13): a ResNet-50-sized state dict (~25.6M parameters, 102 MB of
float32, random weights, torchvision's parameter and buffer shapes) as

* ``.pth`` written by ``torch.save``: ``lf.load`` vs ``torch.load(weights_only=True)``, both also with ``mmap=True``;
* ``.safetensors`` written by ``safetensors.torch``: ``lf.load`` vs ``safetensors.numpy.load_file``.

Run: ``python -m benchmarks.bench_file_load [--repeat N]``. Each number is the median of N rounds, each round one
load by lazyflow then one by the peer (after one warm-up load of each, so the file is in the page cache for every
contender); the ratios are medians of the per-round ratios, in wall time and in CPU time (``time.process_time``).
``lf.load`` returns lazyflow Tensors (jax arrays, ready: ``block_until_ready``), checks zip's CRC-32 of each record
(not with ``mmap=True``) and runs the weights_only allowlist; torch.load returns torch tensors (no CRC check);
load_file returns numpy arrays.

Loads in one process change each other's costs: glibc's malloc adapts its mmap threshold to the sizes freed
before, so a contender whose allocations land in pages a previous load freed (and left mapped) runs faster -- the
peer's ``load_file`` measured 75-95 ms alone and 17-20 ms right after a lazyflow load. So the goal rows time each
load in a FRESH process (a user's usual case: one checkpoint load at start-up), alternating contenders, the file
in the page cache; the in-process rounds are reported alongside without a goal.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import OrderedDict

import jax
import numpy as np
import safetensors.numpy
import safetensors.torch
import torch

import lazyflow as lf
from benchmarks._util import table
from benchmarks.bench_checkpoint import resnet50_shapes


def state_dict() -> OrderedDict:
    """ResNet-50's state_dict: parameters plus each BatchNorm's running_mean/var and num_batches_tracked."""
    g = torch.Generator().manual_seed(0)
    sd = OrderedDict()
    for k, shape in resnet50_shapes().items():
        sd[k] = torch.randn(shape, generator=g)
        if (".bn" in k or k.startswith("bn") or "downsample.1" in k) and k.endswith(".bias"):
            p = k[: -len("bias")]
            sd[p + "running_mean"] = torch.randn(shape, generator=g)
            sd[p + "running_var"] = torch.rand(shape, generator=g) + 0.5
            sd[p + "num_batches_tracked"] = torch.tensor(100)
    return sd


def pair(ours, peer, repeat: int) -> tuple[float, ...]:
    """Medians of ``ours`` and ``peer`` timed alternately (one of each per round, after a warm-up of each), and
    the median of the per-round ratios: the shared machine's noise hits both contenders alike. Wall time, then
    the process's CPU time (``time.process_time``: all threads; far less noisy on a shared machine)."""
    ours()  # warm-up: the file in the page cache for both
    peer()
    a, b, ca, cb = [], [], [], []
    for _ in range(repeat):
        for fn, out, cpu in ((ours, a, ca), (peer, b, cb)):
            t0, c0 = time.perf_counter(), time.process_time()
            got = fn()
            out.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
            del got  # freed outside the timed span, for both contenders
    med = statistics.median
    return (
        *(med(a), med(b), med(x / y for x, y in zip(a, b))),
        *(med(ca), med(cb), med(x / y for x, y in zip(ca, cb))),
    )


_FRESH = {
    # the device runtime started first (a script has made its model before it loads weights), as torch's is at import
    "lf": "import jax, lazyflow as lf\nlf.zeros(1).numpy()\n"
    "def load(p, **kw):\n"
    "    out = lf.load(p, **kw)\n"
    "    jax.block_until_ready([v._value for v in out.values()])\n"
    "    return out\n",
    "torch": "import torch\ndef load(p, **kw):\n    return torch.load(p, weights_only=True, **kw)\n",
    "st": "import safetensors.numpy\ndef load(p, **kw):\n    return safetensors.numpy.load_file(p)\n",
}


def fresh(who: str, path: str, **kw) -> tuple[float, float]:
    """One load in a new Python process (imports not timed): ``(wall, CPU)`` seconds of the load alone."""
    code = _FRESH[who] + (
        "import json, sys, time\n"
        f"t0, c0 = time.perf_counter(), time.process_time()\nout = load({path!r}, **{kw!r})\n"
        "print(json.dumps([time.perf_counter() - t0, time.process_time() - c0]))\n"
    )
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    wall, cpu = json.loads(r.stdout.strip().splitlines()[-1])
    return wall, cpu


def fresh_pair(ours, peer, repeat: int) -> tuple[float, ...]:
    """Like :func:`pair`, each load in its own fresh process (``ours``/``peer`` return ``(wall, CPU)``)."""
    a, b = [], []
    for _ in range(repeat):
        a.append(ours())
        b.append(peer())
    med = statistics.median
    return (
        *(med(x[0] for x in a), med(y[0] for y in b), med(x[0] / y[0] for x, y in zip(a, b))),
        *(med(x[1] for x in a), med(y[1] for y in b), med(x[1] / y[1] for x, y in zip(a, b))),
    )


def lf_load(path, **kw):
    out = lf.load(path, **kw)
    jax.block_until_ready([v._value for v in out.values()])
    return out


def measure(repeat: int, fresh_repeat: int = 0) -> dict:
    """``{"params", "mb", "pth", "pth_mmap", "st"}``: each file kind's :func:`pair` against its peer in this process;
    with ``fresh_repeat``, also ``"fresh_<kind>"``: :func:`fresh_pair` (one load per new process)."""
    sd = state_dict()
    n_params = sum(v.numel() for v in sd.values())
    with tempfile.TemporaryDirectory() as d:
        pth, st = os.path.join(d, "resnet50.pth"), os.path.join(d, "resnet50.safetensors")
        torch.save(sd, pth)
        safetensors.torch.save_file(sd, st)
        got = lf.load(pth)
        assert all(
            np.array_equal(got[k].numpy(), v.numpy()) for k, v in sd.items()
        )  # the values are right (a cheap check)
        res = {
            "params": n_params,
            "mb": os.path.getsize(pth) / 1e6,
            "pth": pair(lambda: lf_load(pth), lambda: torch.load(pth, weights_only=True), repeat),
            "pth_mmap": pair(
                lambda: lf_load(pth, mmap=True), lambda: torch.load(pth, weights_only=True, mmap=True), repeat
            ),
            "st": pair(lambda: lf_load(st), lambda: safetensors.numpy.load_file(st), repeat),
        }
        if fresh_repeat:
            res["fresh_pth"] = fresh_pair(lambda: fresh("lf", pth), lambda: fresh("torch", pth), fresh_repeat)
            res["fresh_pth_mmap"] = fresh_pair(
                lambda: fresh("lf", pth, mmap=True), lambda: fresh("torch", pth, mmap=True), fresh_repeat
            )
            res["fresh_st"] = fresh_pair(lambda: fresh("lf", st), lambda: fresh("st", st), fresh_repeat)
    return res


PEERS = {
    "pth": (".pth", "torch.load(weights_only=True)"),
    "pth_mmap": (".pth mmap=True", "torch.load(weights_only=True, mmap=True)"),
    "st": (".safetensors", "safetensors.numpy.load_file"),
}


def run(quick: bool = False) -> list[dict]:
    """The suite's rows (``python -m benchmarks``): wall and CPU medians per file kind; the goal (<= 1.0x, issue 13)
    on the fresh-process rows (not run with ``quick``), the in-process rounds alongside."""
    r = measure(3 if quick else 7, 0 if quick else 5)
    rows = []
    for k, (f, peer) in PEERS.items():
        for where, key, goal in (("fresh process", "fresh_" + k, True), ("in-process rounds", k, False)):
            if key not in r:
                continue
            for what, lo in (("wall", 0), ("CPU", 3)):
                rows.append(
                    {
                        "case": f"lf.load ResNet-50 {f} ({where}, {what} time)",
                        "versus": peer,
                        "lf": r[key][lo],
                        "ref": r[key][lo + 1],
                        "target": 1.0 if goal else None,
                        "target_text": "<= 1.00x (#13)" if goal else "-",
                        "note": f"median of per-round ratios {r[key][lo + 2]:.2f}x",
                    }
                )
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--fresh", type=int, default=5, help="rounds of one load per fresh process (0: none)")
    args = ap.parse_args()
    r = measure(args.repeat, args.fresh)
    ms = lambda s: f"{s * 1e3:.1f} ms"
    rows = [
        (f + (" (fresh process)" if pre else ""), p, ms(r[pre + k][0]), ms(r[pre + k][1]), f"{r[pre + k][2]:.2f}x")
        + (ms(r[pre + k][3]), ms(r[pre + k][4]), f"{r[pre + k][5]:.2f}x")
        for pre in ("fresh_", "")
        for k, (f, p) in PEERS.items()
        if pre + k in r
    ]
    print(f"ResNet-50 state dict: {r['params'] / 1e6:.1f}M parameters, {r['mb']:.0f} MB; medians of {args.repeat}")
    head = ("file", "peer", "lf.load", "peer", "ratio (wall)", "lf.load CPU", "peer CPU", "ratio (CPU)")
    print(table(rows, head))


if __name__ == "__main__":
    main()
