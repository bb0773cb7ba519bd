"""F.embedding_bag and nn.EmbeddingBag against torch 2.13: sum/mean/max, 2-D and offset bags, empty bags,
padding_idx, per_sample_weights, include_last_offset, weight gradients, eager and compiled, repr/state_dict, errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import lazyflow as lf
import lazyflow.nn.functional as F

W = np.random.default_rng(0).standard_normal((10, 3)).astype(np.float32)
IDX = np.array([1, 2, 4, 5, 4, 3, 2, 9])
OFF = np.array([0, 4, 4, 6])


def _t(m, a):
    return (lf if m is F else torch).tensor(a)


CASES = [
    ("2d-mean", lambda m, w: m.embedding_bag(_t(m, IDX.reshape(2, 4)), w)),
    ("2d-max-pad", lambda m, w: m.embedding_bag(_t(m, IDX.reshape(4, 2)), w, mode="max", padding_idx=4)),
    ("off-sum", lambda m, w: m.embedding_bag(_t(m, IDX), w, _t(m, OFF), mode="sum")),
    ("off-mean-pad-empty", lambda m, w: m.embedding_bag(_t(m, IDX), w, _t(m, OFF), padding_idx=4)),
    ("off-max", lambda m, w: m.embedding_bag(_t(m, IDX), w, _t(m, OFF), mode="max")),
    (
        "off-sum-psw",
        lambda m, w: m.embedding_bag(
            _t(m, IDX), w, _t(m, OFF), mode="sum", per_sample_weights=_t(m, np.linspace(0.5, 2, 8).astype(np.float32))
        ),
    ),
    (
        "last-offset",
        lambda m, w: m.embedding_bag(
            _t(m, IDX), w, _t(m, np.array([0, 3, 3, 8])), mode="mean", include_last_offset=True
        ),
    ),
]


@pytest.mark.parametrize("cid,fn", CASES, ids=[c[0] for c in CASES])
def test_embedding_bag_vs_torch(cid, fn):
    wt = torch.tensor(W, requires_grad=True)
    yt = fn(TF, wt)
    g = np.random.default_rng(1).standard_normal(tuple(yt.shape)).astype(np.float32)
    yt.backward(torch.tensor(g))
    for graph in [False, True] if cid in ("2d-mean", "2d-max-pad") else [False]:
        wl = lf.tensor(W, requires_grad=True)
        yl = (lf.compile(lambda w: fn(F, w)) if graph else (lambda w: fn(F, w)))(wl)
        np.testing.assert_allclose(yl.detach().numpy(), yt.detach().numpy(), rtol=1e-5, atol=1e-6)
        (yl * lf.tensor(g)).sum().backward()
        np.testing.assert_allclose(wl.grad.numpy(), wt.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_layer_repr_state_dict_and_values():
    tm = torch.nn.EmbeddingBag(10, 3, mode="sum", padding_idx=2)
    lm = lf.nn.EmbeddingBag(10, 3, mode="sum", padding_idx=2)
    assert repr(lm) == repr(tm) and list(lm.state_dict()) == list(tm.state_dict())
    assert not lm.weight.detach().numpy()[2].any()
    lm.load_state_dict({"weight": lf.tensor(tm.weight.detach().numpy())})
    np.testing.assert_allclose(
        lm(lf.tensor(IDX), lf.tensor(OFF)).detach().numpy(),
        tm(torch.tensor(IDX), torch.tensor(OFF)).detach().numpy(),
        rtol=1e-6,
    )


def test_bad_input():
    w = lf.tensor(W)
    with pytest.raises(ValueError, match="mode"):
        F.embedding_bag(lf.tensor(IDX), w, lf.tensor(OFF), mode="median")
    with pytest.raises(lf.ShapeError, match="offsets has to be None"):
        F.embedding_bag(lf.tensor(IDX.reshape(2, 4)), w, lf.tensor([0, 1]))
    with pytest.raises(lf.ShapeError, match="offsets has to be a 1D"):
        F.embedding_bag(lf.tensor(IDX), w)
    with pytest.raises(lf.ShapeError, match="start at 0"):
        F.embedding_bag(lf.tensor(IDX), w, lf.tensor([1, 3]))
    with pytest.raises(ValueError, match="only supported for mode='sum'"):
        F.embedding_bag(lf.tensor(IDX), w, lf.tensor(OFF), per_sample_weights=lf.ones(8))
    with pytest.raises(lf.IndexOutOfRangeError):
        F.embedding_bag(lf.tensor([0, 10]), w, lf.tensor([0]))
    with pytest.raises(lf.NotSupportedError, match="max_norm"):
        F.embedding_bag(lf.tensor(IDX), w, lf.tensor(OFF), max_norm=1.0)
