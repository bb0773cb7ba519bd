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
