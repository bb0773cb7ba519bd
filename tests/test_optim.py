"""lf.optim against torch.optim: 20 steps side by side, state_dict round trips, compile counting, errors."""

import copy

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch

import lazyflow as lf
from lazyflow.optim import optimizer as O

SHAPES = [(3, 4), (5,), ()]
STEPS = 20
RTOL = 2e-5

# (optimizer name, kwargs of group 0, overrides for a second group or None)
CASES = [
    ("SGD", dict(lr=0.1), None),
    ("SGD", dict(lr=0.05, momentum=0.9), dict(lr=0.01)),
    ("SGD", dict(lr=0.05, momentum=0.9, dampening=0.2, weight_decay=0.01), None),
    ("SGD", dict(lr=0.05, momentum=0.8, nesterov=True, maximize=True, weight_decay=0.1), None),
    ("Adam", dict(lr=0.01), dict(lr=0.003, betas=(0.8, 0.99))),
    ("Adam", dict(lr=0.01, amsgrad=True, weight_decay=0.1, eps=1e-6), None),
    ("Adam", dict(lr=0.01, maximize=True), None),
    ("AdamW", dict(lr=0.01), dict(weight_decay=0.0)),
    ("AdamW", dict(lr=0.01, amsgrad=True, weight_decay=0.3), None),
    ("RMSprop", dict(lr=0.01), None),
    ("RMSprop", dict(lr=0.01, momentum=0.5, centered=True, weight_decay=0.1), dict(momentum=0.0)),
    ("RMSprop", dict(lr=0.01, alpha=0.9, maximize=True), None),
    ("Adagrad", dict(lr=0.1), None),
    ("Adagrad", dict(lr=0.1, lr_decay=0.01, initial_accumulator_value=0.1, weight_decay=0.1), dict(lr=0.3)),
]


def _data(seed=0, shapes=SHAPES, steps=STEPS):
    rng = np.random.default_rng(seed)
    init = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    grads = [[rng.standard_normal(s).astype(np.float32) for s in shapes] for _ in range(steps)]
    return init, grads


def _groups(params, second):
    if second is None:
        return params
    return [{"params": params[:2]}, {"params": params[2:], **second}]


def _set_grads(params, grads, lib):
    for p, g in zip(params, grads):
        p.grad = lf.tensor(g) if lib is lf else torch.tensor(g)


def _close(lf_params, torch_params, rtol=RTOL):
    for a, b in zip(lf_params, torch_params):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=rtol, atol=1e-6)


@pytest.mark.parametrize("name,kwargs,second", CASES)
def test_matches_torch_with_state_dict_round_trip(name, kwargs, second):
    init, grads = _data()
    lp = [lf.tensor(a, requires_grad=True) for a in init]
    tp = [torch.tensor(a, requires_grad=True) for a in init]
    lo = getattr(lf.optim, name)(_groups(lp, second), **kwargs)
    to = getattr(torch.optim, name)(_groups(tp, second), **kwargs)
    for k in range(STEPS):
        if k == STEPS // 2:
            saved = copy.deepcopy(lo.state_dict())
            lp = [lf.tensor(p.detach().numpy(), requires_grad=True) for p in lp]  # a fresh model and optimizer resume
            lo = getattr(lf.optim, name)(_groups(lp, second), **kwargs)
            lo.load_state_dict(saved)
        _set_grads(lp, grads[k], lf)
        _set_grads(tp, grads[k], torch)
        lo.step()
        to.step()
    _close(lp, tp)
    for p_lf, p_t in zip(lp, tp):
        for key, t_val in to.state[p_t].items():
            np.testing.assert_allclose(lo.state[p_lf][key].numpy(), t_val.numpy(), rtol=RTOL, atol=1e-6)


@pytest.mark.parametrize("name,kwargs,second", CASES)
def test_loads_torch_state_dict_as_numpy(name, kwargs, second):
    init, grads = _data(seed=1)
    tp = [torch.tensor(a, requires_grad=True) for a in init]
    to = getattr(torch.optim, name)(_groups(tp, second), **kwargs)
    for k in range(STEPS // 2):
        _set_grads(tp, grads[k], torch)
        to.step()
    sd = to.state_dict()
    converted = {
        "state": {i: {n: v.numpy() for n, v in s.items()} for i, s in sd["state"].items()},
        "param_groups": copy.deepcopy(sd["param_groups"]),
    }
    lp = [lf.tensor(p.detach().numpy(), requires_grad=True) for p in tp]
    lo = getattr(lf.optim, name)(_groups(lp, second), lr=123.0)  # wrong lr: the state dict's must win
    lo.load_state_dict(converted)
    assert [g["lr"] for g in lo.param_groups] == [g["lr"] for g in to.param_groups]
    for k in range(STEPS // 2, STEPS):
        _set_grads(lp, grads[k], lf)
        _set_grads(tp, grads[k], torch)
        lo.step()
        to.step()
    _close(lp, tp)


@pytest.mark.parametrize("name,kwargs", [(c[0], c[1]) for c in CASES if c[2] is None])
def test_state_dict_layout_matches_torch(name, kwargs):
    init, grads = _data()
    lp = [lf.tensor(a, requires_grad=True) for a in init]
    tp = [torch.tensor(a, requires_grad=True) for a in init]
    lo = getattr(lf.optim, name)(lp, **kwargs)
    to = getattr(torch.optim, name)(tp, **kwargs)

    def layout(sd):
        groups = [{k: (v if k == "params" else type(v).__name__) for k, v in g.items()} for g in sd["param_groups"]]
        state = {
            i: {k: (tuple(v.shape), str(v.dtype).split(".")[-1]) for k, v in s.items()} for i, s in sd["state"].items()
        }
        return groups, state

    assert layout(lo.state_dict()) == layout(to.state_dict())  # before the first step (Adagrad: eager state)
    _set_grads(lp[:2], grads[0][:2], lf)  # the last parameter has no gradient: no state, like torch
    _set_grads(tp[:2], grads[0][:2], torch)
    lo.step()
    to.step()
    assert layout(lo.state_dict()) == layout(to.state_dict())
    assert list(lo.state_dict()["state"]) == list(to.state_dict()["state"])
    np.testing.assert_array_equal(lp[2].detach().numpy(), init[2])


def test_changing_hyperparameters_does_not_recompile():
    init, grads = _data(shapes=[(4, 3), (3,)])
    lp = [lf.tensor(a, requires_grad=True) for a in init]
    tp = [torch.tensor(a, requires_grad=True) for a in init]
    lo, to = lf.optim.Adam(lp, lr=0.01), torch.optim.Adam(tp, lr=0.01)
    _set_grads(lp, grads[0], lf)
    lo.step()
    traces = O.cache_info().traces
    for k in range(1, 8):
        for opt in (lo, to):
            opt.param_groups[0]["lr"] = 0.01 / k
            opt.param_groups[0]["betas"] = (0.9 - 0.01 * k, 0.999)
            opt.param_groups[0]["weight_decay"] = 0.0
        _set_grads(lp, grads[k], lf)
        _set_grads(tp, grads[k], torch)
        lo.step()
        to.step()
    assert O.cache_info().traces == traces
    _set_grads(lp, grads[0], lf)
    lo.param_groups[0]["weight_decay"] = 0.1  # a new static branch (like torch's `if weight_decay != 0`)
    lo.step()
    assert O.cache_info().traces == traces + 1


@pytest.mark.parametrize("dampening,traces", [(0.0, 1), (0.5, 2)])
def test_sgd_momentum_traces_once_then_never(dampening, traces):
    # without dampening the buffer starts at zero (exactly torch's first `buffer = grad`), so the program's inputs
    # never change; with dampening the buffer appears after the first step, as in torch: one more trace
    O.clear_cache()
    init, grads = _data(shapes=[(2, 2)])
    p = lf.tensor(init[0], requires_grad=True)
    opt = lf.optim.SGD([p], lr=0.1, momentum=0.9, dampening=dampening)
    assert opt.state_dict()["state"] == {}
    for k in range(5):
        p.grad = lf.tensor(grads[k][0])
        opt.step()
        assert "momentum_buffer" in opt.state[p]
        opt.param_groups[0]["lr"] *= 0.5
    assert O.cache_info().traces == traces


def test_step_is_one_program_per_group_not_eager_ops():
    init, grads = _data()
    lp = [lf.tensor(a, requires_grad=True) for a in init]
    opt = lf.optim.Adam(_groups(lp, dict(lr=0.1)))
    _set_grads(lp, grads[0], lf)
    opt.step()
    before = lf.eager.cache_info()
    state_objects = [id(t) for p in lp for t in opt.state[p].values()]
    versions = [p._version for p in lp]
    ids = [id(p) for p in lp]
    opt.step()
    after = lf.eager.cache_info()
    assert (after.hits, after.misses) == (before.hits, before.misses)
    assert [id(p) for p in lp] == ids
    assert [p._version for p in lp] == [v + 1 for v in versions]
    assert [id(t) for p in lp for t in opt.state[p].values()] == state_objects


def test_donation_never_invalidates_live_references():
    init, grads = _data(shapes=[(8, 8)])
    p = lf.tensor(init[0], requires_grad=True)
    opt = lf.optim.SGD([p], lr=0.1, momentum=0.9)
    p.grad = lf.tensor(grads[0][0])
    opt.step()
    held = p.detach()
    snapshot = opt.state_dict()
    before, buf = held.numpy(), snapshot["state"][0]["momentum_buffer"].numpy()
    for k in range(1, 4):
        p.grad = lf.tensor(grads[k][0])
        opt.step()
    # held = p.detach() shares p's storage (torch): it shows the steps and its buffer was never deleted;
    # the optimizer's state_dict is a snapshot and keeps its values
    np.testing.assert_array_equal(held.numpy(), p.detach().numpy())
    np.testing.assert_array_equal(snapshot["state"][0]["momentum_buffer"].numpy(), buf)
    assert not np.array_equal(p.detach().numpy(), before)


def test_step_donates_buffers_and_copies_only_shared_ones():
    init, grads = _data(shapes=[(8, 8), (8,)])
    p, q = (lf.tensor(a, requires_grad=True) for a in init)
    opt = lf.optim.SGD([p, q], lr=0.1, momentum=0.9)
    for k in range(2):
        _set_grads([p, q], grads[k], lf)
        opt.step()
    mine = [p, opt.state[p]["momentum_buffer"], opt.state[q]["momentum_buffer"]]
    ptrs = [t.data_ptr() for t in mine]
    held, alias = q.jax(), q.detach()  # a value (keeps what it had) and a view sharing q's storage (torch)
    before = np.asarray(held).copy()
    _set_grads([p, q], grads[2], lf)
    opt.step()
    assert [t.data_ptr() for t in mine] == ptrs, "the step copied buffers it could have donated"
    assert not held.is_deleted() and not alias.jax().is_deleted()
    np.testing.assert_array_equal(np.asarray(held), before)
    assert not np.array_equal(q.detach().numpy(), before)
    np.testing.assert_array_equal(alias.numpy(), q.detach().numpy())


def test_functional_protocol_in_a_users_jax_jit_loop_matches_torch():
    """The public protocol, driven by a jax.jit loop: torch's trajectory and torch's state_dict at the end."""
    init, grads = _data()
    lp = [lf.tensor(a, requires_grad=True) for a in init]
    tp = [torch.tensor(a, requires_grad=True) for a in init]
    second = dict(lr=0.003, betas=(0.8, 0.99))
    lo = lf.optim.Adam(_groups(lp, second), lr=0.01, amsgrad=True)
    to = torch.optim.Adam(_groups(tp, second), lr=0.01, amsgrad=True)
    traces = []

    @jax.jit
    def update(params, grads, state, hyper):
        traces.append(1)
        return lo.functional_update(params, grads, state, hyper)

    params, state = [p.jax() for p in lp], lo.functional_state()
    for k in range(STEPS):
        for opt in (lo, to):
            opt.param_groups[1]["lr"] = 0.003 / (k + 1)
            if k == 10:
                opt.param_groups[0]["weight_decay"] = 0.1  # a new static branch: one retrace
        gs = [jnp.asarray(g) for g in grads[k]]
        _set_grads(tp, grads[k], torch)
        if k == 15:  # no gradient: that parameter and its state are left alone, as torch does
            gs[2], tp[2].grad = None, None
        params, state = update(params, gs, state, lo.functional_hyperparams())
        to.step()
    assert len(traces) == 3  # first program, the weight-decay branch, the step without a gradient
    _close([lf.from_jax(a) for a in params], tp)
    lo.load_functional_state(state)
    ls, ts = lo.state_dict(), to.state_dict()
    assert ls["param_groups"] == ts["param_groups"] and list(ls["state"]) == list(ts["state"])
    for i, st in ts["state"].items():
        assert list(ls["state"][i]) == list(st)
        for key, v in st.items():
            np.testing.assert_allclose(ls["state"][i][key].numpy(), v.numpy(), rtol=RTOL, atol=1e-6, err_msg=key)


def test_functional_protocol_contract():
    p = lf.tensor([1.0, 2.0], requires_grad=True)
    opt = lf.optim.SGD([p], lr=0.1, momentum=0.9, nesterov=True)
    hyper = opt.functional_hyperparams()
    assert all(not isinstance(x, bool) for x in jax.tree_util.tree_leaves(hyper))  # flags are static structure
    assert opt.state_dict()["state"] == {}  # no state before a step, as in torch
    # the functional state starts with a zero buffer (without dampening its first update is torch's `buffer = grad`)
    ((key, buf),) = opt.functional_state()[0].items()
    assert key == "momentum_buffer" and buf.shape == (2,) and not np.asarray(buf).any()
    with pytest.raises(ValueError, match="1 parameters"):
        opt.functional_update([p.jax(), p.jax()], [None, None], [{}, {}], hyper)
    with pytest.raises(ValueError, match="2 states for 1 parameters"):
        opt.load_functional_state([{}, {}])
    new_params, new_state = opt.functional_update([p.jax()], [jnp.ones(2, jnp.float32)], [{}], hyper)
    np.testing.assert_allclose(np.asarray(new_params[0]), [1.0 - 0.1 * 1.9, 2.0 - 0.1 * 1.9], rtol=1e-6)
    np.testing.assert_array_equal(p.detach().numpy(), [1.0, 2.0])  # pure: nothing written until it is loaded
    opt.load_functional_state(new_state)
    np.testing.assert_array_equal(opt.state_dict()["state"][0]["momentum_buffer"].numpy(), [1.0, 1.0])


def test_state_an_update_leaves_out_survives_donation():
    init, grads = _data(shapes=[(4,)])
    lp, tp = lf.tensor(init[0], requires_grad=True), torch.tensor(init[0], requires_grad=True)
    lo, to = lf.optim.Adam([lp], lr=0.1, amsgrad=True), torch.optim.Adam([tp], lr=0.1, amsgrad=True)
    for k in range(3):
        if k == 2:
            lo.param_groups[0]["amsgrad"] = to.param_groups[0]["amsgrad"] = False
        _set_grads([lp], [grads[k][0]], lf)
        _set_grads([tp], [grads[k][0]], torch)
        lo.step()
        to.step()
    _close([lp], [tp])
    np.testing.assert_allclose(
        lo.state[lp]["max_exp_avg_sq"].numpy(), to.state[tp]["max_exp_avg_sq"].numpy(), rtol=RTOL
    )


def test_parameters_and_closure():
    w = lf.nn.Parameter(lf.tensor([1.0, -2.0, 3.0]))
    opt = lf.optim.SGD([w], lr=0.25)

    def closure():
        opt.zero_grad()
        loss = (w * w).sum()
        loss.backward()
        return loss

    loss = opt.step(closure)
    np.testing.assert_allclose(loss.item(), 14.0)
    np.testing.assert_allclose(w.detach().numpy(), np.array([1.0, -2.0, 3.0]) * 0.5)
    assert isinstance(w, lf.nn.Parameter)


def test_zero_grad():
    p = lf.tensor([1.0, 2.0], requires_grad=True)
    opt = lf.optim.SGD([p], lr=0.1)
    p.grad = lf.tensor([3.0, 4.0])
    g = p.grad
    opt.zero_grad(set_to_none=False)
    assert p.grad is g
    np.testing.assert_array_equal(p.grad.numpy(), [0.0, 0.0])
    opt.zero_grad()
    assert p.grad is None
    opt.step()  # no gradients: nothing happens
    np.testing.assert_array_equal(p.detach().numpy(), [1.0, 2.0])


def test_pure_update_is_what_step_runs():
    init, grads = _data(shapes=[(3,)])
    p = lf.tensor(init[0], requires_grad=True)
    opt = lf.optim.Adam([p], lr=0.1, amsgrad=True)
    p.grad = lf.tensor(grads[0][0])
    opt._init_state(0)
    plist, params, gs, states = opt._group_arrays(opt.param_groups[0])
    hyper = opt._hyper(opt.param_groups[0])
    assert (
        hyper["amsgrad"] is True
        and hyper["lr"] == 0.1
        and set(states[0]) == {"step", "exp_avg", "exp_avg_sq", "max_exp_avg_sq"}
    )
    new_params, new_states = opt._update(hyper, [jnp.array(a) for a in params], gs, states)
    opt.step()
    # op-by-op (here) vs one fused program (step) may differ in the last bit
    np.testing.assert_allclose(np.asarray(new_params[0]), p.detach().numpy(), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(new_states[0]["exp_avg"]), opt.state[p]["exp_avg"].numpy(), rtol=1e-6)
    assert opt.state[p]["step"].item() == 1.0 and opt.state[p]["step"].dtype is lf.float32


def test_add_param_group_and_repr():
    a = lf.tensor([1.0], requires_grad=True)
    b = lf.tensor([2.0], requires_grad=True)
    opt = lf.optim.SGD([a], lr=0.1, momentum=0.5)
    opt.add_param_group({"params": b, "lr": 0.2})
    assert opt.param_groups[1]["momentum"] == 0.5 and opt.param_groups[1]["lr"] == 0.2
    with pytest.raises(ValueError, match="more than one parameter group"):
        opt.add_param_group({"params": [a]})
    r = torch.optim.SGD([torch.tensor([1.0], requires_grad=True)], lr=0.1, momentum=0.5)
    assert repr(lf.optim.SGD([a], lr=0.1, momentum=0.5)) == repr(r)


def test_named_parameters_are_accepted():
    a = lf.tensor([1.0], requires_grad=True)
    opt = lf.optim.Adam([("w", a)])
    assert opt.param_groups[0]["param_names"] == ["w"]
    assert opt.state_dict()["param_groups"][0]["param_names"] == ["w"]


@pytest.mark.parametrize(
    "ctor,match",
    [
        (lambda p: lf.optim.SGD(p, lr=-0.1), "learning rate"),
        (lambda p: lf.optim.SGD(p, momentum=-1), "momentum"),
        (lambda p: lf.optim.SGD(p, weight_decay=-1), "weight_decay"),
        (lambda p: lf.optim.SGD(p, nesterov=True), "Nesterov"),
        (lambda p: lf.optim.SGD(p, momentum=0.9, dampening=0.1, nesterov=True), "Nesterov"),
        (lambda p: lf.optim.Adam(p, betas=(1.0, 0.999)), "beta parameter at index 0"),
        (lambda p: lf.optim.Adam(p, betas=(0.9, -0.1)), "beta parameter at index 1"),
        (lambda p: lf.optim.Adam(p, eps=-1e-8), "epsilon"),
        (lambda p: lf.optim.Adam(p, lr=-1), "learning rate"),
        (lambda p: lf.optim.AdamW(p, weight_decay=-0.1), "weight_decay"),
        (lambda p: lf.optim.RMSprop(p, alpha=-0.5), "alpha"),
        (lambda p: lf.optim.RMSprop(p, momentum=-0.5), "momentum"),
        (lambda p: lf.optim.Adagrad(p, lr_decay=-1), "lr_decay"),
        (lambda p: lf.optim.Adagrad(p, initial_accumulator_value=-1), "initial_accumulator_value"),
        (lambda p: lf.optim.Adam(p, differentiable=True), "differentiable"),
        (lambda p: lf.optim.SGD([], lr=0.1), "empty parameter list"),
    ],
)
def test_invalid_hyperparameters_raise_value_error(ctor, match):
    with pytest.raises(ValueError, match=match):
        ctor([lf.tensor([1.0], requires_grad=True)])


def test_invalid_params():
    p = lf.tensor([1.0], requires_grad=True)
    with pytest.raises(TypeError, match="iterable of Tensors"):
        lf.optim.SGD(p)
    with pytest.raises(TypeError, match="only optimize Tensors"):
        lf.optim.SGD([p, 3.0])
    with pytest.raises(TypeError, match="ordered collections"):
        lf.optim.SGD([p]).add_param_group({"params": {lf.tensor([1.0], requires_grad=True)}})
    with pytest.raises(ValueError, match="non-leaf"):
        lf.optim.SGD([p * 2])


def test_load_state_dict_errors():
    a = lf.tensor(np.ones((2, 3), np.float32), requires_grad=True)
    b = lf.tensor(np.ones(3, np.float32), requires_grad=True)
    opt = lf.optim.Adam([a, b])
    a.grad, b.grad = lf.ones(2, 3), lf.ones(3)
    opt.step()
    sd = opt.state_dict()
    with pytest.raises(ValueError, match="parameter groups"):
        lf.optim.Adam([{"params": [a]}, {"params": [b]}]).load_state_dict(sd)
    with pytest.raises(ValueError, match="group 0 has 2 parameters in the state dict and 1"):
        lf.optim.Adam([a]).load_state_dict(sd)
    swapped = lf.optim.Adam([b, a])
    with pytest.raises(lf.ShapeError, match=r"'exp_avg' of parameter 0 has shape \[2, 3\].*shape \[3\]"):
        swapped.load_state_dict(sd)
    with pytest.raises(ValueError, match="'momentum_buffer'.*does not use"):
        lf.optim.Adam([a, b]).load_state_dict(
            {"state": {0: {"step": 1.0, "momentum_buffer": np.zeros((2, 3))}}, "param_groups": sd["param_groups"]}
        )
    with pytest.raises(ValueError, match="'state' and 'param_groups'"):
        opt.load_state_dict({"state": {}})
    fresh = lf.optim.Adam([a, b])
    fresh.load_state_dict(sd)
    assert fresh.state[a]["step"].dtype is lf.float32 and fresh.state[a]["exp_avg"].shape == (2, 3)


def test_pickle_round_trip_resumes_bit_for_bit():
    import pickle

    init, grads = _data(shapes=[(4,)])
    p = lf.tensor(init[0], requires_grad=True)
    opt = lf.optim.RMSprop([p], lr=0.01, momentum=0.9)
    for k in range(3):
        p.grad = lf.tensor(grads[k][0])
        opt.step()
    blob = pickle.dumps({"p": p.detach().numpy(), "opt": opt.state_dict()})
    q = lf.tensor(pickle.loads(blob)["p"], requires_grad=True)
    opt2 = lf.optim.RMSprop([q], lr=0.5)
    opt2.load_state_dict(pickle.loads(blob)["opt"])
    for k in range(3, 6):
        p.grad = lf.tensor(grads[k][0])
        q.grad = lf.tensor(grads[k][0])
        opt.step()
        opt2.step()
    np.testing.assert_array_equal(p.detach().numpy(), q.detach().numpy())


class _SignSGD(O.Optimizer):
    """A user-defined optimizer on the base class: p -= lr * sign(g), with a step counter."""

    _dynamic = ("lr",)
    _state_keys = ()

    def __init__(self, params, lr=0.1):
        super().__init__(params, {"lr": lr})

    def _new_state(self, p, group):
        return {"step": O._scalar_state()}

    def _update(self, hyper, params, grads, states):
        return (
            [p - hyper["lr"] * jnp.sign(g) for p, g in zip(params, grads)],
            [{"step": s["step"] + 1} for s in states],
        )


class _Broken(_SignSGD):
    def _update(self, hyper, params, grads, states):
        new_params, new_states = super()._update(hyper, params, grads, states)
        return [p.astype(jnp.float64) for p in new_params], new_states


def test_custom_optimizer_on_the_base_class():
    p = lf.tensor([1.0, -2.0], requires_grad=True)
    opt = _SignSGD([p], lr=0.5)
    for _ in range(3):
        p.grad = lf.tensor([3.0, -0.1])
        opt.step()
    np.testing.assert_allclose(p.detach().numpy(), [-0.5, -0.5])
    assert opt.state_dict()["state"][0]["step"].item() == 3.0
    q = lf.tensor([1.0], requires_grad=True)
    q.grad = lf.tensor([1.0])
    with pytest.raises(lf.OpError, match=r"changed parameter 0 from float32\[1\] to float64\[1\]"):
        _Broken([q]).step()


@pytest.mark.parametrize(
    "name,kwargs", [("SGD", dict(lr=0.05, momentum=0.9, nesterov=True)), ("AdamW", dict(lr=0.01, weight_decay=0.1))]
)
def test_training_an_nn_module_matches_torch(name, kwargs):
    """Real gradients (autograd through lf.nn layers) and parameter groups by module, side by side."""
    tm = torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
    lm = lf.nn.Sequential(lf.nn.Linear(3, 8), lf.nn.Tanh(), lf.nn.Linear(8, 2))
    lm.load_state_dict({k: v.detach().numpy() for k, v in tm.state_dict().items()})
    groups = lambda m: [{"params": m[0].parameters()}, {"params": m[2].parameters(), "lr": 0.02}]
    lo, to = getattr(lf.optim, name)(groups(lm), **kwargs), getattr(torch.optim, name)(groups(tm), **kwargs)
    rng = np.random.default_rng(0)
    for _ in range(10):
        x, y = rng.standard_normal((16, 3)).astype(np.float32), rng.standard_normal((16, 2)).astype(np.float32)
        for model, opt, lib in ((lm, lo, lf), (tm, to, torch)):
            opt.zero_grad()
            loss = ((model(lib.tensor(x)) - lib.tensor(y)) ** 2).mean()
            loss.backward()
            opt.step()
    for (k, a), b in zip(lm.state_dict().items(), tm.state_dict().values()):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=2e-5, atol=2e-6, err_msg=k)
    assert all(isinstance(p, lf.nn.Parameter) for p in lm.parameters())
