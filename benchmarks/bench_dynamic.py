"""Batch sizes that vary (issue 15): ``lf.compile(model)`` against ``lf.compile(model, dynamic=True)`` over the same
sequence of calls, each mode in a fresh process with the on-disk compile cache off (every compile is paid).

Run: ``python -m benchmarks.bench_dynamic [--quick]``.

Sequences (inference, ``model.eval()``, no gradients):
* ``epoch``: eight batches of 64 and the last partial batch of 17 (an evaluation epoch over 529 samples);
* ``varying``: 12 batches whose sizes wander between 9 and 64 (requests of different sizes).
Models: benchmarks/models.py's small CNN (32x32x3) and 4-layer Transformer encoder (tokens of length 32).
Columns: compiles, total wall time of the sequence (compiles included), and the steady time per call of the
last size repeated 7 times after the sequence (for ``dynamic``: padded at first; a small size that recurs gets its
own power-of-two program after 4 padded calls, so this is the median over both).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

from benchmarks._util import fmt_ms, table

SEQUENCES = {"epoch": [64] * 8 + [17], "varying": [37, 64, 50, 12, 64, 29, 9, 41, 58, 23, 64, 17]}


def _child(model_name: str, seq: str, dynamic: bool) -> dict:
    import numpy as np

    import lazyflow as lf
    from benchmarks.models import build

    lf.config.set_compile_cache(False)
    lf.manual_seed(0)
    model = build(lf.nn, model_name).eval()
    cm = lf.compile(model, dynamic=dynamic)
    rng = np.random.default_rng(0)

    def batch(n):
        if model_name == "transformer":
            return lf.tensor(rng.integers(0, 1000, (n, 32)))
        return lf.tensor(rng.standard_normal((n, 3, 32, 32), np.float32))

    sizes = SEQUENCES[seq]
    with lf.no_grad():
        t0 = time.perf_counter()
        for n in sizes:
            cm(batch(n)).numpy()
        total = time.perf_counter() - t0
        compiles = cm.cache_info().compiles  # the sequence's (repeating the last size below may add one)
        x = batch(sizes[-1])
        steady = []
        for _ in range(7):
            t = time.perf_counter()
            cm(x).numpy()
            steady.append(time.perf_counter() - t)
    return {"compiles": compiles, "total": total, "steady": statistics.median(steady)}


def _measure(model_name: str, seq: str) -> dict:
    res = {}
    for dyn in (False, True):
        out = subprocess.run(
            [sys.executable, "-m", "benchmarks.bench_dynamic", "--child", model_name, seq, str(int(dyn))],
            capture_output=True,
            text=True,
            check=True,
        )
        res[dyn] = json.loads(out.stdout.strip().splitlines()[-1])
    return res


def run(quick: bool = False) -> list[dict]:
    """Rows for the suite (ratio = dynamic / static total time of the sequence, compiles included)."""
    cases = [("small_cnn", "epoch")] if quick else [(m, s) for m in ("small_cnn", "transformer") for s in SEQUENCES]
    rows, printed = [], []
    for model_name, seq in cases:
        r = _measure(model_name, seq)
        s, d = r[False], r[True]
        printed.append(
            [
                model_name,
                seq,
                f"{s['compiles']} / {d['compiles']}",
                f"{s['total']:.2f} s / {d['total']:.2f} s",
                f"{d['total'] / s['total']:.2f}x",
                f"{fmt_ms(s['steady']).strip()} / {fmt_ms(d['steady']).strip()}",
            ]
        )
        rows.append(
            {
                "case": f"{model_name} {seq}: {len(SEQUENCES[seq])} calls, compiles {s['compiles']} -> {d['compiles']}",
                "versus": "lf.compile, static shapes",
                "lf": d["total"],
                "ref": s["total"],
                "note": "dynamic=True, compiles included",
            }
        )
    print(
        table(
            printed,
            ["model", "sequence", "compiles static / dynamic", "total static / dynamic", "total ratio", "last call"],
        )
    )
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="the small CNN's epoch only")
    ap.add_argument("--child", nargs=3)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(_child(args.child[0], args.child[1], args.child[2] == "1")))
        return 0
    run(args.quick)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
