"""Eager op cache memory (issue 17, item 10): resident memory while 10,000 distinct shapes stream through a few ops
at the default cache settings.

Run: ``python -m benchmarks.bench_cache_memory [--quick]``.

A fresh child process (no ``LAZYFLOW_EAGER_CACHE_*`` variables: the defaults, 4096 entries and 1 GiB) warms each op
up once, empties the cache, takes the baseline RSS (``VmRSS`` from ``/proc/self/status``), then runs op ``k % 4`` of
``neg``, ``isnan`` (jitted without a cast wrapper: the case whose evicted executables stayed alive in JAX), ``x * 2.0``
and ``sum(dim=0)`` on a float32 tensor of shape ``(k // 100 + 1, k % 100 + 1)``, k = 0..9999: 10,000 distinct
shapes, each one cache miss. Every 1000 misses it records RSS, the cache's estimated bytes, entries, evictions and
the executables the XLA client still holds. The result: the largest RSS growth over the baseline against the byte
budget, and the growth per 1000 misses before evictions begin and after (flat when evicted kernels are freed).
``--quick``: 100 misses under a 32 MiB budget, a point every 25. The full run is 10,000 XLA compiles: ~12 min of CPU,
~30 min on a loaded 2-core box.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys

import jax
import numpy as np

import lazyflow as lf
from benchmarks._util import table

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MiB = 2**20


def _rss() -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmRSS"))


def child(misses: int, every: int) -> dict:
    """Stream ``misses`` new shapes through the ops in this process; returns the curve (see the module docstring)."""
    ops = [lf.neg, lf.isnan, lambda t: t * 2.0, lambda t: t.sum(dim=0)]
    for i, op in enumerate(ops):  # one-time costs (first trace of each op, XLA's own start-up) are not the cache's
        op(lf.tensor(np.zeros((1000 + i, 3), np.float32)))
    lf.eager.clear_cache()
    gc.collect()
    client = jax.devices()[0].client
    base = _rss()
    points = []
    for k in range(misses):
        ops[k % 4](lf.tensor(np.zeros((k // 100 + 1, k % 100 + 1), np.float32)))
        if (k + 1) % every == 0:
            info, rss = lf.eager.cache_info(), _rss()
            points.append(
                {
                    "misses": info.misses,
                    "rss": rss,
                    "growth": rss - base,
                    "cache_bytes": info.currbytes,
                    "entries": info.currsize,
                    "evictions": info.evictions,
                    "live_executables": len(client.live_executables()),
                }
            )
    info = lf.eager.cache_info()
    return {"baseline_rss": base, "maxbytes": info.maxbytes, "maxsize": info.maxsize, "points": points}


def _slope(points: list[dict], every: int) -> float | None:
    """RSS growth per 1000 misses over ``points`` (None for fewer than two)."""
    if len(points) < 2:
        return None
    return (points[-1]["rss"] - points[0]["rss"]) / (points[-1]["misses"] - points[0]["misses"]) * 1000


def run(quick: bool = False) -> list[dict]:
    """Run the child at the defaults (``--quick``: a 32 MiB budget, 100 misses) and summarize its RSS curve.

    Returns:
        one row in the runner's form (no time ratio: the note carries the numbers; ``curve`` the points).
    """
    misses, every = (100, 25) if quick else (10_000, 1000)
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAZYFLOW_EAGER_CACHE_")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p)
    env["JAX_PLATFORMS"] = env.get("JAX_PLATFORMS", "cpu")
    if quick:
        env["LAZYFLOW_EAGER_CACHE_BYTES"] = "32M"
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.bench_cache_memory", "--child", str(misses), "--every", str(every)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"child failed: {proc.stderr[-2000:]}")
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    pts, budget = res["points"], res["maxbytes"]
    print(f"baseline RSS {res['baseline_rss'] / MiB:.0f} MiB; limits: {res['maxsize']} entries, {budget / MiB:.0f} MiB")
    print(
        table(
            [
                (
                    p["misses"],
                    f"{p['rss'] / MiB:.0f}",
                    f"{p['growth'] / MiB:+.0f}",
                    f"{p['cache_bytes'] / MiB:.0f}",
                    p["entries"],
                    p["evictions"],
                    p["live_executables"],
                )
                for p in pts
            ],
            ["misses", "RSS MiB", "over baseline", "cache est. MiB", "entries", "evictions", "live executables"],
        )
    )
    first = next((i for i, p in enumerate(pts) if p["evictions"] > 0), None)
    before = _slope(pts[: first + 1], every) if first is not None else _slope(pts, every)
    after = _slope(pts[first + 1 :], every) if first is not None else None  # from the first full interval of evictions
    peak = max(p["growth"] for p in pts)
    fmt = lambda s: "-" if s is None else f"{s / MiB:+.1f} MiB"
    summary = (
        f"peak RSS growth {peak / MiB:.0f} MiB over a {budget / MiB:.0f} MiB budget "
        f"({'within' if peak <= budget else 'OVER'}); per 1000 misses: {fmt(before)} before evictions, "
        f"{fmt(after)} after"
    )
    print(summary)
    setting = "a 32 MiB budget (quick)" if quick else "eager cache defaults"
    return [
        {
            "case": f"RSS over {pts[-1]['misses']} distinct-shape misses, {setting}",
            "versus": "",
            "lf": None,
            "ref": None,
            "note": summary,
            "within_budget": peak <= budget,
            "peak_growth": peak,
            "budget": budget,
            "slope_before": before,
            "slope_after": after,
            "curve": pts,
        }
    ]


def _main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--every", type=int, default=1000, help=argparse.SUPPRESS)
    a = parser.parse_args()
    if a.child is not None:
        print(json.dumps(child(a.child, a.every)))
        return
    run(a.quick)


if __name__ == "__main__":
    _main()
