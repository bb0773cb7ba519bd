"""fractional_max_pool2d/3d (+ _with_indices) and FractionalMaxPool2d/3d against torch 2.13 with the same
_random_samples: values, indices and input gradients, output_size and output_ratio, unbatched, compiled, errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import lazyflow as lf
import lazyflow.nn.functional as F

RNG = np.random.default_rng(0)
CASES = [
    ("2d-size", 2, (2, 3, 9, 10), dict(kernel_size=2, output_size=(5, 4))),
    ("2d-ratio-k3", 2, (1, 2, 11, 8), dict(kernel_size=3, output_ratio=(0.5, 0.6))),
    ("2d-unbatched", 2, (3, 7, 7), dict(kernel_size=2, output_size=3)),
    ("3d", 3, (1, 2, 7, 8, 9), dict(kernel_size=(2, 3, 2), output_ratio=0.5)),
]


@pytest.mark.parametrize("cid,nd,shape,kw", CASES, ids=[c[0] for c in CASES])
def test_vs_torch(cid, nd, shape, kw):
    x = RNG.standard_normal(shape).astype(np.float32)
    n_c = (1, shape[0]) if len(shape) == nd + 1 else shape[:2]
    u = RNG.random((*n_c, nd)).astype(np.float32)
    xt = torch.tensor(x, requires_grad=True)
    yt, it = getattr(TF, f"fractional_max_pool{nd}d")(xt, return_indices=True, _random_samples=torch.tensor(u), **kw)
    g = RNG.standard_normal(tuple(yt.shape)).astype(np.float32)
    yt.backward(torch.tensor(g))
    fn = getattr(F, f"fractional_max_pool{nd}d_with_indices")
    for graph in [False, True] if cid == "2d-size" else [False]:
        xl = lf.tensor(x, requires_grad=True)
        call = lambda a: fn(a, _random_samples=lf.tensor(u), **kw)
        yl, il = (lf.compile(call) if graph else call)(xl)
        np.testing.assert_array_equal(yl.detach().numpy(), yt.detach().numpy())
        np.testing.assert_array_equal(il.numpy(), it.numpy())
        (yl * lf.tensor(g)).sum().backward()
        np.testing.assert_allclose(xl.grad.numpy(), xt.grad.numpy(), rtol=1e-6, atol=1e-7)


def test_layers_and_random_samples():
    lm = lf.nn.FractionalMaxPool2d(2, output_size=4, return_indices=True)
    tm = torch.nn.FractionalMaxPool2d(2, output_size=4, return_indices=True)
    assert repr(lm) == repr(tm) and list(lm.state_dict()) == list(tm.state_dict())
    y, i = lm(lf.randn(2, 3, 9, 9))
    assert tuple(y.shape) == (2, 3, 4, 4) and i.dtype is lf.int64
    u = RNG.random((1, 2, 3)).astype(np.float32)
    x = RNG.standard_normal((1, 2, 6, 6, 6)).astype(np.float32)
    lm3 = lf.nn.FractionalMaxPool3d(2, output_ratio=0.5, _random_samples=lf.tensor(u))
    tm3 = torch.nn.FractionalMaxPool3d(2, output_ratio=0.5, _random_samples=torch.tensor(u))
    np.testing.assert_array_equal(lm3(lf.tensor(x)).numpy(), tm3(torch.tensor(x)).numpy())


def test_bad_input():
    with pytest.raises(ValueError, match="output size, or a pooling ratio"):
        lf.nn.FractionalMaxPool2d(2)
    with pytest.raises(ValueError, match="between 0 and 1"):
        lf.nn.FractionalMaxPool2d(2, output_ratio=1.5)
    with pytest.raises(lf.ShapeError, match="too large"):
        F.fractional_max_pool2d(lf.zeros(1, 1, 4, 4), 3, output_size=3)
    with pytest.raises(lf.ShapeError, match="_random_samples"):
        F.fractional_max_pool2d(lf.zeros(1, 1, 4, 4), 2, output_size=2, _random_samples=lf.zeros(1, 1, 3))
    with pytest.raises(ValueError, match="either an output_size or an output_ratio"):
        F.fractional_max_pool2d(lf.zeros(1, 1, 4, 4), 2)
