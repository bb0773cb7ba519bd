"""isclose/allclose/equal/count_nonzero/queries, finfo/iinfo, and the combinatoric and search functions, against
torch 2.13: values, result dtypes, errors, eager and under lf.compile."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import lazyflow as lf
from tests._harness import MODES, run

NAN, INF = float("nan"), float("inf")


def _pair(dtype):
    a = np.array([[1.0, 2.0, NAN, INF], [-INF, 0.0, 1e-9, 100.0]])
    b = np.array([[1.0, 2.00001, NAN, INF], [INF, 1e-9, 0.0, 100.001]])
    if dtype in ("int64", "int32", "bool"):
        a, b = np.nan_to_num(a, posinf=5, neginf=-5).astype(dtype), np.nan_to_num(b, posinf=5, neginf=-3).astype(dtype)
    else:
        a, b = a.astype(dtype), b.astype(dtype)
    return a, b


def _isclose(a, b):
    return lf.isclose(a, b, rtol=1e-4, atol=1e-7, equal_nan=True), lf.isclose(a, b), a.isclose(b, 0.0, 0.0)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "bool"])
def test_isclose_matches_torch(mode, dtype):
    a, b = _pair(dtype)
    got = run(mode, _isclose, lf.tensor(a), lf.tensor(b))
    ta, tb = torch.tensor(a), torch.tensor(b)
    want = (
        torch.isclose(ta, tb, rtol=1e-4, atol=1e-7, equal_nan=True),
        torch.isclose(ta, tb),
        ta.isclose(tb, 0.0, 0.0),
    )
    for g, w in zip(got, want, strict=True):
        assert g.dtype is lf.bool_
        np.testing.assert_array_equal(np.asarray(g), w.numpy())


def test_isclose_integer_tolerance_and_broadcast():
    a, b = torch.tensor([[10, 20, 30]]), torch.tensor([[11], [12]])
    got = lf.isclose(lf.tensor(a.numpy()), lf.tensor(b.numpy()), rtol=0.1, atol=0.5)
    np.testing.assert_array_equal(np.asarray(got), torch.isclose(a, b, rtol=0.1, atol=0.5).numpy())


def test_allclose_equal_match_torch():
    for a, b in [([1.0, 2.0], [1.0, 2.0 + 1e-7]), ([1.0, NAN], [1.0, NAN]), ([1.0, 2.0], [1.0, 2.1])]:
        for kw in ({}, {"equal_nan": True}, {"rtol": 0.1}):
            want = torch.allclose(torch.tensor(a), torch.tensor(b), **kw)
            assert lf.allclose(lf.tensor(a), lf.tensor(b), **kw) is want
            assert lf.tensor(a).allclose(lf.tensor(b), **kw) is want
        assert lf.equal(lf.tensor(a), lf.tensor(b)) is torch.equal(torch.tensor(a), torch.tensor(b))
    assert lf.equal(lf.tensor([1, 2]), lf.tensor([1.0, 2.0])) is torch.equal(
        torch.tensor([1, 2]), torch.tensor([1.0, 2])
    )
    assert lf.equal(lf.tensor([1, 2]), lf.tensor([1, 2, 3])) is False
    assert lf.equal(lf.ones(2, 1), lf.ones(2)) is torch.equal(torch.ones(2, 1), torch.ones(2))
    assert lf.ones(3).equal(lf.ones(3)) is True


def test_isclose_bad_input():
    x = lf.tensor([1.0])
    with pytest.raises(lf.DTypeError, match="same dtype"):
        lf.isclose(x, lf.tensor([1]))
    with pytest.raises(RuntimeError):  # torch: RuntimeError too
        torch.isclose(torch.tensor([1.0]), torch.tensor([1]))
    with pytest.raises(ValueError, match="rtol and atol must be >= 0"):
        lf.isclose(x, x, rtol=-1)
    with pytest.raises(lf.ValueRangeError):
        lf.allclose(x, x, atol=-1e-3)
    with pytest.raises(TypeError, match="must be a Tensor"):
        lf.isclose(x, 1.0)
    with pytest.raises(TypeError, match="must be a Tensor"):
        lf.equal([1.0], x)
    with pytest.raises(lf.ShapeError):
        lf.isclose(lf.ones(2), lf.ones(3))


def test_bool_results_raise_graph_error_naming_the_op():
    def f(a, b):
        return a * 2 if lf.allclose(a, b) else a

    with pytest.raises(lf.GraphError, match="allclose"):
        lf.compile(f)(lf.ones(2), lf.ones(2))
    with pytest.raises(lf.GraphError, match="equal"):
        lf.compile(lambda a: a if lf.equal(a, a) else -a)(lf.ones(2))


@pytest.mark.parametrize("mode", MODES)
def test_count_nonzero_matches_torch(mode):
    a = np.array([[[0.0, 1.0, -0.0], [2.0, NAN, 0.0]], [[0.0, 0.0, 3.0], [1.0, 1.0, 1.0]]])

    def f(x):
        return lf.count_nonzero(x), x.count_nonzero(dim=1), lf.count_nonzero(x, (0, 2)), lf.count_nonzero(x > 0, -1)

    t = torch.tensor(a)
    want = (
        torch.count_nonzero(t),
        t.count_nonzero(dim=1),
        torch.count_nonzero(t, (0, 2)),
        torch.count_nonzero(t > 0, -1),
    )
    for g, w in zip(run(mode, f, lf.tensor(a)), want, strict=True):
        assert g.dtype is lf.int64 and g.shape == tuple(w.shape)
        np.testing.assert_array_equal(np.asarray(g), w.numpy())
    with pytest.raises(IndexError):
        lf.count_nonzero(lf.ones(2), dim=1)
    with pytest.raises(RuntimeError, match="multiple"):
        lf.count_nonzero(lf.ones(2, 2), dim=(0, 0))


def test_queries_match_torch():
    for d in ("float16", "bfloat16", "float32", "float64", "int8", "int64", "uint8", "bool"):
        x, t = lf.zeros(2, 3, dtype=getattr(lf, d)), torch.zeros(2, 3, dtype=getattr(torch, d))
        assert lf.is_floating_point(x) is torch.is_floating_point(t) is x.is_floating_point()
        assert lf.is_complex(x) is torch.is_complex(t) is x.is_complex() is False
    assert lf.is_tensor(lf.ones(1)) and lf.is_tensor(lf.nn.Parameter(lf.ones(1)))
    assert not lf.is_tensor([1.0]) and not lf.is_tensor(np.ones(1)) and not lf.is_tensor(torch.ones(1))
    assert lf.numel(lf.ones(2, 3, 4)) == torch.numel(torch.ones(2, 3, 4)) == 24 and lf.numel(lf.ones(0, 3)) == 0
    assert lf.is_nonzero(lf.tensor([0.5])) is True and lf.tensor(0).is_nonzero() is False
    with pytest.raises(RuntimeError, match="exactly one element"):
        lf.is_nonzero(lf.ones(2))
    with pytest.raises(TypeError, match="must be a Tensor"):
        lf.numel(3)
    with pytest.raises(TypeError):
        lf.is_floating_point(1.0)


@pytest.mark.parametrize("d", ["float16", "bfloat16", "float32", "float64"])
def test_finfo_matches_torch(d):
    a, b = lf.finfo(getattr(lf, d)), torch.finfo(getattr(torch, d))
    for k in ("bits", "eps", "max", "min", "tiny", "smallest_normal", "resolution", "dtype"):
        assert getattr(a, k) == getattr(b, k), k
    assert repr(a) == repr(b)


def test_finfo_iinfo_defaults_and_errors():
    assert lf.finfo().dtype == torch.finfo().dtype == "float32"
    assert lf.finfo("float64").eps == torch.finfo(torch.float64).eps
    for d in ("uint8", "int8", "int16", "int32", "int64"):
        a, b = lf.iinfo(getattr(lf, d)), torch.iinfo(getattr(torch, d))
        assert (a.bits, a.min, a.max, a.dtype, repr(a)) == (b.bits, b.min, b.max, b.dtype, repr(b))
    with pytest.raises(TypeError, match="lf.iinfo"):
        lf.finfo(lf.int32)
    with pytest.raises(TypeError, match="lf.finfo"):
        lf.iinfo(lf.float32)
    with pytest.raises(TypeError):
        lf.iinfo(lf.bool_)
    with pytest.raises(TypeError):  # torch refuses bool as well
        torch.iinfo(torch.bool)
