"""torch's type promotion and broadcasting, checked against torch itself (the test-only parity oracle).

The promotion rules are exercised two ways: ``lf.result_type`` / ``lf.promote_types`` over many generated
operand kinds (no compilation, so hypothesis can try many), and real ops (add, mul, div, where, maximum, eq,
in-place add) on a smaller sample, whose result dtypes and values must equal torch's.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import mutually_broadcastable_shapes

import lazyflow as lf

DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64"]
LF = {n: getattr(lf, n) for n in DTYPES}
TH = {n: getattr(torch, n) for n in DTYPES}


def _name(d) -> str:
    return str(d).rsplit(".", 1)[-1]


# ---------------------------------------------------------------- operands: tensors of any dtype/rank, or scalars
@st.composite
def operand(draw, allow_scalar=True):
    """``("t", dtype name, ndim, values)`` or ``("s", python value)``; values are small and exact in every dtype."""
    if allow_scalar and draw(st.booleans()):
        kind = draw(st.sampled_from(["bool", "int", "float"]))
        v = {"bool": st.booleans(), "int": st.integers(0, 3), "float": st.sampled_from([0.5, 2.0, 1.25])}[kind]
        return ("s", draw(v))
    name = draw(st.sampled_from(DTYPES))
    ndim = draw(st.sampled_from([0, 1, 2]))
    lo = 0 if name in ("bool", "uint8") else -3
    hi = 1 if name == "bool" else 3
    vals = draw(st.lists(st.integers(lo, hi), min_size=6, max_size=6))
    return ("t", name, ndim, vals)


def _make(o, lib):
    if o[0] == "s":
        return o[1]
    _, name, ndim, vals = o
    shape = [(), (3,), (2, 3)][ndim]
    a = np.array(vals[: int(np.prod(shape))], dtype=np.float64).reshape(shape)
    if lib is torch:
        return torch.tensor(a).to(TH[name])
    return lf.tensor(a).to(LF[name])


def _values(x):
    if isinstance(x, torch.Tensor):
        return x.to(torch.float64).numpy()
    return np.asarray(x.to(lf.float64))


def test_promote_types_matches_torch_for_every_pair():
    for a, b in itertools.product(DTYPES, DTYPES):
        assert lf.promote_types(LF[a], LF[b]) is LF[_name(torch.promote_types(TH[a], TH[b]))], (a, b)


@settings(max_examples=400, deadline=None)
@given(operand(), operand())
def test_result_type_matches_torch(a, b):
    if a[0] == "s" and b[0] == "s":
        return
    want = torch.result_type(_make(a, torch), _make(b, torch))
    assert lf.result_type(_make(a, lf), _make(b, lf)) is LF[_name(want)], (a, b)


def test_result_type_categories_and_ranks():
    i8_1d, i64_0d, f16_1d, f64_0d = (
        lf.zeros(2, dtype=lf.int8),
        lf.zeros((), dtype=lf.int64),
        lf.zeros(2, dtype=lf.float16),
        lf.zeros((), dtype=lf.float64),
    )
    assert lf.result_type(i8_1d, i64_0d) is lf.int8  # same category: the dimensioned tensor wins
    assert lf.result_type(i8_1d, f64_0d) is lf.float64  # a higher category wins, at the 0-d tensor's width
    assert lf.result_type(f16_1d, f64_0d) is lf.float16
    assert lf.result_type(i8_1d, 3.5) is lf.float32  # a float scalar brings the default float dtype
    assert lf.result_type(lf.zeros(2, dtype=lf.bool), 3) is lf.int64
    assert lf.result_type(i8_1d, 300) is lf.int8  # Python ints never widen an integer tensor
    with pytest.raises(lf.DTypeError, match="result_type"):
        lf.result_type(i8_1d, "3")


def test_default_dtype_drives_float_scalars():
    lf.set_default_dtype(lf.float64)
    try:
        assert lf.result_type(lf.zeros(2, dtype=lf.int32), 1.5) is lf.float64
        assert (lf.zeros(2, dtype=lf.int32) + 1.5).dtype is lf.float64
        assert lf.tensor([1.5]).dtype is lf.float64
    finally:
        lf.set_default_dtype(lf.float32)
    assert lf.tensor([1.5]).dtype is lf.float32
    with pytest.raises(lf.DTypeError, match="floating"):
        lf.set_default_dtype(lf.int32)


# ---------------------------------------------------------------- real ops vs torch (each example compiles kernels)
OPS = {  # operator forms, so a scalar may come first in torch too (its functions want a tensor first)
    "add": lambda m, a, b: a + b,
    "mul": lambda m, a, b: a * b,
    "div": lambda m, a, b: a / b,
    "maximum": lambda m, a, b: m.maximum(a, b),
    "eq": lambda m, a, b: a == b,
    "where": lambda m, a, b: m.where(m.ones((), dtype=m.bool), a, b),
}


def _has_zero(o) -> bool:
    if o[0] == "s":
        return not o[1]
    return 0 in o[3][: [1, 3, 6][o[2]]]


def _both(f):
    try:
        t = f(torch)
    except (RuntimeError, TypeError) as e:
        return None, e
    return t, None


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(sorted(OPS)), operand(), operand())
def test_binary_op_dtype_and_values_match_torch(op, a, b):
    fn = OPS[op]
    if a[0] == "s" and b[0] == "s":
        return
    if op == "maximum" and (a[0] == "s" or b[0] == "s"):
        return  # torch.maximum takes tensors only (lazyflow also accepts scalars)
    if op == "div" and _has_zero(b):
        return  # x / 0: inf or nan, whose signs are not part of the promotion rules
    want, err = _both(lambda m: fn(m, _make(a, m), _make(b, m)))
    if err is not None:
        with pytest.raises(lf.LazyflowError):
            fn(lf, _make(a, lf), _make(b, lf))
        return
    got = fn(lf, _make(a, lf), _make(b, lf))
    assert got.dtype is LF[_name(want.dtype)], (op, a, b)
    assert got.shape == tuple(want.shape)
    np.testing.assert_allclose(
        _values(got), _values(want), rtol=1e-2 if want.dtype in (torch.float16, torch.bfloat16) else 1e-6
    )


@settings(max_examples=40, deadline=None)
@given(operand(allow_scalar=False), operand())
def test_inplace_add_keeps_dtype_or_refuses_like_torch(a, b):
    """``a.add_(b)`` stores into a's dtype when torch can cast the result there, else raises DTypeError."""
    ta, la = _make(a, torch), _make(a, lf)
    if b[0] == "t" and b[2] > a[2]:
        b = (*b[:2], a[2], b[3])  # the result must keep a's shape
    want, err = _both(lambda m: ta.add_(_make(b, torch)))
    if err is not None:
        with pytest.raises(lf.DTypeError, match="add_"):
            la.add_(_make(b, lf))
        return
    got = la.add_(_make(b, lf))
    assert got is la and la.dtype is LF[a[1]]
    np.testing.assert_allclose(_values(la), _values(want), rtol=1e-2)


def test_can_cast_matches_torch():
    for a, b in itertools.product(DTYPES, DTYPES):
        assert lf.can_cast(LF[a], LF[b]) == torch.can_cast(TH[a], TH[b]), (a, b)


# ---------------------------------------------------------------- broadcasting
@settings(max_examples=200, deadline=None)
@given(mutually_broadcastable_shapes(num_shapes=3, min_dims=0, max_dims=4, max_side=3))
def test_broadcast_shapes_matches_torch(shapes):
    assert lf.broadcast_shapes(*shapes.input_shapes) == tuple(torch.broadcast_shapes(*shapes.input_shapes))


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(1, 3), min_size=1, max_size=3), st.lists(st.integers(2, 3), min_size=1, max_size=3))
def test_incompatible_shapes_raise_shape_error_like_torch(a, b):
    a, b = tuple(a), tuple(b)
    try:
        torch.broadcast_shapes(a, b)
    except RuntimeError:
        with pytest.raises(lf.ShapeError, match=r"broadcast"):
            lf.broadcast_shapes(a, b)
        return
    assert lf.broadcast_shapes(a, b) == tuple(torch.broadcast_shapes(a, b))


_SHAPE_PAIRS = [((2, 1, 3), (4, 1)), ((), (2, 3)), ((3,), (2, 1)), ((1, 1), (1,)), ((2, 0, 1), (3,))]


@pytest.mark.parametrize(("sa", "sb"), _SHAPE_PAIRS)
def test_op_results_broadcast_like_torch(sa, sb):
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal(sa).astype(np.float32), rng.standard_normal(sb).astype(np.float32)
    for name in ("add", "mul", "maximum", "lt", "atan2"):
        got = getattr(lf, name)(lf.tensor(a), lf.tensor(b))
        want = getattr(torch, name)(torch.tensor(a), torch.tensor(b))
        assert got.shape == tuple(want.shape), name
        np.testing.assert_allclose(_values(got), _values(want), rtol=1e-6)
    got = lf.where(lf.tensor(a) > 0, lf.tensor(a), lf.tensor(b))
    np.testing.assert_array_equal(
        got.numpy(), torch.where(torch.tensor(a) > 0, torch.tensor(a), torch.tensor(b)).numpy()
    )


def test_broadcast_error_names_the_op_and_shapes():
    with pytest.raises(lf.ShapeError) as e:
        lf.ones(2, 3) + lf.ones(4)
    msg = str(e.value)
    assert "add" in msg and "[2, 3]" in msg and "[4]" in msg
