"""lf.autograd.functional against torch.autograd.functional: the same functions, values and result structure."""

import numpy as np
import pytest
import torch
import torch.autograd.functional as TF

import lazyflow as lf
import lazyflow.autograd.functional as LF
from lazyflow._core.errors import ArgumentError, AutogradError

RNG = np.random.default_rng(0)
A = RNG.standard_normal(3)
B = RNG.standard_normal((2, 3))
V3 = RNG.standard_normal(3)
V2 = RNG.standard_normal(2)


def _t(lib, a, rg=False):
    return lib.tensor(a, dtype=lib.float64, requires_grad=rg)


def _close(a, b):
    if isinstance(b, (tuple, list)):
        assert isinstance(a, tuple) and len(a) == len(b)
        for x, y in zip(a, b):
            _close(x, y)
        return
    assert list(a.shape) == list(b.shape)
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-6, atol=1e-9)


def f_one(lib):
    return lambda x: (x.sin() * x).cumsum(0)


def f_two(lib):
    return lambda x, w: ((w @ x).tanh(), (x * x).sum())


def scalar(lib):
    return lambda x: (x.exp() * x.sin()).sum() + (x[0] * x[1]) ** 2


def scalar_two(lib):
    return lambda x, w: (w @ x).sin().sum() * x.sum()


@pytest.mark.parametrize("create_graph", [False, True])
def test_jacobian_matches_torch(create_graph):
    _close(LF.jacobian(f_one(lf), _t(lf, A), create_graph=create_graph), TF.jacobian(f_one(torch), _t(torch, A)))
    got = LF.jacobian(f_two(lf), (_t(lf, A), _t(lf, B)), create_graph=create_graph)
    _close(got, TF.jacobian(f_two(torch), (_t(torch, A), _t(torch, B))))
    assert got[0][0].requires_grad == create_graph
    _close(
        LF.jacobian(f_one(lf), _t(lf, A), vectorize=True, strategy="forward-mode"),
        TF.jacobian(f_one(torch), _t(torch, A), vectorize=True, strategy="forward-mode"),
    )


def test_hessian_matches_torch():
    _close(LF.hessian(scalar(lf), _t(lf, A)), TF.hessian(scalar(torch), _t(torch, A)))
    _close(
        LF.hessian(scalar_two(lf), (_t(lf, A), _t(lf, B))), TF.hessian(scalar_two(torch), (_t(torch, A), _t(torch, B)))
    )


def test_vjp_jvp_match_torch():
    _close(LF.vjp(f_one(lf), _t(lf, A), _t(lf, V3)), TF.vjp(f_one(torch), _t(torch, A), _t(torch, V3)))
    _close(
        LF.vjp(f_two(lf), (_t(lf, A), _t(lf, B)), (_t(lf, V2), _t(lf, 1.5))),
        TF.vjp(f_two(torch), (_t(torch, A), _t(torch, B)), (_t(torch, V2), _t(torch, 1.5))),
    )
    _close(LF.vjp(scalar(lf), _t(lf, A)), TF.vjp(scalar(torch), _t(torch, A)))
    _close(LF.jvp(f_one(lf), _t(lf, A), _t(lf, V3)), TF.jvp(f_one(torch), _t(torch, A), _t(torch, V3)))
    _close(
        LF.jvp(f_two(lf), (_t(lf, A), _t(lf, B)), (_t(lf, V3), _t(lf, B * 2))),
        TF.jvp(f_two(torch), (_t(torch, A), _t(torch, B)), (_t(torch, V3), _t(torch, B * 2))),
    )


def test_hvp_vhp_match_torch():
    for lname, tname in (("hvp", "hvp"), ("vhp", "vhp")):
        _close(
            getattr(LF, lname)(scalar(lf), _t(lf, A), _t(lf, V3)),
            getattr(TF, tname)(scalar(torch), _t(torch, A), _t(torch, V3)),
        )
        _close(
            getattr(LF, lname)(scalar_two(lf), (_t(lf, A), _t(lf, B)), (_t(lf, V3), _t(lf, B))),
            getattr(TF, tname)(scalar_two(torch), (_t(torch, A), _t(torch, B)), (_t(torch, V3), _t(torch, B))),
        )


def test_create_graph_results_are_differentiable():
    x = _t(lf, A, rg=True)
    _, g = LF.vjp(scalar(lf), x, create_graph=True)
    g.sum().backward()
    tx = _t(torch, A, rg=True)
    _, tg = TF.vjp(scalar(torch), tx, create_graph=True)
    tg.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-6)


def test_strict_and_bad_inputs_raise_like_torch():
    unused = lambda x, y: x * 2
    for lib, mod in ((lf, LF), (torch, TF)):
        args = (_t(lib, A), _t(lib, A))
        with pytest.raises(RuntimeError, match="independent"):
            mod.jacobian(unused, args, strict=True)
        j = mod.jacobian(unused, args)
        np.testing.assert_array_equal(j[1].numpy(), np.zeros((3, 3)))
        with pytest.raises(RuntimeError, match="can only be None"):
            mod.vjp(lambda x: x * 2, _t(lib, A))
        with pytest.raises(TypeError, match="Tensor or a tuple of Tensors"):
            mod.vjp(lambda x: x, [1.0, 2.0])
    with pytest.raises(AutogradError, match="Mismatch in shape"):
        LF.vjp(lambda x: x * 2, _t(lf, A), _t(lf, V2))
    with pytest.raises(AutogradError, match="single element"):
        LF.hessian(lambda x: x * 2, _t(lf, A))
    with pytest.raises(ArgumentError, match="forward-mode"):
        LF.jacobian(lambda x: x, _t(lf, A), strategy="forward-mode")
