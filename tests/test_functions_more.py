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


# ---------------------------------------------------------------- grids, products, differences
def _np(x):
    return np.asarray(x)


def _same(got, want, rtol=1e-6, atol=1e-7):
    want = want.detach() if isinstance(want, torch.Tensor) else want
    assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1], (got.dtype, want.dtype)
    assert tuple(got.shape) == tuple(want.shape), (got.shape, want.shape)
    np.testing.assert_allclose(_np(got), want.numpy(), rtol=rtol, atol=atol)


def _grids(a, b, c):
    return (
        *lf.meshgrid(a, b, indexing="ij"),
        *lf.meshgrid([a, b, c], indexing="xy"),
        lf.cartesian_prod(a, b, c),
        lf.combinations(a),
        lf.combinations(b, 3, with_replacement=True),
        lf.block_diag(a.reshape(1, 2), b, c.reshape(1, 1).long()),
        lf.kron(a, b.reshape(3, 1)),
        a.kron(a),
    )


@pytest.mark.parametrize("mode", MODES)
def test_grids_and_products_match_torch(mode):
    a, b, c = np.array([1.0, 2.0]), np.array([3.0, -4.0, 5.0]), np.array([7.0])
    got = run(mode, _grids, lf.tensor(a), lf.tensor(b), lf.tensor(c))
    ta, tb, tc = torch.tensor(a), torch.tensor(b), torch.tensor(c)
    want = (
        *torch.meshgrid(ta, tb, indexing="ij"),
        *torch.meshgrid([ta, tb, tc], indexing="xy"),
        torch.cartesian_prod(ta, tb, tc),
        torch.combinations(ta),
        torch.combinations(tb, 3, with_replacement=True),
        torch.block_diag(ta.reshape(1, 2), tb, tc.reshape(1, 1).long()),
        torch.kron(ta, tb.reshape(3, 1)),
        ta.kron(ta),
    )
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        _same(g, w)


def test_grids_edge_cases_and_indices_match_torch():
    for r, w in [(0, False), (1, False), (3, False), (2, True)]:
        _same(lf.combinations(lf.arange(2), r, w), torch.combinations(torch.arange(2), r, w))
    _same(lf.cartesian_prod(lf.tensor([1, 2])), torch.cartesian_prod(torch.tensor([1, 2])))
    _same(
        lf.kron(lf.ones(2, 1, 3), lf.arange(4).reshape(2, 2)),
        torch.kron(torch.ones(2, 1, 3), torch.arange(4).reshape(2, 2)),
    )
    _same(lf.block_diag(lf.tensor(2), lf.ones(0, 2)), torch.block_diag(torch.tensor(2), torch.ones(0, 2)))
    _same(lf.block_diag(), torch.block_diag())
    for row, col, off in [(3, 4, 1), (4, 3, -1), (0, 3, 0), (3, 3, 5), (2, 5, -3)]:
        _same(lf.tril_indices(row, col, off), torch.tril_indices(row, col, off))
        _same(lf.triu_indices(row, col, off), torch.triu_indices(row, col, off))
    _same(lf.tril_indices(3, 3, dtype=lf.int32), torch.tril_indices(3, 3, dtype=torch.int32))
    g = lf.meshgrid(lf.tensor(1.0), lf.arange(2.0))
    assert [tuple(x.shape) for x in g] == [
        tuple(x.shape) for x in torch.meshgrid(torch.tensor(1.0), torch.arange(2.0), indexing="ij")
    ]


def test_grids_bad_input():
    with pytest.raises(ValueError, match="indexing"):
        lf.meshgrid(lf.ones(2), indexing="yx")
    with pytest.raises(RuntimeError, match="0-d or 1-D"):
        lf.meshgrid(lf.ones(2, 2))
    with pytest.raises(RuntimeError, match="at least one"):
        lf.meshgrid()
    with pytest.raises(TypeError, match="must be a Tensor"):
        lf.meshgrid([1, 2])
    with pytest.raises(TypeError, match="same dtype"):
        lf.cartesian_prod(lf.ones(2), lf.arange(2))
    with pytest.raises(RuntimeError, match="1-D"):
        lf.cartesian_prod(lf.ones(2, 2))
    with pytest.raises(RuntimeError, match="1-D"):
        lf.combinations(lf.ones(2, 2))
    with pytest.raises(ValueError, match="non-negative"):
        lf.combinations(lf.ones(2), -1)
    with pytest.raises(RuntimeError, match="2 or fewer"):
        lf.block_diag(lf.ones(1, 1, 1))
    with pytest.raises(TypeError, match="int32 or int64"):
        lf.tril_indices(2, 2, dtype=lf.float32)
    with pytest.raises(ValueError, match="non-negative"):
        lf.triu_indices(-1, 2)


def _diffs(x, b):
    return (
        lf.diff(x),
        x.diff(n=2, dim=0),
        lf.diff(x, 1, 0, prepend=x[:1], append=x),
        lf.diff(x, dim=-1, append=lf.tensor(0.5)),
        lf.diff(x, n=0),
        lf.diff(x, n=5),
        lf.diff(b),
    )


@pytest.mark.parametrize("mode", MODES)
def test_diff_matches_torch_with_gradients(mode):
    a = np.array([[1.0, 4.0, 9.0, 16.0], [2.0, -1.0, 0.5, 3.0], [0.0, 0.0, 1.0, 1.0]])
    bools = np.array([True, False, False, True])
    x = lf.tensor(a, requires_grad=True)
    got = run(mode, _diffs, x, lf.tensor(bools))
    tx = torch.tensor(a, requires_grad=True)
    tb = torch.tensor(bools)
    want = (
        torch.diff(tx),
        tx.diff(n=2, dim=0),
        torch.diff(tx, 1, 0, prepend=tx[:1], append=tx),
        torch.diff(tx, dim=-1, append=torch.tensor(0.5, dtype=torch.float64).expand(3, 1)),
        torch.diff(tx, n=0),
        torch.diff(tx, n=5),
        torch.diff(tb),
    )
    for g, w in zip(got, want, strict=True):
        _same(g, w)
    w = np.random.default_rng(0).normal(size=(3, 3))
    ((got[0] * lf.tensor(w)).sum() + got[2].sum() * 2 + got[3].sum()).backward()
    ((want[0] * torch.tensor(w)).sum() + want[2].sum() * 2 + want[3].sum()).backward()
    np.testing.assert_allclose(_np(x.grad), tx.grad.numpy())


def test_diff_bad_input():
    with pytest.raises(RuntimeError, match="one-dimensional"):
        lf.diff(lf.tensor(1.0))
    with pytest.raises(ValueError, match="non-negative"):
        lf.diff(lf.ones(3), n=-1)
    with pytest.raises(IndexError):
        lf.diff(lf.ones(3), dim=1)
    with pytest.raises(RuntimeError, match="prepend"):
        lf.diff(lf.ones(2, 3), prepend=lf.ones(3, 1))


def _cdists(x1, x2):
    return (
        lf.cdist(x1, x2),
        lf.cdist(x1, x2, p=1.0),
        lf.cdist(x1, x2, p=0.0),
        lf.cdist(x1, x2, p=float("inf")),
        lf.cdist(x1, x2, 3.0, "donot_use_mm_for_euclid_dist"),
        lf.cdist(x1, x1),
    )


@pytest.mark.parametrize("mode", MODES)
def test_cdist_matches_torch_values_and_gradients(mode):
    r = np.random.default_rng(1)
    a, b = r.normal(size=(2, 4, 3)), r.normal(size=(1, 5, 3))
    a[0, 1] = b[0, 2]  # one zero distance: torch's gradient there is 0
    x1, x2 = lf.tensor(a, requires_grad=True), lf.tensor(b, requires_grad=True)
    got = run(mode, _cdists, x1, x2)
    t1, t2 = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    want = (
        torch.cdist(t1, t2),
        torch.cdist(t1, t2, p=1.0),
        torch.cdist(t1, t2, p=0.0),
        torch.cdist(t1, t2, p=float("inf")),
        torch.cdist(t1, t2, 3.0, "donot_use_mm_for_euclid_dist"),
        torch.cdist(t1, t1),
    )
    for g, w in zip(got, want, strict=True):
        _same(g, w, rtol=1e-6, atol=1e-6)  # torch's mm mode differs from the exact formula by rounding only
    ws = [r.normal(size=tuple(w.shape)) for w in want]
    sum(((g * lf.tensor(c)).sum() for g, c in zip(got[:2] + got[3:], ws[:2] + ws[3:], strict=True))).backward()
    sum(((w * torch.tensor(c)).sum() for w, c in zip(want[:2] + want[3:], ws[:2] + ws[3:], strict=True))).backward()
    np.testing.assert_allclose(_np(x1.grad), t1.grad.numpy(), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(_np(x2.grad), t2.grad.numpy(), rtol=1e-6, atol=1e-7)


def test_cdist_bad_input():
    with pytest.raises(RuntimeError, match="same number of columns"):
        lf.cdist(lf.ones(2, 3), lf.ones(2, 4))
    with pytest.raises(ValueError, match="non-negative"):
        lf.cdist(lf.ones(2, 3), lf.ones(2, 3), p=-1)
    with pytest.raises(ValueError, match="compute_mode"):
        lf.cdist(lf.ones(2, 3), lf.ones(2, 3), compute_mode="fast")
    with pytest.raises(RuntimeError, match="2-D"):
        lf.cdist(lf.ones(3), lf.ones(3))
    with pytest.raises(TypeError, match="floating"):
        lf.cdist(lf.ones(2, 3, dtype=lf.int64), lf.ones(2, 3, dtype=lf.int64))


# ---------------------------------------------------------------- search, histograms, running extrema, unique
def _searches(seq, v, seq2d, v2d, perm):
    return (
        lf.searchsorted(seq, v),
        lf.searchsorted(seq, v, right=True, out_int32=True),
        lf.searchsorted(seq, v, side="right"),
        lf.searchsorted(seq2d, v2d),
        lf.searchsorted(seq[perm], v, sorter=perm),
        lf.bucketize(v, seq),
        lf.bucketize(v, seq, right=True),
        lf.histc(v, bins=4, min=0.0, max=6.0),
        lf.histc(v, bins=3),
        v.histc(5, -1.0, 1.0),
    )


@pytest.mark.parametrize("mode", MODES)
def test_searchsorted_bucketize_histc_match_torch(mode):
    seq = np.array([1.0, 2.0, 2.0, 4.0, 6.0])
    v = np.array([[0.0, 2.0, 3.0], [6.0, 7.0, 2.0]])
    seq2d, v2d = np.array([[1.0, 3.0, 5.0], [0.0, 2.0, 4.0]]), np.array([[3.0, 6.0], [-1.0, 2.0]])
    perm = np.array([3, 0, 4, 1, 2])
    got = run(mode, _searches, lf.tensor(seq), lf.tensor(v), lf.tensor(seq2d), lf.tensor(v2d), lf.tensor(perm))
    ts, tv, tp = torch.tensor(seq), torch.tensor(v), torch.tensor(perm)
    want = (
        torch.searchsorted(ts, tv),
        torch.searchsorted(ts, tv, right=True, out_int32=True),
        torch.searchsorted(ts, tv, side="right"),
        torch.searchsorted(torch.tensor(seq2d), torch.tensor(v2d)),
        torch.searchsorted(ts[tp], tv, sorter=tp),
        torch.bucketize(tv, ts),
        torch.bucketize(tv, ts, right=True),
        torch.histc(tv, bins=4, min=0.0, max=6.0),
        torch.histc(tv, bins=3),
        tv.histc(5, -1.0, 1.0),
    )
    for g, w in zip(got, want, strict=True):
        _same(g, w)


def test_search_scalars_and_constant_histc_match_torch():
    _same(lf.searchsorted(lf.tensor([1, 3, 5]), 3), torch.searchsorted(torch.tensor([1, 3, 5]), 3))
    _same(lf.bucketize(4, lf.tensor([1, 3, 5]), right=True), torch.bucketize(4, torch.tensor([1, 3, 5]), right=True))
    _same(
        lf.searchsorted(lf.tensor([1, 3, 5]), lf.tensor([2.5])),
        torch.searchsorted(torch.tensor([1, 3, 5]), torch.tensor([2.5])),
    )
    _same(lf.histc(lf.tensor([1.0, 1.0]), bins=4), torch.histc(torch.tensor([1.0, 1.0]), bins=4))
    _same(lf.histc(lf.tensor([0.0, 1.0, 5.0]), 2, 0.0, 1.0), torch.histc(torch.tensor([0.0, 1.0, 5.0]), 2, 0.0, 1.0))
    x = np.random.default_rng(2).normal(size=200).astype(np.float32)
    _same(lf.histc(lf.tensor(x), bins=7), torch.histc(torch.tensor(x), bins=7))


def test_search_bad_input():
    s = lf.tensor([1.0, 2.0])
    with pytest.raises(ValueError, match="side"):
        lf.searchsorted(s, s, side="middle")
    with pytest.raises(ValueError, match="contradict"):
        lf.searchsorted(s, s, side="left", right=True)
    with pytest.raises(RuntimeError, match="leading"):
        lf.searchsorted(lf.ones(2, 3), lf.ones(3, 2))
    with pytest.raises(RuntimeError, match="sorter"):
        lf.searchsorted(s, s, sorter=lf.tensor([0]))
    with pytest.raises(RuntimeError, match="1-D"):
        lf.bucketize(s, lf.ones(2, 2))
    with pytest.raises(ValueError, match="bins"):
        lf.histc(s, bins=0)
    with pytest.raises(ValueError, match="larger than min"):
        lf.histc(s, min=2, max=1)
    with pytest.raises(RuntimeError, match="not implemented"):
        lf.histc(lf.tensor([1, 2]))
    with pytest.raises(RuntimeError, match="not implemented"):  # torch: NotImplementedError, a RuntimeError
        torch.histc(torch.tensor([1, 2]))


def _scans(x):
    return (*lf.cummax(x, 1), *x.cummin(0), lf.logcumsumexp(x, -1), *lf.cummax(x[0, 0], 0))


@pytest.mark.parametrize("mode", MODES)
def test_cummax_cummin_logcumsumexp_match_torch_with_gradients(mode):
    a = np.array([[1.0, 3.0, 3.0, NAN, 5.0], [2.0, -1.0, 2.0, 0.0, 7.0], [0.0, 0.0, -0.0, 4.0, 4.0]])
    x = lf.tensor(a, requires_grad=True)
    got = run(mode, _scans, x)
    tx = torch.tensor(a, requires_grad=True)
    want = (*torch.cummax(tx, 1), *tx.cummin(0), torch.logcumsumexp(tx, -1), *torch.cummax(tx[0, 0], 0))
    for g, w in zip(got, want, strict=True):
        _same(g, w)
    cot = np.random.default_rng(3).normal(size=a.shape)
    sum((g * lf.tensor(cot)).sum() for g in (got[0], got[2])).backward()
    sum((w * torch.tensor(cot)).sum() for w in (want[0], want[2])).backward()
    np.testing.assert_allclose(_np(x.grad), tx.grad.numpy())
    assert type(got[0]) is lf.Tensor and lf.cummax(lf.tensor(a), 1).indices.dtype is lf.int64
    with pytest.raises(IndexError):
        lf.cummax(lf.ones(2), 1)
    with pytest.raises(RuntimeError, match="not implemented"):
        lf.logcumsumexp(lf.tensor([1, 2]), 0)
    _same(lf.cummin(lf.tensor([3, 1, 1, 2]), 0).indices, torch.cummin(torch.tensor([3, 1, 1, 2]), 0).indices)


def test_unique_matches_torch():
    a = np.array([[3, 1, 3], [2, 1, 2], [3, 1, 3]])
    for kw in ({}, {"return_inverse": True}, {"return_counts": True}, {"return_inverse": True, "return_counts": True}):
        for dim in (None, 0, 1, -1):
            got, want = lf.unique(lf.tensor(a), dim=dim, **kw), torch.unique(torch.tensor(a), dim=dim, **kw)
            for g, w in zip(got if kw else (got,), want if kw else (want,), strict=True):
                _same(g, w)
            got = lf.unique_consecutive(lf.tensor(a), dim=dim, **kw)
            want = torch.unique_consecutive(torch.tensor(a), dim=dim, **kw)
            for g, w in zip(got if kw else (got,), want if kw else (want,), strict=True):
                _same(g, w)
    f = np.array([2.5, NAN, -1.0, 2.5, -0.0, 0.0])
    _same(lf.tensor(f).unique(), torch.tensor(f).unique())
    _same(lf.unique_consecutive(lf.tensor(f[[0, 0, 2, 2]])), torch.unique_consecutive(torch.tensor(f[[0, 0, 2, 2]])))
    _same(lf.unique(lf.tensor([True, False, True])), torch.unique(torch.tensor([True, False, True])))
    _same(lf.unique(lf.ones(0)), torch.unique(torch.ones(0)))
    _same(
        lf.tensor([2, 1, 2]).unique(sorted=False, return_counts=True)[1],
        torch.tensor([2, 1, 2]).unique(return_counts=True)[1],
    )


def test_unique_is_eager_only_and_checks_input():
    with pytest.raises(lf.GraphError, match="unique"):
        lf.compile(lambda x: lf.unique(x))(lf.ones(3))
    with pytest.raises(lf.GraphError, match="unique_consecutive"):
        lf.compile(lambda x: lf.unique_consecutive(x))(lf.ones(3))
    with pytest.raises(IndexError):
        lf.unique(lf.ones(2), dim=1)
    with pytest.raises(TypeError, match="must be a Tensor"):
        lf.unique([1, 2])
