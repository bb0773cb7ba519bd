"""F.linear_cross_entropy, nn.LinearCrossEntropyLoss and LinearCrossEntropyOptions against torch 2.13: values and
gradients (input, weight, bias), ignore_index None/int, label smoothing, class weights, options, compiled, errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import lazyflow as lf
import lazyflow.nn.functional as F

RNG = np.random.default_rng(0)
X = RNG.standard_normal((5, 4)).astype(np.float32)
WL = RNG.standard_normal((6, 4)).astype(np.float32)
B = RNG.standard_normal(6).astype(np.float32)
T = np.array([0, 5, 2, 2, 3])


@pytest.mark.parametrize(
    "kw",
    [{}, {"ignore_index": 2, "reduction": "sum"}, {"label_smoothing": 0.1, "weight": np.linspace(0.5, 2, 6)}],
    ids=["plain", "ignore-sum", "smooth-weight"],
)
def test_functional_vs_torch(kw):
    def args(m, k):
        out = dict(k)
        if "weight" in out:
            out["weight"] = m.tensor(out["weight"].astype(np.float32))
        return out

    xt, wt, bt = (torch.tensor(a, requires_grad=True) for a in (X, WL, B))
    yt = TF.linear_cross_entropy(xt, wt, torch.tensor(T), linear_bias=bt, **args(torch, kw))
    yt.backward()
    xl, wl, bl = (lf.tensor(a, requires_grad=True) for a in (X, WL, B))
    yl = F.linear_cross_entropy(xl, wl, lf.tensor(T), linear_bias=bl, **args(lf, kw))
    np.testing.assert_allclose(yl.item(), yt.item(), rtol=1e-5)
    yl.backward()
    for a, b in ((xl, xt), (wl, wt), (bl, bt)):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-4, atol=1e-6)


def test_layer_vs_torch_and_compiled():
    torch.manual_seed(0)
    tm = torch.nn.LinearCrossEntropyLoss(4, 6, bias=True, options=torch.nn.LinearCrossEntropyOptions())
    lm = lf.nn.LinearCrossEntropyLoss(4, 6, bias=True, options=lf.nn.LinearCrossEntropyOptions())
    lr, tr = repr(lm).splitlines(), repr(tm).splitlines()
    assert lr[0] == tr[0] and lr[2:] == tr[2:]  # the options' own repr differs (a dataclass here)
    assert lr[1].split(", options=")[0] == tr[1].split(", options=")[0]
    assert list(lm.state_dict()) == list(tm.state_dict())
    lm.load_state_dict({k: lf.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    ref = tm(torch.tensor(X), torch.tensor(T)).item()
    np.testing.assert_allclose(lm(lf.tensor(X), lf.tensor(T)).item(), ref, rtol=1e-5)
    np.testing.assert_allclose(lf.compile(lm)(lf.tensor(X), lf.tensor(T)).item(), ref, rtol=1e-5)
    assert repr(lf.nn.LinearCrossEntropyLoss(4, 6)) == repr(torch.nn.LinearCrossEntropyLoss(4, 6))


def test_errors():
    with pytest.raises(lf.NotSupportedError, match="out_features"):
        lf.nn.LinearCrossEntropyLoss(4, 6, out_features=(3,))
    with pytest.raises(lf.NotSupportedError, match="2-D linear_weight"):
        F.linear_cross_entropy(lf.tensor(X), lf.zeros(6, 3, 4), lf.tensor(T))
    with pytest.raises(lf.IndexOutOfRangeError):
        F.linear_cross_entropy(lf.tensor(X), lf.tensor(WL), lf.tensor([0, 1, 2, 3, 6]))
