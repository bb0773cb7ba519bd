"""Start-up benchmarks (issue 15): import time and model construction in fresh processes, lazyflow against torch.

Run: ``python -m benchmarks.bench_startup [--quick]``. Every measurement is a new Python process (median of repeats),
with JAX's persistent compilation cache off, so each lazyflow process pays every XLA compile it needs; the number of
compiles is counted from JAX's own compile events. Models are built by the same code for both frameworks
(``benchmarks/models.py``): torchvision-style ResNet-50 and nanoGPT's 12-layer GPT (d=768), seeded.
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
    jax.config.update("jax_enable_compilation_cache", False)
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
print(json.dumps({"import_s": t_import, "build_s": build_s, "compiles": len(compiles), "compile_s": sum(compiles)}))
"""


def _child(fw: str, model: str) -> dict:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p))
    for k in ("JAX_COMPILATION_CACHE_DIR", "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"):
        env.pop(k, None)
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, fw, model], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{fw} {model}: exit {proc.returncode}: {proc.stderr.strip()[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _median(runs: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def measure(quick: bool, only=None) -> dict:
    """Medians over fresh processes, torch and lazyflow alternating (so load on the machine hits both alike)."""
    repeat = 1 if quick else 3
    cases = [m for m in MODELS if (m in only if only else not quick or m == "resnet50")]
    out: dict = {"repeat": repeat, "cases": []}
    imports: dict[str, list] = {"torch": [], "lazyflow": []}
    for model in cases:
        runs: dict[str, list] = {"torch": [], "lazyflow": []}
        for _ in range(repeat):
            for fw in ("torch", "lazyflow"):
                r = _child(fw, model)
                runs[fw].append(r)
                imports[fw].append(r["import_s"])
        out["cases"].append(
            {
                "case": model,
                "lf_build": _median(runs["lazyflow"], "build_s"),
                "torch_build": _median(runs["torch"], "build_s"),
                "lf_compiles": max(r["compiles"] for r in runs["lazyflow"]),
                "lf_compile_s": _median(runs["lazyflow"], "compile_s"),
            }
        )
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
