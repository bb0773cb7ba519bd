"""Graph mode never returns silently wrong values for out-of-range indices (issue 17 item 8).

Inside a compiled program an index is a tracer and XLA clamps gathers and drops scatters; lazyflow defers the eager
bounds check to after the program (``lazyflow/_core/checks.py``) and raises eager's IndexOutOfRangeError, with the
program's state updates discarded. torch is the oracle: it raises for every bad index here and computes the values
and training steps for the good ones.
"""

import os
import subprocess
import sys
import time

import numpy as np
import pytest
import torch

import lazyflow as lf
from lazyflow import nn
from lazyflow.nn import functional as F

T = torch.nn.functional


def _np(t):
    return np.asarray(t.detach().numpy())


X = np.arange(12, dtype=np.float32).reshape(3, 4) / 7 - 0.5  # (3, 4): every case indexes into this


def _setitem(x, i):
    y = x.clone()
    y[i] = 0.0
    return y


def _scatter(mod):
    return lambda x, i: mod.scatter(x, 1, i, x[:, :2] * 10)


def _index_add(mod):
    return lambda x, i: mod.index_add(x, 0, i, x[:2] * 10)


# name -> (lazyflow fn, torch fn, in-range index, out-of-range indices); every fn takes (x, index)
CASES = {
    "getitem": (lambda x, i: x[i], lambda x, i: x[i], [2, -1, 0], [[3], [-4], [0, 7]]),
    "getitem_dim1": (lambda x, i: x[:, i], lambda x, i: x[:, i], [3, -4], [[4], [-5]]),
    "getitem_0d": (lambda x, i: x[i], lambda x, i: x[i], 1, [3]),
    "setitem": (_setitem, _setitem, [0, -1], [[3], [1, -4]]),
    "index_select": (
        lambda x, i: lf.index_select(x, 1, i),
        lambda x, i: torch.index_select(x, 1, i),
        [0, 3, 3],
        [[4], [-1]],
    ),
    "gather": (
        lambda x, i: lf.gather(x, 1, i),
        lambda x, i: torch.gather(x, 1, i),
        [[0, 3], [1, 2], [3, 3]],
        [[[0, 4], [1, 2], [3, 3]], [[0, 1], [-1, 2], [3, 3]]],
    ),
    "scatter": (_scatter(lf), _scatter(torch), [[0, 3], [1, 2], [3, 0]], [[[0, 3], [1, 9], [3, 0]]]),
    "index_add": (_index_add(lf), _index_add(torch), [2, 0], [[3, 0], [0, -1]]),
    "embedding": (
        lambda x, i: F.embedding(i, x),
        lambda x, i: T.embedding(i, x),
        [[0, 2], [1, 1]],
        [[[0, 3], [1, 1]], [[-1, 0], [1, 1]]],
    ),
    "cross_entropy": (
        lambda x, i: F.cross_entropy(x, i),
        lambda x, i: T.cross_entropy(x, i),
        [0, 3, -100],
        [[0, 4, 1], [0, -1, 1], [-100, 2, 5]],
    ),
    "cross_entropy_smoothed": (
        lambda x, i: F.cross_entropy(x, i, label_smoothing=0.1),
        lambda x, i: T.cross_entropy(x, i, label_smoothing=0.1),
        [0, -100, 2],
        [[0, 4, 1]],
    ),
    "nll_loss": (
        lambda x, i: F.nll_loss(F.log_softmax(x, 1), i, reduction="sum"),
        lambda x, i: T.nll_loss(T.log_softmax(x, 1), i, reduction="sum"),
        [1, 2, 3],
        [[1, 2, 4]],
    ),
    "one_hot": (lambda x, i: F.one_hot(i, 4), lambda x, i: T.one_hot(i, 4), [0, 3, 2], [[0, 4]]),
}


def _bad_cases():
    return [pytest.param(name, k, id=f"{name}-{k}") for name, case in CASES.items() for k in range(len(case[3]))]


@pytest.mark.parametrize("name", list(CASES))
def test_in_range_compiled_equals_torch(name):
    fn, tfn, good, _ = CASES[name]
    f = lf.compile(fn)
    want = tfn(torch.tensor(X), torch.tensor(good))
    for _ in range(2):  # the traced call and the cached one
        got = f(lf.tensor(X), lf.tensor(good))
        np.testing.assert_allclose(_np(got), want.numpy(), rtol=1e-6, atol=1e-6)
    assert f.cache_info().checked == 2


@pytest.mark.parametrize("name, k", _bad_cases())
def test_out_of_range_compiled_raises_eagers_error(name, k):
    fn, tfn, _, bads = CASES[name]
    bad = bads[k]
    with pytest.raises((IndexError, RuntimeError)):  # torch raises (RuntimeError for gather/scatter/one_hot)
        tfn(torch.tensor(X), torch.tensor(bad))
    with pytest.raises(lf.IndexOutOfRangeError) as eager:
        fn(lf.tensor(X), lf.tensor(bad))
    f = lf.compile(fn)
    for _ in range(2):  # the traced call and the cached one
        with pytest.raises(lf.IndexOutOfRangeError) as graph:
            f(lf.tensor(X), lf.tensor(bad))
        assert str(graph.value) == str(eager.value)
    # the offending index and the valid range are named
    flat = np.asarray(bad).ravel()
    assert any(f"index {v} " in str(graph.value) for v in flat)
    assert "size" in str(graph.value) or "range [0, " in str(graph.value)


def test_a_constant_list_index_is_checked_when_traced():
    f = lf.compile(lambda x: x[[0, 5]])
    with pytest.raises(IndexError):
        torch.tensor(X)[[0, 5]]
    with pytest.raises(lf.IndexOutOfRangeError, match="index 5 is out of bounds for dimension 0 with size 3"):
        f(lf.tensor(X))
    np.testing.assert_array_equal(_np(lf.compile(lambda x: x[[2, -1]])(lf.tensor(X))), X[[2, -1]])


def test_the_first_failing_check_in_program_order_is_reported():
    f = lf.compile(lambda x, i, j: x[i].sum() + lf.index_select(x, 1, j).sum())
    with pytest.raises(lf.IndexOutOfRangeError, match="^index_select\\(\\): index 9 "):
        f(lf.tensor(X), lf.tensor([1]), lf.tensor([9]))
    with pytest.raises(lf.IndexOutOfRangeError, match="^index 8 is out of bounds for dimension 0"):
        f(lf.tensor(X), lf.tensor([8]), lf.tensor([9]))
    np.testing.assert_allclose(
        _np(f(lf.tensor(X), lf.tensor([1]), lf.tensor([3]))), X[1].sum() + X[:, 3].sum(), rtol=1e-6
    )


def test_a_program_without_traced_indices_reads_nothing_back():
    plain = lf.compile(lambda x: (x * 2).sum(1))
    indexed = lf.compile(lambda x, i: x[i])
    for _ in range(3):
        plain(lf.tensor(X))
        indexed(lf.tensor(X), lf.tensor([1]))
    assert plain.cache_info().checked == 0
    assert indexed.cache_info().checked == 3


def test_the_switch_turns_the_check_off_and_on():
    f = lf.compile(lambda x, i: x[i])
    x, bad = lf.tensor(X), lf.tensor([5])
    assert lf.graph.index_checks_enabled()
    lf.graph.set_index_checks(False)
    try:
        np.testing.assert_array_equal(_np(f(x, bad)), X[[2]])  # XLA's clamp comes back: nothing was checked
        assert f.cache_info().checked == 0
        with pytest.raises(lf.IndexOutOfRangeError):  # eager mode always checks
            x[bad]
    finally:
        lf.graph.set_index_checks(True)
    with pytest.raises(lf.IndexOutOfRangeError, match="index 5 is out of bounds"):
        f(x, bad)
    with pytest.raises(TypeError):
        lf.graph.set_index_checks(0)  # type: ignore[arg-type]


def test_the_environment_variable_starts_with_the_checks_off():
    code = "import lazyflow as lf; print(lf.graph.index_checks_enabled())"
    env = dict(os.environ, LAZYFLOW_GRAPH_INDEX_CHECKS="0", JAX_PLATFORMS="cpu")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# -- training steps: a failed step leaves model, optimizer and scheduler as they were; torch agrees on the rest


class _Net(nn.Module):
    """Embedding, Linear and a row selection, with a buffer the step writes before any index is used."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(10, 8)
        self.lin = nn.Linear(8, 5)
        self.register_buffer("calls", lf.zeros(()))

    def forward(self, t, sel):
        self.calls.add_(1)
        return self.lin(self.emb(t).tanh())[sel]


class _TorchNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(10, 8)
        self.lin = torch.nn.Linear(8, 5)

    def forward(self, t, sel):
        return self.lin(self.emb(t).tanh())[sel]


class _TrainStep(nn.Graph):
    def __init__(self, model, opt, sched):
        super().__init__()
        self.model = model
        self.add_optimizer(opt, lr_sch=sched)

    def build(self, t, y, sel):
        loss = F.cross_entropy(self.model(t, sel), y)
        loss.backward()
        return loss


def _twins():
    lf.manual_seed(0)
    m = _Net()
    tm = _TorchNet()
    with torch.no_grad():
        for (k, p), (tk, tp) in zip(m.named_parameters(), tm.named_parameters()):
            assert k == tk
            tp.copy_(torch.tensor(_np(p)))
    opt = lf.optim.Adam(m.parameters(), lr=0.05)
    topt = torch.optim.Adam(tm.parameters(), lr=0.05)
    sched = lf.optim.lr_scheduler.StepLR(opt, 1, gamma=0.5)
    tsched = torch.optim.lr_scheduler.StepLR(topt, 1, gamma=0.5)
    return m, opt, sched, tm, topt, tsched


def _torch_step(tm, topt, tsched, t, y, sel):
    loss = T.cross_entropy(tm(torch.tensor(t), torch.tensor(sel)), torch.tensor(y))
    loss.backward()
    topt.step()
    topt.zero_grad()
    tsched.step()
    return loss.item()


def _snapshot(m, opt):
    model = {k: _np(v).copy() for k, v in m.state_dict().items()}
    sd = opt.state_dict()
    state = {(i, k): _np(v).copy() for i, s in sd["state"].items() for k, v in s.items()}
    return model, state, [g["lr"] for g in sd["param_groups"]]


def _assert_snapshot(before, m, opt):
    after = _snapshot(m, opt)
    assert after[0].keys() == before[0].keys() and after[1].keys() == before[1].keys()
    for k in before[0]:
        np.testing.assert_array_equal(after[0][k], before[0][k], err_msg=k)
    for k in before[1]:
        np.testing.assert_array_equal(after[1][k], before[1][k], err_msg=str(k))
    assert after[2] == before[2]


T_OK = np.array([1, 9, 0, 4, 4, 7])
Y_OK = np.array([0, 4, 2, 1, 3, 3])
SEL_OK = np.array([5, 4, 3, 2, 1, 0])
BAD_STEPS = {  # which index is out of range, and eager's message
    "embedding": (dict(t=np.array([1, 9, 0, 10, 4, 7])), "embedding: index 10 is out of range [0, 10)"),
    "embedding_negative": (dict(t=np.array([1, -1, 0, 4, 4, 7])), "embedding: index -1 is out of range [0, 10)"),
    "target": (dict(y=np.array([0, 4, 5, 1, 3, 3])), "cross_entropy: target: index 5 is out of range [0, 5)"),
    "getitem": (dict(sel=np.array([5, 4, 6, 2, 1, 0])), "index 6 is out of bounds for dimension 0 with size 6"),
}


@pytest.mark.parametrize("which", list(BAD_STEPS))
def test_a_failed_graph_step_changes_nothing_and_the_next_step_matches_torch(which):
    m, opt, sched, tm, topt, tsched = _twins()
    step = _TrainStep(m, opt, sched)
    ok = dict(t=T_OK, y=Y_OK, sel=SEL_OK)
    bad = {**ok, **BAD_STEPS[which][0]}
    lf_args = lambda d: (lf.tensor(d["t"]), lf.tensor(d["y"]), lf.tensor(d["sel"]))

    np.testing.assert_allclose(step(*lf_args(ok)).item(), _torch_step(tm, topt, tsched, **ok), rtol=1e-5)
    before = _snapshot(m, opt)
    with pytest.raises((IndexError, RuntimeError)):
        _torch_step(tm, topt, tsched, **bad)
    topt.zero_grad()  # torch raised in the forward: no gradient was written, this only mirrors Graph's clean slate
    for _ in range(2):  # the traced call and the cached one
        with pytest.raises(lf.IndexOutOfRangeError) as e:
            step(*lf_args(bad))
        assert str(e.value) == BAD_STEPS[which][1]
        _assert_snapshot(before, m, opt)
    np.testing.assert_allclose(step(*lf_args(ok)).item(), _torch_step(tm, topt, tsched, **ok), rtol=1e-5)
    assert _np(m.calls) == 2  # the failed calls' buffer update was discarded too
    tsd = dict(tm.named_parameters())
    for k, p in m.named_parameters():
        np.testing.assert_allclose(_np(p), tsd[k].detach().numpy(), rtol=1e-5, atol=1e-6, err_msg=k)
    lsd, tosd = opt.state_dict(), topt.state_dict()
    for i, s in tosd["state"].items():
        for k in ("exp_avg", "exp_avg_sq"):
            np.testing.assert_allclose(_np(lsd["state"][i][k]), s[k].numpy(), rtol=1e-5, atol=1e-7)
    assert [g["lr"] for g in lsd["param_groups"]] == [g["lr"] for g in tosd["param_groups"]]


def test_a_failed_first_graph_step_leaves_the_parameters_and_the_next_step_matches_torch():
    m, opt, sched, tm, topt, tsched = _twins()
    step = _TrainStep(m, opt, sched)
    params = {k: _np(p).copy() for k, p in m.named_parameters()}
    with pytest.raises(lf.IndexOutOfRangeError):
        step(lf.tensor(T_OK), lf.tensor(Y_OK + 5), lf.tensor(SEL_OK))
    for k, p in m.named_parameters():
        np.testing.assert_array_equal(_np(p), params[k], err_msg=k)
    assert opt.param_groups[0]["lr"] == 0.05
    ok = dict(t=T_OK, y=Y_OK, sel=SEL_OK)
    got = step(lf.tensor(T_OK), lf.tensor(Y_OK), lf.tensor(SEL_OK)).item()
    np.testing.assert_allclose(got, _torch_step(tm, topt, tsched, **ok), rtol=1e-5)
    tsd = dict(tm.named_parameters())
    for k, p in m.named_parameters():
        np.testing.assert_allclose(_np(p), tsd[k].detach().numpy(), rtol=1e-5, atol=1e-6, err_msg=k)


def test_compiled_module_with_gradients_and_buffers():
    lf.manual_seed(0)
    m = nn.Sequential(nn.Embedding(6, 4), nn.BatchNorm1d(4))
    tm = torch.nn.Sequential(torch.nn.Embedding(6, 4), torch.nn.BatchNorm1d(4))
    with torch.no_grad():
        tm[0].weight.copy_(torch.tensor(_np(m[0].weight)))
    cm = lf.compile(m)
    before = {k: _np(v).copy() for k, v in m.state_dict().items()}
    with pytest.raises(IndexError):  # torch raises in the embedding, before BatchNorm updates its statistics
        tm(torch.tensor([0, 6, 2]))
    with pytest.raises(lf.IndexOutOfRangeError, match=r"embedding: index 6 is out of range \[0, 6\)"):
        cm(lf.tensor([0, 6, 2]))
    for k, v in m.state_dict().items():
        np.testing.assert_array_equal(_np(v), before[k], err_msg=k)
    assert all(p.grad is None for p in m.parameters())
    out = cm(lf.tensor([0, 5, 2]))
    tout = tm(torch.tensor([0, 5, 2]))
    np.testing.assert_allclose(_np(out), tout.detach().numpy(), rtol=1e-5, atol=1e-5)
    (out * out).sum().backward()
    (tout * tout).sum().backward()
    np.testing.assert_allclose(_np(m[0].weight.grad), tm[0].weight.grad.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(_np(m[1].running_mean), tm[1].running_mean.numpy(), rtol=1e-5, atol=1e-6)


def test_backward_records_no_checks_of_its_own(capsys):
    # the step indexes three times (embedding, row selection, target); the backward pass adds no check of its own
    m, opt, sched, *_ = _twins()
    step = _TrainStep(m, opt, sched)
    step.debug(1)
    step(lf.tensor(T_OK), lf.tensor(Y_OK), lf.tensor(SEL_OK))
    assert ", 3 deferred index checks" in capsys.readouterr().out


# -- how the checks run: one program where nothing is donated, a pruned check program first where something is


def _variants(program):
    return list(program._variants.values())  # internal: the variants' programs (what ran, not what it returned)


def test_a_compiled_forward_reads_its_checks_from_its_one_program():
    # nothing is donated by lf.compile: the step's own program carries the check summary, read after it ran; a failed
    # check writes nothing back (here BatchNorm's running statistics, updated by a train-mode forward)
    lf.manual_seed(0)
    m = nn.Sequential(nn.Embedding(6, 4), nn.BatchNorm1d(4))
    tm = torch.nn.Sequential(torch.nn.Embedding(6, 4), torch.nn.BatchNorm1d(4))
    with torch.no_grad():
        tm[0].weight.copy_(torch.tensor(_np(m[0].weight)))
    cm = lf.compile(m)
    with lf.no_grad(), torch.no_grad():
        for i, t in enumerate(([0, 5, 2], [1, 1, 4])):
            np.testing.assert_allclose(_np(cm(lf.tensor(t))), tm(torch.tensor(t)).numpy(), rtol=1e-5, atol=1e-5)
            assert cm.cache_info().checked == i + 1
        before = {k: _np(v).copy() for k, v in m.state_dict().items()}
        with pytest.raises(IndexError):
            tm(torch.tensor([0, 6, 2]))
        with pytest.raises(lf.IndexOutOfRangeError, match=r"embedding: index 6 is out of range \[0, 6\)"):
            cm(lf.tensor([0, 6, 2]))
        for k, v in m.state_dict().items():
            np.testing.assert_array_equal(_np(v), before[k], err_msg=k)
        assert cm.cache_info().checked == 3
        np.testing.assert_allclose(
            _np(cm(lf.tensor([3, 0, 1]))), tm(torch.tensor([3, 0, 1])).numpy(), rtol=1e-5, atol=1e-5
        )
    np.testing.assert_allclose(_np(m[1].running_mean), tm[1].running_mean.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(_np(m[1].running_var), tm[1].running_var.numpy(), rtol=1e-5, atol=1e-6)
    assert [v.check for v in _variants(cm._program)] == [None]  # no second program per call
    assert cm.cache_info().compiles == 1


def test_a_graph_step_checks_first_and_reads_only_the_checked_arrays():
    # a Graph step donates its parameters and optimizer state, so a failed check must raise before the step runs:
    # a program of the checks alone runs first, passed only the arrays they read (here the target), not the state
    m, opt, sched, *_ = _twins()
    step = _TrainStep(m, opt, sched)
    t, y, sel = lf.tensor(T_OK), lf.tensor(Y_OK), lf.tensor(SEL_OK)
    step(t, y, sel)
    (v,) = _variants(step._program)
    run, inputs = v.check
    n_state = len(step._program._state()[0])
    n_opt = sum(len(s) for s in opt.functional_state())
    n_hyper = len(__import__("jax").tree_util.tree_leaves(opt.functional_hyperparams()))
    first_arg = n_state + n_opt + n_hyper
    assert inputs == [first_arg, first_arg + 1, first_arg + 2]  # the token ids, the targets, the row selection


class _BufferRows(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 3)
        self.register_buffer("rows", lf.tensor([0, 2]))

    def forward(self, x):
        return self.lin(x)[self.rows]


class _SumStep(nn.Graph):
    def __init__(self, model, opt):
        super().__init__()
        self.model = model
        self.add_optimizer(opt)

    def build(self, x):
        loss = self.model(x).sum()
        loss.backward()
        return loss


def test_a_graph_step_whose_checked_index_is_state_reads_it_from_the_state():
    # the check program is passed the buffer holding the index (a state input, not an argument): a bad value
    # written into the buffer between steps raises eager's error, and the parameters stay as they were
    lf.manual_seed(0)
    m = _BufferRows()
    tlin = torch.nn.Linear(4, 3)
    with torch.no_grad():
        tlin.weight.copy_(torch.tensor(_np(m.lin.weight)))
        tlin.bias.copy_(torch.tensor(_np(m.lin.bias)))
    opt = lf.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    topt = torch.optim.SGD(tlin.parameters(), lr=0.1, momentum=0.9)
    step = _SumStep(m, opt)
    x = X  # (3, 4): rows 0..2

    def torch_step(rows):
        loss = tlin(torch.tensor(x))[torch.tensor(rows)].sum()
        loss.backward()
        topt.step()
        topt.zero_grad()
        return loss.item()

    np.testing.assert_allclose(step(lf.tensor(x)).item(), torch_step([0, 2]), rtol=1e-5)
    (v,) = _variants(step._program)
    assert len(v.check[1]) == 1  # one array read: the buffer
    with lf.no_grad():
        m.rows.copy_(lf.tensor([0, 3]))
    with pytest.raises(IndexError):
        tlin(torch.tensor(x))[torch.tensor([0, 3])]
    params = {k: _np(p).copy() for k, p in m.named_parameters()}
    momenta = [_np(s["momentum_buffer"]).copy() for s in opt.state_dict()["state"].values()]
    with pytest.raises(lf.IndexOutOfRangeError, match="index 3 is out of bounds for dimension 0 with size 3"):
        step(lf.tensor(x))
    for k, p in m.named_parameters():
        np.testing.assert_array_equal(_np(p), params[k], err_msg=k)
    for a, s in zip(momenta, opt.state_dict()["state"].values()):
        np.testing.assert_array_equal(_np(s["momentum_buffer"]), a)
    with lf.no_grad():
        m.rows.copy_(lf.tensor([2, 1]))
    np.testing.assert_allclose(step(lf.tensor(x)).item(), torch_step([2, 1]), rtol=1e-5)
    np.testing.assert_allclose(_np(m.lin.weight), tlin.weight.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_a_first_graph_step_compiles_its_checks_and_its_step_at_once_and_the_next_call_compiles_nothing(
    monkeypatch,
):
    # a check program that numpy cannot stand in for (host_eval; here: its inputs made too large for it) compiles
    # with the step, in two threads at once: the first call waits for the longer compile, not the sum; the calls
    # that follow find both programs compiled
    import threading

    import jax.monitoring

    from lazyflow.graph import host_eval

    monkeypatch.setattr(host_eval, "MAX_ELEMENTS", 0)
    for t in list(host_eval._pending):  # earlier tests' background compiles: finished before listening
        t.join()

    compiles = []  # (thread name, start, end) of each XLA compile
    lowerings = []  # the same for lowering to XLA's input (the main thread lowers the step, then compiles it)

    def listen(event, duration, **_):
        if event in ("/jax/core/compile/backend_compile_duration", "/jax/core/compile/jaxpr_to_mlir_module_duration"):
            end = time.monotonic()
            row = (threading.current_thread().name, end - duration, end)
            (compiles if event.endswith("backend_compile_duration") else lowerings).append(row)

    jax.monitoring.register_event_duration_secs_listener(listen)
    try:
        m, opt, sched, tm, topt, tsched = _twins()
        step = _TrainStep(m, opt, sched)
        ok = dict(t=T_OK, y=Y_OK, sel=SEL_OK)
        args = (lf.tensor(T_OK), lf.tensor(Y_OK), lf.tensor(SEL_OK))
        lf.config.set_compile_cache(False)  # a cache hit from an earlier run would skip the compiles
        try:
            compiles.clear()
            lowerings.clear()
            np.testing.assert_allclose(step(*args).item(), _torch_step(tm, topt, tsched, **ok), rtol=1e-5)
            first = list(compiles)
            step_work = [c for c in compiles + lowerings if c[0] != "lazyflow-check-compile"]
            compiles.clear()
            np.testing.assert_allclose(step(*args).item(), _torch_step(tm, topt, tsched, **ok), rtol=1e-5)
        finally:
            lf.config.set_compile_cache(True)
    finally:
        jax.monitoring.unregister_event_duration_listener(listen)
    threads = {name for name, *_ in first}
    assert "lazyflow-check-compile" in threads and threading.main_thread().name in threads, first
    (check,) = [c for c in first if c[0] == "lazyflow-check-compile"]
    # the check program compiled while this thread lowered and compiled the step (a small check program may finish
    # before the step's XLA compile itself begins)
    start, end = min(s for _, s, _ in step_work), max(e for *_, e in step_work)
    assert start < check[2] and check[1] < end, (first, step_work)
    assert compiles == []  # the second call compiled nothing


def test_a_graph_step_leaves_the_summary_to_its_check_program(capsys):
    # the check program computes the checks' summary before the step runs, so the step itself does not: its
    # optimized program has the kernels and outputs of the same step compiled with the checks off (an MLP step had
    # 7 more kernels, the summary's reductions, and one more output), and it still raises and trains as before
    def step_program(checks: bool):
        lf.graph.set_index_checks(checks)
        try:
            m, opt, sched, *_ = _twins()
            step = _TrainStep(m, opt, sched)
            step.debug(3)
            loss = step(lf.tensor(T_OK), lf.tensor(Y_OK), lf.tensor(SEL_OK))
        finally:
            lf.graph.set_index_checks(True)
        hlo = capsys.readouterr().out.split("optimized HLO:")[1]
        entry = hlo[hlo.index("\nENTRY") :]
        root = next(line for line in entry.splitlines() if "ROOT" in line)
        kernels = sum(entry.count(k) for k in (" fusion(", " dot(", " convolution(", " custom-call("))
        return step, loss, kernels, root.split(" tuple(")[0].split("=", 1)[1]

    step_on, loss_on, kernels_on, outputs_on = step_program(True)
    _, loss_off, kernels_off, outputs_off = step_program(False)
    (v,) = _variants(step_on._program)
    assert v.check is not None  # the checks run, in their own program
    assert (kernels_on, outputs_on) == (kernels_off, outputs_off)
    np.testing.assert_allclose(_np(loss_on), _np(loss_off), rtol=1e-6)
    with pytest.raises(lf.IndexOutOfRangeError):  # the stored step still refuses a bad target before donating
        step_on(lf.tensor(T_OK), lf.tensor(np.array([0, 4, 5, 1, 3, 3])), lf.tensor(SEL_OK))
