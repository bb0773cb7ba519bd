"""Adversarial checks of detach()/.data storage aliasing: version counters, traces, donation, deepcopy, memory
and the library's own call sites that take aliases. torch is the reference wherever it has the same API."""

import copy
import gc

import numpy as np
import pytest
import torch

import lazyflow as lf
from lazyflow import nn
from lazyflow.nn.utils import clip_grad_norm_, parameters_to_vector, vector_to_parameters


def _np(t):
    return np.asarray(t.detach().numpy())


RNG = np.random.default_rng(0)
W0 = RNG.standard_normal((3, 3)).astype(np.float32)
X0 = RNG.standard_normal((4, 3)).astype(np.float32)


# ---- version counters: detach() shares its source's, .data has its own (torch) ----


def test_data_write_between_forward_and_backward_is_allowed_and_seen_like_torch():
    """torch: p.data is outside version tracking; the backward uses the modified storage."""
    grads = []
    for F, P in ((lf, nn.Parameter), (torch, torch.nn.Parameter)):
        w = P(F.tensor(W0.copy()))
        x = F.tensor(X0.copy(), requires_grad=True)
        y = (x @ (w * w)).sum()
        w.data.mul_(2.0)
        y.backward()
        grads.append((_np(w.grad) if F is lf else w.grad.numpy(), _np(x.grad) if F is lf else x.grad.numpy()))
    np.testing.assert_allclose(grads[0][0], grads[1][0], rtol=1e-5)
    np.testing.assert_allclose(grads[0][1], grads[1][1], rtol=1e-5)


@pytest.mark.parametrize(
    "write",
    [lambda w: w.detach().add_(1.0), lambda w: w.detach().detach().add_(1.0)],
    ids=["detach", "detach.detach"],
)
def test_detach_write_between_forward_and_backward_raises_like_torch(write):
    for F in (lf, torch):
        w = F.ones(3, requires_grad=True)
        y = (w * w).sum()
        write(w)
        with pytest.raises(RuntimeError, match="modified by an inplace operation|modified by an in-place operation"):
            y.backward()


def test_detach_of_data_shares_the_data_counter_not_the_source_like_torch():
    out = []
    for F in (lf, torch):
        w = F.ones(3, requires_grad=True)
        d = w.data
        y = (w * w).sum()
        d.detach().mul_(3.0)  # bumps d's counter only
        y.backward()
        out.append(np.asarray(w.grad.numpy()))
        v0 = w._version
        w.detach().add_(1.0)
        assert w._version == v0 + 1
        dv = d._version
        w.data.add_(1.0)
        assert w._version == v0 + 1 and d._version == dv
    np.testing.assert_array_equal(out[0], out[1])


# ---- traces ----


class _Clipped(nn.Module):
    """A forward that writes its weight through an alias (max-norm / WGAN-style clipping)."""

    def __init__(self, how):
        super().__init__()
        self.lin = nn.Linear(3, 3)
        self.how = how

    def forward(self, x):
        if self.how == "data":
            self.lin.weight.data.mul_(0.5)
        else:
            self.lin.weight.detach().clamp_(-0.1, 0.1)
        return self.lin(x)


@pytest.mark.parametrize("how", ["data", "detach"])
def test_compiled_write_through_an_alias_writes_the_parameter_like_torch(how):
    lm = _Clipped(how)
    tl = torch.nn.Linear(3, 3)
    with torch.no_grad():
        tl.weight.copy_(torch.from_numpy(_np(lm.lin.weight)))
        tl.bias.copy_(torch.from_numpy(_np(lm.lin.bias)))
    sd = lm.state_dict()
    cm = lf.compile(lm)
    for _ in range(2):
        with lf.no_grad():
            lo = cm(lf.tensor(X0))
        if how == "data":
            tl.weight.data.mul_(0.5)
        else:
            tl.weight.detach().clamp_(-0.1, 0.1)
        with torch.no_grad():
            to = tl(torch.from_numpy(X0))
        np.testing.assert_allclose(_np(lo), to.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(_np(lm.lin.weight), tl.weight.detach().numpy(), rtol=1e-6)
    # the alias taken before compiling holds the written value, as a concrete array (no tracer leaked)
    np.testing.assert_allclose(np.asarray(sd["lin.weight"].jax()), tl.weight.detach().numpy(), rtol=1e-6)


def test_alias_of_a_traced_value_never_gives_tracers_to_outside_aliases():
    m = nn.Linear(3, 3)
    outside = m.weight.detach()
    kept = []

    class Keep(nn.Module):
        def __init__(self):
            super().__init__()
            self.m = m

        def forward(self, x):
            kept.append(self.m.weight.detach())
            return self.m(x)

    with lf.no_grad():
        lf.compile(Keep())(lf.tensor(X0))
    m.weight.data.add_(1.0)  # a concrete write after the trace
    assert isinstance(outside.jax(), type(m.weight.jax()))
    np.testing.assert_array_equal(np.asarray(outside.jax()), np.asarray(m.weight.jax()))


def test_functional_call_with_state_dict_aliases_updates_running_stats_like_torch():
    lb, tb = nn.BatchNorm1d(3), torch.nn.BatchNorm1d(3)
    lsd, tsd = lb.state_dict(), tb.state_dict()
    lf.func.functional_call(lb, dict(lsd), (lf.tensor(X0),))
    torch.func.functional_call(tb, dict(tsd), (torch.from_numpy(X0),))
    for k in tsd:
        np.testing.assert_allclose(_np(lb.state_dict()[k]), tb.state_dict()[k].numpy(), rtol=1e-5, err_msg=k)


# ---- donation: a buffer an alias points at is never deleted ----


def test_eager_inplace_ops_never_delete_an_aliased_buffer():
    p = lf.tensor(W0.copy())
    a = p.detach()
    for _ in range(3):
        p.add_(1.0)
        p.mul_(2.0)
    np.testing.assert_allclose(_np(a), (((W0 + 1) * 2 + 1) * 2 + 1) * 2, rtol=1e-6)
    del a
    gc.collect()
    p.add_(1.0)  # nothing else holds it now: donated
    a2 = p.data
    a2.sub_(1.0)
    np.testing.assert_allclose(_np(p), (((W0 + 1) * 2 + 1) * 2 + 1) * 2, rtol=1e-6)


@pytest.mark.parametrize("opt", ["SGD", "Adam", "AdamW"])
def test_eager_optimizer_step_with_aliases_held_matches_torch(opt):
    lm, tm = nn.Linear(3, 2), torch.nn.Linear(3, 2)
    with torch.no_grad():
        tm.weight.copy_(torch.from_numpy(_np(lm.weight)))
        tm.bias.copy_(torch.from_numpy(_np(lm.bias)))
    lsd, tsd = lm.state_dict(), tm.state_dict()
    ldata = [p.data for p in lm.parameters()]
    lo = getattr(lf.optim, opt)(lm.parameters(), lr=0.1)
    to = getattr(torch.optim, opt)(tm.parameters(), lr=0.1)
    for _ in range(3):
        lm(lf.tensor(X0)).square().mean().backward()
        tm(torch.from_numpy(X0)).square().mean().backward()
        lo.step(), to.step()
        lo.zero_grad(), to.zero_grad()
    for k in tsd:
        np.testing.assert_allclose(_np(lsd[k]), tsd[k].numpy(), rtol=1e-5, atol=1e-6, err_msg=k)
    for d, tp in zip(ldata, tm.parameters()):
        np.testing.assert_allclose(_np(d), tp.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_compiled_state_writes_with_aliases_held_never_delete_them():
    lb, tb = nn.BatchNorm1d(3), torch.nn.BatchNorm1d(3)
    lsd, tsd = lb.state_dict(), tb.state_dict()
    cb = lf.compile(lb)
    for _ in range(3):
        cb(lf.tensor(X0))
        tb(torch.from_numpy(X0))
    for k in tsd:
        np.testing.assert_allclose(_np(lsd[k]), tsd[k].numpy(), rtol=1e-5, err_msg=k)


def test_async_save_of_aliases_then_training_keeps_both(tmp_path):
    m = nn.Linear(3, 2)
    ref = {k: _np(v).copy() for k, v in m.state_dict().items()}
    sd = m.state_dict()
    opt = lf.optim.SGD(m.parameters(), lr=0.5)
    handle = lf.save(sd, tmp_path / "c", async_save=True)
    for _ in range(2):
        m(lf.tensor(X0)).sum().backward()
        opt.step()
        opt.zero_grad()
    assert handle is not None
    handle.wait()
    out = lf.load(tmp_path / "c")
    for k in ref:
        np.testing.assert_array_equal(_np(out[k]), ref[k])
        np.testing.assert_array_equal(_np(sd[k]), _np(getattr(m, k)))  # the aliases followed the steps


# ---- deepcopy, Parameter, .data =, memory ----


def test_deepcopy_keeps_aliasing_inside_the_copy_and_none_with_the_original():
    res = []
    for F in (lf, torch):
        p = F.ones(3)
        a = p.detach()
        p2, a2 = copy.deepcopy((p, a))
        a2.add_(1.0)  # the copies share storage with each other ...
        p.mul_(5.0)  # ... and none with the originals
        res.append([np.asarray(t.numpy()).copy() for t in (p, a, p2, a2)])
    for x, y in zip(*res):
        np.testing.assert_array_equal(x, y)


def test_deepcopy_of_a_module_has_independent_storage_like_torch():
    m = nn.Linear(3, 2)
    sd = m.state_dict()
    w = _np(m.weight).copy()
    m2 = copy.deepcopy(m)
    m2.weight.data.zero_()
    m2.state_dict()["bias"].fill_(3.0)
    np.testing.assert_array_equal(_np(m.weight), w)
    np.testing.assert_array_equal(_np(sd["weight"]), w)
    assert not np.any(_np(m.bias) == 3.0)
    assert not np.any(_np(m2.weight))


def test_vector_to_parameters_assigns_data_like_torch():
    """torch's vector_to_parameters assigns ``p.data``: an alias taken before keeps the old storage."""
    res = []
    for F, mod, v2p, p2v in (
        (lf, nn, vector_to_parameters, parameters_to_vector),
        (torch, torch.nn, torch.nn.utils.vector_to_parameters, torch.nn.utils.parameters_to_vector),
    ):
        m = mod.Linear(2, 2)
        with F.no_grad():
            m.weight.copy_(F.tensor(W0[:2, :2].copy()))
            m.bias.copy_(F.tensor(W0[2, :2].copy()))
        old = m.weight.detach()
        v2p(p2v(m.parameters()) * 2.0, m.parameters())
        with F.no_grad():
            m.weight.add_(1.0)
        res.append((np.asarray(old.numpy()).copy(), np.asarray(m.weight.detach().numpy()).copy()))
    np.testing.assert_array_equal(res[0][0], res[1][0])
    np.testing.assert_allclose(res[0][1], res[1][1], rtol=1e-6)


def test_clip_grad_norm_is_seen_through_grad_aliases_like_torch():
    res = []
    for F, mod, clip in ((lf, nn, clip_grad_norm_), (torch, torch.nn, torch.nn.utils.clip_grad_norm_)):
        w = mod.Parameter(F.tensor(W0.copy()))
        (w * F.tensor(X0[:3].copy())).sum().backward()
        g = w.grad.detach()
        clip([w], max_norm=0.5)
        res.append(np.asarray(g.numpy()).copy())
    np.testing.assert_allclose(res[0], res[1], rtol=1e-5)


def test_swa_update_never_writes_the_source_model():
    m = nn.Linear(3, 2)
    sd = m.state_dict()
    ref = {k: _np(v).copy() for k, v in sd.items()}
    swa = lf.optim.swa_utils.AveragedModel(m)
    for _ in range(3):
        swa.update_parameters(m)
    for k in ref:
        np.testing.assert_array_equal(_np(getattr(m, k)), ref[k])
        np.testing.assert_array_equal(_np(sd[k]), ref[k])


def test_alias_groups_stay_small():
    p = lf.ones(4)
    for _ in range(500):
        p.detach()
        assert p.data is not p
    assert len(p._peers) <= 17
    held = [p.detach() for _ in range(40)]
    assert sum(r() is not None for r, _ in p._peers) == 41 and len(p._peers) <= 41 + 16
    del held
    gc.collect()
    p.add_(1.0)  # a write drops the dead entries; with none left the group is gone
    assert p._peers is None


def test_loss_detach_in_a_loop_keeps_no_group_alive():
    m = nn.Linear(3, 1)
    opt = lf.optim.SGD(m.parameters(), lr=0.01)
    logged = []
    for _ in range(5):
        loss = m(lf.tensor(X0)).square().mean()
        logged.append(loss.detach())
        loss.backward()
        opt.step()
        opt.zero_grad()
    assert all(p._peers is None for p in m.parameters())
    assert all(len(t._peers) == 2 for t in logged)  # each loss and its logged alias, nothing more


@pytest.mark.parametrize(
    "make",
    [
        lambda F, mod, t: mod.Parameter(t),
        lambda F, mod, t: mod.Parameter(t.detach()),
        lambda F, mod, t: mod.Buffer(t),
        lambda F, mod, t: mod.Embedding.from_pretrained(t, freeze=False).weight,
    ],
    ids=["Parameter(t)", "Parameter(t.detach())", "Buffer(t)", "Embedding.from_pretrained"],
)
def test_parameter_shares_storage_and_version_with_its_data_like_torch(make):
    res = []
    for F, mod in ((lf, nn), (torch, torch.nn)):
        t = F.tensor(W0.copy())
        p = make(F, mod, t)
        v0, pv0 = t._version, p._version
        t.add_(1.0)
        with F.no_grad():
            p.mul_(2.0)
        res.append((np.asarray(t.numpy()).copy(), np.asarray(p.detach().numpy()).copy()))
        assert t._version - v0 == 2 and p._version - pv0 == 2  # one counter for both
    for a, b in zip(res[0], res[1]):
        np.testing.assert_allclose(a, b, rtol=1e-6)


def test_assigning_data_shares_the_new_storage_like_torch():
    """``dec.weight.data = enc.weight.data`` (old-style weight tying): later writes to either show in both."""
    res = []
    for F, mod in ((lf, nn), (torch, torch.nn)):
        p, x = mod.Parameter(F.ones(3)), F.zeros(3)
        old = p.detach()
        p.data = x
        v = p._version
        x.add_(2.0)
        assert p._version == v  # its own counter (torch)
        with F.no_grad():
            p.mul_(3.0)
        p.data = p  # assigning itself changes nothing
        res.append([np.asarray(t.detach().numpy()).copy() for t in (p, x, old)])
    for a, b in zip(*res):
        np.testing.assert_array_equal(a, b)


def test_graph_step_with_a_data_write_between_forward_and_backward_matches_torch():
    """A weight clamp through ``p.data`` inside an nn.Graph step: no version error, and the backward and the
    optimizer step see the clamped weight, as in torch's eager step."""
    lm = nn.Linear(3, 1)
    tm = torch.nn.Linear(3, 1)
    with torch.no_grad():
        tm.weight.copy_(torch.from_numpy(_np(lm.weight)))
        tm.bias.copy_(torch.from_numpy(_np(lm.bias)))
    lopt, topt = lf.optim.SGD(lm.parameters(), lr=0.1), torch.optim.SGD(tm.parameters(), lr=0.1)
    sd = lm.state_dict()

    class Step(nn.Graph):
        def __init__(self):
            super().__init__()
            self.m = lm
            self.add_optimizer(lopt)

        def build(self, x):
            loss = self.m(x).square().mean()
            self.m.weight.data.clamp_(-0.2, 0.2)
            loss.backward()
            return loss

    step = Step()
    for _ in range(3):
        step(lf.tensor(X0))
        loss = tm(torch.from_numpy(X0)).square().mean()
        tm.weight.data.clamp_(-0.2, 0.2)
        loss.backward()
        topt.step()
        topt.zero_grad()
    np.testing.assert_allclose(_np(lm.weight), tm.weight.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(_np(sd["weight"]), tm.weight.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_writing_an_outside_alias_inside_compiled_code_is_a_clear_error():
    """Known gap: an alias taken outside the compiled code is a captured tensor there (torch would write the
    parameter): a GraphError that says how to fix it, and nothing is changed."""
    m = nn.Linear(3, 3)
    a = m.weight.detach()
    before = _np(m.weight).copy()

    class Writes(nn.Module):
        def __init__(self):
            super().__init__()
            self.m = m

        def forward(self, x):
            a.mul_(0.5)
            return self.m(x)

    with pytest.raises(lf.GraphError, match="captured from outside the compiled code"):
        with lf.no_grad():
            lf.compile(Writes())(lf.tensor(X0))
    np.testing.assert_array_equal(_np(m.weight), before)
    np.testing.assert_array_equal(_np(a), before)


def test_pickle_and_copy_copy_give_independent_tensors():
    """README known difference: ``copy.copy`` (torch: shared storage) and pickling give tensors of their own."""
    import pickle

    p = lf.tensor(W0.copy())
    a = p.detach()
    c = copy.copy(p)
    p2, a2 = pickle.loads(pickle.dumps((p, a)))
    c.add_(1.0)
    a2.add_(2.0)
    np.testing.assert_array_equal(_np(p), W0)
    np.testing.assert_array_equal(_np(a), W0)
    np.testing.assert_array_equal(_np(p2), W0)
    np.testing.assert_array_equal(_np(c), W0 + 1.0)


@pytest.mark.parametrize(
    "convert",
    [
        lambda m, F: m.half(),
        lambda m, F: m.double(),
        lambda m, F: m.to(F.float64),
        lambda m, F: m.float(),
        lambda m, F: m._apply(lambda t: t * 2),
    ],
    ids=["half", "double", "to(float64)", "float (no-op)", "_apply(t*2)"],
)
def test_module_conversion_gives_new_storage_like_torch(convert):
    """torch's Module._apply assigns ``param.data = fn(param)``: aliases taken before a real conversion keep the
    old dtype and value and stop following the parameter; a no-op conversion keeps them aliased."""
    res = []
    for F, mod in ((lf, nn), (torch, torch.nn)):
        m = mod.Linear(2, 2)
        with F.no_grad():
            m.weight.copy_(F.tensor(W0[:2, :2].copy()))
        sd, a = m.state_dict(), m.weight.detach()
        convert(m, F)
        with F.no_grad():
            m.weight.add_(1.0)
        res.append(
            [(str(t.dtype).split(".")[-1], np.asarray(t.detach().float().numpy())) for t in (sd["weight"], a, m.weight)]
        )
    for (da, va), (db, vb) in zip(*res):
        assert da == db
        np.testing.assert_allclose(va, vb, rtol=1e-3)


@pytest.mark.parametrize("opt", ["Adam", "SGD"])
def test_optimizer_load_state_dict_never_deletes_the_given_state(opt):
    """Loading another optimizer's state_dict() and stepping: the loader's steps match torch, and the state
    tensors it was given stay readable (they used to be donated: "Array has been deleted"). Known difference:
    torch's loader shares those tensors (its steps change the first optimizer's state); lazyflow copies."""
    res = []
    kw = {"lr": 0.1} if opt == "Adam" else {"lr": 0.1, "momentum": 0.9}
    for F, mod in ((lf, nn), (torch, torch.nn)):
        m, m2 = mod.Linear(3, 1), mod.Linear(3, 1)
        with F.no_grad():
            for lin in (m, m2):
                lin.weight.copy_(F.tensor(W0[:1].copy()))
                lin.bias.zero_()
        o = getattr(F.optim, opt)(m.parameters(), **kw)
        o2 = getattr(F.optim, opt)(m2.parameters(), **kw)
        m(F.tensor(X0)).sum().backward()
        o.step()
        held = o.state_dict()["state"][0]["exp_avg" if opt == "Adam" else "momentum_buffer"]
        before = np.asarray(held.numpy()).copy()
        o2.load_state_dict(o.state_dict())
        for _ in range(2):
            m2(F.tensor(X0)).sum().backward()
            o2.step()
        if F is lf:
            np.testing.assert_array_equal(np.asarray(held.numpy()), before)
        res.append(np.asarray(m2.weight.detach().numpy()).copy())
    np.testing.assert_allclose(res[0], res[1], rtol=1e-5, atol=1e-6)


class _DataWriter(nn.Module):
    def __init__(self, how):
        super().__init__()
        self.lin = nn.Linear(3, 3)
        self.how = how

    def forward(self, x):
        alias = self.lin.weight.data if self.how == "data" else self.lin.weight.detach()
        alias.mul_(0.5)
        return self.lin(x)


@pytest.mark.parametrize("how", ["data", "detach"])
def test_scan_layers_refuse_a_write_through_an_alias_like_a_direct_write(how):
    """ScanLayers blocks' tensors are read-only inside the scan (a write would be lost): a write through an alias
    of one is refused the same way, not silently dropped."""
    import jax
    import jax.numpy as jnp

    from lazyflow.utils.scan import ScanLayers

    m = ScanLayers([_DataWriter(how), _DataWriter(how)])
    with pytest.raises(lf.GraphError, match="in-place"):
        jax.jit(lambda x: lf.func.functional_call(m, {}, (x,)))(jnp.ones((2, 3), jnp.float32))
