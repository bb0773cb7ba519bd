"""Adadelta, Adamax, NAdam, RAdam, ASGD, Rprop (and LBFGS) against torch.optim: every step of a real training run,
eager and inside an lf.nn.Graph step, state_dict layout and values, torch state dicts loaded as numpy, checkpoints
through lf.save/lf.load, constructor signatures and argument errors."""

import copy
import inspect
from typing import Any

import numpy as np
import pytest
import torch

import lazyflow as lf
from lazyflow import nn

RTOL, ATOL = 1e-5, 1e-6
STEPS = 8

# (optimizer name, kwargs of group 0, overrides for a second group or None)
CASES = [
    ("Adadelta", dict(), None),
    ("Adadelta", dict(lr=0.5, rho=0.8, eps=1e-5, weight_decay=0.1), dict(lr=2.0)),
    ("Adadelta", dict(maximize=True), None),
    ("Adamax", dict(), None),
    ("Adamax", dict(lr=0.01, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1), dict(lr=0.03)),
    ("Adamax", dict(lr=0.01, maximize=True), None),
    ("NAdam", dict(lr=0.01), None),
    ("NAdam", dict(lr=0.01, betas=(0.8, 0.99), weight_decay=0.1, momentum_decay=0.01), dict(lr=0.003)),
    ("NAdam", dict(lr=0.01, weight_decay=0.1, decoupled_weight_decay=True, maximize=True), None),
    ("RAdam", dict(lr=0.01), None),
    ("RAdam", dict(lr=0.01, betas=(0.5, 0.7), weight_decay=0.1), dict(lr=0.003)),
    ("RAdam", dict(lr=0.01, weight_decay=0.1, decoupled_weight_decay=True, maximize=True), None),
    ("ASGD", dict(lr=0.05), None),
    ("ASGD", dict(lr=0.05, lambd=0.01, alpha=0.5, t0=3, weight_decay=0.1), dict(lr=0.02)),
    ("ASGD", dict(lr=0.05, t0=0, maximize=True), None),
    ("Rprop", dict(), None),
    ("Rprop", dict(lr=0.02, etas=(0.3, 1.5), step_sizes=(1e-3, 0.05)), dict(lr=0.005)),
    ("Rprop", dict(lr=0.01, step_sizes=(5e-3, 0.02), maximize=True), None),
]
NAMES = sorted({c[0] for c in CASES})


def _id(case):
    name, kwargs, second = case
    return f"{name}-{'-'.join(f'{k}={v}' for k, v in kwargs.items()) or 'defaults'}{'-2groups' if second else ''}"


IDS = [_id(c) for c in CASES]


# ---------------------------------------------------------------------------------------------- a small model, twice
def _torch_model(seed=0):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))


def _lf_model(tm):
    lm = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 2))
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


def _close_models(lm, tm, what):
    for (k, a), b in zip(lm.state_dict().items(), tm.state_dict().values()):
        np.testing.assert_allclose(a.numpy(), b.detach().numpy(), rtol=RTOL, atol=ATOL, err_msg=f"{what}: {k}")


def _close_states(lsd, tsd, what=""):
    """Two optimizer state dicts (lazyflow's, torch's) hold the same entries, names, dtypes and values."""
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


# ---------------------------------------------------------------------------------------------- trajectories
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
        _close_models(lm, tm, f"{mode} step {k}")
    _close_states(lo.state_dict(), to.state_dict(), mode)
    if step is not None:  # all state exists before the first update and torch's step-dependent branches are selects
        assert step.cache_info().compiles == 1


def _data(seed, shapes=((3, 4), (5,), ()), steps=STEPS):
    rng = np.random.default_rng(seed)
    init = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    grads = [[rng.standard_normal(s).astype(np.float32) for s in shapes] for _ in range(steps)]
    return init, grads


def _set_grads(params, grads, lib):
    for p, g in zip(params, grads):
        p.grad = None if g is None else (lf.tensor(g) if lib is lf else torch.tensor(g))


def _raw_groups(params, second):
    return params if second is None else [{"params": params[:2]}, {"params": params[2:], **second}]


@pytest.mark.parametrize("name,kwargs,second", CASES, ids=IDS)
def test_state_dict_matches_torch_and_resumes(name, kwargs, second):
    """The same gradients fed to both (one parameter skipped at some steps): state_dict equal to torch's before and
    after every step, and a fresh optimizer loaded from it halfway continues identically."""
    init, grads = _data(0)
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
        g: list[np.ndarray | None] = list(grads[k])
        if k in (0, 5):
            g[2] = None  # no gradient: no state created (step 0) / state left alone, as torch
        _set_grads(lp, g, lf)
        _set_grads(tp, g, torch)
        lo.step()
        to.step()
        for a, b in zip(lp, tp):
            np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=RTOL, atol=ATOL, err_msg=str(k))
        _close_states(lo.state_dict(), to.state_dict(), f"after step {k}")


def _special_grads(shapes=((3, 4), (5,)), steps=12):
    """Gradients that hit the branches random ones miss: exact zeros (all, some), the same gradient repeated (Rprop
    grows to its maximum step), exact sign flips (it shrinks to its minimum), an element flipping at every step."""
    rng = np.random.default_rng(7)
    base = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    out = []
    for k in range(steps):
        gs = []
        for b in base:
            g = b.copy() if k < 6 else (-b if k % 2 else b.copy())
            if k == 2:
                g[:] = 0.0
            g.reshape(-1)[::3] = 0.0 if k % 3 == 1 else g.reshape(-1)[::3]
            g.reshape(-1)[1] = (-1.0) ** k
            gs.append(g)
        out.append(gs)
    return base, out


@pytest.mark.parametrize(
    "name,kwargs", [(c[0], c[1]) for c in CASES if c[2] is None], ids=[_id(c) for c in CASES if c[2] is None]
)
def test_special_gradients_match_torch(name, kwargs):
    init, grads = _special_grads()
    lp = [lf.tensor(a, requires_grad=True) for a in init]
    tp = [torch.tensor(a, requires_grad=True) for a in init]
    lo, to = getattr(lf.optim, name)(lp, **kwargs), getattr(torch.optim, name)(tp, **kwargs)
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
def test_loads_torch_state_dict_as_numpy_and_continues(name, kwargs, second):
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
        _close_models(lm, tm, f"step {k}")
    _close_states(lo.state_dict(), to.state_dict(), "end")


@pytest.mark.parametrize("name", NAMES)
def test_checkpoint_round_trip_continues_identically(tmp_path, name):
    kwargs = next(c[1] for c in CASES if c[0] == name)
    tm = _torch_model(2)
    lm = _lf_model(tm)
    to, lo = getattr(torch.optim, name)(tm.parameters(), **kwargs), getattr(lf.optim, name)(lm.parameters(), **kwargs)
    step = _Step(lm, lo)
    for k in range(3):
        _torch_step(tm, to, k)
        step(*(lf.tensor(a) for a in _batch(k)))
    lf.save({"model": lm.state_dict(), "opt": lo.state_dict()}, tmp_path / "ckpt")
    del lm, lo, step
    ck = lf.load(tmp_path / "ckpt")
    lm2 = _lf_model(_torch_model(3))
    lm2.load_state_dict(ck["model"])
    lo2 = getattr(lf.optim, name)(lm2.parameters(), **kwargs)
    lo2.load_state_dict(ck["opt"])
    _close_states(lo2.state_dict(), to.state_dict(), "loaded")
    for k in range(3, 6):
        _torch_step(tm, to, k)
        lo2.zero_grad()
        _loss(lm2, *(lf.tensor(a) for a in _batch(k))).backward()
        lo2.step()
        _close_models(lm2, tm, f"step {k}")
    _close_states(lo2.state_dict(), to.state_dict(), "end")


# ---------------------------------------------------------------------------------------------- the constructor
@pytest.mark.parametrize("name", [*NAMES, "LBFGS"])
def test_signature_is_torchs(name):
    ours, theirs = inspect.signature(getattr(lf.optim, name)), inspect.signature(getattr(torch.optim, name))
    assert [(p.name, p.kind, p.default) for p in ours.parameters.values()] == [
        (p.name, p.kind, p.default) for p in theirs.parameters.values()
    ]


BAD = [
    ("Adadelta", dict(lr=-1), "Invalid learning rate: -1"),
    ("Adadelta", dict(rho=1.5), "Invalid rho value: 1.5"),
    ("Adadelta", dict(rho=-0.1), "Invalid rho value"),
    ("Adadelta", dict(eps=-1e-6), "Invalid epsilon value"),
    ("Adadelta", dict(weight_decay=-1), "Invalid weight_decay value: -1"),
    ("Adamax", dict(lr=-0.1), "Invalid learning rate: -0.1"),
    ("Adamax", dict(betas=(1.0, 0.999)), "Invalid beta parameter at index 0: 1.0"),
    ("Adamax", dict(betas=(0.9, -0.1)), "Invalid beta parameter at index 1: -0.1"),
    ("Adamax", dict(eps=-1.0), "Invalid epsilon value: -1.0"),
    ("NAdam", dict(momentum_decay=-1e-3), "Invalid momentum_decay value: -0.001"),
    ("NAdam", dict(weight_decay=-0.5), "Invalid weight_decay value: -0.5"),
    ("NAdam", dict(betas=(0.9, 1.0)), "Invalid beta parameter at index 1: 1.0"),
    ("RAdam", dict(lr=-1e-3), "Invalid learning rate: -0.001"),
    ("RAdam", dict(eps=-1e-8), "Invalid epsilon value"),
    ("RAdam", dict(betas=(-0.5, 0.9)), "Invalid beta parameter at index 0: -0.5"),
    ("ASGD", dict(lr=-0.01), "Invalid learning rate: -0.01"),
    ("ASGD", dict(weight_decay=-0.01), "Invalid weight_decay value: -0.01"),
    ("Rprop", dict(lr=-1.0), "Invalid learning rate: -1.0"),
    ("Rprop", dict(etas=(1.0, 1.2)), "Invalid eta values: 1.0, 1.2"),
    ("Rprop", dict(etas=(0.5, 0.9)), "Invalid eta values: 0.5, 0.9"),
    ("Rprop", dict(etas=(0.0, 1.2)), "Invalid eta values: 0.0, 1.2"),
]


@pytest.mark.parametrize("name,kwargs,match", BAD, ids=[f"{n}-{k}" for n, k, _ in BAD])
def test_bad_hyperparameters_raise_value_error_like_torch(name, kwargs, match):
    with pytest.raises(ValueError, match=match):
        getattr(torch.optim, name)([torch.ones(1, requires_grad=True)], **kwargs)
    with pytest.raises(ValueError, match=match):
        getattr(lf.optim, name)([lf.ones(1, requires_grad=True)], **kwargs)


@pytest.mark.parametrize("name", NAMES)
def test_torch_only_keyword_arguments_are_accepted(name):
    params = inspect.signature(getattr(torch.optim, name)).parameters
    flags: dict[str, bool | None] = {k: False for k in ("maximize", "capturable") if k in params}
    if "foreach" in params:
        flags["foreach"] = None
    opt = getattr(lf.optim, name)([lf.ones(2, requires_grad=True)], **flags)
    assert all(opt.defaults[k] == v for k, v in flags.items())


# ---------------------------------------------------------------------------------------------- LBFGS (eager only)
LBFGS_CASES = [
    dict(max_iter=5),
    dict(lr=0.5, max_iter=4, history_size=3),
    dict(max_iter=5, line_search_fn="strong_wolfe"),
    dict(lr=0.8, max_iter=6, history_size=2, line_search_fn="strong_wolfe"),
]


def _closure(model, opt, x, y):
    def closure():
        opt.zero_grad()
        loss = _loss(model, x, y)
        loss.backward()
        return loss

    return closure


def _close_lbfgs_states(lsd, tsd, what, rtol=1e-5, values=True):
    """torch's LBFGS layout (Python ints and floats, 0-d and flat tensors, lists of them with None) and values."""
    assert lsd["param_groups"] == tsd["param_groups"], what
    assert list(lsd["state"]) == list(tsd["state"]) == [0], what
    ls, ts = lsd["state"][0], tsd["state"][0]
    assert list(ls) == list(ts), what
    for key, tv in ts.items():
        lv = ls[key]
        if isinstance(tv, list):
            assert len(lv) == len(tv) and [x is None for x in lv] == [x is None for x in tv], f"{what}: {key}"
            pairs = [(a, b) for a, b in zip(lv, tv) if b is not None]
        else:
            pairs = [(lv, tv)]
        # directions and coefficients are sums of cancelling terms: errors relative to the whole entry's scale
        scale = max((float(b.abs().max()) for _, b in pairs if isinstance(b, torch.Tensor)), default=0.0)
        for a, b in pairs:
            assert isinstance(a, lf.Tensor) == isinstance(b, torch.Tensor), f"{what}: {key} {type(a)} {type(b)}"
            assert type(a) is type(b) or isinstance(b, torch.Tensor), f"{what}: {key} {type(a)} {type(b)}"
            if isinstance(b, torch.Tensor):
                assert tuple(a.shape) == tuple(b.shape) and str(a.dtype)[-7:] == str(b.dtype)[-7:], f"{what}: {key}"
                a, b = a.numpy(), b.numpy()
            if isinstance(b, int):
                assert a == b, f"{what}: {key}"  # n_iter, func_evals: the same iterations and evaluations
            elif values:
                atol = max(1e-7, rtol * scale)
                np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, err_msg=f"{what}: {key}")


def _torch_lbfgs_state_as_numpy(sd):
    """torch's LBFGS state dict with every tensor as numpy (also inside the history lists)."""

    def conv(v):
        if isinstance(v, list):
            return [conv(x) for x in v]
        return v.numpy() if isinstance(v, torch.Tensor) else v

    return {
        "state": {i: {n: conv(v) for n, v in s.items()} for i, s in sd["state"].items()},
        "param_groups": copy.deepcopy(sd["param_groups"]),
    }


_RNG = np.random.default_rng(11)
_M = _RNG.standard_normal((10, 10))
_A, _B = _M.T @ _M / 10 + np.eye(10), _RNG.standard_normal(10)


def _objective_closure(params, opt, lib):
    """The loss and gradient of a smooth convex function (a quadratic plus a quartic) computed in float64 numpy
    from the parameters' values, so torch and lazyflow see bitwise identical gradients: what remains to compare is
    the optimizer itself (and float32 rounding, which a well-conditioned function does not amplify)."""

    def closure():
        opt.zero_grad()
        x = np.concatenate([p.detach().numpy().reshape(-1) for p in params]).astype(np.float64)
        f = 0.5 * x @ _A @ x - _B @ x + 0.25 * np.sum(x**4)
        g = _A @ x - _B + x**3
        offset = 0
        for p in params:
            n = int(np.prod(p.shape))
            p.grad = lib.tensor(g[offset : offset + n].reshape(tuple(p.shape)).astype(np.float32))
            offset += n
        return lib.tensor(np.float32(f))

    return closure


@pytest.mark.parametrize("kwargs", LBFGS_CASES, ids=[str(k) for k in LBFGS_CASES])
def test_lbfgs_matches_torch_on_identical_gradients_and_resumes_from_torchs_state(kwargs):
    init = [np.array([[-1.2, 1.0], [0.5, -0.3], [1.5, 0.8]], np.float32), np.array([0.1, -0.7, 0.9, 1.1], np.float32)]
    tp = [torch.tensor(a, requires_grad=True) for a in init]
    lp = [lf.tensor(a, requires_grad=True) for a in init]
    to, lo = torch.optim.LBFGS(tp, **kwargs), lf.optim.LBFGS(lp, **kwargs)
    for k in range(6):
        if k == 3:  # a fresh optimizer from torch's state dict (numpy arrays, lists of them, Python numbers)
            lo = lf.optim.LBFGS(lp, lr=3.0)
            lo.load_state_dict(_torch_lbfgs_state_as_numpy(to.state_dict()))
            _close_lbfgs_states(lo.state_dict(), to.state_dict(), "loaded", rtol=0)
        t_loss = to.step(_objective_closure(tp, to, torch))
        l_loss = lo.step(_objective_closure(lp, lo, lf))
        np.testing.assert_allclose(l_loss.item(), t_loss.item(), rtol=RTOL)
        for a, b in zip(lp, tp):
            np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=RTOL, atol=ATOL, err_msg=str(k))
        # near the optimum the history holds differences of float32 gradients at their rounding floor: values are
        # compared while the gradient is large, the layout and the iteration/evaluation counts always
        away = float(to.state[tp[0]]["prev_flat_grad"].abs().max()) > 1e-2
        _close_lbfgs_states(lo.state_dict(), to.state_dict(), f"step {k}", rtol=1e-4, values=away)


@pytest.mark.parametrize("kwargs", LBFGS_CASES[::2], ids=[str(k) for k in LBFGS_CASES[::2]])
def test_lbfgs_trains_an_nn_module_like_torch(kwargs):
    """Real autograd gradients (which differ from torch's in the last bits): the same iterations, evaluations and
    parameters; L-BFGS's differences of gradients amplify those bits, so the tolerance is looser."""
    tm = _torch_model(4)
    lm = _lf_model(tm)
    to, lo = torch.optim.LBFGS(tm.parameters(), **kwargs), lf.optim.LBFGS(lm.parameters(), **kwargs)
    x, y = _batch(0)
    for k in range(3):
        t_loss = to.step(_closure(tm, to, torch.tensor(x), torch.tensor(y)))
        l_loss = lo.step(_closure(lm, lo, lf.tensor(x), lf.tensor(y)))
        np.testing.assert_allclose(l_loss.item(), t_loss.item(), rtol=1e-4)
        for (name, a), b in zip(lm.state_dict().items(), tm.state_dict().values()):
            np.testing.assert_allclose(a.numpy(), b.detach().numpy(), rtol=1e-4, atol=1e-5, err_msg=f"{k}: {name}")
        _close_lbfgs_states(lo.state_dict(), to.state_dict(), f"step {k}", values=False)


def test_lbfgs_checkpoint_round_trip_continues_identically(tmp_path):
    kwargs: dict[str, Any] = dict(max_iter=3, history_size=3, line_search_fn="strong_wolfe")
    init = [np.linspace(-1, 1, 6, dtype=np.float32).reshape(3, 2), np.array([0.1, -0.7, 0.9, 1.1], np.float32)]
    tp = [torch.tensor(a, requires_grad=True) for a in init]
    lp, up = ([lf.tensor(a, requires_grad=True) for a in init] for _ in range(2))
    to = torch.optim.LBFGS(tp, **kwargs)
    lo, uo = lf.optim.LBFGS(lp, **kwargs), lf.optim.LBFGS(up, **kwargs)  # uo: the uninterrupted run
    for k in range(4):
        if k == 2:
            lf.save({"params": [p.detach() for p in lp], "opt": lo.state_dict()}, tmp_path / "ckpt")
            ck = lf.load(tmp_path / "ckpt")
            lp = [lf.tensor(p.numpy(), requires_grad=True) for p in ck["params"]]
            lo = lf.optim.LBFGS(lp, lr=0.1)
            lo.load_state_dict(ck["opt"])
        to.step(_objective_closure(tp, to, torch))
        lo.step(_objective_closure(lp, lo, lf))
        uo.step(_objective_closure(up, uo, lf))
        for a, u, b in zip(lp, up, tp):
            np.testing.assert_array_equal(a.detach().numpy(), u.detach().numpy())
            np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=RTOL, atol=ATOL, err_msg=str(k))
    _close_lbfgs_states(lo.state_dict(), to.state_dict(), "end", values=False)
    ls, us = lo.state_dict()["state"][0], uo.state_dict()["state"][0]
    assert (ls["n_iter"], ls["func_evals"]) == (us["n_iter"], us["func_evals"])
    for key in ("d", "prev_flat_grad", "H_diag"):
        np.testing.assert_array_equal(ls[key].numpy(), us[key].numpy(), err_msg=key)


def test_lbfgs_state_dict_is_a_snapshot_and_graph_refuses_it():
    lm = _lf_model(_torch_model(7))
    lo = lf.optim.LBFGS(lm.parameters(), max_iter=3, history_size=2)
    x, y = (lf.tensor(a) for a in _batch(2))
    lo.step(_closure(lm, lo, x, y))
    sd = lo.state_dict()
    before = [t.numpy().copy() for t in sd["state"][0]["old_dirs"]] + [sd["state"][0]["prev_flat_grad"].numpy().copy()]
    lo.step(_closure(lm, lo, x, y))
    after = [t.numpy() for t in sd["state"][0]["old_dirs"]] + [sd["state"][0]["prev_flat_grad"].numpy()]
    assert len(before) == len(after) and all(np.array_equal(a, b) for a, b in zip(before, after))
    with pytest.raises(lf.GraphError, match="closure"):
        _Step(lm, lo)(x, y)
    with pytest.raises(lf.GraphError, match=r"step\(closure\) eagerly"):
        lo.functional_update([], [], [], [])


@pytest.mark.parametrize(
    "kwargs,error,match",
    [
        (dict(lr=-1.0), ValueError, "Invalid learning rate: -1.0"),
        (dict(line_search_fn="armijo"), RuntimeError, "only 'strong_wolfe' is supported"),
    ],
)
def test_lbfgs_errors_like_torch(kwargs, error, match):
    for lib in (torch, lf):
        w = lib.ones(2, requires_grad=True)

        def closure(w=w):
            loss = (w * w).sum()
            loss.backward()
            return loss

        with pytest.raises(error, match=match):
            lib.optim.LBFGS([w], **kwargs).step(closure)
    with pytest.raises(ValueError, match="parameter groups"):
        lf.optim.LBFGS([{"params": [lf.ones(1, requires_grad=True)]}, {"params": [lf.ones(1, requires_grad=True)]}])


def test_every_new_optimizer_is_exported():
    for name in [*NAMES, "LBFGS"]:
        assert name in lf.optim.__all__ and getattr(lf.optim, name).__module__.startswith("lazyflow.optim.")
