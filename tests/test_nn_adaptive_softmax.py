"""nn.AdaptiveLogSoftmaxWithLoss against torch 2.13: repr, state_dict keys (torch's weights load), output, loss and
parameter gradients, log_prob/predict, unbatched input, compiled, and the errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import lazyflow as lf

X = np.random.default_rng(0).standard_normal((6, 8)).astype(np.float32)
T = np.array([0, 4, 5, 11, 12, 19])


def _pair():
    torch.manual_seed(0)
    tm = torch.nn.AdaptiveLogSoftmaxWithLoss(8, 20, [5, 12], div_value=2.0, head_bias=True)
    lm = lf.nn.AdaptiveLogSoftmaxWithLoss(8, 20, [5, 12], div_value=2.0, head_bias=True)
    assert repr(lm) == repr(tm) and list(lm.state_dict()) == list(tm.state_dict())
    lm.load_state_dict({k: lf.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    return lm, tm


@pytest.mark.parametrize("graph", [False, True])
def test_output_loss_and_gradients_vs_torch(graph):
    lm, tm = _pair()
    rt = tm(torch.tensor(X), torch.tensor(T))
    rt.loss.backward()
    run = lf.compile(lm) if graph else lm
    rl = run(lf.tensor(X), lf.tensor(T))
    np.testing.assert_allclose(rl.output.detach().numpy(), rt.output.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(rl.loss.item(), rt.loss.item(), rtol=1e-6)
    rl.loss.backward()
    tg = dict(tm.named_parameters())
    for k, p in lm.named_parameters():
        np.testing.assert_allclose(p.grad.numpy(), tg[k].grad.numpy(), rtol=1e-4, atol=1e-6, err_msg=k)


def test_log_prob_predict_and_unbatched():
    lm, tm = _pair()
    np.testing.assert_allclose(
        lm.log_prob(lf.tensor(X)).detach().numpy(), tm.log_prob(torch.tensor(X)).detach().numpy(), rtol=1e-5, atol=1e-5
    )
    np.testing.assert_array_equal(lm.predict(lf.tensor(X)).numpy(), tm.predict(torch.tensor(X)).numpy())
    ru, tu = lm(lf.tensor(X[2]), lf.tensor(T[2])), tm(torch.tensor(X[2]), torch.tensor(T[2]))
    assert ru.output.shape == tu.output.shape == ()
    np.testing.assert_allclose(ru.loss.item(), tu.loss.item(), rtol=1e-6)


def test_errors():
    with pytest.raises(ValueError, match="cutoffs should be a sequence of unique"):
        lf.nn.AdaptiveLogSoftmaxWithLoss(8, 20, [12, 5])
    with pytest.raises(ValueError, match="length larger than 0"):
        lf.nn.AdaptiveLogSoftmaxWithLoss(8, 20, [])
    lm, _ = _pair()
    with pytest.raises(lf.IndexOutOfRangeError):
        lm(lf.tensor(X), lf.tensor([0, 1, 2, 3, 4, 20]))
    with pytest.raises(lf.ShapeError, match="same batch size"):
        lm(lf.tensor(X), lf.tensor(T[:3]))


def test_reset_parameters_redraws_every_linear():
    lm, _ = _pair()
    before = [p.detach().numpy().copy() for p in lm.parameters()]
    lm.reset_parameters()
    assert all(not np.array_equal(b, p.detach().numpy()) for b, p in zip(before, lm.parameters()) if b.size > 1)
