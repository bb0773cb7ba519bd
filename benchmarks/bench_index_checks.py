"""Cost of graph mode's deferred index checks (issue 17 item 8): one lf.nn.Graph training step with the checks on
(the default) against the same step with ``lf.graph.set_index_checks(False)``, in the same process.

Run: ``python -m benchmarks.bench_index_checks [--quick] [--only embed_linear,transformer]``.

Cases: ``embed_linear`` (Embedding(1000, 64) + Linear(64, 1000) on 32 x 16 tokens, Adam: a step small enough
that the per-call read-back shows) and ``transformer`` (benchmarks/models.py's 4-layer encoder, 8 x 128 tokens,
AdamW: the embedding and the cross-entropy target are checked). Both programs are compiled before timing; the two
variants are timed in alternating rounds and each time is the median over rounds of the mean per call.
ratio = checks on / checks off (1.00x: free).
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from benchmarks._util import fmt_ms, table
from benchmarks.models import build

# case -> (model, token batch shape, vocabulary)
CASES = {"embed_linear": ("embed_linear", (32, 16), 1000), "transformer": ("transformer", (8, 128), 1000)}


def _step(name, vocab, rng_seed=0):
    import lazyflow as lf

    F = lf.nn.functional
    lf.manual_seed(rng_seed)
    if name == "embed_linear":
        model = lf.nn.Sequential(lf.nn.Embedding(vocab, 64), lf.nn.Linear(64, vocab))
        opt = lf.optim.Adam(model.parameters(), lr=1e-3)
    else:
        model = build(lf.nn, name)
        opt = lf.optim.AdamW(model.parameters(), lr=1e-4)

    class Step(lf.nn.Graph):
        def __init__(self):
            super().__init__()
            self.model = model
            self.add_optimizer(opt)

        def build(self, x, y):
            out = self.model(x)
            loss = F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))
            loss.backward()
            return loss

    return Step()


def bench_case(key: str, quick: bool) -> dict:
    import lazyflow as lf

    name, shape, vocab = CASES[key]
    rng = np.random.default_rng(0)
    x, y = lf.tensor(rng.integers(0, vocab, shape)), lf.tensor(rng.integers(0, vocab, shape))
    on, off = _step(name, vocab), _step(name, vocab)

    def run_on():
        on(x, y).jax().block_until_ready()

    def run_off():
        lf.graph.set_index_checks(False)
        try:
            off(x, y).jax().block_until_ready()
        finally:
            lf.graph.set_index_checks(True)

    heavy = name == "transformer"
    number, rounds = (2, 3) if quick else ((3, 7) if heavy else (50, 9))
    for fn in (run_on, run_off):  # compile both, then warm up
        for _ in range(2):
            fn()
    times: dict[str, list[float]] = {"on": [], "off": []}
    for _ in range(rounds):
        for label, fn in (("on", run_on), ("off", run_off)):
            t0 = time.perf_counter()
            for _ in range(number):
                fn()
            times[label].append((time.perf_counter() - t0) / number)
    assert on.cache_info().checked > 0 and off.cache_info().checked == 0, "the switch did not reach the program"
    return {"case": key, "on": statistics.median(times["on"]), "off": statistics.median(times["off"])}


def run(quick: bool = False, only=None) -> list[dict]:
    keys = [k for k in CASES if only is None or k in only]
    if quick:
        keys = [k for k in keys if k == "embed_linear"] or keys[:1]
    res = [bench_case(k, quick) for k in keys]
    print("Graph training step, checks on vs off (median per call; ratio = on / off)")
    rows = [(r["case"], fmt_ms(r["on"]), fmt_ms(r["off"]), f"{r['on'] / r['off']:.3f}x") for r in res]
    print(table(rows, ["case", "checks on", "checks off", "ratio"]))
    return [
        {"case": r["case"], "versus": "index checks off", "lf": r["on"], "ref": r["off"], "note": "checks on"}
        for r in res
    ]


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--quick", action="store_true")
    p.add_argument("--only", default=None)
    a = p.parse_args()
    run(a.quick, a.only.split(",") if a.only else None)
