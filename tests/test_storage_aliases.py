"""detach() and .data share storage with their source, as in torch: the everyday PyTorch patterns that write
through them (``m.weight.data.normal_()`` init, ``bias.data.zero_()``, an EMA over ``state_dict()`` values,
``p.detach().copy_()``) change the model. torch is the reference throughout."""

import numpy as np
import pytest
import torch

import lazyflow as lf
from lazyflow import nn


def _np(t):
    return np.asarray(t.detach().numpy())


def _pair(seed=0):
    """The same small MLP in lazyflow and torch, with equal weights."""
    lf.manual_seed(seed)
    lm = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    tm = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
    with torch.no_grad():
        for tp, lp in zip(tm.state_dict().values(), lm.state_dict().values()):
            tp.copy_(torch.from_numpy(_np(lp)))
    return lm, tm


def _same(lm, tm):
    for (k, a), b in zip(lm.state_dict().items(), tm.state_dict().values()):
        np.testing.assert_allclose(_np(a), b.numpy(), rtol=1e-6, atol=1e-7, err_msg=k)


@pytest.mark.parametrize(
    "write",
    [
        lambda m, F: m[0].bias.data.zero_(),
        lambda m, F: m[0].weight.data.fill_(0.25),
        lambda m, F: m[2].weight.data.mul_(2.0).add_(1.0),
        lambda m, F: m[2].bias.detach().copy_(F.ones(3)),
        lambda m, F: m.state_dict()["0.weight"].clamp_(-0.1, 0.1),
        lambda m, F: m[0].weight.data.__setitem__(1, 7.0),
    ],
    ids=["data.zero_", "data.fill_", "data.mul_.add_", "detach.copy_", "state_dict.clamp_", "data setitem"],
)
def test_writes_through_an_alias_reach_the_module(write):
    lm, tm = _pair()
    write(lm, lf)
    write(tm, torch)
    _same(lm, tm)


def test_random_init_through_data_changes_the_weight():
    """DCGAN / transformers ``_init_weights``: ``weight.data.normal_(0.0, 0.02)``."""
    lf.manual_seed(0)
    m = nn.Linear(256, 256)
    before = _np(m.weight).copy()
    m.weight.data.normal_(mean=0.0, std=0.02)
    w = _np(m.weight)
    assert not np.array_equal(w, before)
    assert abs(w.std() - 0.02) < 0.002 and abs(w.mean()) < 0.002


def test_ema_over_state_dict_values_matches_torch():
    """timm's ModelEmaV2: ``ema_v.copy_(ema_v * decay + (1 - decay) * model_v)`` over ``state_dict().values()``."""
    lm, tm = _pair()
    le, te = _pair(seed=1)
    rng = np.random.default_rng(0)
    for _ in range(3):
        new = [rng.standard_normal(p.shape).astype(np.float32) for p in tm.parameters()]
        with lf.no_grad():
            for p, a in zip(lm.parameters(), new):
                p.copy_(lf.tensor(a))
        with torch.no_grad():
            for p, a in zip(tm.parameters(), new):
                p.copy_(torch.from_numpy(a))
        for model, ema, F in ((lm, le, lf), (tm, te, torch)):
            with F.no_grad():
                for ev, mv in zip(ema.state_dict().values(), model.state_dict().values()):
                    ev.copy_(ev * 0.9 + (1.0 - 0.9) * mv)
    _same(le, te)


def test_alias_taken_before_training_shows_every_step():
    """torch's state_dict() values and p.detach() follow the parameters through optimizer steps (eager and a
    compiled Graph step), and their buffers are never deleted by donation."""
    lm, tm = _pair()
    lsd, tsd = lm.state_dict(), tm.state_dict()
    lopt = lf.optim.SGD(lm.parameters(), lr=0.1, momentum=0.9)
    topt = torch.optim.SGD(tm.parameters(), lr=0.1, momentum=0.9)
    x = np.random.default_rng(1).standard_normal((5, 4)).astype(np.float32)

    class Step(nn.Graph):
        def __init__(self):
            super().__init__()
            self.m = lm
            self.add_optimizer(lopt)

        def build(self, x):
            loss = self.m(x).square().mean()
            loss.backward()
            return loss

    step = Step()
    for i in range(4):
        if i < 2:
            lm(lf.tensor(x)).square().mean().backward()
            lopt.step()
            lopt.zero_grad()
        else:
            step(lf.tensor(x))
        tm(torch.from_numpy(x)).square().mean().backward()
        topt.step()
        topt.zero_grad()
        for k in tsd:
            np.testing.assert_allclose(_np(lsd[k]), tsd[k].numpy(), rtol=1e-5, atol=1e-6, err_msg=f"{k}, step {i}")


def test_assigning_data_gives_storage_of_its_own():
    lp, tp = lf.ones(3), torch.ones(3)
    la, ta = lp.detach(), tp.detach()
    lp.data = lf.zeros(3)
    tp.data = torch.zeros(3)
    lp.add_(5.0), tp.add_(5.0)
    la.mul_(3.0), ta.mul_(3.0)
    np.testing.assert_array_equal(_np(lp), tp.numpy())
    np.testing.assert_array_equal(_np(la), ta.numpy())


def test_writing_through_an_alias_before_backward_is_caught_like_torch():
    lw, tw = lf.ones(3, requires_grad=True), torch.ones(3, requires_grad=True)
    ly, ty = (lw * lw).sum(), (tw * tw).sum()
    tw.detach().mul_(2.0)
    with pytest.raises(RuntimeError):
        ty.backward()
    lw.detach().mul_(2.0)
    with pytest.raises(RuntimeError):
        ly.backward()


def test_compiled_calls_never_leak_traced_values_into_aliases():
    lm, _ = _pair()
    sd = lm.state_dict()
    ref = {k: _np(v).copy() for k, v in sd.items()}
    cm = lf.compile(lm)
    with lf.no_grad():
        cm(lf.tensor(np.ones((2, 4), np.float32)))
    for k, v in sd.items():
        np.testing.assert_array_equal(np.asarray(v.jax()), ref[k])  # a concrete array, not a tracer


def test_many_aliases_in_a_loop_keep_the_group_small():
    p = lf.ones(4)
    for _ in range(200):
        p.detach().norm()  # a logging loop: every alias dies right away
    assert len(p._peers) <= 17
    keep = p.detach()
    p.add_(1.0)
    np.testing.assert_array_equal(_np(keep), np.full(4, 2.0, np.float32))


def test_in_place_shape_ops_leave_aliases_their_own_shape():
    """``x.t_()`` / ``x.unsqueeze_()`` change x's sizes only: an alias taken before keeps its shape and values (as
    torch's view does)."""
    for op in (lambda t: t.t_(), lambda t: t.unsqueeze_(0), lambda t: t.squeeze_()):
        lx, tx = lf.tensor(np.arange(6.0, dtype=np.float32).reshape(2, 3)), torch.arange(6.0).reshape(2, 3)
        la, ta = lx.detach(), tx.detach()
        op(lx), op(tx)
        assert tuple(la.shape) == tuple(ta.shape) and tuple(lx.shape) == tuple(tx.shape)
        np.testing.assert_array_equal(_np(la), ta.numpy())
