"""Margin, embedding, likelihood, multi-label, triplet and CTC losses (functional and layers) against torch 2.13:
values and gradients for every reduction, eager and compiled, special points, layer reprs/state_dicts, bad input."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as TF
from _harness import compiled

import lazyflow as lf
import lazyflow.nn.functional as F

R = np.random.default_rng(0)
X = R.standard_normal((4, 5)).astype(np.float32)
Y = R.standard_normal((4, 5)).astype(np.float32)
Z = R.standard_normal((4, 5)).astype(np.float32)
SIGN = np.array([1, -1, 1, -1], np.float32)
POS = (np.abs(R.standard_normal((4, 5))) + 0.2).astype(np.float32)
COUNTS = np.array(R.integers(0, 5, (4, 5)), np.float32)
BIN = (R.random((4, 5)) > 0.5).astype(np.float32)
CLS = np.array([0, 3, 4, 1], np.int64)
ML = np.array([[3, 0, -1, 1, 2], [1, 2, 4, 3, 0], [-1, 2, 3, 0, 0], [4, -1, 0, 0, 0]], np.int64)
W5 = np.linspace(0.5, 2.0, 5).astype(np.float32)


def _t(m, a):
    return (lf if m is F else torch).tensor(a)


# id, fn(module, x) where x is the differentiated input, x's value
CASES = [
    ("cosine_emb", lambda m, x, r: m.cosine_embedding_loss(x, _t(m, Y), _t(m, SIGN), 0.1, reduction=r), X),
    (
        "cosine_emb-1d",
        lambda m, x, r: m.cosine_embedding_loss(x, _t(m, Y[0]), _t(m, np.float32(-1)), reduction=r),
        X[0],
    ),
    ("hinge_emb", lambda m, x, r: m.hinge_embedding_loss(x, _t(m, np.sign(Y)), 0.7, reduction=r), X),
    ("margin_rank", lambda m, x, r: m.margin_ranking_loss(x, _t(m, Y), _t(m, np.sign(Z)), 0.2, reduction=r), X),
    ("gauss", lambda m, x, r: m.gaussian_nll_loss(x, _t(m, Y), _t(m, POS), reduction=r), X),
    ("gauss-var-grad", lambda m, x, r: m.gaussian_nll_loss(_t(m, X), _t(m, Y), x, True, 0.3, r), POS),
    ("gauss-homo", lambda m, x, r: m.gaussian_nll_loss(x, _t(m, Y), _t(m, POS[:, 0]), reduction=r), X),
    ("poisson", lambda m, x, r: m.poisson_nll_loss(x, _t(m, COUNTS), reduction=r), X),
    ("poisson-full", lambda m, x, r: m.poisson_nll_loss(x, _t(m, COUNTS), False, True, reduction=r), POS),
    ("ml_margin", lambda m, x, r: m.multilabel_margin_loss(x, _t(m, ML), reduction=r), X),
    ("ml_margin-1d", lambda m, x, r: m.multilabel_margin_loss(x, _t(m, ML[0]), reduction=r), X[0]),
    ("ml_soft", lambda m, x, r: m.multilabel_soft_margin_loss(x, _t(m, BIN), _t(m, W5), reduction=r), X),
    ("multi_margin", lambda m, x, r: m.multi_margin_loss(x, _t(m, CLS), reduction=r), X),
    ("multi_margin-p2-w", lambda m, x, r: m.multi_margin_loss(x, _t(m, CLS), 2, 0.5, _t(m, W5), reduction=r), X),
    ("triplet", lambda m, x, r: m.triplet_margin_loss(x, _t(m, Y), _t(m, Z), reduction=r), X),
    (
        "triplet-swap-p1",
        lambda m, x, r: m.triplet_margin_loss(x, _t(m, Y), _t(m, Z), 2.0, 1, swap=True, reduction=r),
        X,
    ),
    (
        "triplet-dist",
        lambda m, x, r: m.triplet_margin_with_distance_loss(
            x, _t(m, Y), _t(m, Z), distance_function=lambda a, b: 1 - m.cosine_similarity(a, b), margin=0.5, reduction=r
        ),
        X,
    ),
]
COMPILED = {"cosine_emb", "gauss", "ml_margin", "multi_margin-p2-w", "triplet"}


def _lf_fn(fn, r):
    return lambda x: fn(F, x, r)


_LF = {(cid, r): _lf_fn(fn, r) for cid, fn, _ in CASES for r in ("mean", "sum", "none")}


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("cid,fn,a", CASES, ids=[c[0] for c in CASES])
def test_functional_vs_torch(cid, fn, a, reduction):
    xt = torch.tensor(a, requires_grad=True)
    yt = fn(TF, xt, reduction)
    g = np.random.default_rng(1).standard_normal(tuple(yt.shape)).astype(np.float32)
    yt.backward(torch.tensor(g))
    for graph in [False, True] if cid in COMPILED and reduction == "mean" else [False]:
        xl = lf.tensor(a, requires_grad=True)
        yl = (compiled(_LF[cid, reduction]) if graph else _LF[cid, reduction])(xl)
        assert tuple(yl.shape) == tuple(yt.shape)
        np.testing.assert_allclose(yl.detach().numpy(), yt.detach().numpy(), rtol=1e-5, atol=1e-6)
        (yl * lf.tensor(g)).sum().backward()
        np.testing.assert_allclose(xl.grad.numpy(), xt.grad.numpy(), rtol=1e-4, atol=1e-6)


def test_margin_ties_and_clamp_boundaries():
    """Inputs exactly at the hinge: torch's clamp_min passes the gradient at the boundary; so does ours."""
    a = np.array([0.5, 0.0, 1.0, -0.5], np.float32)
    b = np.array([0.0, 0.5, 1.0, -0.5], np.float32)
    y = np.array([1.0, 1.0, -1.0, 1.0], np.float32)
    for fn, args in [
        ("margin_ranking_loss", lambda m: (_t(m, b), _t(m, y), 0.5)),
        ("hinge_embedding_loss", lambda m: (_t(m, -y), 1.0)),
    ]:
        xt = torch.tensor(a, requires_grad=True)
        getattr(TF, fn)(xt, *args(TF)).backward()
        xl = lf.tensor(a, requires_grad=True)
        getattr(F, fn)(xl, *args(F)).backward()
        np.testing.assert_allclose(xl.grad.numpy(), xt.grad.numpy())
    # gaussian variance below eps: clamped value, unclamped (pass-through) gradient, as torch
    v = np.array([0.0, 1e-8, 0.5], np.float32)
    vt = torch.tensor(v, requires_grad=True)
    TF.gaussian_nll_loss(torch.ones(3), torch.zeros(3), vt).backward()
    vl = lf.tensor(v, requires_grad=True)
    out = F.gaussian_nll_loss(lf.ones(3), lf.zeros(3), vl)
    out.backward()
    np.testing.assert_allclose(
        out.item(), TF.gaussian_nll_loss(torch.ones(3), torch.zeros(3), torch.tensor(v)).item(), rtol=1e-6
    )
    np.testing.assert_allclose(vl.grad.numpy(), vt.grad.numpy(), rtol=1e-5)


def _ctc_inputs(seed, t=12, n=3, c=5, s=4):
    rng = np.random.default_rng(seed)
    lp = torch.tensor(rng.standard_normal((t, n, c)).astype(np.float64)).log_softmax(2).numpy()
    tl = np.array([s, 2, 0][:n])
    tg = rng.integers(1, c, (n, s))
    tg[0, 1] = tg[0, 2]  # a repeated label: needs a blank between them
    il = np.array([t, t - 3, 5][:n])
    return lp, tg, il, tl


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_ctc_vs_torch(reduction):
    lp, tg, il, tl = _ctc_inputs(2, t=7)
    """Gradients are compared through log_softmax (the documented use; see _ctc's docstring for why)."""
    xt = torch.tensor(lp, requires_grad=True)
    yt = TF.ctc_loss(xt.log_softmax(2), torch.tensor(tg), torch.tensor(il), torch.tensor(tl), reduction=reduction)
    yt.sum().backward()
    for graph in [False, True] if reduction == "mean" else [False]:
        xl = lf.tensor(lp, requires_grad=True)

        def f(x):
            return F.ctc_loss(x.log_softmax(2), lf.tensor(tg), lf.tensor(il), lf.tensor(tl), reduction=reduction)

        yl = (lf.compile(f) if graph else f)(xl)
        np.testing.assert_allclose(yl.detach().numpy(), yt.detach().numpy(), rtol=1e-8)
        yl.sum().backward()
        np.testing.assert_allclose(xl.grad.numpy(), xt.grad.numpy(), rtol=1e-6, atol=1e-9)


def test_ctc_concatenated_targets_unbatched_and_impossible():
    lp, tg, il, tl = _ctc_inputs(3)
    flat = np.concatenate([tg[i, : tl[i]] for i in range(3)])
    ref = TF.ctc_loss(torch.tensor(lp), torch.tensor(flat), tuple(il), tuple(tl), blank=0, reduction="none")
    got = lf.nn.CTCLoss(reduction="none")(lf.tensor(lp), lf.tensor(flat), tuple(il), tuple(tl))
    np.testing.assert_allclose(got.numpy(), ref.numpy(), rtol=1e-8)
    ref1 = TF.ctc_loss(torch.tensor(lp[:, 0]), torch.tensor(tg[0]), (12,), (4,), reduction="none")
    got1 = F.ctc_loss(lf.tensor(lp[:, 0]), lf.tensor(tg[0]), (12,), (4,), reduction="none")
    assert got1.shape == ref1.shape
    np.testing.assert_allclose(got1.numpy(), ref1.numpy(), rtol=1e-8)
    # a target that cannot fit its input: inf, or 0 with a zero gradient under zero_infinity (as torch)
    args = (tg, (2, 9, 5), (4, 2, 0))
    for zi in (False, True):
        xt = torch.tensor(lp, requires_grad=True)
        yt = TF.ctc_loss(xt.log_softmax(2), torch.tensor(args[0]), args[1], args[2], reduction="sum", zero_infinity=zi)
        xl = lf.tensor(lp, requires_grad=True)
        yl = F.ctc_loss(xl.log_softmax(2), lf.tensor(args[0]), args[1], args[2], reduction="sum", zero_infinity=zi)
        np.testing.assert_allclose(yl.item(), yt.item(), rtol=1e-8)
        if zi:
            yt.backward(), yl.backward()
            np.testing.assert_allclose(xl.grad.numpy(), xt.grad.numpy(), rtol=1e-6, atol=1e-9)


def test_layers_repr_state_dict_and_values():
    pairs = [
        (lf.nn.CosineEmbeddingLoss(0.2), torch.nn.CosineEmbeddingLoss(0.2), (X, Y, SIGN)),
        (lf.nn.HingeEmbeddingLoss(), torch.nn.HingeEmbeddingLoss(), (X, np.sign(Y))),
        (
            lf.nn.MarginRankingLoss(0.1, reduction="sum"),
            torch.nn.MarginRankingLoss(0.1, reduction="sum"),
            (X[0], Y[0], SIGN[:1].repeat(5)),
        ),
        (lf.nn.GaussianNLLLoss(full=True), torch.nn.GaussianNLLLoss(full=True), (X, Y, POS)),
        (lf.nn.PoissonNLLLoss(), torch.nn.PoissonNLLLoss(), (X, COUNTS)),
        (lf.nn.MultiLabelMarginLoss(), torch.nn.MultiLabelMarginLoss(), (X, ML)),
        (lf.nn.MultiLabelSoftMarginLoss(lf.tensor(W5)), torch.nn.MultiLabelSoftMarginLoss(torch.tensor(W5)), (X, BIN)),
        (
            lf.nn.MultiMarginLoss(2, weight=lf.tensor(W5)),
            torch.nn.MultiMarginLoss(2, weight=torch.tensor(W5)),
            (X, CLS),
        ),
        (lf.nn.TripletMarginLoss(swap=True), torch.nn.TripletMarginLoss(swap=True), (X, Y, Z)),
        (
            lf.nn.TripletMarginWithDistanceLoss(margin=2.0),
            torch.nn.TripletMarginWithDistanceLoss(margin=2.0),
            (X, Y, Z),
        ),
        (
            lf.nn.NLLLoss2d(),
            torch.nn.NLLLoss2d(),
            (np.log(np.full((2, 3, 2, 2), 1 / 3, np.float32)), np.zeros((2, 2, 2), np.int64)),
        ),
    ]
    for lm, tm, args in pairs:
        assert repr(lm) == repr(tm)
        assert list(lm.state_dict()) == list(tm.state_dict())
        got = lm(*[lf.tensor(a) for a in args])
        np.testing.assert_allclose(got.numpy(), tm(*[torch.tensor(a) for a in args]).numpy(), rtol=1e-5, atol=1e-6)
    lm = lf.nn.MultiMarginLoss(weight=lf.ones(5))
    lm.load_state_dict({"weight": lf.tensor(W5)})
    np.testing.assert_allclose(lm.weight.numpy(), W5)


def test_bad_input():
    with pytest.raises(lf.ShapeError, match="same shape"):
        F.cosine_embedding_loss(lf.zeros(2, 3), lf.zeros(2, 4), lf.ones(2))
    with pytest.raises(lf.ShapeError, match="target of shape"):
        F.cosine_embedding_loss(lf.zeros(2, 3), lf.zeros(2, 3), lf.ones(3))
    with pytest.raises(lf.ShapeError, match="one shape"):
        F.margin_ranking_loss(lf.zeros(2), lf.zeros(2), lf.ones(3))
    with pytest.raises(lf.ShapeError, match="incorrect size"):
        F.gaussian_nll_loss(lf.zeros(2, 3), lf.zeros(2, 3), lf.ones(3, 3))
    with pytest.raises(ValueError, match="negative"):
        F.gaussian_nll_loss(lf.zeros(2), lf.zeros(2), lf.tensor([1.0, -1.0]))
    with pytest.raises(lf.IndexOutOfRangeError, match="out of range"):
        F.multi_margin_loss(lf.zeros(2, 3), lf.tensor([0, 3]))
    with pytest.raises(lf.DTypeError, match="integer"):
        F.multi_margin_loss(lf.zeros(2, 3), lf.tensor([0.0, 1.0]))
    with pytest.raises(ValueError, match="p == 1 and p == 2"):
        F.multi_margin_loss(lf.zeros(2, 3), lf.tensor([0, 1]), p=3)
    with pytest.raises(lf.IndexOutOfRangeError):
        F.multilabel_margin_loss(lf.zeros(2, 3), lf.tensor([[0, 5, -1], [1, -1, 0]]))
    with pytest.raises(lf.ShapeError, match="one rank"):
        F.triplet_margin_loss(lf.zeros(2, 3), lf.zeros(3), lf.zeros(2, 3))
    with pytest.raises(ValueError, match="margin must be greater than 0"):
        lf.nn.TripletMarginWithDistanceLoss(margin=0.0)
    with pytest.raises(ValueError, match="not a valid value for reduction"):
        F.triplet_margin_loss(lf.zeros(2, 3), lf.zeros(2, 3), lf.zeros(2, 3), reduction="avg")
    lp = lf.zeros(5, 2, 4)
    with pytest.raises(lf.ShapeError, match="input_lengths must be in"):
        F.ctc_loss(lp, lf.ones(2, 3).long(), (6, 5), (3, 3))
    with pytest.raises(lf.ShapeError, match="one per batch element"):
        F.ctc_loss(lp, lf.ones(2, 3).long(), (5,), (3, 3))
    with pytest.raises(lf.ShapeError, match="sum to"):
        F.ctc_loss(lp, lf.ones(5).long(), (5, 5), (3, 3))
    with pytest.raises(lf.IndexOutOfRangeError):
        F.ctc_loss(lp, lf.full((2, 3), 4).long(), (5, 5), (3, 3))
