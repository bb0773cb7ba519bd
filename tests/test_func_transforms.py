"""lf.func transforms (vmap, grad, grad_and_value, jacrev, jacfwd, hessian, vjp, jvp, linearize) against torch.func:
the same user functions run on both libraries; nesting (per-sample gradients with functional_call), lf.compile."""

import numpy as np
import pytest
import torch
import torch.func as tf

import lazyflow as lf
from lazyflow._core.errors import ArgumentError

RNG = np.random.default_rng(0)
X = RNG.standard_normal((4, 3)).astype(np.float32)
Y = RNG.standard_normal((4, 3)).astype(np.float32)
V = RNG.standard_normal(3).astype(np.float32)


def _np(t):
    return np.array(t.detach().numpy(), copy=True)


def _close(a, b, rtol=1e-5, atol=1e-6):
    if isinstance(b, dict):
        assert isinstance(a, dict) and list(a) == list(b)
        for k in b:
            _close(a[k], b[k], rtol, atol)
        return
    if isinstance(b, (tuple, list)):
        assert isinstance(a, type(b)) and len(a) == len(b)
        for x, y in zip(a, b):
            _close(x, y, rtol, atol)
        return
    assert list(a.shape) == list(b.shape)
    np.testing.assert_allclose(_np(a), _np(b), rtol=rtol, atol=atol)


def _pair(fn):
    """Run ``fn(lib, T)`` (T: tensor constructor) on lazyflow and torch and compare."""
    a = fn(lf, lambda v: lf.tensor(v))
    b = fn(torch, lambda v: torch.tensor(v))
    _close(a, b)


def f(x, y):
    return (x * y).sin().sum() + (x**2).sum()


# ------------------------------------------------------------------------------------------------ vmap
def test_vmap_in_dims_out_dims_chunks_match_torch():
    _pair(lambda lib, T: lib.func.vmap(lambda a, b: (a * b).sum(), in_dims=(0, None))(T(X), T(V)))
    _pair(lambda lib, T: lib.func.vmap(lambda a, b: a + b, in_dims=(1, 0), out_dims=1)(T(X), T(Y[:, :3].T.copy())))
    _pair(lambda lib, T: lib.func.vmap(lambda a: (a.sum(), a * 2), out_dims=(0, 1))(T(X)))
    _pair(lambda lib, T: lib.func.vmap(lambda a: a.cumsum(-1), in_dims=-1)(T(X)))
    _pair(
        lambda lib, T: lib.func.vmap(lambda d: d["a"] @ d["b"], in_dims=({"a": 0, "b": None},))({"a": T(X), "b": T(V)})
    )
    _pair(lambda lib, T: lib.func.vmap(lambda a, b: a * b, chunk_size=3)(T(X), T(Y)))
    _pair(lambda lib, T: lib.func.vmap(lib.func.vmap(lambda a: a.exp().sum()))(T(X)))  # nested
    assert lf.vmap is lf.func.vmap


def test_vmap_errors_like_torch():
    for lib in (lf, torch):
        x, y = lib.tensor(X), lib.tensor(Y[:3])
        with pytest.raises(ValueError, match="same size in the mapped dimension"):
            lib.func.vmap(lambda a, b: a + b)(x, y)
        with pytest.raises(ValueError, match="non-Tensor"):
            lib.func.vmap(lambda a, k: a * k, in_dims=(0, 0))(x, 2.0)
        with pytest.raises(ValueError, match="in_dims"):
            lib.func.vmap(lambda a: a, in_dims=None)(x)
        with pytest.raises(ValueError, match="in_dim"):
            lib.func.vmap(lambda a: a, in_dims=2)(x)
        with pytest.raises(RuntimeError, match="randomness"):
            lib.func.vmap(lambda a: a, randomness="sometimes")(x)
        with pytest.raises(RuntimeError, match="randomness error mode"):
            lib.func.vmap(lambda a: a + lib.rand(3))(x)  # noqa: B023
    with pytest.raises(ArgumentError, match="must return Tensors"):
        lf.func.vmap(lambda a: 3.0)(lf.tensor(X))


def test_vmap_randomness_same_and_different():
    x = lf.zeros(5, 4)
    same = lf.func.vmap(lambda a: a + lf.rand(4), randomness="same")(x)
    diff = lf.func.vmap(lambda a: a + lf.rand(4), randomness="different")(x)
    s, d = _np(same), _np(diff)
    assert np.allclose(s, s[0]) and not np.allclose(d, d[0])
    assert len({tuple(r) for r in d.round(6)}) == 5
    lf.manual_seed(3)
    d1 = _np(lf.func.vmap(lambda a: a + lf.randn(4), randomness="different")(x))
    d2 = _np(lf.func.vmap(lambda a: a + lf.randn(4), randomness="different")(x))
    lf.manual_seed(3)
    d3 = _np(lf.func.vmap(lambda a: a + lf.randn(4), randomness="different")(x))
    assert not np.allclose(d1, d2) and np.allclose(d1, d3)  # the generator advances; reseeding repeats


# ------------------------------------------------------------------------------------------------ grad family
def test_grad_argnums_has_aux_and_value_match_torch():
    _pair(lambda lib, T: lib.func.grad(f)(T(X), T(Y)))
    _pair(lambda lib, T: lib.func.grad(f, argnums=(0, 1))(T(X), T(Y)))
    _pair(lambda lib, T: lib.func.grad(f, argnums=-1)(T(X), T(Y)))
    _pair(lambda lib, T: lib.func.grad_and_value(f)(T(X), T(Y)))
    _pair(lambda lib, T: lib.func.grad(lambda x: (f(x, x), {"aux": x.mean()}), has_aux=True)(T(X)))
    _pair(lambda lib, T: lib.func.grad_and_value(lambda x: (f(x, x), x * 2), has_aux=True)(T(X)))
    _pair(lambda lib, T: lib.func.grad(lambda d: (d["w"] * d["b"]).sum())({"w": T(X), "b": T(Y)}))


def test_nested_grad_matches_torch():
    g3 = lambda lib: lib.func.grad(lib.func.grad(lib.func.grad(lambda x: x.sin() * x**3)))
    _pair(lambda lib, T: g3(lib)(T(np.float32(0.7))))
    _pair(lambda lib, T: lib.func.vmap(lib.func.grad(lambda x: x.tanh().sum()))(T(X)))


def test_per_sample_gradients_with_functional_call_match_torch():
    """torch.func's canonical example: vmap over grad of a functional_call of a model."""

    def run(lib, T):
        torch.manual_seed(0)
        tmodel = torch.nn.Sequential(torch.nn.Linear(3, 5), torch.nn.Tanh(), torch.nn.Linear(5, 2))
        if lib is torch:
            model = tmodel
        else:
            model = lf.nn.Sequential(lf.nn.Linear(3, 5), lf.nn.Tanh(), lf.nn.Linear(5, 2))
            model.load_state_dict({k: lf.tensor(_np(v)) for k, v in tmodel.state_dict().items()})
        params = {k: v.detach() for k, v in model.named_parameters()}

        def loss(p, x, t):
            out = lib.func.functional_call(model, p, (x.unsqueeze(0),))
            return ((out - t) ** 2).mean()

        return lib.func.vmap(lib.func.grad(loss), in_dims=(None, 0, 0))(params, T(X), T(Y[:, :2]))

    _pair(run)


def test_jacobians_hessian_match_torch():
    g = lambda x, y: (x * y).sin().cumsum(0)
    _pair(lambda lib, T: lib.func.jacrev(g)(T(V), T(V * 2)))
    _pair(lambda lib, T: lib.func.jacfwd(g, argnums=(0, 1))(T(V), T(V * 2)))
    _pair(lambda lib, T: lib.func.jacrev(g, argnums=1)(T(X), T(X)))
    _pair(lambda lib, T: lib.func.jacrev(lambda x: (x.exp(), x.sum()))(T(V)))
    _pair(lambda lib, T: lib.func.jacrev(lambda x: (x.exp(), x.sum()), has_aux=True)(T(V)))
    _pair(lambda lib, T: lib.func.hessian(lambda x: (x.sin() * x).sum())(T(V)))
    _pair(lambda lib, T: lib.func.vmap(lib.func.jacrev(lambda x: x.sin() * x.sum()))(T(X)))


def test_vjp_jvp_linearize_match_torch():
    def vjp_run(lib, T):
        out, fn = lib.func.vjp(lambda x, y: x * y.sin(), T(X), T(Y))
        return out, fn(T(Y))

    _pair(vjp_run)

    def vjp_aux(lib, T):
        out, fn, aux = lib.func.vjp(lambda x: (x.exp(), x.sum()), T(V), has_aux=True)
        return out, fn(T(V)), aux

    _pair(vjp_aux)
    _pair(lambda lib, T: lib.func.jvp(lambda x, y: (x * y).sin(), (T(X), T(Y)), (T(Y), T(X))))
    _pair(lambda lib, T: lib.func.jvp(lambda x: (x.exp(), x * 2), (T(V),), (T(V),), has_aux=True))

    def lin(lib, T):
        out, fn = lib.func.linearize(lambda x: x.sin() * x, T(V))
        return out, fn(T(V * 3))

    _pair(lin)


def test_grad_errors_like_torch():
    for lib in (lf, torch):
        with pytest.raises(RuntimeError, match="scalar Tensor"):
            lib.func.grad(lambda x: x * 2)(lib.tensor(V))
        with pytest.raises(RuntimeError, match="argnums?=2, but only 1 positional inputs"):
            lib.func.grad(lambda x: x.sum(), argnums=2)(lib.tensor(V))
        with pytest.raises(RuntimeError, match="floating point"):
            lib.func.grad(lambda x: x.sum())(lib.tensor([1, 2]))
        with pytest.raises(RuntimeError, match="tuple"):
            lib.func.jvp(lambda x: x, lib.tensor(V), lib.tensor(V))
    with pytest.raises(ArgumentError, match=r"\(output, aux\)"):
        lf.func.grad(lambda x: x.sum(), has_aux=True)(lf.tensor(V))


def test_transforms_inside_lf_compile_match_eager():
    fn = lambda x: lf.func.vmap(lf.func.grad(lambda r: (r.sin() * r).sum()))(x) * 2
    compiled = lf.compile(fn)
    _close(compiled(lf.tensor(X)), fn(lf.tensor(X)))
    _close(compiled(lf.tensor(Y)), tf.vmap(tf.grad(lambda r: (r.sin() * r).sum()))(torch.tensor(Y)) * 2)


def test_functionalize_keeps_results_and_input_mutations_like_torch():
    def body(lib):
        def fn(a):
            b = a * 2
            b.add_(1)  # an intermediate mutation
            a.mul_(3)  # a mutation of the input, which functionalize keeps
            return b

        a = lib.tensor(V)
        out = lib.func.functionalize(fn)(a)
        return out, a

    _close(body(lf), body(torch))
    assert lf.func.functionalize(f, remove="mutations_and_views") is f
    for lib in (lf, torch):
        with pytest.raises(RuntimeError, match="invalid argument for remove"):
            lib.func.functionalize(f, remove="views")


def test_forward_mode_through_ops_with_backward_rules_matches_torch():
    """pow, relu, abs, clamp, norm carry op-table backward rules (jax.custom_vjp); forward mode traces without them."""
    g = lambda x: (x**3 + x.relu() * x.abs() + x.clamp(-0.5, 0.5)) / x.norm()
    _pair(lambda lib, T: lib.func.jacfwd(g)(T(V)))
    _pair(lambda lib, T: lib.func.jvp(g, (T(V),), (T(V * 2),)))
    _pair(lambda lib, T: lib.func.hessian(lambda x: g(x).sum())(T(V)))
    _pair(lambda lib, T: lib.func.vmap(lib.func.jacfwd(g))(T(X)))

    def lin(lib, T):
        out, fn = lib.func.linearize(g, T(V))
        return out, fn(T(V))

    _pair(lin)


def test_jvp_never_aliases_a_numpy_tangent():
    """A numpy tangent is caller memory: the tangent output of the identity is a copy (the reference is the
    tangent's value before the caller changes it)."""
    t = np.arange(3, dtype=np.float32)
    before = t.copy()
    _, out = lf.func.jvp(lambda x: x, (lf.ones(3),), (t,))
    t += 100.0
    np.testing.assert_array_equal(np.asarray(out.numpy()), before)
