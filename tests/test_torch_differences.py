"""Every deliberate difference from torch's gradients at special points, written down as a test (issue 11,
section 2; the sibling of tests/test_graph_differences.py).

tests/test_special_points.py holds lazyflow to torch's gradient at kinks, ties, clamp bounds, zero vectors and
constant inputs. Where lazyflow keeps a convention of its own, the test here runs both and asserts what differs,
with the reason, so a change on either side shows up. The default is to match torch; keep this list short.
"""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import lazyflow as lf
import lazyflow.nn.functional as F

NAN, INF = math.nan, math.inf


def _grads(lib, fn, *values):
    """Forward value and gradients (cotangent of ones) of ``fn`` in lazyflow (``"lf"``) or torch, in float64."""
    if lib == "lf":
        xs = [lf.tensor(np.array(v, np.float64)).requires_grad_() for v in values]
        out = fn(*xs)
        gs = lf.autograd.grad(out, xs, lf.ones_like(out), allow_unused=True)
        return out.detach().numpy(), [np.asarray(g) for g in gs]
    xs = [torch.tensor(v, dtype=torch.float64, requires_grad=True) for v in values]
    out = fn(*xs)
    gs = torch.autograd.grad(out, xs, torch.ones_like(out), allow_unused=True)
    return out.detach().numpy(), [g.numpy() for g in gs]


def test_floor_divide_has_zero_gradients_where_torch_raises():
    """torch defines no derivative for ``floor_divide`` (``//``) but zeros for ``div(rounding_mode="floor")``, the
    same function; lazyflow gives both the zeros (a step function's derivative wherever it exists)."""
    a, b = [7.0, -3.0], [2.0, 2.0]
    with pytest.raises(RuntimeError, match="floor_divide is not implemented"):
        _grads("torch", lambda x, y: x // y, a, b)
    _, want = _grads("torch", lambda x, y: torch.div(x, y, rounding_mode="floor"), a, b)
    _, got = _grads("lf", lambda x, y: x // y, a, b)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
        np.testing.assert_array_equal(g, 0.0)


def test_scatter_multiply_is_differentiable_where_torch_raises():
    """torch's legacy ``scatter(reduce="multiply")`` has no derivative; lazyflow gives it the gradient of
    ``scatter_reduce(..., "prod")``, which computes the same product."""
    idx = [[0, 0, 2]]
    x, s = [[1.0, 2, 0, 3]], [[2.0, 0, 5]]
    with pytest.raises(RuntimeError, match="not implemented"):
        _grads("torch", lambda a, b: a.scatter(1, torch.tensor(idx), b, reduce="multiply"), x, s)
    want_out, want = _grads("torch", lambda a, b: a.scatter_reduce(1, torch.tensor(idx), b, "prod"), x, s)
    got_out, got = _grads("lf", lambda a, b: a.scatter(1, lf.tensor(idx), b, reduce="multiply"), x, s)
    np.testing.assert_array_equal(got_out, want_out)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


def test_amax_over_a_nan_shares_the_gradient_between_the_nans():
    """torch's ``max()``/``min()`` split the gradient evenly between the elements equal to the result, a NaN result
    between the NaNs; its ``amax``/``amin`` rule divides by the count of ``x == result``, which is 0 for a NaN, and
    gives the whole slice NaN. lazyflow's ``max()`` is its ``amax`` primitive, so one rule serves both: max()'s."""
    x = [[NAN, 1.0, NAN], [1.0, 2.0, 2.0]]
    _, (want_max,) = _grads("torch", lambda a: a.max(), x)
    _, (got_max,) = _grads("lf", lambda a: a.max(), x)
    np.testing.assert_array_equal(got_max, want_max)  # max(): the same
    _, (torch_amax,) = _grads("torch", lambda a: a.amax(1), x)
    _, (got_amax,) = _grads("lf", lambda a: a.amax(1), x)
    assert np.isnan(torch_amax[0]).all()
    np.testing.assert_array_equal(got_amax[0], [0.5, 0.0, 0.5])
    np.testing.assert_array_equal(got_amax[1], torch_amax[1])  # no NaN: the same


@pytest.mark.parametrize("exponent", [0.5, -0.5])
def test_half_powers_follow_ieee_pow_at_negative_zero_and_minus_infinity(exponent):
    """torch computes ``x ** 0.5`` as ``sqrt(x)`` and ``x ** -0.5`` as ``rsqrt(x)``, which keep the sign of -0.0 and
    give NaN at -inf; lazyflow's ``pow`` is IEEE ``pow`` for every exponent (+0.0 / +inf there, and the
    gradient to match). ``lf.sqrt``/``lf.rsqrt`` themselves agree with torch at these points."""
    x = [-0.0, -INF, 4.0]
    want_out, (want,) = _grads("torch", lambda a: a**exponent, x)
    got_out, (got,) = _grads("lf", lambda a: a**exponent, x)
    ieee = [0.0, INF, 2.0] if exponent > 0 else [INF, 0.0, 0.5]  # C99 pow(+-0, y), pow(-inf, y) for y = +-0.5
    np.testing.assert_array_equal(got_out, ieee)
    np.testing.assert_array_equal(np.signbit(got_out[:2]), [False, False])
    np.testing.assert_array_equal(want_out[:2], [-0.0, NAN] if exponent > 0 else [-INF, NAN])
    if exponent > 0:  # the gradient b * a**(b-1) follows: +inf / -inf at -0.0, 0 / NaN at -inf
        np.testing.assert_array_equal(got[:2], [INF, 0.0])
        np.testing.assert_array_equal(want[:2], [-INF, NAN])
    np.testing.assert_allclose(got_out[2], want_out[2], rtol=1e-15)
    np.testing.assert_allclose(got[2], want[2], rtol=1e-15)
    for fn in (lambda a: a.sqrt(), lambda a: a.rsqrt()):
        t_out, (t_g,) = _grads("torch", fn, x)
        l_out, (l_g,) = _grads("lf", fn, x)
        np.testing.assert_array_equal(l_out, t_out)
        np.testing.assert_array_equal(l_g, t_g)


def test_subnormal_numbers_are_flushed_to_zero():
    """XLA on CPU computes with subnormal numbers flushed to zero (flush-to-zero / denormals-are-zero), in eager
    and in graph mode alike; torch keeps them. lazyflow keeps XLA's mode: changing it would slow every kernel."""
    tiny = 5e-324
    got_out, (got,) = _grads("lf", lambda a: a.sqrt(), [tiny])
    want_out, (want,) = _grads("torch", lambda a: a.sqrt(), [tiny])
    assert want_out[0] > 0 and np.isfinite(want[0])
    assert got_out[0] == 0 and got[0] == INF
    assert lf.compile(lambda a: a.sqrt())(lf.tensor([tiny], dtype=lf.float64)).numpy()[0] == 0


def test_hardsigmoid_and_hardswish_at_nan_follow_their_composite():
    """lazyflow writes hardsigmoid as ``hardtanh(x + 3, 0, 6) / 6`` and hardswish as ``x * hardsigmoid(x)`` (no
    primitives of their own), so at a NaN input they pass on hardtanh's gradient (torch's: the whole gradient at
    NaN) through the composite: 1/6 and NaN, where torch's fused kernels give 0 and 1. Away from NaN, edges
    included, they equal torch's (tests/test_special_points.py)."""
    _, (want,) = _grads("torch", TF.hardsigmoid, [NAN])
    _, (got,) = _grads("lf", F.hardsigmoid, [NAN])
    assert want[0] == 0.0 and got[0] == pytest.approx(1 / 6, rel=1e-15)
    _, (want,) = _grads("torch", TF.hardswish, [NAN])
    _, (got,) = _grads("lf", F.hardswish, [NAN])
    assert want[0] == 1.0 and np.isnan(got[0])


def test_hardsigmoid_gradient_is_one_sixth_exactly():
    """torch's hardsigmoid backward multiplies by 1/6 rounded to float32 even for float64 tensors (a 3e-8
    relative error); lazyflow's is 1/6 in the tensor's own precision."""
    _, (want,) = _grads("torch", TF.hardsigmoid, [0.0])
    _, (got,) = _grads("lf", F.hardsigmoid, [0.0])
    assert got[0] == 1 / 6
    assert want[0] == float(np.float32(1 / 6)) and want[0] != got[0]


def test_max_pool_window_with_several_nans_routes_to_the_first():
    """torch's max-pool kernel replaces its running maximum at every NaN, so of several NaNs in one window the
    last one is "the maximum" (index and gradient); lazyflow's window rule takes the first, as it does for tied
    numbers (where torch agrees). One NaN per window: the same (tests/test_special_points.py)."""
    x = [[[[1.0, NAN], [NAN, 1.0]]]]
    (_, t_idx) = TF.max_pool2d(torch.tensor(x, dtype=torch.float64), 2, return_indices=True)
    (_, l_idx) = F.max_pool2d(lf.tensor(x, dtype=lf.float64), 2, return_indices=True)
    assert t_idx.item() == 2 and l_idx.item() == 1
    _, (want,) = _grads("torch", lambda a: TF.max_pool2d(a, 2), x)
    _, (got,) = _grads("lf", lambda a: F.max_pool2d(a, 2), x)
    np.testing.assert_array_equal(want.reshape(-1), [0, 0, 1, 0])
    np.testing.assert_array_equal(got.reshape(-1), [0, 1, 0, 0])
