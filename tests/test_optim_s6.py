"""Adafactor and Muon against torch.optim 2.13: every step of a training run (eager and inside an lf.nn.Graph step),
the state_dict layout and values, torch's state dict loaded as numpy and lazyflow's loaded into torch, constructor
signatures and argument errors."""

import copy
import inspect

import numpy as np
import pytest
import torch

import lazyflow as lf
from lazyflow import nn

RTOL, ATOL = 1e-5, 1e-6
STEPS = 6

# (optimizer name, kwargs of group 0, overrides for a second group or None)
CASES = [
    ("Adafactor", dict(), None),
    ("Adafactor", dict(lr=0.05, beta2_decay=-0.5, eps=(1e-4, 1e-2), d=1.5, weight_decay=0.1), dict(lr=0.02)),
    ("Adafactor", dict(lr=0.5, maximize=True), None),
    ("Muon", dict(lr=0.02), None),
    ("Muon", dict(lr=0.02, momentum=0.8, nesterov=False, weight_decay=0.0), dict(lr=0.05)),
    ("Muon", dict(lr=0.01, adjust_lr_fn="match_rms_adamw", ns_steps=3, eps=1e-5), None),
]
IDS = [
    f"{n}-{'-'.join(f'{k}={v}' for k, v in kw.items()) or 'defaults'}{'-2groups' if s else ''}" for n, kw, s in CASES
]


def _torch_model(seed=0):
    torch.manual_seed(seed)
    # no biases: Muon takes 2-D parameters only; Adafactor's vector state is exercised by the raw-tensor tests
    return torch.nn.Sequential(torch.nn.Linear(3, 8, bias=False), torch.nn.Tanh(), torch.nn.Linear(8, 2, bias=False))


def _lf_model(tm):
    lm = nn.Sequential(nn.Linear(3, 8, bias=False), nn.Tanh(), nn.Linear(8, 2, bias=False))
    lm.load_state_dict({k: v.detach().numpy().copy() for k, v in tm.state_dict().items()})
    return lm


def _groups(model, second):
    if second is None:
        return model.parameters()
    return [{"params": model[0].parameters()}, {"params": model[2].parameters(), **second}]


def _batch(k):
    rng = np.random.default_rng(100 + k)
    return rng.standard_normal((16, 3)).astype(np.float32), rng.standard_normal((16, 2)).astype(np.float32)


def _loss(model, x, y):
    return ((model(x) - y) ** 2).mean()


class _Step(nn.Graph):
    def __init__(self, model, opt):
        super().__init__()
        self.model = model
        self.add_optimizer(opt)

    def build(self, x, y):
        loss = _loss(self.model, x, y)
        loss.backward()
        return loss


def _torch_step(tm, to, k):
    x, y = _batch(k)
    to.zero_grad()
    loss = _loss(tm, torch.tensor(x), torch.tensor(y))
    loss.backward()
    to.step()
    return loss.item()


def _close_states(lsd, tsd, what=""):
    assert lsd["param_groups"] == tsd["param_groups"], what
    assert [list(g) for g in lsd["param_groups"]] == [list(g) for g in tsd["param_groups"]], what
    assert list(lsd["state"]) == list(tsd["state"]), what
    for i, ts in tsd["state"].items():
        ls = lsd["state"][i]
        assert list(ls) == list(ts), f"{what}: state {i}"
        for key, tv in ts.items():
            lv = ls[key]
            assert tuple(lv.shape) == tuple(tv.shape), f"{what}: {i}.{key}"
            assert str(lv.dtype).split(".")[-1] == str(tv.dtype).split(".")[-1], f"{what}: {i}.{key}"
            np.testing.assert_allclose(lv.numpy(), tv.numpy(), rtol=RTOL, atol=ATOL, err_msg=f"{what}: {i}.{key}")


@pytest.mark.parametrize("mode", ["eager", "graph"])
@pytest.mark.parametrize("name,kwargs,second", CASES, ids=IDS)
def test_training_matches_torch_after_every_step(name, kwargs, second, mode):
    tm = _torch_model()
    lm = _lf_model(tm)
    to = getattr(torch.optim, name)(_groups(tm, second), **kwargs)
    lo = getattr(lf.optim, name)(_groups(lm, second), **kwargs)
    step = _Step(lm, lo) if mode == "graph" else None
    for k in range(STEPS):
        t_loss = _torch_step(tm, to, k)
        x, y = (lf.tensor(a) for a in _batch(k))
        if step is not None:
            l_loss = step(x, y).item()
        else:
            lo.zero_grad()
            loss = _loss(lm, x, y)
            loss.backward()
            lo.step()
            l_loss = loss.item()
        np.testing.assert_allclose(l_loss, t_loss, rtol=RTOL, atol=ATOL, err_msg=f"loss at step {k}")
        for (n, a), b in zip(lm.state_dict().items(), tm.state_dict().values()):
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=RTOL, atol=ATOL, err_msg=f"{mode} {k} {n}")
    _close_states(lo.state_dict(), to.state_dict(), mode)
    if step is not None:
        assert step.cache_info().compiles == 1


def _data(name, seed=0, steps=STEPS):
    shapes = ((3, 4), (2, 5)) if name == "Muon" else ((3, 4), (5,), (), (2, 3, 4))
    rng = np.random.default_rng(seed)
    init = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    grads = [[rng.standard_normal(s).astype(np.float32) for s in shapes] for _ in range(steps)]
    return init, grads


def _set_grads(params, grads, lib):
    for p, g in zip(params, grads):
        p.grad = None if g is None else (lf.tensor(g) if lib is lf else torch.tensor(g))


def _raw_groups(params, second):
    return params if second is None else [{"params": params[:1]}, {"params": params[1:], **second}]


SD_CASES = [0, 1, 4]  # each optimizer's two-group case and the defaults of the one with vector/scalar/3-D state


@pytest.mark.parametrize("name,kwargs,second", [CASES[i] for i in SD_CASES], ids=[IDS[i] for i in SD_CASES])
def test_state_dict_matches_torch_and_resumes(name, kwargs, second):
    """Vectors, scalars and 3-D parameters too (Adafactor's unfactored and batched factored state); one parameter
    without a gradient at some steps; a fresh optimizer loaded from the state dict halfway continues identically."""
    init, grads = _data(name)
    lp = [lf.tensor(a, requires_grad=True) for a in init]
    tp = [torch.tensor(a, requires_grad=True) for a in init]
    lo = getattr(lf.optim, name)(_raw_groups(lp, second), **kwargs)
    to = getattr(torch.optim, name)(_raw_groups(tp, second), **kwargs)
    _close_states(lo.state_dict(), to.state_dict(), "before the first step")
    for k in range(STEPS):
        if k == STEPS // 2:
            saved = copy.deepcopy(lo.state_dict())
            lp = [lf.tensor(p.detach().numpy(), requires_grad=True) for p in lp]
            lo = getattr(lf.optim, name)(_raw_groups(lp, second), lr=7.0)  # the loaded groups must win
            lo.load_state_dict(saved)
        g = list(grads[k])
        if k in (0, 4):
            g[1] = None
        _set_grads(lp, g, lf)
        _set_grads(tp, g, torch)
        lo.step()
        to.step()
        for a, b in zip(lp, tp):
            np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=RTOL, atol=ATOL, err_msg=str(k))
        _close_states(lo.state_dict(), to.state_dict(), f"after step {k}")


def test_adafactor_special_gradients_match_torch():
    """All-zero gradients (the second moment hits eps1), a zero row, a huge gradient (the RMS clip d) and a zero
    parameter (alpha falls back to eps2)."""
    shapes = ((3, 4), (4,))
    init = [np.zeros(shapes[0], np.float32), np.ones(shapes[1], np.float32)]
    grads = []
    for k in range(6):
        g0 = np.full(shapes[0], 0.5 * (k + 1), np.float32)
        g0[1] = 0.0
        g1 = np.zeros(shapes[1], np.float32) if k == 1 else np.full(shapes[1], 1e6 if k == 3 else -0.3, np.float32)
        grads.append([np.zeros(shapes[0], np.float32) if k == 2 else g0, g1])
    lp = [lf.tensor(a, requires_grad=True) for a in init]
    tp = [torch.tensor(a, requires_grad=True) for a in init]
    lo, to = lf.optim.Adafactor(lp, lr=0.1), torch.optim.Adafactor(tp, lr=0.1)
    for k, g in enumerate(grads):
        _set_grads(lp, g, lf)
        _set_grads(tp, g, torch)
        lo.step()
        to.step()
        for a, b in zip(lp, tp):
            np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=RTOL, atol=ATOL, err_msg=str(k))
    _close_states(lo.state_dict(), to.state_dict())


def _numpy_state_dict(sd):
    return {
        "state": {i: {n: v.numpy() for n, v in s.items()} for i, s in sd["state"].items()},
        "param_groups": copy.deepcopy(sd["param_groups"]),
    }


@pytest.mark.parametrize("name,kwargs,second", CASES, ids=IDS)
def test_state_dicts_cross_between_torch_and_lazyflow(name, kwargs, second):
    """torch's state dict (as numpy) loads into lazyflow, and lazyflow's (as torch tensors) into torch: both
    continue as the other would have."""
    tm = _torch_model(1)
    to = getattr(torch.optim, name)(_groups(tm, second), **kwargs)
    for k in range(STEPS // 2):
        _torch_step(tm, to, k)
    lm = _lf_model(tm)
    lo = getattr(lf.optim, name)(_groups(lm, second), lr=123.0)
    lo.load_state_dict(_numpy_state_dict(to.state_dict()))
    _close_states(lo.state_dict(), to.state_dict(), "loaded")
    for k in range(STEPS // 2, STEPS):
        _torch_step(tm, to, k)
        lo.zero_grad()
        _loss(lm, *(lf.tensor(a) for a in _batch(k))).backward()
        lo.step()
    _close_states(lo.state_dict(), to.state_dict(), "end")
    back = lo.state_dict()
    tm2 = _torch_model(1)
    tm2.load_state_dict({k: torch.tensor(v.numpy()) for k, v in lm.state_dict().items()})
    to2 = getattr(torch.optim, name)(_groups(tm2, second), lr=123.0)
    to2.load_state_dict(
        {
            "state": {i: {n: torch.tensor(v.numpy()) for n, v in s.items()} for i, s in back["state"].items()},
            "param_groups": copy.deepcopy(back["param_groups"]),
        }
    )
    _torch_step(tm2, to2, 50)
    _torch_step(tm, to, 50)
    _close_states(_as_lf(to2.state_dict()), to.state_dict(), "lazyflow's state loaded into torch")


def _as_lf(sd):
    return {
        "state": {i: {n: lf.tensor(v.numpy()) for n, v in s.items()} for i, s in sd["state"].items()},
        "param_groups": sd["param_groups"],
    }


@pytest.mark.parametrize("name", ["Adafactor", "Muon"])
def test_signature_is_torchs_and_exported(name):
    ours, theirs = inspect.signature(getattr(lf.optim, name)), inspect.signature(getattr(torch.optim, name))
    assert [(p.name, p.kind, p.default) for p in ours.parameters.values()] == [
        (p.name, p.kind, p.default) for p in theirs.parameters.values()
    ]
    assert name in lf.optim.__all__


BAD = [
    ("Adafactor", dict(lr=-1.0), "Learning rate should be >= 0 but is: -1.0"),
    ("Adafactor", dict(beta2_decay=0.5), "beta2_decay should be <= 0 but is: 0.5"),
    ("Adafactor", dict(eps=(-1.0, 1e-3)), "epsilon1 should be >= 0 but is: -1.0"),
    ("Adafactor", dict(eps=(None, -1e-3)), "epsilon2 should be >= 0 but is: -0.001"),
    ("Adafactor", dict(d=0.5), "Clipping threshold d should be >= 1 but is: 0.5"),
    ("Adafactor", dict(weight_decay=-0.1), "weight_decay should be >= 0 but is: -0.1"),
    ("Muon", dict(lr=-1.0), "Learning rate should be >= 0 but is: -1.0"),
    ("Muon", dict(momentum=-0.5), "momentum should be >= 0 but is: -0.5"),
    ("Muon", dict(weight_decay=-0.1), "weight decay should be >= 0 but is: -0.1"),
    ("Muon", dict(adjust_lr_fn="sqrt"), "Adjust learning rate function sqrt is not supported"),
]


@pytest.mark.parametrize("name,kwargs,match", BAD, ids=[f"{n}-{k}" for n, k, _ in BAD])
def test_bad_hyperparameters_raise_value_error_like_torch(name, kwargs, match):
    with pytest.raises(ValueError, match=match):
        getattr(torch.optim, name)([torch.ones(2, 2, requires_grad=True)], **kwargs)
    with pytest.raises(ValueError, match=match):
        getattr(lf.optim, name)([lf.ones(2, 2, requires_grad=True)], **kwargs)


def test_muon_refuses_what_torch_refuses():
    for m in (torch, lf):
        with pytest.raises(ValueError, match="Muon only supports 2D parameters"):
            m.optim.Muon([m.ones(3, requires_grad=True)])
    for m in (torch, lf):
        opt = m.optim.Muon([m.ones(2, 2, requires_grad=True)], ns_steps=100)
        opt.param_groups[0]["params"][0].grad = m.ones(2, 2)
        with pytest.raises(ValueError, match="less than 100"):
            opt.step()


def test_adafactor_state_dict_with_wrong_names_or_shapes_is_refused():
    p = lf.ones(3, 4, requires_grad=True)
    opt = lf.optim.Adafactor([p])
    good = {"step": np.float32(1), "row_var": np.ones((3, 1), np.float32), "col_var": np.ones((1, 4), np.float32)}
    groups = copy.deepcopy(opt.state_dict()["param_groups"])
    opt.load_state_dict({"state": {0: good}, "param_groups": groups})
    with pytest.raises(lf.ShapeError, match=r"keeps \[3, 1\]"):
        opt.load_state_dict({"state": {0: {**good, "row_var": np.ones((3, 4), np.float32)}}, "param_groups": groups})
    with pytest.raises(ValueError, match="'variance'"):
        opt.load_state_dict(
            {"state": {0: {"step": np.float32(1), "variance": np.ones((3, 4))}}, "param_groups": groups}
        )
