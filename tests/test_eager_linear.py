"""F.linear's lowering (one dot contracting the weight's dim 1, no transposed copy of the weight) against torch 2.13:
values and gradients of input, weight and bias for one row, a batch, a 1-D input, a 3-D input, no bias, float64;
and three SGD steps of the 784-256-10 MLP benchmark model, eager, against torch's."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import lazyflow as lf
import lazyflow.nn.functional as F

RNG = np.random.default_rng(0)


@pytest.mark.parametrize(
    "xshape, bias, dtype",
    [
        ((1, 784), True, np.float32),
        ((64, 784), True, np.float32),
        ((784,), True, np.float32),
        ((2, 3, 784), True, np.float32),
        ((5, 784), False, np.float32),
        ((1, 784), True, np.float64),
    ],
    ids=["row", "batch", "vector", "3d", "no-bias", "f64-row"],
)
def test_linear_vs_torch(xshape, bias, dtype):
    x = RNG.standard_normal(xshape).astype(dtype)
    w = (RNG.standard_normal((256, 784)) / 28).astype(dtype)
    b = RNG.standard_normal(256).astype(dtype) if bias else None
    g = RNG.standard_normal((*xshape[:-1], 256)).astype(dtype)
    tt = [torch.tensor(a, requires_grad=True) if a is not None else None for a in (x, w, b)]
    yt = TF.linear(*tt)
    yt.backward(torch.tensor(g))
    lt = [lf.tensor(a, requires_grad=True) if a is not None else None for a in (x, w, b)]
    yl = F.linear(*lt)
    assert yl.shape == tuple(yt.shape) and yl.dtype.name == str(yt.dtype).split(".")[1]
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(yl.detach().numpy(), yt.detach().numpy(), **tol)
    yl.backward(lf.tensor(g))
    for a, c in zip(lt, tt):
        if a is not None:
            np.testing.assert_allclose(a.grad.numpy(), c.grad.numpy(), **tol)


@pytest.mark.parametrize("batch", [1, 64])
def test_mlp_sgd_steps_vs_torch(batch):
    torch.manual_seed(0)
    tm = torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))
    lm = lf.nn.Sequential(lf.nn.Linear(784, 256), lf.nn.ReLU(), lf.nn.Linear(256, 10))
    lm.load_state_dict({k: lf.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    topt, lopt = torch.optim.SGD(tm.parameters(), lr=0.1), lf.optim.SGD(lm.parameters(), lr=0.1)
    for _ in range(3):
        x = RNG.standard_normal((batch, 784)).astype(np.float32)
        y = RNG.integers(0, 10, batch)
        lt = TF.cross_entropy(tm(torch.tensor(x)), torch.tensor(y))
        lt.backward()
        topt.step()
        topt.zero_grad()
        ll = F.cross_entropy(lm(lf.tensor(x)), lf.tensor(y))
        ll.backward()
        lopt.step()
        lopt.zero_grad()
        np.testing.assert_allclose(ll.item(), lt.item(), rtol=1e-5)
    for (k, v), p in zip(tm.state_dict().items(), lm.state_dict().values()):
        np.testing.assert_allclose(p.detach().numpy(), v.numpy(), rtol=1e-4, atol=1e-6, err_msg=k)


def test_linear_bad_shapes():
    with pytest.raises(lf.ShapeError, match=r"expected input of shape \(\*, 784\)"):
        F.linear(lf.ones(2, 783), lf.ones(256, 784))
    with pytest.raises(lf.ShapeError, match="bias of shape"):
        F.linear(lf.ones(2, 784), lf.ones(256, 784), lf.ones(255))
