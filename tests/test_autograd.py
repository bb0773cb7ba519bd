"""Tape autograd against ``jax.grad`` of plain ``jax.numpy`` code: backward, accumulation, grad modes,
``lf.autograd.grad``, retain_grad/detach, errors, multi-output ops, double backward, grad_fn names,
and pickling of the requires_grad flag."""

import pickle
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import lazyflow as lf

RNG = np.random.default_rng(1)
X0 = RNG.uniform(0.2, 1.5, (3, 4))
W0 = RNG.standard_normal((4, 2))
V0 = RNG.standard_normal((3, 4))


@pytest.fixture(autouse=True)
def grad_mode_isolated():
    """A failing grad-mode test must not leave recording off for the tests after it."""
    yield
    lf.set_grad_enabled(True)


def _t(a, rg=True):
    return lf.tensor(np.asarray(a, np.float64), requires_grad=rg)


def _lf_f(x, w):
    h = lf.tanh(x @ w) * 2.0 + lf.exp(-x.sum(dim=1, keepdim=True))
    return (h**2).mean() + lf.log(x).sum() / (1.0 + lf.sigmoid(w).sum())


def _jnp_f(x, w):
    h = jnp.tanh(x @ w) * 2.0 + jnp.exp(-x.sum(axis=1, keepdims=True))
    return (h**2).mean() + jnp.log(x).sum() / (1.0 + jax.nn.sigmoid(w).sum())


def _close(a, b, rtol=1e-10, atol=1e-12):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=rtol, atol=atol)


# --------------------------------------------------------------------------- backward


def test_backward_scalar_matches_jax_grad():
    x, w = _t(X0), _t(W0)
    loss = _lf_f(x, w)
    loss.backward()
    gx, gw = jax.grad(_jnp_f, argnums=(0, 1))(X0, W0)
    _close(loss.item(), _jnp_f(X0, W0))
    _close(x.grad.numpy(), gx)
    _close(w.grad.numpy(), gw)
    assert x.grad.dtype is lf.float64 and x.grad.shape == x.shape and x.grad.requires_grad is False


def test_backward_with_given_gradient_is_a_vjp():
    x = _t(X0)
    y = lf.sin(x) * x
    g = RNG.standard_normal(X0.shape)
    y.backward(gradient=lf.tensor(g))
    _, pull = jax.vjp(lambda x: jnp.sin(x) * x, X0)
    _close(x.grad.numpy(), pull(g)[0])


def test_backward_float32_leaf_gets_float32_grad():
    x = lf.tensor(X0.astype(np.float32), requires_grad=True)
    (x * x).sum().backward()
    assert x.grad.dtype is lf.float32
    np.testing.assert_allclose(x.grad.numpy(), 2 * X0.astype(np.float32), rtol=1e-6)


def test_broadcast_gradients_reduce_to_input_shapes():
    a, b = _t(X0[:, :1]), _t(W0[:, 0])  # (3, 1) and (4,)
    ((a * b + a) ** 2).sum().backward()
    ga, gb = jax.grad(lambda a, b: ((a * b + a) ** 2).sum(), argnums=(0, 1))(X0[:, :1], W0[:, 0])
    assert a.grad.shape == (3, 1) and b.grad.shape == (4,)
    _close(a.grad.numpy(), ga)
    _close(b.grad.numpy(), gb)


def test_grad_accumulates_across_two_backwards():
    x, w = _t(X0), _t(W0)
    _lf_f(x, w).backward()
    _lf_f(x, w).backward()
    gx, gw = jax.grad(_jnp_f, argnums=(0, 1))(X0, W0)
    _close(x.grad.numpy(), 2 * np.asarray(gx))
    _close(w.grad.numpy(), 2 * np.asarray(gw))
    x.grad = None
    (x * 3.0).sum().backward()
    _close(x.grad.numpy(), np.full(X0.shape, 3.0))


def test_retain_graph_allows_a_second_backward_and_a_freed_graph_raises():
    x = _t(X0)
    y = (lf.exp(x) * x).sum()
    y.backward(retain_graph=True)
    y.backward()
    g = jax.grad(lambda x: (jnp.exp(x) * x).sum())(X0)
    _close(x.grad.numpy(), 2 * np.asarray(g))
    with pytest.raises(lf.AutogradError, match="second time"):
        y.backward()
    assert issubclass(lf.AutogradError, RuntimeError)


def test_freed_graph_raises_through_a_shared_subgraph():
    x = _t(X0)
    h = lf.sin(x)
    (h * 2.0).sum().backward()
    with pytest.raises(lf.AutogradError, match="second time"):
        (h * 3.0).sum().backward()  # the new mul node is fresh, sin's saved values are freed


def test_backward_of_non_scalar_without_gradient_raises():
    x = _t(X0)
    y = x * 2.0
    with pytest.raises(lf.AutogradError, match=r"scalar.*\[3, 4\]"):
        y.backward()
    with pytest.raises(lf.AutogradError, match="shape"):
        y.backward(gradient=lf.ones(4, 3, dtype=lf.float64))
    assert x.grad is None


def test_backward_of_tensor_not_requiring_grad_raises():
    with pytest.raises(lf.AutogradError, match="does not require grad"):
        (lf.tensor(X0) * 2.0).sum().backward()
    x = _t(X0)
    with lf.no_grad():
        y = (x * 2.0).sum()
    with pytest.raises(lf.AutogradError):
        y.backward()


def test_backward_inputs_restricts_accumulation():
    x, w = _t(X0), _t(W0)
    _lf_f(x, w).backward(inputs=[w])
    assert x.grad is None
    _close(w.grad.numpy(), jax.grad(_jnp_f, argnums=1)(X0, W0))


# --------------------------------------------------------------------------- leaves, retain_grad, detach


def test_non_leaf_grad_is_none_unless_retain_grad():
    x = _t(X0)
    h = lf.sin(x)
    k = lf.sin(x)
    k.retain_grad()
    assert x.is_leaf and not h.is_leaf and k.retains_grad and not h.retains_grad
    ((h * k) ** 2).sum().backward()
    assert h.grad is None
    # d/dk of sum((h k)^2) at fixed h
    gk = jax.grad(lambda k: ((np.sin(X0) * k) ** 2).sum())(np.sin(X0))
    _close(k.grad.numpy(), gk)
    _close(x.grad.numpy(), jax.grad(lambda x: ((jnp.sin(x) * jnp.sin(x)) ** 2).sum())(X0))


def test_retain_grad_on_leaf_is_a_no_op_and_on_no_grad_tensor_raises():
    x = _t(X0)
    x.retain_grad()
    (x * 2.0).sum().backward()
    _close(x.grad.numpy(), np.full(X0.shape, 2.0))
    with pytest.raises(lf.AutogradError):
        lf.tensor(X0).retain_grad()


def test_detach_cuts_the_graph():
    x = _t(X0)
    d = x.detach()
    assert not d.requires_grad and d.is_leaf and d.grad_fn is None
    (lf.sin(x) * d).sum().backward()
    _close(x.grad.numpy(), np.cos(X0) * X0)
    x.grad = None
    h = lf.exp(x)
    (h.detach() * h).sum().backward()  # gradient flows only through the second factor
    _close(x.grad.numpy(), np.exp(X0) * np.exp(X0))


def test_detach_inplace_turns_a_non_leaf_into_a_leaf():
    x = _t(X0)
    h = x * 2.0
    h.detach_()
    assert h.is_leaf and not h.requires_grad


def test_requires_grad_on_integer_or_bool_tensors_raises():
    i = lf.tensor(np.arange(3))
    with pytest.raises(lf.DTypeError, match="floating"):
        i.requires_grad_()
    with pytest.raises(lf.DTypeError):
        i.requires_grad = True
    with pytest.raises(lf.DTypeError):
        lf.tensor([1, 2, 3], requires_grad=True)
    with pytest.raises(lf.DTypeError):
        lf.zeros(3, dtype=lf.int64, requires_grad=True)
    with pytest.raises(lf.DTypeError):
        lf.tensor([True, False]).requires_grad_()
    assert not i.requires_grad


def test_requires_grad_flag_on_non_leaf_cannot_be_cleared():
    h = _t(X0) * 2.0
    with pytest.raises(lf.AutogradError):
        h.requires_grad_(False)


def test_integer_results_do_not_require_grad():
    x = _t(X0)
    assert not x.argmax().requires_grad
    assert not (x > 0.5).requires_grad
    v, i = x.max(dim=1)
    assert v.requires_grad and not i.requires_grad and i.grad_fn is None
    assert i.dtype is lf.int64


# --------------------------------------------------------------------------- grad modes


def test_no_grad_enable_grad_nesting():
    x = _t(X0)
    assert lf.is_grad_enabled()
    with lf.no_grad():
        assert not lf.is_grad_enabled()
        y = x * 2.0
        with lf.enable_grad():
            assert lf.is_grad_enabled()
            z = x * 3.0
            with lf.no_grad():
                u = x * 4.0
            assert lf.is_grad_enabled()
        assert not lf.is_grad_enabled()
    assert lf.is_grad_enabled()
    assert not y.requires_grad and y.grad_fn is None
    assert z.requires_grad and z.grad_fn is not None
    assert not u.requires_grad


def test_grad_mode_restored_after_exception():
    with pytest.raises(KeyError):
        with lf.no_grad():
            raise KeyError
    assert lf.is_grad_enabled()


def test_set_grad_enabled_as_context_manager_and_function():
    x = _t(X0)
    with lf.set_grad_enabled(False):
        assert not lf.is_grad_enabled()
        assert not (x * 2.0).requires_grad
        with lf.set_grad_enabled(True):
            assert (x * 2.0).requires_grad
        assert not lf.is_grad_enabled()
    assert lf.is_grad_enabled()
    lf.set_grad_enabled(False)  # torch: a plain call switches the mode at once
    try:
        assert not lf.is_grad_enabled()
        assert not (x * 2.0).requires_grad
    finally:
        lf.set_grad_enabled(True)
    assert lf.is_grad_enabled()


def test_inference_mode():
    x = _t(X0)
    with lf.inference_mode():
        assert not (x * 2.0).requires_grad
    with lf.inference_mode(False):
        assert (x * 2.0).requires_grad
    assert lf.is_grad_enabled()


def test_grad_modes_as_decorators():
    x = _t(X0)

    @lf.no_grad()
    def f_off():
        return lf.is_grad_enabled(), (x * 2.0).requires_grad

    @lf.enable_grad()
    def f_on():
        return lf.is_grad_enabled(), (x * 2.0).requires_grad

    @lf.set_grad_enabled(False)
    def g_off():
        return lf.is_grad_enabled()

    assert lf.is_grad_enabled(), "decorating with set_grad_enabled(False) must not change the mode"
    assert f_off() == (False, False) and lf.is_grad_enabled()
    assert f_on() == (True, True)
    assert g_off() is False and lf.is_grad_enabled()
    with lf.no_grad():
        assert f_on() == (True, True)
        assert not lf.is_grad_enabled(), "a decorated call restores the mode in force at call time"
        assert g_off() is False
        assert not lf.is_grad_enabled()
    assert f_off.__name__ == "f_off"


def test_grad_mode_decorators_without_parentheses():
    @lf.no_grad
    def f():
        return lf.is_grad_enabled()

    @lf.enable_grad
    def g():
        return lf.is_grad_enabled()

    assert f() is False and lf.is_grad_enabled()
    with lf.no_grad():
        assert g() is True
        assert not lf.is_grad_enabled()


def test_recursive_decorated_function_restores_the_mode():
    @lf.no_grad()
    def depth(n):
        return depth(n - 1) if n else lf.is_grad_enabled()

    assert depth(3) is False
    assert lf.is_grad_enabled()

    @lf.enable_grad()
    def depth_on(n):
        return depth_on(n - 1) if n else lf.is_grad_enabled()

    with lf.no_grad():
        assert depth_on(2) is True
        assert not lf.is_grad_enabled()
    assert lf.is_grad_enabled()


# --------------------------------------------------------------------------- lf.autograd.grad


def test_autograd_grad_matches_jax_and_leaves_dot_grad_alone():
    x, w = _t(X0), _t(W0)
    gx, gw = lf.autograd.grad(_lf_f(x, w), (x, w))
    rx, rw = jax.grad(_jnp_f, argnums=(0, 1))(X0, W0)
    _close(gx.numpy(), rx)
    _close(gw.numpy(), rw)
    assert x.grad is None and w.grad is None
    assert not gx.requires_grad


def test_autograd_grad_single_input_returns_a_one_tuple():
    x = _t(X0)
    res = lf.autograd.grad((x * x).sum(), x)
    assert isinstance(res, tuple) and len(res) == 1
    _close(res[0].numpy(), 2 * X0)


def test_autograd_grad_with_grad_outputs_and_several_outputs():
    x = _t(X0)
    y1, y2 = lf.sin(x), (x * x).sum(dim=0)
    g1, g2 = RNG.standard_normal(X0.shape), RNG.standard_normal(4)
    (gx,) = lf.autograd.grad([y1, y2], [x], grad_outputs=[lf.tensor(g1), lf.tensor(g2)])
    _, pull = jax.vjp(lambda x: (jnp.sin(x), (x * x).sum(axis=0)), X0)
    _close(gx.numpy(), pull((g1, g2))[0])


def test_autograd_grad_retain_graph():
    x = _t(X0)
    y = (lf.tanh(x) ** 3).sum()
    (g1,) = lf.autograd.grad(y, x, retain_graph=True)
    (g2,) = lf.autograd.grad(y, x)
    _close(g1.numpy(), g2.numpy(), rtol=0, atol=0)
    _close(g1.numpy(), jax.grad(lambda x: (jnp.tanh(x) ** 3).sum())(X0))
    with pytest.raises(lf.AutogradError, match="second time"):
        lf.autograd.grad(y, x)


def test_autograd_grad_unused_input():
    x, w = _t(X0), _t(W0)
    y = (x * 2.0).sum()
    with pytest.raises(lf.AutogradError, match="allow_unused"):
        lf.autograd.grad(y, [x, w], retain_graph=True)
    gx, gw = lf.autograd.grad(y, [x, w], allow_unused=True)
    assert gw is None
    _close(gx.numpy(), np.full(X0.shape, 2.0))


def test_autograd_grad_with_respect_to_an_intermediate_and_a_leaf():
    x = _t(XD)
    h = x * x
    gh, gx = lf.autograd.grad(lf.sin(h).sum(), [h, x])
    _close(gh.numpy(), np.cos(XD * XD))
    _close(gx.numpy(), jax.grad(lambda x: jnp.sin(x * x).sum())(XD))
    assert h.grad is None and x.grad is None


def test_autograd_backward_function_with_several_roots():
    x = _t(X0)
    y1, y2 = lf.sin(x), (x * x).sum(dim=1)
    g1, g2 = RNG.standard_normal(X0.shape), RNG.standard_normal(3)
    lf.autograd.backward([y1, y2], [lf.tensor(g1), lf.tensor(g2)])
    _, pull = jax.vjp(lambda x: (jnp.sin(x), (x * x).sum(axis=1)), X0)
    _close(x.grad.numpy(), pull((g1, g2))[0])


def test_autograd_grad_of_input_not_requiring_grad_raises():
    x = _t(X0)
    with pytest.raises(lf.AutogradError, match="does not require grad"):
        lf.autograd.grad((x * 2.0).sum(), [x, lf.tensor(W0)])


def test_autograd_grad_non_scalar_without_grad_outputs_raises():
    x = _t(X0)
    with pytest.raises(lf.AutogradError, match="scalar"):
        lf.autograd.grad(x * 2.0, x)


def test_autograd_grad_create_graph_returns_differentiable_grads():
    x = _t(X0)
    (g,) = lf.autograd.grad((x**3).sum(), x, create_graph=True)
    assert g.requires_grad and g.grad_fn is not None
    _close(g.detach().numpy(), 3 * X0**2)
    g.sum().backward()
    _close(x.grad.numpy(), 6 * X0)


# --------------------------------------------------------------------------- multi-output ops

D0 = np.array([[0.5, -1.25, 2.0, 0.75], [3.5, 0.25, -0.5, 1.5], [-2.0, 1.0, 0.125, 2.5]])  # no ties

MULTI_CASES = [
    ("max dim values", lambda x: (x.max(dim=1)[0] ** 2).sum(), lambda x: (x.max(axis=1) ** 2).sum()),
    (
        "min dim values keepdim",
        lambda x: (x.min(dim=0, keepdim=True)[0] * x).sum(),
        lambda x: (x.min(axis=0, keepdims=True) * x).sum(),
    ),
    (
        "sort values, first column",
        lambda x: (x.sort(dim=1)[0][:, 0] * 3.0).sum(),
        lambda x: (jnp.sort(x, axis=1)[:, 0] * 3.0).sum(),
    ),
    (
        "sort descending, indices unused",
        lambda x: (x.sort(dim=0, descending=True)[0][0] ** 2).sum(),
        lambda x: (jnp.sort(x, axis=0)[::-1][0] ** 2).sum(),
    ),
    (
        "topk values, second",
        lambda x: (x.topk(2, dim=1)[0][:, 1] * x[:, 0]).sum(),
        lambda x: (jax.lax.top_k(x, 2)[0][:, 1] * x[:, 0]).sum(),
    ),
    ("split, one piece", lambda x: (x.split([1, 3], dim=1)[1] ** 2).sum(), lambda x: (x[:, 1:] ** 2).sum()),
    ("split equal, two of three pieces", lambda x: _two_of(x.split(1, dim=0)), lambda x: (jnp.sin(x[0]) * x[2]).sum()),
    ("chunk, last", lambda x: (lf.exp(x.chunk(2, dim=1)[1])).sum(), lambda x: jnp.exp(x[:, 2:]).sum()),
    ("unbind, middle", lambda x: (x.unbind(0)[1] ** 3).sum(), lambda x: (x[1] ** 3).sum()),
    ("unbind, two outputs reused", lambda x: _unbind_two(x), lambda x: (x[:, 0] * x[:, 3] + x[:, 0]).sum()),
]


def _two_of(parts):
    return (lf.sin(parts[0]) * parts[2]).sum()


def _unbind_two(x):
    cols = x.unbind(1)
    return (cols[0] * cols[3] + cols[0]).sum()


@pytest.mark.parametrize("name,lf_fn,jnp_fn", MULTI_CASES, ids=[c[0] for c in MULTI_CASES])
def test_multi_output_ops_backprop_when_only_some_outputs_are_used(name, lf_fn, jnp_fn):
    x = _t(D0)
    loss = lf_fn(x)
    loss.backward()
    _close(loss.item(), jnp_fn(D0))
    _close(x.grad.numpy(), jax.grad(jnp_fn)(D0))


# --------------------------------------------------------------------------- double backward

ELEMENTWISE = [
    ("mul", lambda x: x * x * 1.5, lambda x: x * x * 1.5),
    ("div", lambda x: 1.0 / (x + 2.0), lambda x: 1.0 / (x + 2.0)),
    ("add/sub", lambda x: (x + 1.0) * (x - 3.0), lambda x: (x + 1.0) * (x - 3.0)),
    ("pow", lambda x: x**3, lambda x: x**3),
    ("exp", lambda x: lf.exp(x), jnp.exp),
    ("log", lambda x: lf.log(x + 2.0), lambda x: jnp.log(x + 2.0)),
    ("sqrt", lambda x: lf.sqrt(x + 2.0), lambda x: jnp.sqrt(x + 2.0)),
    ("sin*cos", lambda x: lf.sin(x) * lf.cos(x), lambda x: jnp.sin(x) * jnp.cos(x)),
    ("tanh", lambda x: lf.tanh(x), jnp.tanh),
    ("sigmoid", lambda x: lf.sigmoid(x), jax.nn.sigmoid),
    ("softplus", lambda x: lf.softplus(x), jax.nn.softplus),
    ("gelu tanh", lambda x: lf.gelu(x, approximate="tanh"), lambda x: jax.nn.gelu(x, approximate=True)),
]

XD = np.array([-1.3, -0.4, 0.2, 0.9, 1.7])
VD = np.array([0.7, -1.1, 0.4, 2.0, -0.3])


@pytest.mark.parametrize("name,lf_fn,jnp_fn", ELEMENTWISE, ids=[c[0] for c in ELEMENTWISE])
def test_double_backward_elementwise_matches_jax(name, lf_fn, jnp_fn):
    x = _t(XD)
    v = lf.tensor(VD)
    (g,) = lf.autograd.grad(lf_fn(x).sum(), x, create_graph=True)
    _close(g.detach().numpy(), jax.grad(lambda x: jnp_fn(x).sum())(XD))
    (g * v).sum().backward()
    hvp = jax.grad(lambda x: jnp.vdot(jax.grad(lambda y: jnp_fn(y).sum())(x), VD))(XD)
    _close(x.grad.numpy(), hvp)


def test_double_backward_matmul_matches_jax():
    a0, b0 = RNG.standard_normal((3, 4)), RNG.standard_normal((4, 2))

    def jf(a, b):
        return (jnp.tanh(a @ b) ** 2).sum()

    a, b = _t(a0), _t(b0)
    ga, gb = lf.autograd.grad((lf.tanh(a @ b) ** 2).sum(), (a, b), create_graph=True)
    ((ga**2).sum() + (gb * a.sum(dim=0, keepdim=True).T).sum()).backward()

    def second(a, b):
        ra, rb = jax.grad(jf, argnums=(0, 1))(a, b)
        return (ra**2).sum() + (rb * a.sum(axis=0, keepdims=True).T).sum()

    ra, rb = jax.grad(second, argnums=(0, 1))(a0, b0)
    _close(a.grad.numpy(), ra)
    _close(b.grad.numpy(), rb)


def test_third_derivative_through_create_graph_twice():
    x = _t(XD)
    (g1,) = lf.autograd.grad((lf.sin(x) * x).sum(), x, create_graph=True)
    (g2,) = lf.autograd.grad(g1.sum(), x, create_graph=True)
    (g3,) = lf.autograd.grad(g2.sum(), x)

    def f(x):
        return (jnp.sin(x) * x).sum()

    d2 = jax.grad(lambda x: jax.grad(f)(x).sum())
    d3 = jax.grad(lambda x: d2(x).sum())
    _close(g2.detach().numpy(), d2(XD))
    _close(g3.numpy(), d3(XD))


def test_backward_create_graph_accumulates_differentiable_grad():
    x = _t(XD)
    (x**3).sum().backward(create_graph=True)
    g = x.grad
    assert g.requires_grad
    _close(g.detach().numpy(), 3 * XD**2)
    (gg,) = lf.autograd.grad(g.sum(), x)
    _close(gg.numpy(), 6 * XD)


# --------------------------------------------------------------------------- grad_fn names

import torch

GRAD_FN_CASES = [
    ("mul", lambda m, x: x * 2.0),
    ("add", lambda m, x: x + x),
    ("sub", lambda m, x: x - 1.0),
    ("div", lambda m, x: x / 3.0),
    ("sum", lambda m, x: x.sum()),
    ("mean", lambda m, x: x.mean()),
    ("exp", lambda m, x: m.exp(x)),
    ("tanh", lambda m, x: m.tanh(x)),
    ("sigmoid", lambda m, x: m.sigmoid(x)),
    ("relu", lambda m, x: m.relu(x)),
    ("pow", lambda m, x: x**2),
    ("neg", lambda m, x: -x),
    ("cat", lambda m, x: m.cat([x, x])),
    ("expand", lambda m, x: x[None].expand(2, 3, 4)),
    ("permute", lambda m, x: x.permute(1, 0)),
    ("softmax", lambda m, x: m.softmax(x, 1)),
    ("sort", lambda m, x: x.sort(1)[0]),
    ("topk", lambda m, x: x.topk(2)[0]),
    ("split", lambda m, x: x.split(1)[0]),
    ("where", lambda m, x: m.where(x > 1, x, x * 0.0)),
    ("abs", lambda m, x: x.abs()),
    ("log_softmax", lambda m, x: m.log_softmax(x, 1)),
    ("sqrt", lambda m, x: x.sqrt()),
]


@pytest.mark.parametrize("name,fn", GRAD_FN_CASES, ids=[c[0] for c in GRAD_FN_CASES])
def test_grad_fn_names_match_torch(name, fn):
    y = fn(lf, _t(X0))
    ty = fn(torch, torch.tensor(X0, requires_grad=True))
    assert y.grad_fn.name() == ty.grad_fn.name()
    assert f"grad_fn=<{ty.grad_fn.name()}>" in repr(y)


def test_grad_fn_names_have_torch_form_and_leaves_have_none():
    x = _t(X0)
    assert x.grad_fn is None and lf.tensor(X0).grad_fn is None
    for y in (
        x @ lf.tensor(W0),
        x[0],
        x.view(12),
        x.t(),
        x.unsqueeze(0),
        x.clone(),
        x.float(),
        x.max(dim=1)[0],
        x.unbind(0)[1],
        lf.stack([x, x]),
        x.cumsum(0),
        x.clamp(0.5, 1.0),
    ):
        assert re.fullmatch(r"[A-Z][A-Za-z0-9]*Backward[0-9]", y.grad_fn.name()), y.grad_fn.name()


# --------------------------------------------------------------------------- pickle


@pytest.mark.parametrize("dtype", [lf.float16, lf.bfloat16, lf.float32, lf.float64])
def test_pickle_keeps_requires_grad_values_and_dtype(dtype):
    w = lf.tensor(X0, dtype=dtype, requires_grad=True)
    w2 = pickle.loads(pickle.dumps(w))
    assert w2.requires_grad and w2.is_leaf and w2.grad_fn is None and w2.grad is None
    assert w2.dtype is dtype and w2.shape == w.shape
    np.testing.assert_array_equal(np.asarray(w2.float().detach()), np.asarray(w.float().detach()))
    (w2.float() * 2.0).sum().backward()  # a usable leaf
    np.testing.assert_array_equal(w2.grad.float().numpy(), np.full(X0.shape, 2.0, np.float32))


def test_pickle_of_non_leaf_gives_a_leaf_requiring_grad_like_torch():
    h = _t(X0) * 2.0
    h2 = pickle.loads(pickle.dumps(h))
    th = pickle.loads(pickle.dumps(torch.tensor(X0, requires_grad=True) * 2.0))
    assert (h2.requires_grad, h2.is_leaf) == (th.requires_grad, th.is_leaf)
    _close(h2.detach().numpy(), 2 * X0, rtol=0, atol=0)


def test_pickle_of_plain_and_integer_tensors():
    for t in (lf.tensor(X0), lf.tensor(np.arange(5)), lf.tensor([True, False]), lf.tensor(3.5)):
        t2 = pickle.loads(pickle.dumps(t))
        assert not t2.requires_grad and t2.dtype is t.dtype and t2.shape == t.shape
        np.testing.assert_array_equal(t2.numpy(), t.numpy())


def test_pickle_dtype_singletons_and_devices():
    for d in (
        lf.float16,
        lf.bfloat16,
        lf.float32,
        lf.float64,
        lf.int8,
        lf.int16,
        lf.int32,
        lf.int64,
        lf.uint8,
        lf.bool,
        lf.long,
        lf.half,
    ):
        assert pickle.loads(pickle.dumps(d)) is d
    for dev in (lf.device("cpu"), lf.device("cpu:0")):
        back = pickle.loads(pickle.dumps(dev))
        assert back == dev and str(back) == str(dev) and back.type == "cpu"
    assert pickle.loads(pickle.dumps(lf.tensor(X0).device)) == lf.device("cpu")
