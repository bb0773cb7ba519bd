"""Same-process A/B of the whole eager MLP 784-256-10 SGD step (issue 14, session 9): the session's changes (linear
as one dot_general; record, Node and _torch_convention as loops) against the versions before them, loaded from a
checkout of the base commit, with torch (1 and 2 threads) interleaved; wall time, medians and per-round ratios.

    git worktree add /tmp/base b7191d6   # or: git archive b7191d6 | tar -x -C /tmp/base
    PYTHONPATH=. python -m benchmarks.ab_eager_step /tmp/base [rounds]
"""

import copy
import statistics
import sys
import time

import jax.numpy as jnp
import torch

import lazyflow._dispatch as Dm
import lazyflow.autograd.engine as E
import lazyflow.autograd.node as N
import lazyflow.eager.interpreter as I
import lazyflow.nn.functional._linear as FL
from benchmarks.bench_eager import mlp_steps
from lazyflow.ops.table import REGISTRY as R


def main() -> None:
    torch.set_num_threads(2)
    BASE = sys.argv[1]

    def load(path, name, mod, until):
        src = open(path).read()
        fn = src[src.index(name) : src.index(until)]
        ns = dict(vars(mod))
        exec(fn, ns)
        return ns

    old_rec = load(BASE + "/lazyflow/_dispatch.py", "def record(", Dm, "class OpRecord")["record"]
    old_tc = load(BASE + "/lazyflow/autograd/engine.py", "def _torch_convention(", E, "def _conj_tensors")[
        "_torch_convention"
    ]
    OldNode = load(BASE + "/lazyflow/autograd/node.py", "class Node", N, "    def name(self)")["Node"]
    old_lin = copy.copy(R["linear"])

    def _old_impl(x, w, b):
        y = jnp.matmul(x, w.T)
        return y if b is None else y + b

    old_lin.impl = _old_impl
    OLD = (old_rec, old_tc, OldNode, old_lin)
    NEW = (Dm.record, E._torch_convention, N.Node, R["linear"])

    def setimpl(r, tc, nd, lin):
        I.record = r
        E._torch_convention = tc
        Dm.Node = nd
        FL._LINEAR = lin

    for batch in (1, 64):
        lstep, tstep, lm = mlp_steps(batch)

        def per(f, n):
            t0 = time.perf_counter()
            for _ in range(n):
                f()
            if f is lstep:
                lm[0].weight._value.block_until_ready()
            return (time.perf_counter() - t0) / n * 1e6

        def a():
            setimpl(*OLD)
            return per(lstep, 40)

        def b():
            setimpl(*NEW)
            return per(lstep, 40)

        def t1():
            torch.set_num_threads(1)
            return per(tstep, 40)

        def t2():
            torch.set_num_threads(2)
            return per(tstep, 40)

        Rr = {"before": [], "after": [], "torch1": [], "torch2": []}
        a()
        b()
        t1()
        t2()
        for _ in range(int(sys.argv[2]) if len(sys.argv) > 2 else 9):
            Rr["before"].append(a())
            Rr["after"].append(b())
            Rr["torch1"].append(t1())
            Rr["torch2"].append(t2())
        m = {k: statistics.median(v) for k, v in Rr.items()}

        def q(xs):
            xs = sorted(xs)
            return f"{statistics.median(xs):.2f}x (IQR {xs[len(xs) // 4]:.2f}-{xs[(3 * len(xs)) // 4]:.2f})"

        print(
            f"b{batch}",
            " ".join("{} {:.1f} us".format(*kv) for kv in m.items()),
            "| after/before",
            q([y / x for x, y in zip(Rr["before"], Rr["after"])]),
            "| before/torch1",
            q([x / t for x, t in zip(Rr["before"], Rr["torch1"])]),
            "| after/torch1",
            q([y / t for y, t in zip(Rr["after"], Rr["torch1"])]),
            "| before/torch2",
            q([x / t for x, t in zip(Rr["before"], Rr["torch2"])]),
            "| after/torch2",
            q([y / t for y, t in zip(Rr["after"], Rr["torch2"])]),
        )


if __name__ == "__main__":
    main()
