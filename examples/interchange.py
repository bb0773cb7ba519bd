"""One checkpoint for every mode: save from eager training, resume compiled and as an lf.nn.Graph step.

    python examples/interchange.py [--steps N] [--out DIR]

1. Train a small model eagerly for a few steps and ``lf.save`` the model and optimizer state.
2. Load that checkpoint into (a) ``lf.compile(model)`` trained with eager backward/step, (b) a model trained by an
   ``lf.nn.Graph`` step (forward, backward and update in one XLA program), and (c) a plain eager model; continue
   training each from the same state: the three continued trajectories agree.
3. The ``state_dict`` keys are the same whichever mode produced them (a compiled wrapper adds no prefix), and each
   mode's checkpoint lists the same tensors.
4. If torch is installed: ``torch.compile`` prefixes every key with ``_orig_mod.``, and ``load_state_dict`` fails
   in both directions between the compiled and the plain module; ``lf.compile`` accepts such a prefixed dict.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import warnings

import numpy as np

import lazyflow as lf
from lazyflow import nn
from lazyflow.nn import functional as F

LR, MOMENTUM = 0.05, 0.9


def make_model(nn_mod=nn):
    """The same architecture for lazyflow and (with ``nn_mod=torch.nn``) torch."""
    return nn_mod.Sequential(nn_mod.Linear(20, 64), nn_mod.BatchNorm1d(64), nn_mod.ReLU(), nn_mod.Linear(64, 4))


def make_data(n: int = 256, seed: int = 0):
    """A 4-class problem from a fixed random linear teacher (no download)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 20)).astype(np.float32)
    y = (x @ rng.standard_normal((20, 4))).argmax(1).astype(np.int64)
    return lf.tensor(x), lf.tensor(y)


def make_opt(model):
    return lf.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)


class TrainStep(nn.Graph):
    """Forward, backward and the SGD update as one compiled program."""

    def __init__(self, model, opt):
        super().__init__()
        self.model = model
        self.add_optimizer(opt)

    def build(self, x, y):
        loss = F.cross_entropy(self.model(x), y)
        loss.backward()
        return loss


def eager_steps(model, opt, x, y, n: int) -> list[float]:
    """``n`` eager steps (``model`` may be an ``lf.compile`` wrapper: compiled forward, one compiled backward)."""
    losses = []
    for _ in range(n):
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    return losses


def graph_steps(step: nn.Graph, x, y, n: int) -> list[float]:
    return [step(x, y).item() for _ in range(n)]


def resume(path: str):
    """A fresh model and optimizer with the checkpoint's state loaded."""
    ck = lf.load(path)
    model = make_model()
    opt = make_opt(model)
    model.load_state_dict(ck["model"])
    opt.load_state_dict(ck["optim"])
    return model, opt, ck


def fmt(losses: list[float]) -> str:
    return " ".join(f"{v:.4f}" for v in losses)


def torch_compile_demo() -> dict | None:
    """What torch.compile does to state_dict keys (no compilation happens: wrapping alone renames the keys)."""
    try:
        import torch
    except ImportError:
        print("\n(torch is not installed: skipping the torch.compile comparison)")
        return None
    print("\n== torch.compile, for comparison (torch", torch.__version__, ") ==")
    plain = make_model(torch.nn)
    compiled = torch.compile(make_model(torch.nn))
    keys = list(compiled.state_dict())
    print("torch.compile(model).state_dict() keys:", keys[:3], "...")
    out = {"keys": keys, "plain_keys": list(plain.state_dict())}
    for label, dst, src in (
        ("compiled.load_state_dict(plain.state_dict())", compiled, plain),
        ("plain.load_state_dict(compiled.state_dict())", plain, compiled),
    ):
        try:
            dst.load_state_dict(src.state_dict())
            out[label] = None
            print(f"{label}: loaded")
        except RuntimeError as e:
            first = str(e).strip().splitlines()
            out[label] = str(e)
            print(f"{label}: RuntimeError: {' '.join(s.strip() for s in first[:2])[:150]}...")
    return out


def main(argv: list[str] | None = None) -> dict:
    """Run the walk-through; returns the keys and loss trajectories it printed (the tests assert on them)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=10, help="steps before the checkpoint and after each resume")
    ap.add_argument("--out", default=None, help="checkpoint directory (default: a temporary one)")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    tmp = None
    if a.out is None:
        tmp = tempfile.TemporaryDirectory(prefix="lf_interchange_")
        a.out = tmp.name
    os.makedirs(a.out, exist_ok=True)
    try:
        return _walkthrough(a)
    finally:
        if tmp is not None:
            tmp.cleanup()


def _walkthrough(a) -> dict:
    lf.manual_seed(a.seed)
    x, y = make_data(seed=a.seed)

    print("== 1. eager training, then lf.save ==")
    model = make_model()
    opt = make_opt(model)
    before = eager_steps(model, opt, x, y, a.steps)
    print(f"eager losses:    {fmt(before)}")
    ckpt = os.path.join(a.out, "eager")
    lf.save({"model": model.state_dict(), "optim": opt.state_dict(), "step": a.steps}, ckpt)
    print(f"saved {ckpt}: {len(lf.checkpoint.inspect(ckpt))} tensors")

    print("\n== 2. resume the same checkpoint three ways ==")
    m_eager, o_eager, _ = resume(ckpt)
    m_comp, o_comp, _ = resume(ckpt)
    compiled = lf.compile(m_comp)
    m_graph, o_graph, _ = resume(ckpt)
    step = TrainStep(m_graph, o_graph)
    cont = {
        "eager": eager_steps(m_eager, o_eager, x, y, a.steps),
        "compiled": eager_steps(compiled, o_comp, x, y, a.steps),
        "graph": graph_steps(step, x, y, a.steps),
    }
    for k, v in cont.items():
        print(f"{k + ' losses:':16s} {fmt(v)}")
    gap = max(abs(p - q) / max(abs(p), 1e-12) for p, q in zip(cont["eager"], cont["graph"] + cont["compiled"]))
    print(f"largest relative difference from the eager continuation: {gap:.2e}")

    print("\n== 3. state_dict keys across modes ==")
    keys = {
        "eager": list(m_eager.state_dict()),
        "compiled": list(compiled.state_dict()),
        "graph": list(step.model.state_dict()),
    }
    print("keys:", keys["eager"])
    same = keys["eager"] == keys["compiled"] == keys["graph"]
    print("identical (and in the same order) for eager / lf.compile / lf.nn.Graph:", same)
    saved = {}
    for mode, (m, o) in {
        "eager": (m_eager, o_eager),
        "compiled": (compiled, o_comp),
        "graph": (m_graph, o_graph),
    }.items():
        path = os.path.join(a.out, f"after_{mode}")
        lf.save({"model": m.state_dict(), "optim": o.state_dict()}, path)
        saved[mode] = [(k, i.shape, str(i.dtype)) for k, i in lf.checkpoint.inspect(path).items()]
    print("checkpoint tensors (lf.checkpoint.inspect):", [k for k, _, _ in saved["eager"]][:4], "...")
    print(
        "each mode's checkpoint lists the same keys, shapes and dtypes:",
        saved["eager"] == saved["compiled"] == saved["graph"],
    )
    opt_keys = {
        mode: sorted(o.state_dict()["state"])
        for mode, o in (("eager", o_eager), ("compiled", o_comp), ("graph", o_graph))
    }

    prefixed = {"_orig_mod." + k: v for k, v in m_eager.state_dict().items()}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = lf.compile(make_model()).load_state_dict(prefixed)
    print(f"\nlf.compile(model).load_state_dict(<keys prefixed with '_orig_mod.'>) -> {result}")
    for w in caught:
        print("  warning:", w.message)

    out = {
        "before": before,
        "continued": cont,
        "keys": keys,
        "checkpoint_keys": saved,
        "optim_state_keys": opt_keys,
        "prefixed_load": result,
        "torch": torch_compile_demo(),
    }
    return out


if __name__ == "__main__":
    main()
