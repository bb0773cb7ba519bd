"""Process-level A/B of CNN/ResNet training steps (issue 14): settings read once per process -- lazyflow's malloc
defaults (``LAZYFLOW_MALLOC_DEFAULTS``), ``XLA_FLAGS`` -- cannot be toggled inside one process, so each setting runs
in its own fresh process, the processes alternating setting by setting. Inside each process the ``lf.nn.Graph``
step, the eager step and torch eager are called in turn (the order rotating each round), so each process also
gives lazyflow/torch ratios under the same load. Per side: median wall time, median process CPU time (user+sys, all
threads) and median minor page faults per step (``getrusage``).

Run: ``python -m benchmarks.ab_process_env [--cases resnet50_224,small_cnn] [--rounds 5] [--pairs 2]
[--sides graph,eager,torch] --env "LAZYFLOW_MALLOC_DEFAULTS=0" --env ""``: each ``--env`` is one setting (space
separated ``NAME=VALUE``; ``XLA_FLAGS=...`` is appended to lazyflow's own flags). A standalone tool, not a suite
module.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

import numpy as np


def _child(case: str, rounds: int, sides: list[str]) -> dict:
    from benchmarks import bench_graph

    name, shape, opt_name, classes = bench_graph.CASES[case]
    xs, ys = bench_graph._inputs(shape, classes, np.random.default_rng(0))
    eager, graph = bench_graph._lf_steps(name, xs, ys, opt_name)
    fns = {"graph": graph, "eager": eager}
    if "torch" in sides:
        fns["torch"] = bench_graph._torch_step(name, xs, ys, opt_name)[2]
    fns = {k: fns[k] for k in sides}
    for f in fns.values():  # compile and warm every side
        f()
        f()
    wall: dict = {k: [] for k in fns}
    cpu: dict = {k: [] for k in fns}
    flt: dict = {k: [] for k in fns}
    keys = list(fns)
    for r in range(rounds):
        for k in keys[r % len(keys) :] + keys[: r % len(keys)]:
            r0 = resource.getrusage(resource.RUSAGE_SELF)
            t0 = time.perf_counter()
            fns[k]()
            t1 = time.perf_counter()
            r1 = resource.getrusage(resource.RUSAGE_SELF)
            wall[k].append(t1 - t0)
            cpu[k].append(r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime)
            flt[k].append(r1.ru_minflt - r0.ru_minflt)
    res = {"case": case, "load": os.getloadavg()[0]}
    for k in keys:
        res[k] = {
            "wall": float(np.median(wall[k])),
            "cpu": float(np.median(cpu[k])),
            "faults": float(np.median(flt[k])),
        }
        if "torch" in wall and k != "torch":
            res[k]["per_torch"] = float(np.median(np.asarray(wall[k]) / np.asarray(wall["torch"])))
    return res


def _run(case: str, env_spec: str, rounds: int, sides: list[str]) -> dict:
    env = dict(os.environ)
    for item in env_spec.split():
        k, v = item.split("=", 1)
        env[k] = (env.get(k, "") + " " + v).strip() if k == "XLA_FLAGS" else v
    cmd = [sys.executable, "-m", "benchmarks.ab_process_env", "--child", case, "--rounds", str(rounds)]
    cmd += ["--sides", ",".join(sides)]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
    if out.returncode != 0:
        raise RuntimeError(f"{case} [{env_spec}] failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _line(env_spec: str, r: dict) -> str:
    s = f"{r['case']:13s} [{env_spec or 'default'}] load {r['load']:.1f}:"
    for k in ("graph", "eager", "torch"):
        if k in r:
            v = r[k]
            s += f"  {k} {v['wall'] * 1e3:.1f} ms (cpu {v['cpu'] * 1e3:.0f}, faults {v['faults']:.0f}"
            s += f", /torch {v['per_torch']:.2f}x)" if "per_torch" in v else ")"
    return s


def main(argv=None) -> list:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", default="resnet50_224")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--pairs", type=int, default=2, help="how many times each setting runs (alternating)")
    ap.add_argument("--sides", default="graph,eager,torch")
    ap.add_argument("--env", action="append", default=None, help="one setting: NAME=VALUE ... ('' = default)")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    sides = a.sides.split(",")
    if a.child:
        print(json.dumps(_child(a.child, a.rounds, sides)))
        return []
    envs = a.env if a.env is not None else ["LAZYFLOW_MALLOC_DEFAULTS=0", ""]
    rows = []
    for case in a.cases.split(","):
        for _ in range(a.pairs):
            for spec in envs:
                try:
                    r = _run(case, spec, a.rounds, sides)
                except RuntimeError as e:  # a setting that does not compile or run is a result too
                    print(f"{case:13s} [{spec}] FAILED: {str(e).strip().splitlines()[-1]}", flush=True)
                    continue
                print(_line(spec, r), flush=True)
                rows.append((spec, r))
    return rows


if __name__ == "__main__":
    main()
