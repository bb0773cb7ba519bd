"""Timing helpers shared by the benchmarks: medians over repeats, ratios in the same run."""

from __future__ import annotations

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


def fmt_us(s: float) -> str:
    return f"{s * 1e6:8.2f} us"


def fmt_ms(s: float) -> str:
    return f"{s * 1e3:8.2f} ms"


def table(rows, headers) -> str:
    widths = [max(len(str(h)), *(len(str(r[i])) for r in rows)) for i, h in enumerate(headers)]
    line = lambda r: " | ".join(str(c).ljust(w) for c, w in zip(r, widths))
    return "\n".join([line(headers), "-+-".join("-" * w for w in widths), *map(line, rows)])
