"""lf.compile: compiled functions and modules against eager lazyflow, numpy/jax references and torch's contracts."""

import copy
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import lazyflow as lf
from lazyflow import nn


class Counter(nn.Module):
    """A linear layer that counts its calls in a buffer (a buffer mutated in forward)."""

    def __init__(self, i, o):
        super().__init__()
        self.weight = nn.Parameter(lf.randn(o, i) * 0.3)
        self.bias = nn.Parameter(lf.zeros(o))
        self.register_buffer("calls", lf.zeros((), dtype=lf.int64))

    def forward(self, x):
        self.calls.add_(1)
        return x @ self.weight.t() + self.bias


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = Counter(4, 8)
        self.drop = nn.Dropout(0.5)
        self.out = nn.Linear(8, 3)
        self.hidden = 8  # a plain attribute, reachable through the wrapper

    def forward(self, x):
        return self.out(self.drop(lf.tanh(self.fc(x))))


def _np(t):
    return np.asarray(t.detach().numpy())


def test_function_forward_and_grad_match_jax():
    @lf.compile
    def f(x, y):
        return (lf.tanh(x) * y).sum(1)

    rng = np.random.default_rng(0)
    xn, yn = rng.standard_normal((3, 4)).astype(np.float32), rng.standard_normal((3, 4)).astype(np.float32)
    x = lf.tensor(xn, requires_grad=True)
    out = f(x, lf.tensor(yn))
    np.testing.assert_allclose(_np(out), (np.tanh(xn) * yn).sum(1), rtol=1e-5, atol=1e-6)
    out.sum().backward()
    ref = jax.grad(lambda a: (jnp.tanh(a) * yn).sum())(xn)
    np.testing.assert_allclose(_np(x.grad), ref, rtol=1e-5, atol=1e-6)
    assert out.grad_fn is not None and "Compiled" in out.grad_fn.name()


def test_decorator_with_options_and_variants_counted():
    @lf.compile(cache_size_limit=4)
    def f(x):
        return x * 2

    f(lf.zeros(2))
    f(lf.zeros(2))
    assert f.cache_info().traces == 1 and f.cache_info().hits == 1
    f(lf.zeros(3))
    assert f.cache_info().compiles == 2
    f(lf.zeros(2, dtype=lf.float64))
    assert f.cache_info().compiles == 3


def test_recompile_limit_warns_once_naming_the_argument_then_runs_eagerly():
    f = lf.compile(lambda x: x + 1, recompile_limit=2)
    f(lf.zeros(1))
    f(lf.zeros(2))
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        r = f(lf.zeros(3))
        f(lf.zeros(4))
    assert len(w) == 1 and "tensor argument 0" in str(w[0].message) and "[2]" in str(w[0].message)
    np.testing.assert_array_equal(_np(r), np.ones(3))
    assert f.cache_info().fallbacks == 2


def test_recompile_limit_raise_option():
    f = lf.compile(lambda x: x + 1, recompile_limit=1, on_recompile_limit="raise")
    f(lf.zeros(1))
    with pytest.raises(lf.GraphError, match="recompile limit"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        f(lf.zeros(2))
    with pytest.raises(ValueError):
        lf.compile(lambda x: x, on_recompile_limit="sometimes")


def test_module_forward_grads_and_buffers_match_eager():
    lf.manual_seed(0)
    m = Net()
    cm = lf.compile(m)
    ref = copy.deepcopy(m)
    x = lf.randn(5, 4)
    lf.manual_seed(7)
    y = cm(x)
    lf.manual_seed(7)
    y_ref = ref(x)
    np.testing.assert_allclose(_np(y), _np(y_ref), rtol=1e-5, atol=1e-6)
    (y**2).sum().backward()
    (y_ref**2).sum().backward()
    for (n, p), (_, q) in zip(m.named_parameters(), ref.named_parameters()):
        np.testing.assert_allclose(_np(p.grad), _np(q.grad), rtol=1e-5, atol=1e-6, err_msg=n)
    assert int(m.fc.calls.item()) == 1 == int(ref.fc.calls.item())
    cm(x)
    assert int(m.fc.calls.item()) == 2


def test_dropout_is_fresh_each_call_and_reproducible():
    m = nn.Sequential(nn.Dropout(0.5))
    cm = lf.compile(m)
    x = lf.ones(64)
    lf.manual_seed(3)
    a, b = _np(cm(x)), _np(cm(x))
    assert not np.array_equal(a, b)
    lf.manual_seed(3)
    np.testing.assert_array_equal(_np(cm(x)), a)
    assert set(np.unique(a)) <= {0.0, 2.0}


def test_compiled_draws_follow_every_generator_change_between_calls():
    # the (seed, offset) device arrays are reused while the generator is unchanged: every way a user moves it
    # (manual_seed, an eager random op, set_rng_state, the compiled call itself) must reach the next call
    from lazyflow.graph.functionalize import rng_inputs

    cm = lf.compile(nn.Sequential(nn.Dropout(0.5)))
    x = lf.ones(256)
    lf.manual_seed(5)
    state = lf.get_rng_state()
    a = _np(cm(x))
    b = _np(cm(x))  # the call advanced the offset
    lf.set_rng_state(state)
    np.testing.assert_array_equal(_np(cm(x)), a)
    lf.rand(3)  # an eager draw between compiled calls moves the offset
    c = _np(cm(x))
    lf.set_rng_state(state)
    cm(x)
    np.testing.assert_array_equal(_np(cm(x)), b)
    lf.manual_seed(6)
    d = _np(cm(x))
    assert len({a.tobytes(), b.tobytes(), c.tobytes(), d.tobytes()}) == 4
    for seed in (5, 2**40 + 7):
        lf.manual_seed(seed)
        lf.rand(2)
        gen = lf.default_generator
        s, o = rng_inputs()
        assert (int(s), int(o)) == (((seed ^ (seed >> 32)) & 0xFFFFFFFF), gen._offset & 0xFFFFFFFF)
        assert rng_inputs()[0] is s  # unchanged generator: the same arrays, no new transfer


def test_parameters_are_inputs_not_constants():
    m = nn.Linear(3, 2)
    cm = lf.compile(m)
    x = lf.randn(4, 3)
    cm(x)
    with lf.no_grad():
        m.weight.mul_(3.0)
    np.testing.assert_allclose(_np(cm(x)), _np(x) @ _np(m.weight).T + _np(m.bias), rtol=1e-5, atol=1e-6)
    m.load_state_dict({"weight": np.ones((2, 3), np.float32), "bias": np.zeros(2, np.float32)})
    np.testing.assert_allclose(_np(cm(x)), _np(x).sum(1, keepdims=True).repeat(2, 1), rtol=1e-5, atol=1e-6)
    assert cm.cache_info().traces == 1


def test_captured_tensor_is_lifted_and_updates_are_seen():
    w = lf.randn(4)
    g = lf.compile(lambda a: a @ w)
    y = lf.randn(3, 4)
    np.testing.assert_allclose(_np(g(y)), _np(y) @ _np(w), rtol=1e-5)
    w.mul_(2)
    np.testing.assert_allclose(_np(g(y)), _np(y) @ _np(w), rtol=1e-5)
    g(y)
    assert g.cache_info().traces == 2  # once baked (first call), once lifted, then hits


def test_which_inputs_require_grad_is_part_of_the_signature():
    """The same shapes with another argument requiring grad: a new program, not the stale one's gradients."""
    f = lf.compile(lambda a, b: (a * b).sum())
    an, bn = np.arange(3.0, dtype=np.float32), np.full(3, 2.0, np.float32)
    x = lf.tensor(an, requires_grad=True)
    f(x, lf.tensor(bn)).backward()
    np.testing.assert_array_equal(_np(x.grad), bn)
    y = lf.tensor(bn, requires_grad=True)
    f(lf.tensor(an), y).backward()
    np.testing.assert_array_equal(_np(y.grad), an)
    assert f.cache_info().compiles == 2


def test_train_eval_switch_compiles_a_variant():
    m = nn.Sequential(nn.Linear(2, 2), nn.Dropout(0.9))
    cm = lf.compile(m)
    x = lf.ones(3, 2)
    cm(x)
    cm.eval()
    assert not m.training and not m[1].training and not cm.training
    np.testing.assert_allclose(_np(cm(x)), _np(m(x)), rtol=1e-6)
    assert cm.cache_info().compiles == 2


def test_state_dict_pass_through_all_directions():
    m = Net()
    cm = lf.compile(m)
    sd, csd = m.state_dict(), cm.state_dict()
    assert list(sd) == list(csd) and all("_orig_mod" not in k for k in csd)
    for k in sd:
        np.testing.assert_array_equal(_np(sd[k]), _np(csd[k]))
    other = Net()
    assert other.load_state_dict(cm.state_dict()).missing_keys == []
    cm.load_state_dict(other.state_dict())
    np.testing.assert_array_equal(_np(m.out.weight), _np(other.out.weight))

    class Parent(nn.Module):
        def __init__(self, child):
            super().__init__()
            self.child = child
            self.head = nn.Linear(3, 1)

    p_plain, p_comp = Parent(Net()), Parent(lf.compile(Net()))
    assert list(p_plain.state_dict()) == list(p_comp.state_dict())
    p_comp.load_state_dict(p_plain.state_dict())
    p_plain.load_state_dict(p_comp.state_dict())
    np.testing.assert_array_equal(_np(p_comp.child.fc.weight), _np(p_plain.child.fc.weight))


@pytest.mark.parametrize("prefix", ["_orig_mod.", "module."])
def test_wrapper_prefixed_keys_load_with_a_report(prefix):
    m, src = Net(), Net()
    cm = lf.compile(m)
    sd = {prefix + k: v for k, v in src.state_dict().items()}
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        res = cm.load_state_dict(sd)
    assert res.missing_keys == [] and res.unexpected_keys == []
    assert any(prefix in str(x.message) for x in w)
    np.testing.assert_array_equal(_np(m.fc.weight), _np(src.fc.weight))
    half = dict(list(sd.items())[:2]) | {k[len(prefix) :]: v for k, v in list(sd.items())[2:]}
    with pytest.raises(lf.CheckpointError):
        cm.load_state_dict(half)


def test_torch_compile_fails_both_ways_where_lazyflow_does_not():
    import torch

    tm = torch.nn.Linear(3, 2)
    opt_mod = torch.compile(tm)
    assert list(opt_mod.state_dict()) == ["_orig_mod.weight", "_orig_mod.bias"]
    with pytest.raises(RuntimeError):
        opt_mod.load_state_dict(tm.state_dict())
    with pytest.raises(RuntimeError):
        torch.nn.Linear(3, 2).load_state_dict(opt_mod.state_dict())
    plain = nn.Linear(3, 2)
    cm = lf.compile(plain)
    assert list(cm.state_dict()) == ["weight", "bias"]
    cm.load_state_dict({k: v.detach().numpy() for k, v in tm.state_dict().items()})
    nn.Linear(3, 2).load_state_dict(cm.state_dict())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cm.load_state_dict({k: v.detach().numpy() for k, v in opt_mod.state_dict().items()})
    np.testing.assert_array_equal(_np(plain.weight), tm.weight.detach().numpy())


def test_wrapper_acts_as_the_original():
    m = Net()
    cm = lf.compile(m)
    assert isinstance(cm, nn.Module) and cm.module is m and cm._orig_mod is m
    assert cm.fc is m.fc and cm.hidden == 8
    assert [id(p) for p in cm.parameters()] == [id(p) for p in m.parameters()]
    assert [n for n, _ in cm.named_parameters()] == [n for n, _ in m.named_parameters()]
    assert [id(b) for b in cm.buffers()] == [id(b) for b in m.buffers()]
    assert next(iter(cm.modules())) is m
    cm(lf.randn(2, 4)).sum().backward()
    assert m.fc.weight.grad is not None
    cm.zero_grad()
    assert m.fc.weight.grad is None
    cm.to(lf.float64)
    assert m.fc.weight.dtype is lf.float64
    assert "Net(" in repr(cm) and repr(cm).startswith("CompiledModule(")


def test_graph_errors_name_the_problem_and_the_line():
    y = lf.randn(3)

    @lf.compile
    def branch(a):
        if a.sum() > 0:
            return a
        return -a

    with pytest.raises(lf.GraphError, match=r"test_compile.py:\d+"):
        branch(y)

    @lf.compile
    def item(a):
        return a * a.sum().item()

    with pytest.raises(lf.GraphError, match="item"):
        item(y)

    @lf.compile
    def mutate(a):
        y.add_(1)
        return a

    with pytest.raises(lf.GraphError, match="captured"):
        mutate(lf.randn(3))

    @lf.compile
    def non_tensor(a):
        return 3

    with pytest.raises(lf.GraphError, match="int"):
        non_tensor(y)
    assert issubclass(lf.GraphError, RuntimeError)


def test_compile_rejects_non_callables():
    with pytest.raises(TypeError):
        lf.compile(42)
    assert lf.compile(Net(), disable=True).__class__ is Net


def test_an_op_backward_rule_applies_in_eager_and_in_the_compiled_vjp():
    from lazyflow._core.context import state
    from lazyflow.ops.table import REGISTRY, op

    name = "test_rule_scaled_identity"
    o = op(name, bwd=lambda xs, out, ct: (ct * 3.0,))(lambda x: x * 1.0)
    try:
        x = lf.randn(4, requires_grad=True)
        state.interp.apply(o, (x,), ()).sum().backward()
        np.testing.assert_allclose(_np(x.grad), np.full(4, 3.0))
        x.grad = None
        lf.compile(lambda a: state.interp.apply(o, (a,), ()).sum())(x).backward()
        np.testing.assert_allclose(_np(x.grad), np.full(4, 3.0))
    finally:
        del REGISTRY[name]  # a test-only op must not outlive the test (the op table meta-test checks records)


def test_first_call_of_a_function_closing_over_parameters_has_their_gradients():
    # the parameters are captured, not arguments: the first call finds them while tracing and runs again with them
    # as inputs, so even its result carries their gradient (d sum(x W^T + b) / dW = column sums of x, numpy)
    lin = lf.nn.Linear(3, 2)

    @lf.compile
    def f(x):
        return lin(x).sum()

    x = np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32)
    f(lf.tensor(x)).backward()
    np.testing.assert_allclose(lin.weight.grad.numpy(), np.tile(x.sum(0), (2, 1)), rtol=1e-5)
    np.testing.assert_allclose(lin.bias.grad.numpy(), [4.0, 4.0])
