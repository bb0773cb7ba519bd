"""Recurrent layers against torch (the oracle): RNN (tanh/relu), LSTM (with proj_size) and GRU with torch's weights
copied in (outputs, final states and gradients w.r.t. inputs, initial states and every parameter; eager, lf.compile
and an lf.nn.Graph training step), the cells, state_dict keys/shapes, init, signatures, dropout, bad input, and one
eager kernel per call whatever the sequence length."""

from __future__ import annotations

import inspect
import math
import typing

import numpy as np
import pytest
import torch

import lazyflow as lf
from lazyflow._core.errors import LazyflowError

RTOL = {lf.float32: 1e-5, lf.float64: 1e-11}
NP = {lf.float32: np.float32, lf.float64: np.float64}
TDT = {lf.float32: torch.float32, lf.float64: torch.float64}


def _close(got, want, what="", dtype=lf.float32):
    want = np.asarray(want, np.float64)
    scale = max(float(np.max(np.abs(want))) if want.size else 0.0, 1e-6)
    rtol = RTOL[dtype]
    np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=rtol, atol=rtol * scale, err_msg=what)


def _arr(shape, seed, dtype=lf.float32):
    return np.random.default_rng(seed).standard_normal(shape).astype(NP[dtype])


def _pair_module(name, kw, dtype=lf.float32, seed=0):
    """torch's layer with its own init and a lazyflow layer with torch's weights loaded (numpy arrays)."""
    torch.manual_seed(seed)
    tm = getattr(torch.nn, name)(**kw).to(TDT[dtype])
    lm = getattr(lf.nn, name)(**kw, dtype=dtype)
    res = lm.load_state_dict({k: v.detach().numpy().copy() for k, v in tm.state_dict().items()})
    assert not res.missing_keys and not res.unexpected_keys
    return lm, tm


# (id, class, constructor kwargs, batched, initial state given)
CASES = [
    ("rnn_tanh", "RNN", {"input_size": 4, "hidden_size": 5}, True, True),
    ("rnn_relu_2l_bi", "RNN", {"input_size": 4, "hidden_size": 5, "nonlinearity": "relu", "num_layers": 2,
                               "bidirectional": True}, True, False),
    ("rnn_nobias_bf", "RNN", {"input_size": 3, "hidden_size": 4, "bias": False, "batch_first": True}, True, True),
    ("rnn_unbatched_2l", "RNN", {"input_size": 4, "hidden_size": 5, "num_layers": 2}, False, True),
    ("lstm", "LSTM", {"input_size": 4, "hidden_size": 5}, True, True),
    ("lstm_2l_bi_bf", "LSTM", {"input_size": 4, "hidden_size": 5, "num_layers": 2, "bidirectional": True,
                               "batch_first": True}, True, True),
    ("lstm_proj_2l", "LSTM", {"input_size": 4, "hidden_size": 6, "proj_size": 3, "num_layers": 2}, True, True),
    ("lstm_proj_bi_nobias", "LSTM", {"input_size": 4, "hidden_size": 6, "proj_size": 2, "bidirectional": True,
                                     "bias": False}, True, False),
    ("lstm_unbatched_bi", "LSTM", {"input_size": 3, "hidden_size": 4, "bidirectional": True}, False, True),
    ("gru", "GRU", {"input_size": 4, "hidden_size": 5}, True, True),
    ("gru_2l_bi_bf_nobias", "GRU", {"input_size": 4, "hidden_size": 5, "num_layers": 2, "bidirectional": True,
                                    "batch_first": True, "bias": False}, True, True),
    ("gru_unbatched", "GRU", {"input_size": 4, "hidden_size": 5}, False, False),
]  # fmt: skip
T, N = 6, 3


def _inputs(name, kw, batched, with_state, dtype, seed=1):
    """Numpy input and initial states for a layer built with ``kw``."""
    dirs = 2 if kw.get("bidirectional") else 1
    lead = (kw.get("num_layers", 1) * dirs,) + ((N,) if batched else ())
    h_out = kw.get("proj_size") or kw["hidden_size"]
    xs = ((N, T) if kw.get("batch_first") else (T, N)) if batched else (T,)
    x = _arr(xs + (kw["input_size"],), seed, dtype)
    if not with_state:
        return x, []
    states = [_arr(lead + (h_out,), seed + 1, dtype)]
    if name == "LSTM":
        states.append(_arr(lead + (kw["hidden_size"],), seed + 2, dtype))
    return x, states


def _call(m, name, x, states):
    if name == "LSTM":
        out, (h, c) = m(x, tuple(states) if states else None)
        return out, h, c
    out, h = m(x, states[0] if states else None)
    return out, h


def _check_layer(case, mode, dtype=lf.float32):
    _, name, kw, batched, with_state = case
    lm, tm = _pair_module(name, kw, dtype)
    x, states = _inputs(name, kw, batched, with_state, dtype)
    lx, tx = lf.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    ls = [lf.tensor(s, requires_grad=True) for s in states]
    ts = [torch.tensor(s, requires_grad=True) for s in states]
    run = lf.compile(lm) if mode == "graph" else lm
    lres, tres = _call(run, name, lx, ls), _call(tm, name, tx, ts)
    assert len(lres) == len(tres)
    lloss, tloss = 0.0, 0.0
    for i, (a, b) in enumerate(zip(lres, tres)):
        assert tuple(a.shape) == tuple(b.shape), f"result {i}"
        assert a.dtype is dtype
        _close(a.detach().numpy(), b.detach().numpy(), f"result {i}", dtype)
        g = _arr(tuple(b.shape), 10 + i, dtype)
        lloss = lloss + (a * lf.tensor(g)).sum()
        tloss = tloss + (b * torch.tensor(g)).sum()
    lloss.backward()
    tloss.backward()
    _close(lx.grad.numpy(), tx.grad.numpy(), "grad of input", dtype)
    for i, (a, b) in enumerate(zip(ls, ts)):
        _close(a.grad.numpy(), b.grad.numpy(), f"grad of initial state {i}", dtype)
    tp = dict(tm.named_parameters())
    lp = dict(lm.named_parameters())
    assert list(lp) == list(tp)
    for k, p in lp.items():
        _close(p.grad.numpy(), tp[k].grad.numpy(), f"grad of {k}", dtype)


@pytest.mark.parametrize("mode", ["eager", "graph"])
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_layer_vs_torch(case, mode):
    _check_layer(case, mode)


@pytest.mark.parametrize("case", [CASES[1], CASES[5], CASES[6], CASES[10]], ids=lambda c: c[0])
def test_layer_vs_torch_float64(case):
    _check_layer(case, "eager", lf.float64)


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_state_dict_keys_shapes_repr_and_init(case):
    _, name, kw, _, _ = case
    lm, tm = getattr(lf.nn, name)(**kw), getattr(torch.nn, name)(**kw)
    assert [(k, tuple(v.shape)) for k, v in lm.state_dict().items()] == [
        (k, tuple(v.shape)) for k, v in tm.state_dict().items()
    ]
    assert repr(lm) == repr(tm)
    assert [[n for n, _ in zip(names, names)] for names in lm._all_weights] == tm._all_weights
    assert [[tuple(p.shape) for p in ps] for ps in lm.all_weights] == [
        [tuple(p.shape) for p in ps] for ps in tm.all_weights
    ]
    bound = 1.0 / math.sqrt(kw["hidden_size"])
    w = np.concatenate([p.detach().numpy().ravel() for p in lm.parameters()])
    assert np.abs(w).max() <= bound
    assert abs(w.std() - bound / math.sqrt(3)) < 0.25 * bound  # U(-b, b) has std b / sqrt(3)


def test_init_is_reproducible_under_manual_seed():
    lf.manual_seed(3)
    a = lf.nn.LSTM(3, 4, 2).state_dict()
    lf.manual_seed(3)
    b = lf.nn.LSTM(3, 4, 2).state_dict()
    for k in a:
        np.testing.assert_array_equal(a[k].numpy(), b[k].numpy())
    assert not np.array_equal(a["weight_ih_l0"].numpy(), a["weight_ih_l1"].numpy())


def _torch_init_signature(cls):
    sig = inspect.signature(cls.__init__)
    if list(sig.parameters) == ["self", "args", "kwargs"]:  # RNN/LSTM/GRU: the documented overload
        sig = inspect.signature(typing.get_overloads(cls.__init__)[0])
    return sig


NAMES = ["RNN", "LSTM", "GRU", "RNNCell", "LSTMCell", "GRUCell"]


@pytest.mark.parametrize("name", NAMES)
def test_signatures_match_torch(name):
    lcls, tcls = getattr(lf.nn, name), getattr(torch.nn, name)

    def params(sig):
        return [(p.name, p.kind, p.default) for p in sig.parameters.values()]

    got = params(inspect.signature(lcls.__init__))
    want = params(_torch_init_signature(tcls))
    assert got == want
    assert params(inspect.signature(lcls.forward)) == params(inspect.signature(tcls.forward))


def test_lstm_positional_proj_size_like_torch():
    # torch's LSTM takes proj_size as the 8th positional argument
    assert (
        lf.nn.LSTM(4, 6, 1, True, False, 0.0, False, 3).proj_size
        == torch.nn.LSTM(4, 6, 1, True, False, 0.0, False, 3).proj_size
        == 3
    )


# ---------------------------------------------------------------- cells
# (id, class, kwargs, batched, state given)
CELLS = [
    ("rnn_tanh", "RNNCell", {"input_size": 4, "hidden_size": 5}, True, True),
    ("rnn_relu_nobias", "RNNCell", {"input_size": 4, "hidden_size": 5, "nonlinearity": "relu", "bias": False}, True,
     True),
    ("rnn_unbatched", "RNNCell", {"input_size": 4, "hidden_size": 5}, False, True),
    ("lstm", "LSTMCell", {"input_size": 4, "hidden_size": 5}, True, True),
    ("lstm_nostate", "LSTMCell", {"input_size": 4, "hidden_size": 5}, True, False),
    ("lstm_unbatched_nobias", "LSTMCell", {"input_size": 4, "hidden_size": 5, "bias": False}, False, True),
    ("gru", "GRUCell", {"input_size": 4, "hidden_size": 5}, True, True),
    ("gru_unbatched_nostate", "GRUCell", {"input_size": 4, "hidden_size": 5}, False, False),
]  # fmt: skip


@pytest.mark.parametrize("mode", ["eager", "graph"])
@pytest.mark.parametrize("case", CELLS, ids=[c[0] for c in CELLS])
def test_cell_vs_torch(case, mode):
    _, name, kw, batched, with_state = case
    lm, tm = _pair_module(name, kw)
    assert [(k, tuple(v.shape)) for k, v in lm.state_dict().items()] == [
        (k, tuple(v.shape)) for k, v in tm.state_dict().items()
    ]
    assert repr(lm) == repr(tm)
    lead = (N,) if batched else ()
    x = _arr(lead + (kw["input_size"],), 1)
    states = [_arr(lead + (kw["hidden_size"],), 2 + i) for i in range(2 if name == "LSTMCell" else 1)]
    states = states if with_state else []
    lx, tx = lf.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    ls = [lf.tensor(s, requires_grad=True) for s in states]
    ts = [torch.tensor(s, requires_grad=True) for s in states]
    run = lf.compile(lm) if mode == "graph" else lm
    if name == "LSTMCell":
        lres, tres = run(lx, tuple(ls) if ls else None), tm(tx, tuple(ts) if ts else None)
    else:
        lres, tres = (run(lx, ls[0] if ls else None),), (tm(tx, ts[0] if ts else None),)
    lloss, tloss = 0.0, 0.0
    for i, (a, b) in enumerate(zip(lres, tres)):
        assert tuple(a.shape) == tuple(b.shape)
        _close(a.detach().numpy(), b.detach().numpy(), f"result {i}")
        g = _arr(tuple(b.shape), 10 + i)
        lloss = lloss + (a * lf.tensor(g)).sum()
        tloss = tloss + (b * torch.tensor(g)).sum()
    lloss.backward()
    tloss.backward()
    _close(lx.grad.numpy(), tx.grad.numpy(), "grad of input")
    for i, (a, b) in enumerate(zip(ls, ts)):
        _close(a.grad.numpy(), b.grad.numpy(), f"grad of state {i}")
    tp = dict(tm.named_parameters())
    for k, p in lm.named_parameters():
        _close(p.grad.numpy(), tp[k].grad.numpy(), f"grad of {k}")


def test_cell_loop_equals_layer():
    """A GRUCell stepped over time with the layer's weights gives the layer's output (two independent paths)."""
    layer = lf.nn.GRU(3, 4)
    cell = lf.nn.GRUCell(3, 4)
    cell.load_state_dict({k[:-3]: v for k, v in layer.state_dict().items()})
    x = lf.tensor(_arr((5, 2, 3), 4))
    out, h = layer(x)
    hx = None
    steps = []
    for t in range(5):
        hx = cell(x[t], hx)
        steps.append(hx.detach().numpy())
    _close(out.detach().numpy(), np.stack(steps))
    _close(h.detach().numpy()[0], steps[-1])


# ---------------------------------------------------------------- training step
class _LfNet(lf.nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = lf.nn.LSTM(3, 5, num_layers=2, bidirectional=True, proj_size=2)
        self.head = lf.nn.Linear(4, 1)

    def forward(self, x):
        out, (h, c) = self.rnn(x)
        return self.head(out[-1])


class _TorchNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = torch.nn.LSTM(3, 5, num_layers=2, bidirectional=True, proj_size=2)
        self.head = torch.nn.Linear(4, 1)

    def forward(self, x):
        out, (h, c) = self.rnn(x)
        return self.head(out[-1])


class _Step(lf.nn.Graph):
    def __init__(self, model, opt):
        super().__init__()
        self.model = model
        self.add_optimizer(opt)

    def build(self, x, y):
        loss = lf.nn.functional.mse_loss(self.model(x), y)
        loss.backward()
        return loss


@pytest.mark.parametrize("mode", ["eager", "compiled", "graph"])
def test_training_steps_match_torch(mode):
    torch.manual_seed(0)
    tnet = _TorchNet()
    lnet = _LfNet()
    lnet.load_state_dict({k: v.detach().numpy().copy() for k, v in tnet.state_dict().items()})
    topt = torch.optim.Adam(tnet.parameters(), lr=0.01)
    lopt = lf.optim.Adam(lnet.parameters(), lr=0.01)
    x, y = _arr((7, 4, 3), 1), _arr((4, 1), 2)
    lx, ly, tx, ty = lf.tensor(x), lf.tensor(y), torch.tensor(x), torch.tensor(y)
    step = _Step(lnet, lopt) if mode == "graph" else None
    fwd = lf.compile(lnet) if mode == "compiled" else lnet
    for _ in range(3):
        tloss = torch.nn.functional.mse_loss(tnet(tx), ty)
        topt.zero_grad()
        tloss.backward()
        topt.step()
        if step is not None:
            lloss = step(lx, ly)
        else:
            lloss = lf.nn.functional.mse_loss(fwd(lx), ly)
            lopt.zero_grad()
            lloss.backward()
            lopt.step()
        _close(lloss.item(), tloss.item(), "loss")
    tp = dict(tnet.named_parameters())
    for k, p in lnet.named_parameters():
        _close(p.detach().numpy(), tp[k].detach().numpy(), f"{k} after 3 steps")
    if step is not None:
        assert step.cache_info().compiles == 1


# ---------------------------------------------------------------- dropout
def test_dropout_eval_equals_torch_and_train_is_seeded():
    kw = {"input_size": 4, "hidden_size": 5, "num_layers": 3, "dropout": 0.5}
    lm, tm = _pair_module("GRU", kw)
    x = _arr((T, N, 4), 1)
    lm.eval()
    tm.eval()
    ev = lm(lf.tensor(x))[0].detach().numpy()
    _close(ev, tm(torch.tensor(x))[0].detach().numpy(), "eval output")
    lm.train()
    for run in (lm, lf.compile(lm)):
        lf.manual_seed(7)
        a = run(lf.tensor(x))[0].detach().numpy()
        b = run(lf.tensor(x))[0].detach().numpy()
        lf.manual_seed(7)
        a2 = run(lf.tensor(x))[0].detach().numpy()
        np.testing.assert_array_equal(a, a2)
        assert not np.allclose(a, ev) and not np.allclose(a, b)
    # the first layer sees no dropout: with 1 layer, training equals eval (torch warns about the useless dropout)
    with pytest.warns(UserWarning, match="num_layers greater than 1"):
        one = lf.nn.GRU(4, 5, dropout=0.5)
    with pytest.warns(UserWarning, match="num_layers greater than 1"):
        torch.nn.GRU(4, 5, dropout=0.5)
    np.testing.assert_array_equal(one(lf.tensor(x))[0].detach().numpy(), one.eval()(lf.tensor(x))[0].detach().numpy())


def test_dropout_scales_kept_units():
    """Between layers, dropout zeroes units with probability p and scales the kept ones by 1/(1-p): with
    weight_ih_l1 = identity and no recurrence, the second layer's pre-activation shows the mask."""
    m = lf.nn.RNN(4, 4, num_layers=2, dropout=0.25, bias=False, nonlinearity="relu")
    eye = np.eye(4, dtype=np.float32)
    zero = np.zeros((4, 4), np.float32)
    m.load_state_dict({"weight_ih_l0": eye, "weight_hh_l0": zero, "weight_ih_l1": eye, "weight_hh_l1": zero})
    x = np.abs(_arr((200, 50, 4), 3)) + 0.1
    lf.manual_seed(0)
    out = m(lf.tensor(x))[0].detach().numpy()
    kept = out != 0
    assert abs(kept.mean() - 0.75) < 0.01
    np.testing.assert_allclose(out[kept], (x / 0.75)[kept], rtol=1e-6)


# ---------------------------------------------------------------- special points
@pytest.mark.parametrize("name", ["RNN", "LSTM", "GRU"])
def test_empty_batch_like_torch(name):
    lm, tm = _pair_module(name, {"input_size": 3, "hidden_size": 4, "num_layers": 2})
    lres, tres = lm(lf.zeros(5, 0, 3)), tm(torch.zeros(5, 0, 3))
    assert tuple(lres[0].shape) == tuple(tres[0].shape) == (5, 0, 4)
    lh, th = (lres[1][0], tres[1][0]) if name == "LSTM" else (lres[1], tres[1])
    assert tuple(lh.shape) == tuple(th.shape) == (2, 0, 4)


def test_relu_rnn_gradient_at_zero_like_torch():
    """All-zero weights, input and state: every pre-activation is exactly 0, where torch's relu gradient is 0."""
    kw = {"input_size": 3, "hidden_size": 4, "nonlinearity": "relu", "num_layers": 2}
    lm, tm = _pair_module("RNN", kw)
    with torch.no_grad():
        for p in tm.parameters():
            p.zero_()
    lm.load_state_dict({k: v.numpy().copy() for k, v in tm.state_dict().items()})
    lx, tx = lf.zeros(4, 2, 3, requires_grad=True), torch.zeros(4, 2, 3, requires_grad=True)
    (lm(lx)[0] * 2.0).sum().backward()
    (tm(tx)[0] * 2.0).sum().backward()
    np.testing.assert_array_equal(lx.grad.numpy(), tx.grad.numpy())
    tp = dict(tm.named_parameters())
    for k, p in lm.named_parameters():
        np.testing.assert_array_equal(p.grad.numpy(), tp[k].grad.numpy(), err_msg=k)


def test_double_backward_like_torch():
    """A gradient penalty through a GRU (create_graph=True): the scan's vjp is itself differentiated."""
    lm, tm = _pair_module("GRU", {"input_size": 3, "hidden_size": 4, "num_layers": 2})
    x = _arr((5, 2, 3), 0)
    lx, tx = lf.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    (lg,) = lf.autograd.grad(lm(lx)[0].sum(), lx, create_graph=True)
    (tg,) = torch.autograd.grad(tm(tx)[0].sum(), tx, create_graph=True)
    _close(lg.detach().numpy(), tg.detach().numpy(), "first gradient")
    (lg**2).sum().backward()
    (tg**2).sum().backward()
    _close(lx.grad.numpy(), tx.grad.numpy(), "second-order gradient of the input")
    tp = dict(tm.named_parameters())
    for k, p in lm.named_parameters():
        _close(p.grad.numpy(), tp[k].grad.numpy(), f"second-order gradient of {k}")


# ---------------------------------------------------------------- kernels per call
def test_eager_runs_one_kernel_per_call_whatever_the_length():
    m = lf.nn.LSTM(3, 4, num_layers=2, bidirectional=True)

    def misses(length):
        x = lf.tensor(_arr((length, 2, 3), length), requires_grad=True)
        before = lf.eager.cache_info()
        out, (h, c) = m(x)
        fwd = lf.eager.cache_info().misses - before.misses
        (out.sum() + h.sum() + c.sum()).backward()
        after = lf.eager.cache_info()
        return fwd, after.misses - before.misses, after.backward_compiles - before.backward_compiles

    misses(5)  # warm: the kernels whose shapes do not depend on the length
    first = misses(9)
    # a new length compiles the rnn op and the output's sum, and their backwards: nothing per time step
    assert first == (1, 2, 2), first
    assert misses(33) == first
    # and a call is one kernel launch, not one per step: a per-step loop would hit the cache 33 times here
    x = lf.tensor(_arr((33, 2, 3), 0))
    before = lf.eager.cache_info()
    m(x)
    after = lf.eager.cache_info()
    assert (after.hits + after.misses) - (before.hits + before.misses) == 1


# ---------------------------------------------------------------- bad input
def _x(m, *shape):
    return m.zeros(*shape)


BAD = [
    ("wrong_feature_size", lambda nn, m: nn.LSTM(3, 4)(_x(m, 5, 2, 7))),
    ("wrong_hidden_shape", lambda nn, m: nn.GRU(3, 4, 2)(_x(m, 5, 2, 3), _x(m, 1, 2, 4))),
    ("wrong_hidden_batch", lambda nn, m: nn.RNN(3, 4)(_x(m, 5, 2, 3), _x(m, 1, 3, 4))),
    ("wrong_cell_state", lambda nn, m: nn.LSTM(3, 4)(_x(m, 5, 2, 3), (_x(m, 1, 2, 4), _x(m, 1, 2, 5)))),
    ("proj_h_not_proj", lambda nn, m: nn.LSTM(3, 4, proj_size=2)(_x(m, 5, 2, 3), (_x(m, 1, 2, 4), _x(m, 1, 2, 4)))),
    ("hidden_3d_for_unbatched", lambda nn, m: nn.RNN(3, 4)(_x(m, 5, 3), _x(m, 1, 1, 4))),
    ("hidden_2d_for_batched", lambda nn, m: nn.GRU(3, 4)(_x(m, 5, 2, 3), _x(m, 2, 4))),
    ("input_4d", lambda nn, m: nn.LSTM(3, 4)(_x(m, 5, 2, 1, 3))),
    ("input_1d", lambda nn, m: nn.RNN(3, 4)(_x(m, 3))),
    ("empty_sequence", lambda nn, m: nn.LSTM(3, 4)(_x(m, 0, 2, 3))),
    ("empty_sequence_batch_first", lambda nn, m: nn.GRU(3, 4, batch_first=True)(_x(m, 2, 0, 3))),
    ("proj_size_ge_hidden", lambda nn, m: nn.LSTM(3, 4, proj_size=4)),
    ("proj_size_negative", lambda nn, m: nn.LSTM(3, 4, proj_size=-1)),
    ("nonlinearity_foo", lambda nn, m: nn.RNN(3, 4, nonlinearity="foo")),
    ("dropout_out_of_range", lambda nn, m: nn.GRU(3, 4, dropout=1.5)),
    ("hidden_size_zero", lambda nn, m: nn.LSTM(3, 0)),
    ("num_layers_zero", lambda nn, m: nn.GRU(3, 4, num_layers=0)),
    ("bias_not_bool", lambda nn, m: nn.RNN(3, 4, bias=1)),
    ("input_size_float", lambda nn, m: nn.RNN(3.0, 4)),
    ("dtype_mismatch", lambda nn, m: nn.GRU(3, 4)(_x(m, 5, 2, 3).double())),
    ("cell_wrong_feature_size", lambda nn, m: nn.GRUCell(3, 4)(_x(m, 2, 5))),
    ("cell_input_3d", lambda nn, m: nn.LSTMCell(3, 4)(_x(m, 2, 2, 3))),
    ("cell_hidden_batch", lambda nn, m: nn.RNNCell(3, 4)(_x(m, 2, 3), _x(m, 3, 4))),
    ("cell_hidden_size", lambda nn, m: nn.GRUCell(3, 4)(_x(m, 2, 3), _x(m, 2, 5))),
    ("cell_nonlinearity_foo", lambda nn, m: nn.RNNCell(3, 4, nonlinearity="foo")(_x(m, 2, 3))),
]  # fmt: skip
# the builtin class torch raises, where lazyflow's differs in a documented way: (torch's, lazyflow's)
BAD_DIFFERS = {"dtype_mismatch": (ValueError, TypeError)}


@pytest.mark.parametrize("case", BAD, ids=[c[0] for c in BAD])
def test_bad_input_raises_like_torch(case):
    name, fn = case
    with pytest.raises(Exception) as tinfo:  # the class to expect is read from torch
        fn(torch.nn, torch)
    want = type(tinfo.value)
    want = BAD_DIFFERS.get(name, (want,))[-1]
    with pytest.raises(want) as linfo:
        fn(lf.nn, lf)
    err = linfo.value
    assert isinstance(err, LazyflowError) or type(err) in (ValueError, TypeError, RuntimeError), type(err)
    assert str(err)


def test_torch_packed_sequence_is_refused_with_a_clear_error():
    seq = torch.nn.utils.rnn.pack_sequence([torch.zeros(3, 2), torch.zeros(2, 2)])
    with pytest.raises(TypeError, match="lazyflow PackedSequence is expected"):
        lf.nn.LSTM(2, 3)(seq)


# ---------------------------------------------------------------- pad_sequence
@pytest.mark.parametrize("mode", ["eager", "graph"])
@pytest.mark.parametrize("trailing", [(), (2, 3)], ids=["1d", "3d"])
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("padding_side", ["right", "left"])
def test_pad_sequence_vs_torch(padding_side, batch_first, trailing, mode):
    arrs = [_arr((n, *trailing), n) for n in (3, 1, 4, 4)]
    ls = [lf.tensor(a, requires_grad=True) for a in arrs]
    ts = [torch.tensor(a, requires_grad=True) for a in arrs]
    kw = {"batch_first": batch_first, "padding_value": -1.5, "padding_side": padding_side}

    def fn(*seqs):
        return lf.nn.utils.rnn.pad_sequence(list(seqs), **kw)

    got = (lf.compile(fn) if mode == "graph" else fn)(*ls)
    want = torch.nn.utils.rnn.pad_sequence(ts, **kw)
    np.testing.assert_array_equal(got.detach().numpy(), want.detach().numpy())
    g = _arr(tuple(want.shape), 9)
    (got * lf.tensor(g)).sum().backward()
    (want * torch.tensor(g)).sum().backward()
    for a, b in zip(ls, ts):
        np.testing.assert_array_equal(a.grad.numpy(), b.grad.numpy())


def test_pad_sequence_of_a_tensor_and_bad_input():
    a = _arr((3, 2, 4), 0)
    np.testing.assert_array_equal(
        lf.nn.utils.rnn.pad_sequence(lf.tensor(a), batch_first=True).numpy(),
        torch.nn.utils.rnn.pad_sequence(torch.tensor(a), batch_first=True).numpy(),
    )
    for args, kw in (
        (([lf.zeros(2)],), {"padding_side": "middle"}),
        (([],), {}),
        (([lf.zeros(2, 3), lf.zeros(2, 4)],), {}),
    ):
        targs = [[torch.zeros(*t.shape) for t in args[0]]]
        with pytest.raises(Exception) as tinfo:  # the class to expect is read from torch
            torch.nn.utils.rnn.pad_sequence(*targs, **kw)
        with pytest.raises(type(tinfo.value)):
            lf.nn.utils.rnn.pad_sequence(*args, **kw)
