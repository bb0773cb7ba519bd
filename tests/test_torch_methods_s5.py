"""In-place forms, Tensor-only methods, bad inputs and runtime switches of the names added for issue 12, against torch.

* every in-place ``_`` method: the same call on a copy in torch and in lazyflow leaves the same values and dtype in
  ``self`` and returns ``self``; a leaf that requires grad is refused, as torch refuses it;
* bad inputs: each raises a lazyflow error class that is a subclass of the exception torch raises for it;
* runtime switches and queries (determinism flags, threads, default device, print options, ``stride`` ...) answer as
  torch's CPU build does;
* random fills: the support and the moments of ``random_``, ``cauchy_``, ``geometric_``, ``log_normal_``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import lazyflow as lf

_R = np.random.default_rng(1)


def _pair(a):
    return lf.tensor(a), torch.tensor(a)


def _arg(v, lib):
    if isinstance(v, np.ndarray):
        return lf.tensor(v) if lib == "lf" else torch.tensor(v)
    if isinstance(v, tuple):
        return tuple(_arg(x, lib) for x in v)
    return v


F = _R.uniform(-2, 2, (3, 4))
P = _R.uniform(0.2, 0.8, (3, 4))
G = _R.uniform(1.5, 3, (3, 4))
INTS = _R.integers(-9, 10, (3, 4))
SQ = _R.uniform(-2, 2, (3, 3))

INPLACE = [
    # method, self, args
    ("acosh_", G, ()),
    ("arccosh_", G, ()),
    ("asinh_", F, ()),
    ("arcsinh_", F, ()),
    ("atanh_", P, ()),
    ("arctanh_", P, ()),
    ("erfc_", F, ()),
    ("lgamma_", G, ()),
    ("digamma_", G, ()),
    ("i0_", F, ()),
    ("sinc_", F, ()),
    ("deg2rad_", F, ()),
    ("rad2deg_", F, ()),
    ("frac_", F, ()),
    ("logit_", P, ()),
    ("logit_", P, (0.3,)),
    ("sgn_", F, ()),
    ("polygamma_", G, (2,)),
    ("mvlgamma_", G + 1, (2,)),
    ("nan_to_num_", np.array([np.nan, np.inf, -np.inf, 1.0]), (0.5, 9.0, -9.0)),
    ("xlogy_", P, (G,)),
    ("hypot_", F, (F[::-1].copy(),)),
    ("copysign_", F, (-1.0,)),
    ("nextafter_", F, (np.zeros((3, 4)),)),
    ("ldexp_", F, (np.arange(4),)),
    ("float_power_", F, (2,)),
    ("arctan2_", F, (G,)),
    ("heaviside_", np.array([-1.0, 0.0, 2.0]), (np.array([0.5, 0.5, 0.5]),)),
    ("igamma_", G, (P,)),
    ("igammac_", G, (P,)),
    ("gcd_", INTS, (np.full((3, 4), 6),)),
    ("lcm_", INTS, (np.full((3, 4), 4),)),
    ("greater_", F, (0.0,)),
    ("greater_equal_", F, (0.0,)),
    ("less_", F, (0.0,)),
    ("less_equal_", F, (0.0,)),
    ("not_equal_", INTS, (0,)),
    ("addmm_", F, (SQ, F)),
    ("addmv_", F[0].copy(), (SQ.T[:4, :3].copy() if False else F.T.copy(), F[:, 0].copy())),
    ("addr_", F, (F[:, 0].copy(), F[0].copy())),
    ("baddbmm_", np.stack([F, F]), (np.stack([SQ, SQ]), np.stack([F, F]))),
    ("addbmm_", F, (np.stack([SQ, SQ]), np.stack([F, F]))),
    ("cumsum_", F, (1,)),
    ("cumprod_", F, (0,)),
    ("renorm_", F, (2, 0, 1.0)),
    ("tril_", F, (1,)),
    ("triu_", F, (-1,)),
    ("fill_diagonal_", F, (5.0,)),
    ("fill_diagonal_", np.zeros((7, 3)), (5.0, True)),
    ("index_copy_", F, (1, np.array([3, 0]), np.ones((3, 2)))),
    ("index_fill_", F, (0, np.array([2, 0]), -1.0)),
    ("index_put_", F, ((np.array([0, 0]), np.array([1, 1])), np.array([1.0, 2.0]), True)),
    ("masked_scatter_", F, (F > 0, np.arange(12.0))),
    ("put_", F, (np.array([1, -1]), np.array([7.0, 8.0]))),
    ("scatter_reduce_", F, (1, np.array([[0, 0], [1, 1], [2, 3]]), np.ones((3, 2)), "amax")),
    ("squeeze_", F[:1].copy(), ()),
    ("unsqueeze_", F, (1,)),
    ("t_", F, ()),
    ("transpose_", F, (0, 1)),
    ("swapaxes_", F, (0, 1)),
    ("swapdims_", F, (1, 0)),
    ("resize_", F, (2, 5)),
    ("resize_", F, ((4, 3),)),
    ("resize_as_", F, (np.zeros((2, 2)),)),
]


@pytest.mark.parametrize(("name", "self_", "args"), INPLACE, ids=[f"{n}-{k}" for k, (n, *_) in enumerate(INPLACE)])
def test_inplace_matches_torch(name, self_, args):
    a, b = _pair(self_)
    ra = getattr(a, name)(*_arg(args, "lf"))
    rb = getattr(b, name)(*_arg(args, "th"))
    assert ra is a and rb is b
    assert a.dtype.name == str(b.dtype).split(".")[-1]
    assert tuple(a.shape) == tuple(b.shape)
    np.testing.assert_allclose(np.asarray(a), b.numpy(), rtol=1e-9, atol=1e-12, equal_nan=True, err_msg=name)


@pytest.mark.parametrize("name", ["acosh_", "deg2rad_", "addmm_", "tril_", "unsqueeze_", "cumsum_", "index_fill_"])
def test_inplace_on_leaf_that_requires_grad_is_refused(name):
    args = {
        "acosh_": (),
        "deg2rad_": (),
        "addmm_": (lf.ones(3, 3), lf.ones(3, 3)),
        "tril_": (),
        "unsqueeze_": (0,),
        "cumsum_": (0,),
        "index_fill_": (0, lf.tensor([0]), 1.0),
    }[name]
    x = lf.ones(3, 3, requires_grad=True) * 1.5
    x = x.detach().requires_grad_()
    with pytest.raises(lf.AutogradError, match="leaf"):
        getattr(x, name)(*args)
    with lf.no_grad():
        getattr(x, name)(*args)  # allowed without grad recording, as torch


def test_inplace_gradients_flow_like_torch():
    """Composite and shape in-place forms keep the autograd graph: gradients equal torch's."""
    a = _R.uniform(0.5, 2, (3, 4))
    x, t = lf.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    for lib, v in (("lf", x), ("th", t)):
        y = v * 1.0
        y.deg2rad_().lgamma_().unsqueeze_(0).squeeze_(0).t_().unsqueeze_(-1)
        z = y * (lf.arange(12.0, dtype=lf.float64) if lib == "lf" else torch.arange(12.0, dtype=torch.float64)).reshape(
            4, 3, 1
        )
        z.sum().backward()
    np.testing.assert_allclose(np.asarray(x.grad), t.grad.numpy(), rtol=1e-12)


def test_inplace_dtype_rule_like_torch():
    """An integer self cannot take a floating result in place (torch: RuntimeError)."""
    with pytest.raises(RuntimeError):
        torch.arange(3).deg2rad_()
    with pytest.raises(lf.DTypeError):
        lf.arange(3).deg2rad_()
    with pytest.raises(RuntimeError):
        torch.ones(3).float_power_(2)
    with pytest.raises(lf.DTypeError):
        lf.ones(3).float_power_(2)


def test_resize_grows_with_zeros():
    """torch leaves grown elements uninitialised; lazyflow fills them with zeros (as its empty does)."""
    x = lf.arange(4.0)
    assert x.resize_(2, 3) is x and x.tolist() == [[0.0, 1.0, 2.0], [3.0, 0.0, 0.0]]
    with pytest.raises(lf.ShapeError):
        x.resize_(-1)


def test_shape_inplace_refused_in_graph_mode():
    with pytest.raises(lf.GraphError, match="out-of-place"):
        lf.compile(lambda a: a.unsqueeze_(0))(lf.ones(2))


# ---------------------------------------------------------------- bad inputs: lazyflow's class, torch's built-in
X = np.zeros((3, 4))
BAD = [
    ("frexp_int", lambda L: L.frexp(L.tensor([1, 2])), lf.DTypeError),
    ("frac_int", lambda L: L.frac(L.tensor([1, 2])), lf.DTypeError),
    ("polygamma_negative", lambda L: L.polygamma(-1, L.ones(2)), lf.ValueRangeError),
    ("mvlgamma_p0", lambda L: L.mvlgamma(L.ones(2) * 3, 0), lf.ValueRangeError),
    ("heaviside_dtypes", lambda L: L.heaviside(L.ones(2), L.ones(2, dtype=L.float64)), lf.DTypeError),
    ("gcd_float", lambda L: L.gcd(L.ones(2), L.ones(2)), lf.DTypeError),
    ("positive_bool", lambda L: L.positive(L.ones(2, dtype=L.bool)), lf.DTypeError),
    ("nanmean_int", lambda L: L.nanmean(L.ones(2, dtype=L.int64)), lf.DTypeError),
    ("kthvalue_k", lambda L: L.kthvalue(L.ones(3), 4), lf.OpError),
    ("quantile_q_range", lambda L: L.quantile(L.ones(3), 1.5), lf.ValueRangeError),
    ("quantile_int", lambda L: L.quantile(L.ones(3, dtype=L.int64), 0.5), lf.DTypeError),
    ("quantile_interp", lambda L: L.quantile(L.ones(3), 0.5, interpolation="cubic"), lf.OpError),
    ("quantile_q_dtype", lambda L: L.quantile(L.ones(3), L.tensor([0.5], dtype=L.float64)), lf.DTypeError),
    ("bincount_2d", lambda L: L.bincount(L.ones(2, 2, dtype=L.int64)), lf.ShapeError),
    ("bincount_negative", lambda L: L.bincount(L.tensor([1, -1])), lf.ValueRangeError),
    ("bincount_float", lambda L: L.bincount(L.ones(2)), lf.DTypeError),
    ("histogram_bins", lambda L: L.histogram(L.ones(3), 0), lf.ValueRangeError),
    ("histogram_range", lambda L: L.histogram(L.ones(3), 3, range=(1.0, 0.0)), lf.ValueRangeError),
    ("cov_3d", lambda L: L.cov(L.ones(2, 2, 2)), lf.ShapeError),
    ("trace_1d", lambda L: L.trace(L.ones(3)), lf.ShapeError),
    ("renorm_p", lambda L: L.renorm(L.ones(2, 2), 0, 0, 1.0), lf.ValueRangeError),
    ("addmm_1d", lambda L: L.addmm(L.ones(3), L.ones(3), L.ones(3, 3)), lf.ShapeError),
    ("vdot_2d", lambda L: L.vdot(L.ones(2, 2), L.ones(2, 2)), lf.ShapeError),
    ("inner_mismatch", lambda L: L.inner(L.ones(2, 3), L.ones(2, 4)), lf.ShapeError),
    ("tensordot_mismatch", lambda L: L.tensordot(L.ones(2, 3), L.ones(4, 5), 1), lf.ShapeError),
    ("matrix_power_nonsquare", lambda L: L.matrix_power(L.ones(2, 3), 2), lf.ShapeError),
    ("matrix_exp_nonsquare", lambda L: L.matrix_exp(L.ones(2, 3)), lf.ShapeError),
    ("triangular_solve_shapes", lambda L: L.triangular_solve(L.ones(4, 2), L.ones(3, 3)), lf.ShapeError),
    ("rot90_dims", lambda L: L.rot90(L.ones(2, 2), 1, (0, 0)), lf.OpError),
    ("select_range", lambda L: L.select(L.ones(2, 3), 1, 3), lf.IndexOutOfRangeError),
    ("hsplit_indivisible", lambda L: L.hsplit(L.ones(2, 5), 2), lf.OpError),
    ("vsplit_1d", lambda L: L.vsplit(L.ones(4), 2), lf.ShapeError),
    ("dsplit_2d", lambda L: L.dsplit(L.ones(2, 4), 2), lf.ShapeError),
    ("put_counts", lambda L: L.put(L.ones(4), L.tensor([0, 1]), L.ones(3)), lf.IndexOutOfRangeError),
    ("diag_3d", lambda L: L.diag(L.ones(2, 2, 2)), lf.ShapeError),
    ("select_scatter_shape", lambda L: L.select_scatter(L.ones(3, 4), L.ones(3), 0, 0), lf.ShapeError),
    ("masked_scatter_float_mask", lambda L: L.masked_scatter(L.ones(3), L.ones(3), L.ones(3)), lf.OpError),
    ("sum_to_size", lambda L: L.ones(2, 3).sum_to_size(3, 3), lf.ShapeError),
    ("fill_diagonal_1d", lambda L: L.ones(3).fill_diagonal_(1.0), lf.ShapeError),
    ("logspace_steps", lambda L: L.logspace(0, 1, -1), lf.ValueRangeError),
    ("window_length", lambda L: L.hann_window(-1), lf.ValueRangeError),
    ("window_int_dtype", lambda L: L.hann_window(4, dtype=L.int64), lf.DTypeError),
    ("vander_2d", lambda L: L.vander(L.ones(2, 2)), lf.ShapeError),
    ("gradient_edge_order", lambda L: L.gradient(L.ones(4), edge_order=3), lf.OpError),
    ("gradient_too_short", lambda L: L.gradient(L.ones(2), edge_order=2), lf.OpError),
    ("random_bounds", lambda L: L.zeros(3).random_(5, 2), lf.ValueRangeError),
    ("geometric_p", lambda L: L.zeros(3).geometric_(1.5), lf.ValueRangeError),
    ("cauchy_int", lambda L: L.zeros(3, dtype=L.int64).cauchy_(), lf.DTypeError),
    ("deterministic_debug_mode", lambda L: L.set_deterministic_debug_mode(5), lf.ValueRangeError),
    ("adjoint_1d", lambda L: L.adjoint(L.ones(3)), lf.ShapeError),
    ("nonzero_static_size", lambda L: L.nonzero_static(L.ones(3), size=-1), lf.ValueRangeError),
]


@pytest.mark.parametrize(("id_", "call", "err"), BAD, ids=[b[0] for b in BAD])
def test_bad_input_raises_torchs_exception_kind(id_, call, err):
    with pytest.raises(Exception) as th:
        call(torch)
    with pytest.raises(err) as got:
        call(lf)
    assert isinstance(got.value, type(th.value)) or isinstance(got.value, RuntimeError) == isinstance(
        th.value, RuntimeError
    ), f"{id_}: lazyflow raised {type(got.value).__mro__}, torch {type(th.value).__name__}"
    assert str(got.value), id_


def test_value_dependent_sizes_refuse_graph_mode():
    """The README's eager-only list: bincount, and histogram without range=; nonzero_static compiles."""
    with pytest.raises(lf.GraphError):
        lf.compile(lambda x: lf.bincount(x))(lf.tensor([0, 1, 1]))
    with pytest.raises(lf.GraphError):
        lf.compile(lambda x: lf.histogram(x, 3))(lf.tensor([0.0, 1.0, 1.5]))
    h = lf.compile(lambda x: lf.histogram(x, 3, range=(0.0, 3.0)).hist)(lf.tensor([0.0, 1.0, 1.5]))
    assert h.tolist() == torch.histogram(torch.tensor([0.0, 1.0, 1.5]), 3, range=(0.0, 3.0)).hist.tolist()
    assert lf.compile(lambda x: lf.nonzero_static(x, size=2))(lf.tensor([0, 3, 4])).tolist() == [[1], [2]]


# ---------------------------------------------------------------- switches and queries
def test_runtime_switches_like_torch():
    assert lf.are_deterministic_algorithms_enabled() is torch.are_deterministic_algorithms_enabled() is False
    try:
        lf.use_deterministic_algorithms(True, warn_only=True)
        assert lf.are_deterministic_algorithms_enabled() and lf.is_deterministic_algorithms_warn_only_enabled()
        assert lf.get_deterministic_debug_mode() == 1
        lf.set_deterministic_debug_mode("error")
        assert lf.get_deterministic_debug_mode() == 2 and not lf.is_deterministic_algorithms_warn_only_enabled()
    finally:
        lf.set_deterministic_debug_mode(0)
    assert not lf.are_deterministic_algorithms_enabled()
    assert lf.is_warn_always_enabled() is torch.is_warn_always_enabled()
    lf.set_warn_always(True)
    assert lf.is_warn_always_enabled()
    lf.set_warn_always(False)
    n = lf.get_num_threads()
    assert isinstance(n, int) and n >= 1
    lf.set_num_threads(3)
    assert lf.get_num_threads() == 3
    lf.init_num_threads()
    with pytest.raises(lf.ValueRangeError):
        lf.set_num_threads(0)


def test_default_device_maps_to_jax():
    assert lf.get_default_device() == lf.device("cpu")
    try:
        lf.set_default_device("cpu")
        assert lf.get_default_device() == lf.device("cpu")
        assert lf.zeros(2).device == lf.device("cpu")
    finally:
        lf.set_default_device(None)
    if not lf.cuda.is_available():
        with pytest.raises(lf.DeviceError):
            lf.set_default_device("cuda")


def test_tensor_queries_like_torch():
    for shape in ((), (3,), (2, 3, 4), (2, 0, 3)):
        a, b = lf.zeros(shape), torch.zeros(shape)
        assert a.stride() == b.stride()
        assert a.ndimension() == b.ndimension()
        assert a.dim_order() == b.dim_order()
        for d in range(-len(shape), len(shape)):
            assert a.stride(d) == b.stride(d)
    for dt in ("float32", "int64", "uint8", "bool", "int8"):
        assert lf.zeros(2, dtype=getattr(lf, dt)).is_signed() == torch.zeros(2, dtype=getattr(torch, dt)).is_signed()
    x = lf.ones(2)
    assert x.get_device() == torch.ones(2).get_device() == -1
    assert not x.is_conj() and not x.is_neg() and not x.is_inference() and not lf.is_inference(x)
    assert lf.conj(x) is x and x.resolve_conj() is x and lf.resolve_neg(x) is x
    c = lf.conj_physical(x)
    assert c is not x and np.array_equal(np.asarray(c), np.ones(2))


def test_apply_and_map_like_torch():
    a, b = _pair(np.arange(6.0).reshape(2, 3))
    a.apply_(lambda v: v * v + 1)
    b.apply_(lambda v: v * v + 1)
    np.testing.assert_array_equal(np.asarray(a), b.numpy())
    a.map_(lf.tensor([1.0, 2.0, 3.0], dtype=lf.float64), lambda u, v: u - v)
    b.map_(torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64), lambda u, v: u - v)
    np.testing.assert_array_equal(np.asarray(a), b.numpy())


def test_set_printoptions_like_torch():
    a = np.array([[1.23456789, -2.5], [1000.0, 0.001]])
    try:
        for kw in ({"precision": 2}, {"sci_mode": False}, {"sci_mode": True, "precision": 3}, {"profile": "short"}):
            torch.set_printoptions(**kw)
            lf.set_printoptions(**kw)
            assert repr(lf.tensor(a)) == repr(torch.tensor(a)).replace("torch.", "lazyflow."), kw
        lf.set_printoptions(profile="default", threshold=5, edgeitems=1)
        torch.set_printoptions(profile="default", threshold=5, edgeitems=1)
        big = np.arange(20.0)
        assert repr(lf.tensor(big)) == repr(torch.tensor(big)).replace("torch.", "lazyflow.")
    finally:
        torch.set_printoptions(profile="default", sci_mode=None)
        lf.set_printoptions(profile="default", sci_mode=None)
    with pytest.raises(lf.ValueRangeError):
        lf.set_printoptions(profile="huge")


def test_asarray_like_torch():
    a = np.array([1.0, 2.0])
    for kw in ({}, {"dtype": lf.float32}, {"requires_grad": True}):
        tk = {k: (torch.float32 if v is lf.float32 else v) for k, v in kw.items()}
        x, t = lf.asarray(a, **kw), torch.asarray(a, **tk)
        assert x.dtype.name == str(t.dtype).split(".")[-1] and x.requires_grad == t.requires_grad
        np.testing.assert_array_equal(np.asarray(x.detach()), t.detach().numpy())
    x = lf.ones(2)
    assert lf.asarray(x) is x and torch.asarray(torch.ones(2)) is not None
    assert lf.asarray(x, copy=True) is not x
    assert lf.asarray(x, dtype=lf.float64).dtype is lf.float64
    a[0] = 9.0  # lazyflow copied at ingress: later writes to the source do not show
    assert float(lf.asarray(a, copy=None)[0]) == 9.0 and float(x[0]) == 1.0
    with pytest.raises(lf.ArgumentError):
        lf.asarray(x, dtype=lf.float64, copy=False)
    with pytest.raises(lf.ArgumentError):
        lf.asarray([1.0], copy=False)


def test_sym_helpers_and_fork_wait_like_torch():
    for name, args in [
        ("sym_float", (3,)),
        ("sym_int", (3.7,)),
        ("sym_int", (-3.7,)),
        ("sym_max", (2, 5)),
        ("sym_min", (2, 5)),
        ("sym_not", (True,)),
        ("sym_ite", (False, 1, 2)),
        ("sym_sum", ([1, 2, 3],)),
    ]:
        assert getattr(lf, name)(*args) == getattr(torch, name)(*args), name
    fut, tfut = lf.fork(lambda a, b: a * b, 3, b=4), torch.jit.fork(lambda a, b: a * b, 3, b=4)
    assert lf.wait(fut) == torch.jit.wait(tfut) == 12 and fut.done()


# ---------------------------------------------------------------- random fills
def test_random_fills_support_and_moments():
    lf.manual_seed(0)
    t = lf.zeros(20000).random_(3, 7)
    v = np.asarray(t)
    assert set(np.unique(v)) == {3.0, 4.0, 5.0, 6.0}
    assert set(np.unique(np.asarray(lf.zeros(5000, dtype=lf.int64).random_(4)))) == {0, 1, 2, 3}
    big = np.asarray(lf.zeros(1000, dtype=lf.int16).random_())
    assert big.min() >= 0 and big.max() > 1000
    g = np.asarray(lf.zeros(20000).geometric_(0.25))
    assert g.min() >= 1 and np.all(g == np.round(g)) and abs(g.mean() - 4.0) < 0.15
    c = np.asarray(lf.zeros(20000, dtype=lf.float64).cauchy_(1.0, 2.0))
    assert abs(np.median(c) - 1.0) < 0.1 and abs(np.percentile(c, 75) - 3.0) < 0.2  # quartiles at median +- sigma
    ln = np.log(np.asarray(lf.zeros(20000, dtype=lf.float64).log_normal_(0.5, 0.7)))
    assert abs(ln.mean() - 0.5) < 0.03 and abs(ln.std() - 0.7) < 0.03
    x = lf.zeros(3)
    assert x.random_(2) is x and x.cauchy_() is x and x.geometric_(0.5) is x and x.log_normal_() is x
    lf.manual_seed(5)
    first = np.asarray(lf.zeros(4).cauchy_())
    lf.manual_seed(5)
    assert np.array_equal(first, np.asarray(lf.zeros(4).cauchy_())), "fills follow the generator's seed"


def test_kaiser_window_is_i0_ratio():
    """A check independent of torch: the Kaiser window from numpy's own ``np.kaiser`` (symmetric form)."""
    np.testing.assert_allclose(
        np.asarray(lf.kaiser_window(9, False, 5.0, dtype=lf.float64)), np.kaiser(9, 5.0), rtol=1e-12
    )
    assert math.isclose(float(lf.hann_window(5, False)[2]), 1.0)


def test_gradients_where_torch_has_none():
    """The README's list: lazyflow's gradients where torch's are NaN, zero by integer rounding, or fail."""
    x = lf.tensor([1.5, -2.0, 3.0], dtype=lf.float64, requires_grad=True)
    e = lf.tensor([-2, -1, 3])
    (g,) = lf.autograd.grad(lf.ldexp(x, e).sum(), [x])
    np.testing.assert_array_equal(np.asarray(g), [0.25, 0.5, 8.0])  # d/dx x * 2**e = 2**e
    v = lf.tensor([2.0, 3.0], dtype=lf.float64, requires_grad=True)
    (gv,) = lf.autograd.grad(lf.vander(v, 3).sum(), [v])  # rows [x**2, x, 1]: d/dx = 2x + 1
    np.testing.assert_allclose(np.asarray(gv), [5.0, 7.0])
    n = lf.tensor([[math.nan, math.nan], [1.0, 3.0]], dtype=lf.float64, requires_grad=True)
    (gn,) = lf.autograd.grad(lf.nanmean(n, 1).sum(), [n])
    np.testing.assert_array_equal(np.asarray(gn), [[0.0, 0.0], [0.5, 0.5]])
    q = lf.tensor([[math.nan, 1.0], [1.0, 3.0]], dtype=lf.float64, requires_grad=True)
    (gq,) = lf.autograd.grad(lf.quantile(q, 0.5, dim=1).sum(), [q])
    np.testing.assert_array_equal(np.asarray(gq), [[0.0, 0.0], [0.5, 0.5]])


_SHAPE_IP = {"squeeze_", "unsqueeze_", "t_", "transpose_", "swapaxes_", "swapdims_", "resize_", "resize_as_"}
_GRAPH_IP = [c for c in INPLACE if c[0] not in _SHAPE_IP][::3]


def test_inplace_in_graph_mode_matches_torch():
    """A sample of the in-place forms (every third non-shape one) inside one compiled program, on clones of traced
    inputs: the values equal torch's in-place results."""
    selfs = [lf.tensor(s) for _, s, _ in _GRAPH_IP]

    def program(*xs):
        return [getattr(x.clone(), n)(*_arg(a, "lf")) for x, (n, _, a) in zip(xs, _GRAPH_IP)]

    outs = lf.compile(program)(*selfs)
    assert len(outs) >= 15
    for out, (n, s, a) in zip(outs, _GRAPH_IP):
        want = getattr(torch.tensor(s), n)(*_arg(a, "th"))
        assert out.dtype.name == str(want.dtype).split(".")[-1], n
        np.testing.assert_allclose(np.asarray(out), want.numpy(), rtol=1e-9, atol=1e-12, equal_nan=True, err_msg=n)
