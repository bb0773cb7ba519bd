"""Optimizers on complex parameters step as torch's do: each complex number as two reals (torch's view_as_real in
every elementwise optimizer), state kept complex in torch's state_dict layout; eager and inside an nn.Graph."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import lazyflow as lf

RNG = np.random.default_rng(0)
P0 = (RNG.standard_normal((3, 4)) + 1j * RNG.standard_normal((3, 4))).astype(np.complex64)
GRADS = [(RNG.standard_normal((3, 4)) + 1j * RNG.standard_normal((3, 4))).astype(np.complex64) for _ in range(3)]

CASES = [
    ("Adam", {"amsgrad": True}),
    ("AdamW", {}),
    ("Adagrad", {}),
    ("Adadelta", {}),
    ("Adamax", {}),
    ("ASGD", {}),
    ("NAdam", {}),
    ("RAdam", {}),
    ("RMSprop", {"momentum": 0.9, "centered": True}),
    ("Rprop", {}),
    ("SGD", {"momentum": 0.9, "nesterov": True, "weight_decay": 0.1}),
]


@pytest.mark.parametrize("name,kw", CASES, ids=[c[0] for c in CASES])
def test_complex_parameter_steps_like_torch(name, kw):
    tp, lp = torch.nn.Parameter(torch.tensor(P0)), lf.nn.Parameter(lf.tensor(P0))
    to = getattr(torch.optim, name)([tp], lr=0.1, **kw)
    lo = getattr(lf.optim, name)([lp], lr=0.1, **kw)
    for g in GRADS:
        tp.grad, lp.grad = torch.tensor(g), lf.tensor(g)
        to.step()
        lo.step()
    np.testing.assert_allclose(lp.detach().numpy(), tp.detach().numpy(), rtol=2e-5, atol=2e-6)
    ts, ls = to.state_dict()["state"][0], lo.state_dict()["state"][0]
    assert sorted(ts) == sorted(ls)
    for k, v in ts.items():
        if torch.is_tensor(v) and v.is_complex():
            assert ls[k].dtype == lf.complex64
            np.testing.assert_allclose(ls[k].numpy(), v.numpy(), rtol=2e-5, atol=2e-6)


def test_complex_parameter_adam_in_a_graph_step_like_torch():
    """A complex linear least-squares fit: torch's Adam steps vs lf.nn.Graph with Adam (gradients in torch's
    conjugate convention, the update on real pairs)."""
    x = (RNG.standard_normal((8, 3)) + 1j * RNG.standard_normal((8, 3))).astype(np.complex64)
    y = (RNG.standard_normal((8, 4)) + 1j * RNG.standard_normal((8, 4))).astype(np.complex64)
    tw = torch.nn.Parameter(torch.tensor(P0[:, :4]))
    topt = torch.optim.Adam([tw], lr=0.05)
    lw = lf.nn.Parameter(lf.tensor(P0[:, :4]))
    lopt = lf.optim.Adam([lw], lr=0.05)
    holder = lf.nn.Module()
    holder.w = lw

    class Step(lf.nn.Graph):
        def __init__(self):
            super().__init__()
            self.m = holder
            self.add_optimizer(lopt)

        def build(self, x, y):
            loss = ((x @ self.m.w - y).abs() ** 2).mean()
            loss.backward()
            return loss

    step = Step()
    for _ in range(3):
        topt.zero_grad()
        tl = ((torch.tensor(x) @ tw - torch.tensor(y)).abs() ** 2).mean()
        tl.backward()
        topt.step()
        ll = step(lf.tensor(x), lf.tensor(y))
        np.testing.assert_allclose(ll.item(), tl.item(), rtol=1e-5)
    np.testing.assert_allclose(lw.detach().numpy(), tw.detach().numpy(), rtol=2e-5, atol=2e-6)


@pytest.mark.parametrize("name", ["Adafactor", "Muon"])
def test_optimizers_torch_refuses_complex_for_refuse_it_too(name):
    tp, lp = torch.nn.Parameter(torch.tensor(P0)), lf.nn.Parameter(lf.tensor(P0))
    tp.grad, lp.grad = torch.tensor(GRADS[0]), lf.tensor(GRADS[0])
    with pytest.raises(RuntimeError, match="does not support complex parameters"):
        getattr(torch.optim, name)([tp], lr=0.1).step()
    with pytest.raises(RuntimeError, match="does not support complex parameters"):
        getattr(lf.optim, name)([lp], lr=0.1).step()
    np.testing.assert_array_equal(lp.detach().numpy(), P0)  # nothing changed
