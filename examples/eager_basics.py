"""Eager lazyflow in a few screens: tensors, dtype promotion, autograd, in-place updates and the op cache.

    python examples/eager_basics.py [--loop N]

Every line runs at once, as in PyTorch. Behind each op sits a cache of compiled XLA kernels keyed by the op's
signature (op, static attributes, shapes, dtypes, placement), never by the values: the loop ``v[i] = x`` over
N rows compiles one kernel and then hits it N - 1 times.
"""

from __future__ import annotations

import argparse

import numpy as np

import lazyflow as lf


def section(title: str) -> None:
    print(f"\n== {title} ==")


def tensors() -> None:
    section("tensors")
    a = lf.tensor([[1.0, 2.0], [3.0, 4.0]])
    b = lf.arange(4).reshape(2, 2)
    print("a =", a)
    print("b = lf.arange(4).reshape(2, 2) ->", b.tolist(), b.dtype)
    print("a @ a.T =", (a @ a.T).tolist())
    print("a.sum(dim=0) =", a.sum(dim=0).tolist(), " a.max(dim=1) ->", a.max(dim=1).values.tolist())
    print("numpy round trip:", lf.from_numpy(np.ones(3, np.float32)).numpy())


def promotion() -> dict:
    section("dtype promotion (torch's rules)")
    cases = {
        "int64 tensor + 1.5": lf.tensor([1, 2]) + 1.5,
        "int64 tensor / 2": lf.tensor([1, 2]) / 2,
        "uint8 + int8": lf.tensor([1], dtype=lf.uint8) + lf.tensor([1], dtype=lf.int8),
        "int32 + float16 tensor": lf.tensor([1], dtype=lf.int32) + lf.tensor([1.0], dtype=lf.float16),
        "float16 tensor * 2.0 (scalar is weak)": lf.tensor([1.0], dtype=lf.float16) * 2.0,
        "bool + 1": lf.tensor([True]) + 1,
    }
    for name, t in cases.items():
        print(f"{name:40s} -> {t.dtype}")
    return {name: t.dtype for name, t in cases.items()}


def autograd() -> dict:
    section("autograd")
    x = lf.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = (x**2).sum()
    y.backward()
    print("d/dx sum(x^2) at", x.tolist(), "=", x.grad.tolist())
    (g,) = lf.autograd.grad((x**3).sum(), x)
    print("lf.autograd.grad(sum(x^3), x) =", g.tolist())
    with lf.no_grad():
        z = x * 2
    print("under lf.no_grad(): (x * 2).requires_grad =", z.requires_grad)
    (gg,) = lf.autograd.grad(lf.autograd.grad((x**3).sum(), x, create_graph=True)[0].sum(), x)
    print("second derivative of sum(x^3) =", gg.tolist())
    return {"grad": x.grad.tolist(), "grad3": g.tolist(), "second": gg.tolist(), "no_grad": z.requires_grad}


def inplace(n: int) -> dict:
    section("in-place updates and the op cache")
    w = lf.zeros(3)
    w.add_(1).mul_(3)
    print("lf.zeros(3).add_(1).mul_(3) =", w.tolist())
    leaf = lf.ones(2, requires_grad=True)
    try:
        leaf.add_(1)
    except lf.AutogradError as e:
        print("in-place on a leaf that requires grad raises", type(e).__name__)

    a = lf.rand(16, 16)
    a * 2.0  # warm: the first call compiles
    before = lf.eager.cache_info()
    for k in range(100):
        a * float(k)  # the scalar's value is an operand, not part of the key
    after = lf.eager.cache_info()
    print(
        f"100 x (a * k) with a different scalar each time: +{after.hits - before.hits} hits, "
        f"+{after.misses - before.misses} misses"
    )

    v, x = lf.zeros(n, 4), lf.ones(4)
    before = lf.eager.cache_info()
    for i in range(n):
        v[i] = x
    after = lf.eager.cache_info()
    entries = after.currsize - before.currsize
    print(
        f"loop v[i] = x over {n} rows: {entries} new cache entr{'y' if entries == 1 else 'ies'}, "
        f"+{after.hits - before.hits} hits, +{after.misses - before.misses} misses; v.sum() = {v.sum().item():g}"
    )
    print("lf.eager.cache_info() =", after)
    return {
        "loop_new_entries": entries,
        "loop_hits": after.hits - before.hits,
        "loop_misses": after.misses - before.misses,
        "v_sum": float(v.sum().item()),
        "w": w.tolist(),
    }


def main(argv: list[str] | None = None) -> dict:
    """Run every section and return what was shown (the tests assert on it)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--loop", type=int, default=10_000, help="rows in the v[i] = x loop")
    a = ap.parse_args(argv)
    tensors()
    out = {"promotion": promotion(), "autograd": autograd()}
    out.update(inplace(a.loop))
    return out


if __name__ == "__main__":
    main()
