"""lp_pool1d/2d/3d, adaptive_max_pool1d/2d/3d, max/avg/adaptive_avg_pool3d (functional and layers) against
torch 2.13: forward, indices and input gradient, eager and compiled, first-maximum tie rule, repr, bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as TF
from _harness import compiled

import lazyflow as lf
import lazyflow.nn.functional as F

CASES = [
    ("amax2d-idx", lambda m, x: m.adaptive_max_pool2d(x, (3, 4), return_indices=True), (2, 3, 7, 9)),
    ("amax2d-none-unbatched", lambda m, x: m.adaptive_max_pool2d(x, (None, 2)), (3, 7, 5)),
    ("amax1d-idx", lambda m, x: m.adaptive_max_pool1d(x, 4, True), (2, 3, 10)),
    ("amax1d-upsample", lambda m, x: m.adaptive_max_pool1d(x, 7), (1, 2, 5)),
    ("lp2d", lambda m, x: m.lp_pool2d(x, 2, 3, 2), (2, 3, 7, 8)),
    ("lp1d-ceil", lambda m, x: m.lp_pool1d(x.abs() + 0.1, 3, 2, ceil_mode=True), (2, 3, 7)),
    ("lp2d-inf", lambda m, x: m.lp_pool2d(x, math.inf, (2, 3)), (2, 3, 7, 8)),
    ("lp1d-frac", lambda m, x: m.lp_pool1d(x.abs() + 0.1, 1.5, 3), (2, 3, 7)),
    (
        "max3d-idx",
        lambda m, x: m.max_pool3d(x, (2, 3, 2), (1, 2, 2), (1, 1, 0), ceil_mode=True, return_indices=True),
        (2, 3, 5, 6, 7),
    ),
    ("avg3d", lambda m, x: m.avg_pool3d(x, (2, 3, 2), (1, 2, 2), (1, 1, 0), True, False), (2, 3, 5, 6, 7)),
    ("aavg3d", lambda m, x: m.adaptive_avg_pool3d(x, (2, None, 3)), (2, 3, 5, 6, 7)),
    ("amax3d-idx-unbatched", lambda m, x: m.adaptive_max_pool3d(x, (2, 4, 3), return_indices=True), (3, 5, 6, 7)),
    ("lp3d", lambda m, x: m.lp_pool3d(x, 2, 2), (2, 3, 4, 4, 5)),
]
COMPILED = {"amax2d-idx", "lp2d", "max3d-idx"}
_LF = {cid: (lambda f: lambda x: f(F, x))(fn) for cid, fn, _ in CASES}


@pytest.mark.parametrize("cid,fn,shape", CASES, ids=[c[0] for c in CASES])
def test_vs_torch_forward_indices_and_grad(cid, fn, shape):
    rng = np.random.default_rng(len(cid))
    a = rng.standard_normal(shape).astype(np.float32)
    xt = torch.tensor(a, requires_grad=True)
    yt = fn(TF, xt)
    it = None
    if isinstance(yt, tuple):
        yt, it = yt
    g = rng.standard_normal(tuple(yt.shape)).astype(np.float32)
    yt.backward(torch.tensor(g))
    for graph in [False, True] if cid in COMPILED else [False]:
        xl = lf.tensor(a, requires_grad=True)
        yl = (compiled(_LF[cid]) if graph else _LF[cid])(xl)
        if it is not None:
            yl, il = yl
            assert il.dtype is lf.int64
            np.testing.assert_array_equal(il.numpy(), it.numpy())
        np.testing.assert_allclose(yl.detach().numpy(), yt.detach().numpy(), rtol=1e-5, atol=1e-6)
        (yl * lf.tensor(g)).sum().backward()
        np.testing.assert_allclose(xl.grad.numpy(), xt.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_adaptive_max_ties_pick_the_first_like_torch():
    """A constant input: every window is a tie; torch's CPU loop keeps the first (row-major) maximum, and the
    gradient goes to that element only."""
    a = np.ones((1, 1, 5, 5), np.float32)
    xt = torch.tensor(a, requires_grad=True)
    yt, it = TF.adaptive_max_pool2d(xt, 2, return_indices=True)
    yt.sum().backward()
    xl = lf.tensor(a, requires_grad=True)
    yl, il = F.adaptive_max_pool2d(xl, 2, return_indices=True)
    yl.sum().backward()
    np.testing.assert_array_equal(il.numpy(), it.numpy())
    np.testing.assert_array_equal(xl.grad.numpy(), xt.grad.numpy())


def test_layers_match_torch_and_repr():
    a = np.random.default_rng(5).standard_normal((2, 3, 6, 7)).astype(np.float32)
    pairs = [
        ("AdaptiveMaxPool2d", ((3, None),)),
        ("AdaptiveMaxPool2d", (2, True)),
        ("LPPool2d", (2, 3)),
        ("LPPool2d", (1.5, (2, 3), 1, True)),
    ]
    for name, args in pairs:
        lm, tm = getattr(lf.nn, name)(*args), getattr(torch.nn, name)(*args)
        assert repr(lm) == repr(tm)
        x = np.abs(a) + 0.1
        yl, yt = lm(lf.tensor(x)), tm(torch.tensor(x))
        if isinstance(yt, tuple):
            np.testing.assert_array_equal(yl[1].numpy(), yt[1].numpy())
            yl, yt = yl[0], yt[0]
        np.testing.assert_allclose(yl.numpy(), yt.numpy(), rtol=1e-5, atol=1e-6)
    v = np.abs(np.random.default_rng(6).standard_normal((1, 2, 4, 5, 6)).astype(np.float32)) + 0.1
    for name, args in [
        ("MaxPool3d", (2,)),
        ("AvgPool3d", (2, 1, 1)),
        ("AdaptiveAvgPool3d", ((2, None, 3),)),
        ("LPPool3d", (2, 2)),
        ("AdaptiveMaxPool3d", (2,)),
    ]:
        lm, tm = getattr(lf.nn, name)(*args), getattr(torch.nn, name)(*args)
        assert repr(lm) == repr(tm)
        np.testing.assert_allclose(lm(lf.tensor(v)).numpy(), tm(torch.tensor(v)).numpy(), rtol=1e-5, atol=1e-6)
    b = np.abs(a[:, :, 0]) + 0.1
    for lm, tm in [
        (lf.nn.AdaptiveMaxPool1d(3), torch.nn.AdaptiveMaxPool1d(3)),
        (lf.nn.LPPool1d(2, 3), torch.nn.LPPool1d(2, 3)),
    ]:
        assert repr(lm) == repr(tm)
        np.testing.assert_allclose(lm(lf.tensor(b)).numpy(), tm(torch.tensor(b)).numpy(), rtol=1e-5, atol=1e-6)


def test_bad_input():
    with pytest.raises(lf.ShapeError, match="positive"):
        F.adaptive_max_pool2d(lf.zeros(1, 2, 4, 4), (0, 2))
    with pytest.raises(lf.ShapeError, match="3-D .* or 4-D"):
        F.adaptive_max_pool2d(lf.zeros(4, 4), 2)
    with pytest.raises(ValueError, match="output_size"):
        F.adaptive_max_pool2d(lf.zeros(1, 2, 4, 4), (1, 2, 3))
    with pytest.raises(lf.ShapeError, match=r"AdaptiveMaxPool1d"):
        lf.nn.AdaptiveMaxPool1d(2)(lf.zeros(1, 2, 3, 4))
    with pytest.raises(lf.ShapeError, match=r"MaxPool3d.*D, H, W"):
        lf.nn.MaxPool3d(2)(lf.zeros(2, 3, 4))
    with pytest.raises(lf.ShapeError, match="too small"):
        F.lp_pool2d(lf.zeros(1, 1, 2, 2), 2, 3)
    with pytest.raises(RuntimeError):
        TF.lp_pool2d(torch.zeros(1, 1, 2, 2), 2, 3)
