"""lf.nn.Graph: whole training steps as one program, checked against the same steps run eagerly."""

import copy

import numpy as np
import pytest

import lazyflow as lf
from lazyflow import nn
from lazyflow.nn import functional as F


def _np(t):
    return np.asarray(t.detach().numpy())


def _model(seed=0):
    lf.manual_seed(seed)
    # no bias before BatchNorm: its gradient is zero up to rounding, which Adam would amplify into noise
    return nn.Sequential(nn.Linear(6, 16, bias=False), nn.BatchNorm1d(16), nn.Tanh(), nn.Linear(16, 3))


def _data(n=8, seed=1):
    rng = np.random.default_rng(seed)
    return lf.tensor(rng.standard_normal((n, 6)).astype(np.float32)), lf.tensor(rng.integers(0, 3, n))


class Step(nn.Graph):
    def __init__(self, model, opt, sched=None, clip=None):
        super().__init__()
        self.model = model
        self.clip = clip
        self.add_optimizer(opt, lr_sch=sched)

    def build(self, x, y):
        loss = F.cross_entropy(self.model(x), y)
        loss.backward()
        if self.clip is not None:
            nn.utils.clip_grad_norm_(self.model.parameters(), self.clip)
        return loss


def _eager_step(model, opt, x, y, clip=None, sched=None):
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    if clip is not None:
        nn.utils.clip_grad_norm_(model.parameters(), clip)
    opt.step()
    opt.zero_grad()
    if sched is not None:
        sched.step()
    return loss


def _assert_same(m1, m2, rtol=1e-5, atol=1e-6):
    s1, s2 = m1.state_dict(), m2.state_dict()
    assert list(s1) == list(s2)
    for k in s1:
        np.testing.assert_allclose(_np(s1[k]), _np(s2[k]), rtol=rtol, atol=atol, err_msg=k)


OPTS = {
    "sgd_momentum": lambda p: lf.optim.SGD(p, lr=0.1, momentum=0.9, weight_decay=1e-3, nesterov=True),
    "adam": lambda p: lf.optim.Adam(p, lr=1e-2, weight_decay=1e-3),
}


@pytest.mark.parametrize("name", list(OPTS))
def test_graph_matches_eager_over_20_steps(name):
    m_e, m_g = _model(), _model()
    o_e, o_g = OPTS[name](m_e.parameters()), OPTS[name](m_g.parameters())
    step = Step(m_g, o_g, clip=1.0)
    for i in range(20):
        x, y = _data(seed=i)
        le = _eager_step(m_e, o_e, x, y, clip=1.0)
        lg = step(x, y)
        np.testing.assert_allclose(lg.item(), le.item(), rtol=1e-5, atol=1e-6)
    _assert_same(m_e, m_g)
    se, sg = o_e.state_dict(), o_g.state_dict()
    assert se["param_groups"] == sg["param_groups"]
    assert list(se["state"]) == list(sg["state"])
    for i in se["state"]:
        assert list(se["state"][i]) == list(sg["state"][i])
        for k in se["state"][i]:
            np.testing.assert_allclose(
                _np(lf.as_tensor(se["state"][i][k])),
                _np(lf.as_tensor(sg["state"][i][k])),
                rtol=1e-5,
                atol=1e-6,
                err_msg=f"{i}.{k}",
            )
    # one program for all 20 steps (SGD's momentum buffers start at zero, exactly torch's first `buffer = grad`)
    info = step.cache_info()
    assert info.compiles == 1 and info.hits == 19
    assert all(p.grad is None for p in m_g.parameters())


def test_modes_mix_into_one_trajectory():
    ref, mix = _model(), _model()
    o_ref = lf.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)
    o_mix = lf.optim.SGD(mix.parameters(), lr=0.1, momentum=0.9)
    step = Step(mix, o_mix)
    for i in range(9):
        x, y = _data(seed=i)
        _eager_step(ref, o_ref, x, y)
        if 3 <= i < 6:
            step(x, y)
        else:
            _eager_step(mix, o_mix, x, y)
    _assert_same(ref, mix)


def test_scheduler_steps_without_recompiling():
    m_e, m_g = _model(), _model()
    o_e, o_g = lf.optim.SGD(m_e.parameters(), lr=0.2), lf.optim.SGD(m_g.parameters(), lr=0.2)
    s_e = lf.optim.lr_scheduler.StepLR(o_e, step_size=2, gamma=0.5)
    s_g = lf.optim.lr_scheduler.StepLR(o_g, step_size=2, gamma=0.5)
    step = Step(m_g, o_g, sched=s_g)
    for i in range(6):
        x, y = _data(seed=i)
        _eager_step(m_e, o_e, x, y, sched=s_e)
        step(x, y)
    assert o_g.param_groups[0]["lr"] == pytest.approx(0.2 * 0.5**3)
    _assert_same(m_e, m_g)
    assert step.cache_info().compiles == 1  # plain SGD: no lazily created state, and lr is a program input


def test_inference_graph_honours_eval_mode():
    m = _model()
    m.eval()

    class Infer(nn.Graph):
        def __init__(self, model):
            super().__init__()
            self.model = model

        def build(self, x):
            return self.model(x)

    x, _ = _data()
    g = Infer(m)
    np.testing.assert_allclose(_np(g(x)), _np(m(x)), rtol=1e-5, atol=1e-6)
    assert "MODULE:model" in repr(g)


def test_gradient_accumulation_equals_the_full_batch():
    m_e, m_g = _model(), _model()
    for mod in (m_e, m_g):
        mod[1] = nn.LayerNorm(16)  # batch statistics would differ between micro-batches
    o_e = lf.optim.SGD(m_e.parameters(), lr=0.1, momentum=0.9)
    o_g = lf.optim.SGD(m_g.parameters(), lr=0.1, momentum=0.9)
    step = Step(m_g, o_g)
    step.config.set_gradient_accumulation_steps(4)
    for i in range(3):
        x, y = _data(n=8, seed=i)
        _eager_step(m_e, o_e, x, y)
        step(x, y)
    _assert_same(m_e, m_g, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError):
        step.config.set_gradient_accumulation_steps(0)


def test_amp_keeps_float32_state_and_tracks_fp32():
    m_a, m_f = _model(), _model()
    o_a = lf.optim.SGD(m_a.parameters(), lr=0.05)
    o_f = lf.optim.SGD(m_f.parameters(), lr=0.05)
    sa, sf = Step(m_a, o_a), Step(m_f, o_f)
    sa.config.enable_amp(dtype=lf.bfloat16)
    x, y = _data()
    la, lf32 = sa(x, y), sf(x, y)
    assert la.dtype is lf.float32
    assert abs(la.item() - lf32.item()) < 0.05
    assert all(p.dtype is lf.float32 for p in m_a.parameters())
    for p, q in zip(m_a.parameters(), m_f.parameters()):
        np.testing.assert_allclose(_np(p), _np(q), atol=5e-3)


def test_donation_never_invalidates_an_alias():
    m = _model()
    opt = lf.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    step = Step(m, opt)
    x, y = _data()
    step(x, y)
    w = m[0].weight
    alias, value = w.detach(), w.jax()
    before = _np(alias).copy()
    step(x, y)
    assert not alias.jax().is_deleted() and not value.is_deleted()
    np.testing.assert_array_equal(np.asarray(value), before)  # a jax array is a value: it keeps what it had
    np.testing.assert_array_equal(_np(alias), _np(w))  # detach() shares w's storage (torch): it shows the step
    assert not np.array_equal(_np(w), before)


def _buffers(m, opt):
    """Every buffer a step may donate: the parameters and their optimizer state (by their storage addresses)."""
    ps = list(m.parameters())
    return ps + [t for p in ps for t in opt.state[p].values()]


@pytest.mark.parametrize("name", list(OPTS))
def test_step_donates_parameters_and_optimizer_state(name):
    """The README's claim: holding nothing else, a step updates parameters and optimizer state in their own buffers
    (donated to the program) instead of copying them into new ones."""
    m = _model()
    opt = OPTS[name](m.parameters())
    step = Step(m, opt)
    x, y = _data()
    step(x, y)
    step(x, y)  # SGD's momentum buffers exist from the first step on
    before = [t.data_ptr() for t in _buffers(m, opt)]
    objects = [id(t) for t in _buffers(m, opt)]
    traces = step.cache_info().traces
    step(x, y)
    assert [id(t) for t in _buffers(m, opt)] == objects  # same Tensor objects, rebound
    assert [t.data_ptr() for t in _buffers(m, opt)] == before, "the step copied state it could have donated"
    assert step.cache_info().traces == traces


def test_aliases_stay_readable_and_views_follow_the_step_while_the_rest_is_donated():
    m = _model()
    opt = lf.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    step = Step(m, opt)
    x, y = _data()
    step(x, y)
    step(x, y)
    w = m[0].weight
    data, jax_held, snapshot = w.data, m[3].bias.jax(), opt.state_dict()
    values = (_np(data), np.asarray(jax_held).copy(), _np(snapshot["state"][0]["momentum_buffer"]))
    others = {k: v.data_ptr() for k, v in m.state_dict().items() if k in ("1.weight", "1.bias", "3.weight")}
    traces = step.cache_info().traces
    step(x, y)
    step(x, y)
    # what the user holds stays readable (JAX raises on a deleted buffer): values (a jax array, the optimizer's
    # state_dict snapshot) keep what they had; w.data shares w's storage as in torch and shows the step
    np.testing.assert_array_equal(np.asarray(jax_held), values[1])
    np.testing.assert_array_equal(_np(snapshot["state"][0]["momentum_buffer"]), values[2])
    assert not jax_held.is_deleted() and not data.jax().is_deleted()
    assert not np.array_equal(_np(w), values[0])
    np.testing.assert_array_equal(_np(data), _np(w))
    # ... and only those buffers were copied: the others were still donated
    assert {k: m.state_dict()[k].data_ptr() for k in others} == others
    assert step.cache_info().traces == traces  # one program for both: the shared buffers were donated as copies


def test_a_pending_async_checkpoint_keeps_what_it_saves(tmp_path):
    m = _model()
    opt = lf.optim.Adam(m.parameters(), lr=1e-2)
    step = Step(m, opt)
    x, y = _data()
    step(x, y)
    ref = {
        "model": {k: _np(v) for k, v in m.state_dict().items()},
        "exp_avg": _np(opt.state_dict()["state"][0]["exp_avg"]),
    }
    handle = lf.save({"model": m.state_dict(), "optim": opt.state_dict()}, tmp_path / "c", async_save=True)
    for _ in range(3):  # steps right away, while the save may still read the buffers
        step(x, y)
    handle.wait()
    assert handle.exception() is None
    out = lf.load(tmp_path / "c")
    for k, v in ref["model"].items():
        np.testing.assert_array_equal(_np(out["model"][k]), v, err_msg=k)
    np.testing.assert_array_equal(_np(out["optim"]["state"][0]["exp_avg"]), ref["exp_avg"])
    assert not np.array_equal(_np(m[0].weight), ref["model"]["0.weight"])


class _ProtocolOnly:
    """An optimizer seen through its public functional protocol only: any other attribute raises."""

    PUBLIC = (
        "param_groups",
        "functional_state",
        "functional_hyperparams",
        "functional_update",
        "load_functional_state",
    )

    def __init__(self, opt):
        object.__setattr__(self, "_opt", opt)

    def __getattr__(self, name):
        if name not in self.PUBLIC:
            raise AssertionError(f"the Graph reached past the optimizer's public protocol: {name}")
        return getattr(object.__getattribute__(self, "_opt"), name)


def test_graph_drives_the_optimizer_through_its_public_protocol_only():
    m_e, m_g = _model(), _model()
    o_e = lf.optim.Adam(m_e.parameters(), lr=1e-2)
    o_g = lf.optim.Adam(m_g.parameters(), lr=1e-2)
    step = Step(m_g, _ProtocolOnly(o_g))
    for i in range(3):
        x, y = _data(seed=i)
        _eager_step(m_e, o_e, x, y)
        step(x, y)
    _assert_same(m_e, m_g)
    np.testing.assert_allclose(
        _np(o_g.state_dict()["state"][0]["exp_avg"]), _np(o_e.state_dict()["state"][0]["exp_avg"]), rtol=1e-5, atol=1e-6
    )


def test_a_signature_change_retraces():
    m = _model()
    opt = lf.optim.SGD(m.parameters(), lr=0.1)
    step = Step(m, opt)
    x, y = _data()
    step(x, y)
    step(*_data(n=4))  # a new batch size
    m[3].bias.requires_grad_(False)  # a new set of trained parameters
    b = _np(m[3].bias)
    step(x, y)
    np.testing.assert_array_equal(_np(m[3].bias), b)
    opt.param_groups[0]["nesterov"] = True  # a new static flag of the update
    opt.param_groups[0]["momentum"] = 0.5
    step(x, y)
    assert step.cache_info().compiles == 4 and "momentum_buffer" in opt.state[m[0].weight]
    step(x, y)  # the momentum buffers came with the step that turned momentum on: no new program input
    step(x, y)
    assert step.cache_info()[:3] == (4, 4, 2)


def test_build_errors_are_graph_errors():
    class Bad(nn.Graph):
        def __init__(self, model, what):
            super().__init__()
            self.model = model
            self.what = what

        def build(self, x):
            out = self.model(x).sum()
            if self.what == "item":
                return out * out.item()
            if self.what == "python":
                return 1.0
            if out > 0:
                return out
            return -out

    x, _ = _data()
    for what, pat in (("item", "item"), ("python", "float"), ("bool", "bool")):
        with pytest.raises(lf.GraphError, match=pat):
            Bad(_model(), what)(x)


def test_debug_prints_compile_events(capsys):
    m = _model()
    step = Step(m, lf.optim.SGD(m.parameters(), lr=0.1))
    step.debug(1)
    step(*_data())
    assert "compiled" in capsys.readouterr().out
    m2 = _model()
    step2 = Step(m2, lf.optim.SGD(m2.parameters(), lr=0.1))
    step2.debug(3)
    step2(*_data())
    out = capsys.readouterr().out
    assert "traced program" in out and "dot_general" in out and "HloModule" in out
    assert copy.copy(step) is not None
