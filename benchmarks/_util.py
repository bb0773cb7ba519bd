"""Timing helpers shared by the benchmarks: medians over repeats, ratios in the same run."""

from __future__ import annotations

import random
import statistics
import time


def timeit(fn, *, number: int, repeat: int, warmup: int = 2) -> float:
    """Median seconds per call of ``fn`` over ``repeat`` runs of ``number`` calls."""
    for _ in range(warmup):
        fn()
    runs = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        runs.append((time.perf_counter() - t0) / number)
    return statistics.median(runs)


def interleaved(
    fns: dict, *, number: int, repeat: int, warmup: int = 2, settle_s: float | None = 0.01, seed: int = 0
) -> dict:
    """Median seconds per call of each of ``fns`` (name -> callable), measured in ``repeat`` rounds that alternate
    between them, in an order shuffled per round, so that a shared machine's drift hits every contestant alike.
    Before each timed round of ``number`` calls the contestant runs untimed for ``settle_s`` seconds (at least one
    call; ``None``: none), so what ran before it -- another library's worker threads still spin-waiting after its
    last op, caches holding another model -- is absorbed by the contestant's own warm-up, not by its timing."""
    order = list(fns)
    rng = random.Random(seed)
    for f in fns.values():
        for _ in range(warmup):
            f()
    runs: dict = {k: [] for k in fns}
    for _ in range(repeat):
        rng.shuffle(order)
        for k in order:
            f = fns[k]
            if settle_s is not None:
                end = time.perf_counter() + settle_s
                f()
                while time.perf_counter() < end:
                    f()
            t0 = time.perf_counter()
            for _ in range(number):
                f()
            runs[k].append((time.perf_counter() - t0) / number)
    return {k: statistics.median(v) for k, v in runs.items()}


def fmt_us(s: float) -> str:
    return f"{s * 1e6:8.2f} us"


def fmt_ms(s: float) -> str:
    return f"{s * 1e3:8.2f} ms"


def table(rows, headers) -> str:
    widths = [max(len(str(h)), *(len(str(r[i])) for r in rows)) for i, h in enumerate(headers)]
    line = lambda r: " | ".join(str(c).ljust(w) for c, w in zip(r, widths))
    return "\n".join([line(headers), "-+-".join("-" * w for w in widths), *map(line, rows)])
