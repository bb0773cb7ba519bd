"""Orphaned DataLoader workers (issue 17, item 7): seconds until they are gone after the training process is
SIGKILLed (what the OOM killer does), lf.utils.data.DataLoader vs torch.utils.data.DataLoader.

Run: ``python -m benchmarks.bench_worker_exit [--quick]``.

A child process builds two loaders with ``num_workers=2`` -- one with persistent workers after a whole epoch (idle,
waiting for the next), one mid-epoch (workers fetching, batches in flight) -- prints its workers' pids and sleeps.
The parent SIGKILLs it and polls ``/proc`` until every worker (and, for lazyflow, the fork server that started them)
is gone or a zombie; the time from the kill is the measurement, the median over repeats. torch forks its workers and
each polls ``os.getppid()`` every 5 s; lazyflow's workers watch the owner's pid every second
(``lazyflow/utils/data/_worker.py``, ``OwnerWatch``).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

from benchmarks._util import table

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SCRIPT = """
import json, os, sys, time
import numpy as np


class Cells:
    def __init__(self, n, delay):
        self.n, self.delay = n, delay

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        time.sleep(self.delay)
        return np.full((256, 256), i, np.float32), os.getpid()


if __name__ == "__main__":
    if sys.argv[1] == "torch":
        from torch.utils.data import DataLoader
    else:
        from lazyflow.utils.data import DataLoader
    idle = DataLoader(Cells(16, 0.0), batch_size=4, num_workers=2, persistent_workers=True)
    pids = {int(p[0]) for _, p in idle}
    busy = iter(DataLoader(Cells(100000, 0.02), batch_size=4, num_workers=2))
    for _ in range(4):
        pids.add(int(next(busy)[1][0]))
    print(json.dumps({"main": os.getpid(), "workers": sorted(pids)}), flush=True)
    time.sleep(300)
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def _ppid(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        return int(next(line for line in f if line.startswith("PPid:")).split()[1])


def measure(library: str, script: str, limit: float = 30.0) -> float:
    """Seconds from SIGKILL of the main process until its workers (and their fork server) are gone."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p))
    proc = subprocess.Popen(
        [sys.executable, script, library], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env
    )
    procs: list[int] = []
    try:
        report = json.loads(proc.stdout.readline())
        main = report["main"]
        procs = [*report["workers"], *({_ppid(p) for p in report["workers"]} - {main})]
        t0 = time.monotonic()
        os.kill(main, signal.SIGKILL)
        proc.wait(10)
        while any(_alive(p) for p in procs):
            if time.monotonic() - t0 > limit:
                return float("nan")
            time.sleep(0.01)
        return time.monotonic() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        for p in procs:
            if _alive(p):
                os.kill(p, signal.SIGKILL)
        proc.stdout.close()


def run(quick: bool = False) -> list[dict]:
    """Median seconds until the workers of a SIGKILLed process are gone, both loaders.

    Args:
        quick: one kill per library instead of three.
    Returns:
        one row in the runner's form (``case``, ``versus``, ``lf``, ``ref`` in seconds, ``target``).
    """
    repeat = 1 if quick else 3
    with tempfile.TemporaryDirectory(prefix="lf_orphan_") as d:
        script = os.path.join(d, "orphan.py")
        with open(script, "w") as f:
            f.write(SCRIPT)
        times: dict[str, list[float]] = {"lazyflow": [], "torch": []}
        for _ in range(repeat):
            for library in times:
                times[library].append(measure(library, script))
    lf_s, torch_s = statistics.median(times["lazyflow"]), statistics.median(times["torch"])
    print(
        table(
            [(lib, ", ".join(f"{t:.2f}" for t in ts), f"{statistics.median(ts):.2f}") for lib, ts in times.items()],
            ["library", "seconds until the workers are gone (each kill)", "median"],
        )
    )
    return [
        {
            "case": "DataLoader workers gone after SIGKILL of the main process",
            "versus": "torch DataLoader",
            "lf": lf_s,
            "ref": torch_s,
            "target": 1.0,
            "target_text": "<= 1.00x (#17)",
            "note": f"2 idle persistent + 2 busy workers; median of {repeat}",
        }
    ]


def _main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    run(parser.parse_args().quick)


if __name__ == "__main__":
    _main()
