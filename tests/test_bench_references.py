"""The hand-written jax.jit references of the benchmarks (benchmarks/jax_models.py) against torch: the same weights
give the same loss, and one step gives the same parameters, BatchNorm running statistics and optimizer state, so a
Graph/jax.jit ratio in BENCHMARKS.md compares lazyflow with the same model (not a cheaper one)."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)  # benchmarks/ is a top-level package of the repository, not of the installed wheel

from benchmarks import jax_models
from benchmarks.models import build

# small shapes of the benchmark cases: model -> (input shape, optimizer, classes, steps, tolerance). Parameters and
# optimizer state are compared as vectors (relative error of the update / state): BatchNorm over few values per
# channel (ResNet layer4: 16) amplifies rounding in the gradients of the layers before it, element by element.
# ResNet-50 gets one step: after an lr=0.01 step its next loss is chaotic in rounding (torch and XLA part by 2%),
# and even one step's stem gradient is 2.3% off in float32 -- torch's own float32 against torch in float64 (measured:
# 2.27e-2, XLA's 2.29e-2); a wrong formula moves these by O(1).
CASES = {
    "mlp": ((4, 784), "sgd", 10, 2, 1e-4),
    "small_cnn": ((3, 3, 32, 32), "sgd", 10, 2, 1e-4),
    "resnet18": ((4, 3, 64, 64), "sgd", 1000, 2, 2e-3),
    "resnet50": ((4, 3, 64, 64), "sgd", 1000, 1, 5e-2),
    "transformer": ((2, 12), "adamw", 1000, 2, 1e-3),
}

# parameters whose gradient is zero in exact arithmetic (a conv bias right before BatchNorm): what torch and XLA
# compute there is rounding noise, compared with nothing
_ZERO_GRAD = {"small_cnn": ("0.bias", "3.bias")}


def _close(ours, theirs, tol, what):
    ours, theirs = np.asarray(ours, np.float64).ravel(), np.asarray(theirs, np.float64).ravel()
    err = np.linalg.norm(ours - theirs) / max(np.linalg.norm(theirs), 1e-12)
    assert err <= tol, f"{what}: relative error {err:.2e} > {tol:.0e}"


def _data(name, shape, classes, rng):
    if name == "transformer":
        return rng.integers(0, classes, shape), rng.integers(0, classes, shape)
    return rng.standard_normal(shape).astype(np.float32), rng.integers(0, classes, shape[0])


def _torch_step(m, opt, xs, ys):
    out = m(torch.from_numpy(xs))
    loss = torch.nn.functional.cross_entropy(out.reshape(-1, out.shape[-1]), torch.from_numpy(ys).reshape(-1))
    loss.backward()
    opt.step()
    opt.zero_grad()
    return loss.item()


@pytest.mark.parametrize("name", list(CASES))
def test_reference_step_matches_torch(name):
    shape, opt_name, classes, steps, tol = CASES[name]
    rng = np.random.default_rng(0)
    torch.manual_seed(0)
    m = build(torch.nn, name)
    with torch.no_grad():  # BatchNorm's affine parameters away from 1/0, so a swapped weight/bias shows
        for k, v in m.named_parameters():
            if ".bn" in k or k.startswith("bn") or (name == "small_cnn" and k[0] in "14"):
                v.add_(torch.from_numpy(rng.uniform(-0.3, 0.3, v.shape).astype(np.float32)))
    fn, init = jax_models.make_step(name, opt_name)
    params, buffers = jax_models.split_state(m)
    initial = {k: np.asarray(v) for k, v in params.items()}
    opt_state = init(params)
    opt = (
        torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9)
        if opt_name == "sgd"
        else torch.optim.AdamW(m.parameters(), lr=1e-4)
    )
    for step in range(1, steps + 1):  # a second step reads the first one's momentum / moments
        xs, ys = _data(name, shape, classes, rng)
        t_loss = _torch_step(m, opt, xs, ys)
        params, buffers, opt_state, loss = fn(params, buffers, opt_state, step, xs, ys)
        np.testing.assert_allclose(float(loss), t_loss, rtol=2e-5, atol=1e-5)
    for k, v in m.named_parameters():  # the update each made, against torch's
        if k in _ZERO_GRAD.get(name, ()):
            continue
        ours, theirs, first = np.asarray(params[k]), v.detach().numpy(), initial[k]
        if k.endswith("in_proj_bias"):  # the key bias has a zero gradient (softmax ignores a constant per query):
            d = ours.shape[0] // 3  # AdamW turns its rounding noise into lr-sized steps of any sign
            ours, theirs, first = (np.delete(a, np.s_[d : 2 * d]) for a in (ours, theirs, first))
        _close(ours - first, theirs - first, tol, f"{k} update")
    floats = {k: v for k, v in m.named_buffers() if v.dtype.is_floating_point}
    assert set(floats) == set(buffers)
    for k, v in floats.items():
        _close(buffers[k], v.numpy(), 1e-4, k)
    for p_name, p in m.named_parameters():
        st = opt.state[p]
        if p_name in _ZERO_GRAD.get(name, ()):
            continue
        if opt_name == "sgd":
            _close(opt_state[p_name], st["momentum_buffer"].numpy(), tol, f"{p_name} momentum")
        else:
            _close(opt_state["m"][p_name], st["exp_avg"].numpy(), tol, f"{p_name} exp_avg")
            _close(opt_state["v"][p_name], st["exp_avg_sq"].numpy(), tol, f"{p_name} exp_avg_sq")


def test_reference_donates_its_state():
    """The reference donates parameters, buffers and optimizer state, as lazyflow's Graph does: the inputs of a
    step are deleted after it (a reference that copied its state every step would flatter lazyflow)."""
    torch.manual_seed(0)
    m = build(torch.nn, "small_cnn")
    fn, init = jax_models.make_step("small_cnn", "sgd")
    params, buffers = jax_models.split_state(m)
    opt_state = init(params)
    rng = np.random.default_rng(0)
    xs, ys = _data("small_cnn", (2, 3, 32, 32), 10, rng)
    new = fn(params, buffers, opt_state, 1, xs, ys)
    assert all(a.is_deleted() for a in [*params.values(), *buffers.values(), *opt_state.values()])
    assert not any(a.is_deleted() for t in new[:3] for a in t.values())
