"""The per-call caches of compiled modules and Graphs (issue 14): a call walks the module tree only after the tree
changed. Every change a user can make between two calls -- a new child, parameter or buffer, a replaced one, a
direct write into a module's dicts, a frozen parameter, a pickled and restored module -- must be seen by the next
call. References are numpy computations of the same layers, not lazyflow."""

import copy
import pickle

import numpy as np
import pytest

import lazyflow as lf
from lazyflow import nn
from lazyflow.nn import functional as F
from lazyflow.nn.module import structure_version


def _np(t):
    return np.asarray(t.detach().numpy())


def _linear(x, m):
    return x @ _np(m.weight).T + (0 if m.bias is None else _np(m.bias))


class Two(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 5)
        self.b = nn.Linear(5, 3)

    def forward(self, x):
        y = self.b(self.a(x).relu())
        for name, buf in self.named_buffers():
            if name.startswith("shift"):
                y = y + buf
        return y


def _ref(m, x):
    y = _linear(np.maximum(_linear(x, m.a), 0), m.b)
    for name, buf in m.named_buffers():
        if name.startswith("shift"):
            y = y + _np(buf)
    return y


X = np.random.default_rng(0).standard_normal((6, 4)).astype(np.float32)


@pytest.mark.parametrize(
    "change",
    [
        "replace_child",
        "replace_parameter",
        "dict_write",
        "new_buffer",
        "delete_buffer",
        "load_assign",
    ],
)
def test_compiled_module_sees_every_structural_change(change):
    lf.manual_seed(0)
    m = Two()
    m.register_buffer("shift", lf.ones(3))
    cm = lf.compile(m)
    x = lf.tensor(X)
    with lf.no_grad():
        np.testing.assert_allclose(_np(cm(x)), _ref(m, X), rtol=1e-5, atol=1e-5)
        before = structure_version()
        if change == "replace_child":
            m.b = nn.Linear(5, 3)
        elif change == "replace_parameter":
            m.a.weight = nn.Parameter(lf.randn(5, 4))
        elif change == "dict_write":  # what parametrize-style code does
            m.b._parameters["bias"] = nn.Parameter(lf.full((3,), 7.0))
        elif change == "new_buffer":
            m.register_buffer("shift2", lf.full((3,), 2.0))
        elif change == "delete_buffer":
            del m.shift
        else:
            sd = {k: v * 2 for k, v in m.state_dict().items()}
            m.load_state_dict(sd, assign=True)
        assert structure_version() != before
        np.testing.assert_allclose(_np(cm(x)), _ref(m, X), rtol=1e-5, atol=1e-5)


def test_train_eval_switch_is_seen():
    lf.manual_seed(0)
    m = nn.Sequential(nn.Linear(4, 8), nn.Dropout(0.5), nn.Linear(8, 2))
    cm = lf.compile(m)
    x = lf.tensor(X)
    m.eval()
    ref = _linear(np.maximum(0, _linear(X, m[0])) * 0 + _linear(X, m[0]), m[2])  # dropout off: identity
    with lf.no_grad():
        np.testing.assert_allclose(_np(cm(x)), ref, rtol=1e-5, atol=1e-5)
        m[1].training = True  # set on one module directly, not through train()
        out = _np(cm(x))
    assert not np.allclose(out, ref, rtol=1e-5, atol=1e-5), "the dropout module's own training flag was ignored"


def _sgd_ref(ws, grads, lr):
    return [w - lr * g for w, g in zip(ws, grads)]


class Step(nn.Graph):
    def __init__(self, model, opt):
        super().__init__()
        self.model = model
        self.add_optimizer(opt)

    def build(self, x, y):
        loss = F.mse_loss(self.model(x), y)
        loss.backward()
        return loss


def test_graph_sees_a_frozen_parameter_and_a_new_param_group():
    lf.manual_seed(0)
    m = nn.Linear(4, 3)
    opt = lf.optim.SGD([m.weight], lr=0.1)
    step = Step(m, opt)
    x, y = lf.tensor(X), lf.tensor(np.ones((6, 3), np.float32))
    step(x, y)
    # numpy reference of one SGD step on the weight (bias not optimized)
    w, b = _np(m.weight), _np(m.bias)
    err = X @ w.T + b - 1.0
    gw = 2 * err.T @ X / err.size
    step(x, y)
    np.testing.assert_allclose(_np(m.weight), w - 0.1 * gw, rtol=1e-5, atol=1e-6)
    # freeze the weight: nothing may move now
    m.weight.requires_grad_(False)
    w2 = _np(m.weight)
    step(x, y)
    np.testing.assert_array_equal(_np(m.weight), w2)
    # a new param group: the bias is optimized from the next call on
    m.weight.requires_grad_(True)
    opt.add_param_group({"params": [m.bias], "lr": 0.5})
    w, b = _np(m.weight), _np(m.bias)
    err = X @ w.T + b - 1.0
    gw, gb = 2 * err.T @ X / err.size, 2 * err.sum(0) / err.size
    step(x, y)
    np.testing.assert_allclose(_np(m.weight), w - 0.1 * gw, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(_np(m.bias), b - 0.5 * gb, rtol=1e-5, atol=1e-6)


def test_stores_pickle_as_plain_dicts_and_come_back_as_stores():
    m = Two()
    data = pickle.dumps(m)
    assert b"_Store" not in data  # checkpoints never name the class
    for clone in (pickle.loads(data), copy.deepcopy(m)):
        for mod in clone.modules():
            for store in (mod._parameters, mod._buffers, mod._modules):
                before = structure_version()
                store["probe"] = None
                assert structure_version() != before
                del store["probe"]


def test_a_plain_dict_disables_the_cache_but_stays_correct():
    lf.manual_seed(0)
    m = Two()
    m.a.__dict__["_parameters"] = dict(m.a._parameters)  # someone bypassed the store
    cm = lf.compile(m)
    x = lf.tensor(X)
    with lf.no_grad():
        cm(x)
        m.a._parameters["weight"] = nn.Parameter(lf.randn(5, 4))  # no version bump: a plain dict
        np.testing.assert_allclose(_np(cm(x)), _ref(m, X), rtol=1e-5, atol=1e-5)


def test_shared_backward_seed_is_never_changed_through_a_grad():
    """backward()'s implicit ones seed is one shared array per kind: changing a leaf's .grad in place, or an
    optimizer step that donates, must not reach the next backward's seed."""
    a = lf.tensor(2.0, requires_grad=True)
    a.backward()  # a leaf scalar: its .grad is the seed itself
    a.grad.mul_(5.0)
    a.grad.add_(1.0)
    opt = lf.optim.SGD([a], lr=1.0, momentum=0.9)
    opt.step()  # the eager step donates what it owns
    b = lf.tensor(3.0, requires_grad=True)
    b.backward()
    assert float(b.grad) == 1.0
    c = lf.tensor([1.0, 2.0], requires_grad=True)
    (c * c).sum().backward()
    np.testing.assert_array_equal(_np(c.grad), [2.0, 4.0])


# -- replay: a call whose inputs chose the same variant as the last call skips the key (issue 14). Every change a user
# can make between two calls must still be seen; the reference is torch running the same steps eagerly.


def _torch_pair():
    torch = pytest.importorskip("torch")
    lf.manual_seed(0)
    m = nn.Sequential(nn.Linear(6, 16), nn.BatchNorm1d(16), nn.Tanh(), nn.Linear(16, 3))
    tm = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.BatchNorm1d(16), torch.nn.Tanh(), torch.nn.Linear(16, 3))
    with torch.no_grad():
        for (k, v), (tk, tv) in zip(m.state_dict().items(), tm.state_dict().items()):
            assert k == tk
            tv.copy_(torch.from_numpy(_np(v).copy()))
    opt = lf.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    topt = torch.optim.SGD(tm.parameters(), lr=0.1, momentum=0.9)
    return torch, m, opt, tm, topt


class CEStep(nn.Graph):
    def __init__(self, model, opt, sched=None):
        super().__init__()
        self.model = model
        self.add_optimizer(opt, lr_sch=sched)

    def build(self, x, y):
        out = self.model(x)
        loss = F.cross_entropy(out, y)
        loss.backward()
        return loss, out


def _batch(n=8, seed=1):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, 6)).astype(np.float32), rng.integers(0, 3, n)


def _torch_step(torch, tm, topt, xs, ys, sched=None):
    out = tm(torch.from_numpy(xs))
    loss = torch.nn.functional.cross_entropy(out, torch.from_numpy(ys))
    loss.backward()
    topt.step()
    topt.zero_grad()
    if sched is not None:
        sched.step()
    return loss.item(), out.detach().numpy()


def _same(m, tm, rtol=1e-4, atol=1e-5):
    sd = tm.state_dict()
    for k, v in m.state_dict().items():
        np.testing.assert_allclose(_np(v), sd[k].numpy(), rtol=rtol, atol=atol, err_msg=k)


CHANGES = [
    "lr_by_hand",
    "momentum_by_hand",
    "nesterov_flag",
    "requires_grad_off",
    "module_swapped",
    "eval",
    "load_state_dict",
    "add_param_group",
    "new_batch_shape",
    "eager_step_between",
    "state_tensor_replaced",
    "state_cleared",
]


@pytest.mark.parametrize("change", CHANGES)
def test_graph_replay_sees_every_change_between_calls(change):
    torch, m, opt, tm, topt = _torch_pair()
    step = CEStep(m, opt)
    for i in range(3):  # the second and third calls replay the first's variant
        xs, ys = _batch(seed=i)
        loss, _ = step(lf.tensor(xs), lf.tensor(ys))
        tloss, _ = _torch_step(torch, tm, topt, xs, ys)
        np.testing.assert_allclose(loss.item(), tloss, rtol=1e-5, atol=1e-6)
    _same(m, tm)
    traces = step.cache_info().traces
    n = 8
    if change == "lr_by_hand":
        opt.param_groups[0]["lr"] = topt.param_groups[0]["lr"] = 0.03
    elif change == "momentum_by_hand":
        opt.param_groups[0]["momentum"] = topt.param_groups[0]["momentum"] = 0.5
    elif change == "nesterov_flag":
        opt.param_groups[0]["nesterov"] = topt.param_groups[0]["nesterov"] = True
    elif change == "requires_grad_off":
        m[0].weight.requires_grad_(False)
        tm[0].weight.requires_grad_(False)
    elif change == "module_swapped":  # the optimizers keep the old layer's parameters, as in torch
        lf.manual_seed(5)
        m[3] = nn.Linear(16, 3)
        tm[3] = torch.nn.Linear(16, 3)
        with torch.no_grad():
            tm[3].weight.copy_(torch.from_numpy(_np(m[3].weight).copy()))
            tm[3].bias.copy_(torch.from_numpy(_np(m[3].bias).copy()))
    elif change == "eval":
        m.eval()
        tm.eval()
    elif change == "load_state_dict":
        sd = topt.state_dict()
        for s in sd["state"].values():
            s["momentum_buffer"] = s["momentum_buffer"] * 3.0
        topt.load_state_dict(sd)
        opt.load_state_dict(
            {
                "state": {k: {n_: v.numpy() for n_, v in s.items()} for k, s in topt.state_dict()["state"].items()},
                "param_groups": topt.state_dict()["param_groups"],
            }
        )
    elif change == "add_param_group":
        extra = nn.Linear(3, 3)
        textra = torch.nn.Linear(3, 3)
        with torch.no_grad():
            textra.weight.copy_(torch.from_numpy(_np(extra.weight).copy()))
            textra.bias.copy_(torch.from_numpy(_np(extra.bias).copy()))
        m.append(extra)
        tm.append(textra)
        opt.add_param_group({"params": list(extra.parameters()), "lr": 0.5})
        topt.add_param_group({"params": list(textra.parameters()), "lr": 0.5})
    elif change == "new_batch_shape":
        n = 5
    elif change == "eager_step_between":
        xs, ys = _batch(seed=10)
        loss = F.cross_entropy(m(lf.tensor(xs)), lf.tensor(ys))
        loss.backward()
        opt.step()
        opt.zero_grad()
        _torch_step(torch, tm, topt, xs, ys)
    elif change == "state_tensor_replaced":
        p, tp = m[3].weight, tm[3].weight
        opt.state[p]["momentum_buffer"] = lf.full(tuple(p.shape), 0.25)
        topt.state[tp]["momentum_buffer"] = torch.full(tuple(tp.shape), 0.25)
    elif change == "state_cleared":
        p, tp = m[3].weight, tm[3].weight
        del opt.state[p]
        del topt.state[tp]
    for i in range(3):
        xs, ys = _batch(n, seed=20 + i)
        loss, out = step(lf.tensor(xs), lf.tensor(ys))
        tloss, tout = _torch_step(torch, tm, topt, xs, ys)
        np.testing.assert_allclose(_np(out), tout, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(loss.item(), tloss, rtol=1e-5, atol=1e-5)
        _same(m, tm)
    if change in ("lr_by_hand", "momentum_by_hand", "eager_step_between", "state_tensor_replaced"):
        assert step.cache_info().traces == traces, "a new value of the same kind must not retrace"


def test_graph_replay_scheduler_changes_lr_without_retracing():
    torch, m, opt, tm, topt = _torch_pair()
    sched = lf.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.3)
    tsched = torch.optim.lr_scheduler.StepLR(topt, step_size=2, gamma=0.3)
    step = CEStep(m, opt, sched)
    for i in range(7):
        xs, ys = _batch(seed=i)
        loss, _ = step(lf.tensor(xs), lf.tensor(ys))
        tloss, _ = _torch_step(torch, tm, topt, xs, ys, tsched)
        np.testing.assert_allclose(loss.item(), tloss, rtol=1e-5, atol=1e-5)
        assert opt.param_groups[0]["lr"] == pytest.approx(topt.param_groups[0]["lr"])
    _same(m, tm)
    assert step.cache_info().traces == 1 and step.cache_info().hits == 6


def test_graph_replay_detach_alias_and_index_checks():
    torch, m, opt, tm, topt = _torch_pair()
    step = CEStep(m, opt)
    for i in range(2):
        xs, ys = _batch(seed=i)
        step(lf.tensor(xs), lf.tensor(ys))
        _torch_step(torch, tm, topt, xs, ys)
    alias, talias = m[0].weight.detach(), tm[0].weight.detach()  # taken between replayed calls
    held = m[3].weight.jax()  # a value something else holds: must stay readable (donated as a copy)
    before = np.asarray(held).copy()
    xs, ys = _batch(seed=5)
    step(lf.tensor(xs), lf.tensor(ys))
    _torch_step(torch, tm, topt, xs, ys)
    np.testing.assert_allclose(_np(alias), talias.numpy(), rtol=1e-4, atol=1e-5)  # shares the storage: shows the step
    np.testing.assert_array_equal(np.asarray(held), before)
    _same(m, tm)
    # an out-of-range target of the same shape and dtype (the replayed variant): eager's error, nothing updated
    w = _np(m[0].weight)
    bad = np.array([0, 1, 2, 3, 0, 1, 2, 0])
    with pytest.raises(lf.IndexOutOfRangeError):
        step(lf.tensor(xs), lf.tensor(bad))
    np.testing.assert_array_equal(_np(m[0].weight), w)
    lf.graph.set_index_checks(False)
    try:
        step(lf.tensor(xs), lf.tensor(bad))  # checks off from now on: no read-back, no error
    finally:
        lf.graph.set_index_checks(True)


def test_compile_replay_sees_grad_mode_default_dtype_and_arguments():
    torch = pytest.importorskip("torch")
    lf.manual_seed(0)
    m = nn.Linear(4, 3)
    tw, tb = (torch.from_numpy(_np(p).copy()).requires_grad_(True) for p in (m.weight, m.bias))
    cm = lf.compile(m)
    x = lf.tensor(X)
    for _ in range(2):
        out = cm(x)
    assert out.requires_grad
    with lf.no_grad():
        out = cm(x)
    assert not out.requires_grad
    out = cm(x)  # grad mode again: the tape must be connected
    out.sum().backward()
    tout = torch.from_numpy(X) @ tw.T + tb
    tout.sum().backward()
    np.testing.assert_allclose(_np(m.weight.grad), tw.grad.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(_np(out), tout.detach().numpy(), rtol=1e-5, atol=1e-6)
    xr = lf.tensor(X, requires_grad=True)  # an argument that needs a gradient now
    cm(xr).sum().backward()
    np.testing.assert_allclose(_np(xr.grad), np.tile(tw.detach().numpy().sum(0), (6, 1)), rtol=1e-5)

    def f(x, k):
        return x * k + lf.ones(3)

    cf = lf.compile(f)
    with lf.no_grad():
        for k in (2.0, 2.0, 3.0):  # a Python number is part of the signature
            np.testing.assert_allclose(_np(cf(lf.ones(3), k)), np.full(3, k + 1.0))
        assert cf(lf.ones(3), 3.0).dtype == lf.float32
        old = lf.get_default_dtype()
        lf.set_default_dtype(lf.float64)
        try:
            torch_dtype = (torch.ones(3, dtype=torch.float32) + torch.ones(3, dtype=torch.float64)).dtype
            got = cf(lf.ones(3, dtype=lf.float32), 3.0)
            assert str(got.dtype).split(".")[-1] == str(torch_dtype).split(".")[-1]
        finally:
            lf.set_default_dtype(old)
        assert cf(lf.ones(3), 3.0).dtype == lf.float32


def test_graph_replay_reads_a_tensor_lr_changed_in_place():
    """A hyperparameter that can change without a new object (a Tensor lr filled in place) is read every call."""
    torch, m, opt, tm, topt = _torch_pair()
    lr = lf.tensor(0.1)
    opt.param_groups[0]["lr"] = lr
    step = CEStep(m, opt)
    for i in range(6):
        if i == 3:
            lr.fill_(0.02)
            topt.param_groups[0]["lr"] = 0.02
        xs, ys = _batch(seed=i)
        loss, _ = step(lf.tensor(xs), lf.tensor(ys))
        tloss, _ = _torch_step(torch, tm, topt, xs, ys)
        np.testing.assert_allclose(loss.item(), tloss, rtol=1e-5, atol=1e-6)
        _same(m, tm)
    assert step.cache_info().traces == 1


def test_compile_tensor_only_calls_and_other_argument_shapes_alternate():
    # a call of tensors only skips the pytree walk (its structure is cached per number of arguments); a call with a
    # keyword, a Python number, a list or another number of tensors between such calls is still told apart
    def f(x, y=None, k=1.0):
        out = x * k
        if y is not None:
            out = out + (y[0] if isinstance(y, list) else y)
        return out

    cf = lf.compile(f)
    a, b = lf.tensor(X), lf.tensor(X * 2)
    calls = [
        ((a,), {}, X),
        ((a, b), {}, X + 2 * X),
        ((a,), {"y": b}, X + 2 * X),
        ((a, b, 3.0), {}, 3 * X + 2 * X),
        ((a, [b]), {}, X + 2 * X),
        ((a,), {"k": 2.0}, 2 * X),
        ((b,), {}, 2 * X),
        ((a, b), {}, X + 2 * X),
    ]
    with lf.no_grad():
        for args, kwargs, want in calls + calls:
            np.testing.assert_allclose(_np(cf(*args, **kwargs)), want, rtol=1e-6)
    info = cf.cache_info()
    assert info.compiles == 6 and info.traces == 6  # (a,) and (b,) share one signature, as do both (a, b) calls
