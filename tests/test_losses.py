"""Losses against torch (the oracle): one table of cases drives forward values and input gradients for the
functional forms (eager and compiled) and the module forms; then torch's edge cases and bad input."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import lazyflow as lf
import lazyflow.nn as nn
import lazyflow.nn.functional as F

pytestmark = pytest.mark.filterwarnings("ignore:size_average and reduce args")

RTOL, ATOL = 1e-5, 1e-6


def _logits(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def _labels(rng, c, *shape, ignore=None):
    t = rng.integers(0, c, shape).astype(np.int64)
    if ignore is not None:
        t.flat[::3] = ignore
    return t


def _probs(rng, *shape, dim=1):
    p = rng.random(shape).astype(np.float32) + 0.1
    return (p / p.sum(axis=dim, keepdims=True)).astype(np.float32)


def _weights(rng, c):
    return (rng.random(c) + 0.5).astype(np.float32)


def _unit(rng, *shape):
    return rng.uniform(0.05, 0.95, shape).astype(np.float32)


# (id, make(rng) -> dict of numpy arrays ("input" is differentiated), call(F, tensors) -> loss)
CASES = [
    (
        "ce_mean",
        lambda r: dict(input=_logits(r, 6, 5), target=_labels(r, 5, 6)),
        lambda F, a: F.cross_entropy(a["input"], a["target"]),
    ),
    (
        "ce_sum",
        lambda r: dict(input=_logits(r, 6, 5), target=_labels(r, 5, 6)),
        lambda F, a: F.cross_entropy(a["input"], a["target"], reduction="sum"),
    ),
    (
        "ce_none",
        lambda r: dict(input=_logits(r, 6, 5), target=_labels(r, 5, 6)),
        lambda F, a: F.cross_entropy(a["input"], a["target"], reduction="none"),
    ),
    (
        "ce_weight",
        lambda r: dict(input=_logits(r, 7, 4), target=_labels(r, 4, 7), weight=_weights(r, 4)),
        lambda F, a: F.cross_entropy(a["input"], a["target"], weight=a["weight"]),
    ),
    (
        "ce_weight_ignore",
        lambda r: dict(input=_logits(r, 7, 4), target=_labels(r, 4, 7, ignore=-100), weight=_weights(r, 4)),
        lambda F, a: F.cross_entropy(a["input"], a["target"], weight=a["weight"]),
    ),
    (
        "ce_ignore_custom_none",
        lambda r: dict(input=_logits(r, 7, 4), target=_labels(r, 4, 7, ignore=2)),
        lambda F, a: F.cross_entropy(a["input"], a["target"], ignore_index=2, reduction="none"),
    ),
    (
        "ce_smooth",
        lambda r: dict(input=_logits(r, 6, 5), target=_labels(r, 5, 6)),
        lambda F, a: F.cross_entropy(a["input"], a["target"], label_smoothing=0.2),
    ),
    (
        "ce_smooth_weight_ignore",
        lambda r: dict(input=_logits(r, 9, 5), target=_labels(r, 5, 9, ignore=-100), weight=_weights(r, 5)),
        lambda F, a: F.cross_entropy(a["input"], a["target"], weight=a["weight"], label_smoothing=0.15),
    ),
    (
        "ce_smooth_weight_sum",
        lambda r: dict(input=_logits(r, 6, 5), target=_labels(r, 5, 6, ignore=-100), weight=_weights(r, 5)),
        lambda F, a: F.cross_entropy(a["input"], a["target"], weight=a["weight"], label_smoothing=0.3, reduction="sum"),
    ),
    (
        "ce_smooth_none",
        lambda r: dict(input=_logits(r, 6, 5), target=_labels(r, 5, 6, ignore=-100)),
        lambda F, a: F.cross_entropy(a["input"], a["target"], label_smoothing=0.1, reduction="none"),
    ),
    (
        "ce_kdim",
        lambda r: dict(input=_logits(r, 2, 4, 3, 5), target=_labels(r, 4, 2, 3, 5, ignore=-100), weight=_weights(r, 4)),
        lambda F, a: F.cross_entropy(a["input"], a["target"], weight=a["weight"], label_smoothing=0.05),
    ),
    (
        "ce_single_sample",
        lambda r: dict(input=_logits(r, 5), target=np.array(3)),
        lambda F, a: F.cross_entropy(a["input"], a["target"]),
    ),
    (
        "ce_probs",
        lambda r: dict(input=_logits(r, 6, 5), target=_probs(r, 6, 5)),
        lambda F, a: F.cross_entropy(a["input"], a["target"]),
    ),
    (
        "ce_probs_weight_smooth",
        lambda r: dict(input=_logits(r, 6, 5), target=_probs(r, 6, 5), weight=_weights(r, 5)),
        lambda F, a: F.cross_entropy(a["input"], a["target"], weight=a["weight"], label_smoothing=0.1),
    ),
    (
        "ce_probs_kdim_none",
        lambda r: dict(input=_logits(r, 2, 3, 4), target=_probs(r, 2, 3, 4)),
        lambda F, a: F.cross_entropy(a["input"], a["target"], reduction="none"),
    ),
    (
        "ce_probs_weight_sum",
        lambda r: dict(input=_logits(r, 4, 3), target=_probs(r, 4, 3), weight=_weights(r, 3)),
        lambda F, a: F.cross_entropy(a["input"], a["target"], weight=a["weight"], reduction="sum"),
    ),
    (
        "ce_legacy_size_average",
        lambda r: dict(input=_logits(r, 6, 5), target=_labels(r, 5, 6)),
        lambda F, a: F.cross_entropy(a["input"], a["target"], size_average=False),
    ),
    (
        "nll_weight_ignore",
        lambda r: dict(input=_logits(r, 7, 4), target=_labels(r, 4, 7, ignore=1), weight=_weights(r, 4)),
        lambda F, a: F.nll_loss(a["input"], a["target"], weight=a["weight"], ignore_index=1),
    ),
    (
        "nll_none_kdim",
        lambda r: dict(input=_logits(r, 3, 4, 2), target=_labels(r, 4, 3, 2)),
        lambda F, a: F.nll_loss(a["input"], a["target"], reduction="none"),
    ),
    (
        "mse",
        lambda r: dict(input=_logits(r, 4, 3), target=_logits(r, 4, 3)),
        lambda F, a: F.mse_loss(a["input"], a["target"]),
    ),
    (
        "mse_sum_weight",
        lambda r: dict(input=_logits(r, 4, 3), target=_logits(r, 4, 3), weight=_unit(r, 4, 3)),
        lambda F, a: F.mse_loss(a["input"], a["target"], reduction="sum", weight=a["weight"]),
    ),
    (
        "l1_none",
        lambda r: dict(input=_logits(r, 4, 3), target=_logits(r, 4, 3)),
        lambda F, a: F.l1_loss(a["input"], a["target"], reduction="none"),
    ),
    (
        "smooth_l1",
        lambda r: dict(input=_logits(r, 5, 3), target=_logits(r, 5, 3)),
        lambda F, a: F.smooth_l1_loss(a["input"], a["target"], beta=0.5),
    ),
    (
        "smooth_l1_beta0",
        lambda r: dict(input=_logits(r, 5, 3), target=_logits(r, 5, 3)),
        lambda F, a: F.smooth_l1_loss(a["input"], a["target"], beta=0.0, reduction="sum"),
    ),
    (
        "huber",
        lambda r: dict(input=_logits(r, 5, 3), target=_logits(r, 5, 3)),
        lambda F, a: F.huber_loss(a["input"], a["target"], delta=0.7),
    ),
    (
        "bce",
        lambda r: dict(input=_unit(r, 4, 3), target=_unit(r, 4, 3)),
        lambda F, a: F.binary_cross_entropy(a["input"], a["target"]),
    ),
    (
        "bce_weight_none",
        lambda r: dict(input=_unit(r, 4, 3), target=_unit(r, 4, 3), weight=_unit(r, 3)),
        lambda F, a: F.binary_cross_entropy(a["input"], a["target"], weight=a["weight"], reduction="none"),
    ),
    (
        "bce_logits",
        lambda r: dict(input=_logits(r, 4, 3) * 5, target=_unit(r, 4, 3)),
        lambda F, a: F.binary_cross_entropy_with_logits(a["input"], a["target"]),
    ),
    (
        "bce_logits_posweight",
        lambda r: dict(
            input=_logits(r, 4, 3) * 5, target=_unit(r, 4, 3), weight=_unit(r, 4, 3), pos_weight=_weights(r, 3)
        ),
        lambda F, a: F.binary_cross_entropy_with_logits(
            a["input"], a["target"], weight=a["weight"], pos_weight=a["pos_weight"], reduction="sum"
        ),
    ),
    (
        "kl_batchmean",
        lambda r: dict(input=np.log(_probs(r, 4, 5)), target=_probs(r, 4, 5)),
        lambda F, a: F.kl_div(a["input"], a["target"], reduction="batchmean"),
    ),
    (
        "kl_log_target_none",
        lambda r: dict(input=np.log(_probs(r, 4, 5)), target=np.log(_probs(r, 4, 5))),
        lambda F, a: F.kl_div(a["input"], a["target"], reduction="none", log_target=True),
    ),
    (
        "soft_margin",
        lambda r: dict(input=_logits(r, 4, 3), target=np.sign(_logits(r, 4, 3))),
        lambda F, a: F.soft_margin_loss(a["input"], a["target"]),
    ),
]
IDS = [c[0] for c in CASES]


def _run(call, Fmod, arrays, to_tensor):
    ts = {k: to_tensor(v, k == "input") for k, v in arrays.items()}
    return ts, call(Fmod, ts)


@pytest.mark.parametrize("mode", ["eager", "graph"])
@pytest.mark.parametrize("name,make,call", CASES, ids=IDS)
def test_functional_loss_matches_torch(name, make, call, mode):
    arrays = make(np.random.default_rng(len(name)))
    tts, tout = _run(call, torch.nn.functional, arrays, lambda v, g: torch.tensor(v, requires_grad=g))
    cot = np.random.default_rng(0).standard_normal(tuple(tout.shape)).astype(np.float32)
    tout.backward(torch.tensor(cot))

    lts = {k: lf.tensor(v, requires_grad=k == "input") for k, v in arrays.items()}
    keys = list(lts)
    fn = lambda *vals: call(F, dict(zip(keys, vals)))
    if mode == "graph":
        fn = lf.compile(fn)
    out = fn(*lts.values())
    np.testing.assert_allclose(out.detach().numpy(), tout.detach().numpy(), rtol=RTOL, atol=ATOL)
    out.backward(lf.tensor(cot))
    np.testing.assert_allclose(lts["input"].grad.numpy(), tts["input"].grad.numpy(), rtol=RTOL, atol=ATOL)


# (lazyflow/torch class name, constructor kwargs builder, case id whose inputs it takes)
MODULES = [
    ("CrossEntropyLoss", lambda T, r: dict(weight=T(_weights(r, 5)), label_smoothing=0.1), "ce_smooth"),
    ("CrossEntropyLoss", lambda T, r: dict(ignore_index=2, reduction="sum"), "ce_ignore_custom_none"),
    ("NLLLoss", lambda T, r: dict(weight=T(_weights(r, 4)), ignore_index=1), "nll_weight_ignore"),
    ("MSELoss", lambda T, r: dict(reduction="sum"), "mse"),
    ("L1Loss", lambda T, r: dict(), "mse"),
    ("SmoothL1Loss", lambda T, r: dict(beta=0.3), "smooth_l1"),
    ("HuberLoss", lambda T, r: dict(delta=2.0), "huber"),
    ("BCELoss", lambda T, r: dict(weight=T(_unit(r, 3))), "bce"),
    ("BCEWithLogitsLoss", lambda T, r: dict(pos_weight=T(_weights(r, 3))), "bce_logits"),
    ("KLDivLoss", lambda T, r: dict(reduction="batchmean"), "kl_batchmean"),
    ("SoftMarginLoss", lambda T, r: dict(), "soft_margin"),
]


@pytest.mark.parametrize("cls,kwargs,case", MODULES, ids=[f"{m[0]}-{i}" for i, m in enumerate(MODULES)])
def test_loss_modules_match_torch(cls, kwargs, case):
    make = dict((c[0], c[1]) for c in CASES)[case]
    arrays = make(np.random.default_rng(5))
    tm = getattr(torch.nn, cls)(**kwargs(torch.tensor, np.random.default_rng(9)))
    lm = getattr(nn, cls)(**kwargs(lf.tensor, np.random.default_rng(9)))
    assert [(k, tuple(v.shape)) for k, v in lm.state_dict().items()] == [
        (k, tuple(v.shape)) for k, v in tm.state_dict().items()
    ]
    assert repr(lm) == repr(tm)
    x_t = torch.tensor(arrays["input"], requires_grad=True)
    tout = tm(x_t, torch.tensor(arrays["target"]))
    tout.backward()
    x = lf.tensor(arrays["input"], requires_grad=True)
    out = lm(x, lf.tensor(arrays["target"]))
    np.testing.assert_allclose(out.detach().numpy(), tout.detach().numpy(), rtol=RTOL, atol=ATOL)
    out.backward()
    np.testing.assert_allclose(x.grad.numpy(), x_t.grad.numpy(), rtol=RTOL, atol=ATOL)


def test_cross_entropy_all_targets_ignored_is_nan_like_torch():
    x = np.zeros((2, 3), np.float32)
    t = np.full(2, -100)
    ref = torch.nn.functional.cross_entropy(torch.tensor(x), torch.tensor(t)).item()
    assert np.isnan(ref) and np.isnan(F.cross_entropy(lf.tensor(x), lf.tensor(t)).item())


def test_cross_entropy_bad_input():
    x = lf.zeros(4, 3)
    with pytest.raises(lf.ShapeError, match=r"expected target of shape \[4\].*got target of shape \[4, 1\]"):
        F.cross_entropy(x, lf.zeros(4, 1, dtype=lf.int64))
    with pytest.raises(lf.IndexOutOfRangeError, match="index 3 is out of range"):
        F.cross_entropy(x, lf.tensor([0, 1, 2, 3]))
    with pytest.raises(lf.ShapeError, match=r"probability targets must have the input's shape \[4, 3\]"):
        F.cross_entropy(x, lf.zeros(4, 2))
    with pytest.raises(lf.ShapeError, match="weight should be a 1-D tensor of size 3"):
        F.cross_entropy(x, lf.tensor([0, 1, 2, 1]), weight=lf.ones(4))
    with pytest.raises(ValueError, match="label_smoothing"):
        F.cross_entropy(x, lf.tensor([0, 1, 2, 1]), label_smoothing=1.5)
    with pytest.raises(ValueError, match="not a valid value for reduction"):
        nn.CrossEntropyLoss(reduction="avg")
    with pytest.raises(lf.DTypeError, match="integer class indices"):
        F.nll_loss(x, lf.zeros(4))
    # ignore_index targets are exempt from the range check
    F.cross_entropy(x, lf.tensor([0, -100, 2, 1]))


def test_elementwise_losses_reject_mismatched_shapes():
    with pytest.raises(lf.ShapeError, match=r"target size \(\[4\]\).*input size \(\[4, 1\]\)"):
        F.mse_loss(lf.zeros(4, 1), lf.zeros(4))
    with pytest.raises(ValueError, match="negative values for beta"):
        F.smooth_l1_loss(lf.zeros(2), lf.zeros(2), beta=-1.0)


def test_bce_clamps_log_at_minus_100_like_torch():
    x = np.array([0.0, 1.0, 0.5], np.float32)
    t = np.array([1.0, 0.0, 1.0], np.float32)
    ref = torch.nn.functional.binary_cross_entropy(torch.tensor(x), torch.tensor(t), reduction="none").numpy()
    np.testing.assert_allclose(F.binary_cross_entropy(lf.tensor(x), lf.tensor(t), reduction="none").numpy(), ref)
