"""Start-up benchmarks (issue 15): import time and model construction in fresh processes, lazyflow against torch.

Run: ``python -m benchmarks.bench_startup [--quick]``. Every measurement is a new Python process (median of repeats).
"cold": lazyflow's compile cache off (``LAZYFLOW_COMPILE_CACHE=0``), so each process pays every XLA compile it needs;
"warm": a private cache directory filled by one earlier process; "warm, kernel store off": the same directory with
``LAZYFLOW_KERNEL_CACHE=0`` (eager kernels found through JAX's cache: traced and lowered to compute its key).
Compiles are counted from JAX's own compile events.
Models are built by the same code for both frameworks (``benchmarks/models.py``): torchvision-style ResNet-50 and
nanoGPT's 12-layer GPT (d=768), seeded. For ResNet-50 the child also runs eager SGD-momentum training steps at batch 8,
64x64 (cross-entropy): the first step's time, and the compiles of steps 2-3 (the goal: none); ``--quick`` (the smoke
test) builds only.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

from benchmarks._util import table

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = ("resnet50", "gpt")
TARGET = 5.0  # construction: lazyflow within 5x of torch (#15)

_CHILD = """
import json, sys, time
t0 = time.perf_counter()
fw, model = sys.argv[1], sys.argv[2]
compiles = []
if fw == "lazyflow":
    import jax
    jax.monitoring.register_event_duration_secs_listener(
        lambda ev, d, **kw: compiles.append(d) if ev == "/jax/core/compile/backend_compile_duration" else None
    )
    import lazyflow as lib
else:
    import torch as lib
t_import = time.perf_counter() - t0
from benchmarks.models import build
build_s = None
if model != "none":
    lib.manual_seed(0)
    t1 = time.perf_counter()
    m = build(lib.nn, model)
    build_s = time.perf_counter() - t1
n_build = len(compiles)
step_s = later = None
if model == "resnet50" and sys.argv[3] == "steps":
    x, y = lib.randn(8, 3, 64, 64), lib.randint(0, 1000, (8,))
    opt = lib.optim.SGD(m.parameters(), lr=0.01, momentum=0.9)
    times = []
    for k in range(3):
        if k == 1:
            before = len(compiles)
        t2 = time.perf_counter()
        loss = lib.nn.functional.cross_entropy(m(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        loss.item()
        times.append(time.perf_counter() - t2)
    step_s, later = times[0], len(compiles) - before
print(json.dumps({"import_s": t_import, "build_s": build_s, "compiles": n_build, "compile_s": sum(compiles),
                  "step_s": step_s, "later_compiles": later}))
"""


def _child(fw: str, model: str, cache: str | None = None, steps: bool = False, kernel_store: bool = True) -> dict:
    """One fresh process; ``cache``: lazyflow's compile cache directory (None: the cache off); ``kernel_store``:
    False sets ``LAZYFLOW_KERNEL_CACHE=0``."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p))
    for k in ("JAX_COMPILATION_CACHE_DIR", "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "LAZYFLOW_KERNEL_CACHE"):
        env.pop(k, None)
    if not kernel_store:
        env["LAZYFLOW_KERNEL_CACHE"] = "0"
    if cache is None:
        env["LAZYFLOW_COMPILE_CACHE"] = "0"
    else:
        env["LAZYFLOW_COMPILE_CACHE"] = "1"
        env["LAZYFLOW_COMPILE_CACHE_DIR"] = cache
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, fw, model, "steps" if steps else "build"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{fw} {model}: exit {proc.returncode}: {proc.stderr.strip()[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _median(runs: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def measure(quick: bool, only=None) -> dict:
    """Medians over fresh processes, torch and lazyflow alternating (so load on the machine hits both alike)."""
    import tempfile

    repeat = 1 if quick else 3
    cases = [m for m in MODELS if (m in only if only else not quick or m == "resnet50")]
    out: dict = {"repeat": repeat, "cases": []}
    imports: dict[str, list] = {"torch": [], "lazyflow": []}
    for model in cases:
        runs: dict[str, list] = {"torch": [], "lazyflow": [], "warm": [], "warm_jax": []}
        with tempfile.TemporaryDirectory() as cache:
            _child("lazyflow", model, cache, not quick)  # fills the cache (lazyflow's kernel store)
            if not quick:  # the store-off row is a first-step row: --quick (build only) has none
                _child("lazyflow", model, cache, True, kernel_store=False)  # JAX's entries for the same kernels
            for _ in range(repeat):
                for fw in ("torch", "lazyflow", "warm") if quick else ("torch", "lazyflow", "warm", "warm_jax"):
                    warm = fw.startswith("warm")
                    r = _child("lazyflow" if warm else fw, model, cache if warm else None, not quick, fw != "warm_jax")
                    runs[fw].append(r)
                    if not warm:
                        imports[fw].append(r["import_s"])
        case = {
            "case": model,
            "lf_build": _median(runs["lazyflow"], "build_s"),
            "warm_build": _median(runs["warm"], "build_s"),
            "torch_build": _median(runs["torch"], "build_s"),
            "lf_compiles": max(r["compiles"] for r in runs["lazyflow"]),
            "warm_compiles": max(r["compiles"] for r in runs["warm"]),
            "lf_compile_s": _median(runs["lazyflow"], "compile_s"),
        }
        if runs["torch"][0].get("step_s") is not None:
            case.update(
                lf_step=_median(runs["lazyflow"], "step_s"),
                warm_step=_median(runs["warm"], "step_s"),
                warm_jax_step=_median(runs["warm_jax"], "step_s"),
                torch_step=_median(runs["torch"], "step_s"),
                later_compiles=max(r["later_compiles"] for r in runs["lazyflow"] + runs["warm"]),
            )
        out["cases"].append(case)
    if not cases:  # import only
        for _ in range(repeat):
            for fw in ("torch", "lazyflow"):
                imports[fw].append(_child(fw, "none")["import_s"])
    out["lf_import"] = statistics.median(imports["lazyflow"])
    out["torch_import"] = statistics.median(imports["torch"])
    return out


def rows(res: dict) -> list[dict]:
    """The runner's row convention: lazyflow vs torch, ratio = lazyflow time / torch time."""
    n = res["repeat"]
    out = [
        {
            "case": "import (fresh process)",
            "versus": "import torch",
            "lf": res["lf_import"],
            "ref": res["torch_import"],
            "note": f"median of {n * max(1, len(res['cases']))} processes",
        }
    ]
    for c in res["cases"]:
        out.append(
            {
                "case": f"build {c['case']} (fresh process, no compile cache)",
                "versus": "torch",
                "lf": c["lf_build"],
                "ref": c["torch_build"],
                "target": TARGET,
                "target_text": f"<= {TARGET:g}x (#15)",
                "note": f"{c['lf_compiles']} XLA compiles ({c['lf_compile_s']:.2f} s); median of {n}",
            }
        )
        out.append(
            {
                "case": f"build {c['case']} (fresh process, warm compile cache)",
                "versus": "torch",
                "lf": c["warm_build"],
                "ref": c["torch_build"],
                "note": f"{c['warm_compiles']} XLA compiles; median of {n}",
            }
        )
        if "lf_step" in c:
            for kind, key, target in (
                ("no compile cache", "lf_step", None),
                ("warm compile cache", "warm_step", 2.0),
                ("warm compile cache, kernel store off", "warm_jax_step", None),
            ):
                row = {
                    "case": f"first eager SGD step {c['case']} b8 64x64 ({kind})",
                    "versus": "torch's first step",
                    "lf": c[key],
                    "ref": c["torch_step"],
                    "note": f"compiles in steps 2-3: {c['later_compiles']}; median of {n}",
                }
                if target:
                    row.update(target=target, target_text=f"<= {target:g}x (#15)")
                out.append(row)
    return out


def run(quick: bool = False, only=None) -> list[dict]:
    res = measure(quick, only)
    print(report(res))
    return rows(res)


def report(res) -> str:
    if isinstance(res, list):  # rows, as run() returns them (already printed)
        return ""
    lines = [
        [
            r["case"],
            f"{r['lf']:.3f} s",
            f"{r['ref']:.3f} s",
            f"{r['lf'] / r['ref']:.2f}x",
            r.get("note", ""),
        ]
        for r in rows(res)
    ]
    return table(lines, ["case", "lazyflow", "torch", "ratio", "note"])


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", default=None, help="comma list of " + ", ".join(MODELS))
    a = ap.parse_args()
    res = measure(a.quick, a.only.split(",") if a.only else None)
    print(report(res))
    print(json.dumps(res))
