"""Issue 12, last names, against torch 2.13 (CPU): ``F.grouped_mm``, ``lf.autograd.enforce_grad_layout_policy``,
the ``torch.*`` names that are nn.functional's (``hardshrink``, ``prelu``, ``pdist``, ``conv_tbc``, the in-place
``celu_``/``selu_``/``threshold_``/``rrelu_``...), ``index_reduce``/``Tensor.index_reduce_``, ``frombuffer`` and
``Tensor.dense_dim``/``const_data_ptr``/``module_load``.

grouped_mm: every grouping (2-D x 3-D with jagged rows, 3-D x 3-D, 2-D x 2-D with a jagged contraction, 3-D x 2-D
with jagged columns) in float32 and bfloat16, values and gradients against torch's CPU kernel, eager and under
``lf.compile``; bad inputs raise lazyflow errors of the class torch raises. (torch's kernel needs 16-byte-aligned
rows, so sizes here are multiples of 8.)
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import lazyflow as lf
import lazyflow.nn.functional as F

OFFS = np.array([8, 24, 32], np.int32)  # three groups: 8, 16 and 8 long; the last 8 of 40 outside every group


def _grouped_case(mode, rng):
    g = len(OFFS)
    shapes = {
        "2d3d": ((40, 16), (g, 16, 8)),
        "3d3d": ((g, 8, 16), (g, 16, 8)),
        "2d2d": ((8, 40), (40, 16)),
        "3d2d": ((g, 8, 16), (16, 40)),
    }[mode]
    a, b = (rng.standard_normal(s).astype(np.float32) for s in shapes)
    return a, b, None if mode == "3d3d" else OFFS


def _defined(mode, x):
    """The part torch defines: rows (2d3d) / columns (3d2d) past offs[-1] are left unset by its kernel."""
    return x[:32] if mode == "2d3d" else x[:, :32] if mode == "3d2d" else x


def _outside(mode, x):
    return x[32:] if mode == "2d3d" else x[:, 32:] if mode == "3d2d" else x[:0]


def _mask_outside(mode, cot):
    cot = cot.copy()
    if mode == "2d3d":
        cot[32:] = 0
    elif mode == "3d2d":
        cot[:, 32:] = 0
    return cot


MODES = ["2d3d", "3d3d", "2d2d", "3d2d"]


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("mode", MODES)
def test_grouped_mm_values_and_grads_match_torch(mode, dtype):
    a, b, offs = _grouped_case(mode, np.random.default_rng(0))
    td, ld = getattr(torch, dtype), getattr(lf, dtype)
    ta = torch.tensor(a).to(td).requires_grad_()
    tb = torch.tensor(b).to(td).requires_grad_()
    to = None if offs is None else torch.tensor(offs)
    tout = TF.grouped_mm(ta, tb, offs=to)
    la = lf.tensor(a).to(ld).requires_grad_()
    lb = lf.tensor(b).to(ld).requires_grad_()
    lo = None if offs is None else lf.tensor(offs)
    lout = F.grouped_mm(la, lb, offs=lo)
    assert lout.dtype is ld and tuple(lout.shape) == tuple(tout.shape)
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == "float32" else dict(rtol=1e-2, atol=1e-2)
    lv, tv = lout.detach().float().numpy(), tout.detach().float().numpy()
    np.testing.assert_allclose(_defined(mode, lv), _defined(mode, tv), **tol)
    if mode in ("2d3d", "3d2d"):
        assert not _outside(mode, lv).any()  # lazyflow's rows/columns past offs[-1] are 0
    cot = np.random.default_rng(1).standard_normal(tuple(tout.shape)).astype(np.float32)
    cot = _mask_outside(mode, cot)
    (tout.float() * torch.tensor(cot)).sum().backward()
    (lout.float() * lf.tensor(cot)).sum().backward()
    for lt, tt, which in ((la, ta, "a"), (lb, tb, "b")):
        ours, theirs = lt.grad.float().numpy(), tt.grad.float().numpy()
        # past offs[-1] the forward reads nothing, so the gradient there is 0 (ours); torch's kernel leaves those
        # entries unset (2d3d, 3d2d) or fills them (2d2d): only the part inside the groups is compared
        inside = _grad_inside(mode, which)
        np.testing.assert_allclose(ours[inside], theirs[inside], **tol)
        outside = np.ones(ours.shape, bool)
        outside[inside] = False
        assert not ours[outside].any()


def _grad_inside(mode, which):
    return {
        ("2d3d", "a"): np.s_[:32],
        ("2d2d", "a"): np.s_[:, :32],
        ("2d2d", "b"): np.s_[:32],
        ("3d2d", "b"): np.s_[:, :32],
    }.get((mode, which), np.s_[...])


@pytest.mark.parametrize("mode", MODES)
def test_grouped_mm_compiled_equals_torch(mode):
    a, b, offs = _grouped_case(mode, np.random.default_rng(2))
    expected = TF.grouped_mm(torch.tensor(a), torch.tensor(b), offs=None if offs is None else torch.tensor(offs))
    fn = lf.compile(lambda x, y, o: F.grouped_mm(x, y, offs=o))
    out = fn(lf.tensor(a), lf.tensor(b), None if offs is None else lf.tensor(offs))
    np.testing.assert_allclose(_defined(mode, out.numpy()), _defined(mode, expected.numpy()), rtol=1e-5, atol=1e-5)


def test_grouped_mm_empty_group_and_gradient_outside_groups():
    """A group of size 0 (equal offsets) contributes nothing; rows past offs[-1] get a zero gradient here."""
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((16, 8)).astype(np.float32), rng.standard_normal((3, 8, 8)).astype(np.float32)
    offs = np.array([4, 4, 12], np.int32)
    ta, la = torch.tensor(a, requires_grad=True), lf.tensor(a, requires_grad=True)
    t = TF.grouped_mm(ta, torch.tensor(b), offs=torch.tensor(offs))
    lout = F.grouped_mm(la, lf.tensor(b), offs=lf.tensor(offs))
    np.testing.assert_allclose(lout.detach().numpy()[:12], t.detach().numpy()[:12], rtol=1e-5, atol=1e-5)
    t[:12].sum().backward()
    lout.sum().backward()
    np.testing.assert_allclose(la.grad.numpy()[:12], ta.grad.numpy()[:12], rtol=1e-5, atol=1e-5)
    assert not la.grad.numpy()[12:].any()  # torch leaves these rows unset


BAD = [
    ("1-D mat_a", lambda m, a, b, o: m(a[0], b, offs=o), RuntimeError, "2 or 3d"),
    ("no offs with a 2-D operand", lambda m, a, b, o: m(a, b), RuntimeError, "offsets"),
    ("int64 offs", lambda m, a, b, o: m(a, b, offs=o.long() if hasattr(o, "long") else o), RuntimeError, "int32"),
    ("offs count != groups", lambda m, a, b, o: m(a, b, offs=o[:2]), RuntimeError, "batch sizes"),
    ("contraction mismatch", lambda m, a, b, o: m(a[:, :8], b, offs=o), RuntimeError, "contraction"),
    ("bias", lambda m, a, b, o: m(a, b, offs=o, bias=b[:, 0]), RuntimeError, "Bias not supported"),
]


@pytest.mark.parametrize("what,call,error,match", BAD, ids=[b[0] for b in BAD])
def test_grouped_mm_bad_input_raises_like_torch(what, call, error, match):
    a, b, offs = _grouped_case("2d3d", np.random.default_rng(4))
    with pytest.raises(error, match=match):
        call(TF.grouped_mm, torch.tensor(a), torch.tensor(b), torch.tensor(offs))
    lo = lf.tensor(offs)
    if what == "int64 offs":
        lo = lo.to(lf.int64)
    with pytest.raises(lf.LazyflowError, match=match):
        call(F.grouped_mm, lf.tensor(a), lf.tensor(b), lo)


def test_grouped_mm_refuses_mixed_dtypes_and_other_out_dtype_like_torch_cpu():
    a, b, offs = _grouped_case("3d3d", np.random.default_rng(5))
    with pytest.raises(RuntimeError, match="output dtype"):
        TF.grouped_mm(torch.tensor(a).bfloat16(), torch.tensor(b).bfloat16(), out_dtype=torch.float32)
    with pytest.raises(lf.DTypeError, match="output dtype"):
        F.grouped_mm(lf.tensor(a).bfloat16(), lf.tensor(b).bfloat16(), out_dtype=lf.float32)
    with pytest.raises(lf.DTypeError, match="one dtype"):
        F.grouped_mm(lf.tensor(a), lf.tensor(b).bfloat16())


# ---------------------------------------------------------------- autograd.enforce_grad_layout_policy
def _torch_flag():
    return torch._C._is_grad_layout_enforcement_enabled()


def test_enforce_grad_layout_policy_follows_torchs_flag_protocol():
    from lazyflow.autograd.grad_mode import is_grad_layout_enforced as ours

    assert ours() is _torch_flag() is True
    with lf.autograd.enforce_grad_layout_policy(False), torch.autograd.enforce_grad_layout_policy(False):
        assert ours() is _torch_flag() is False
    assert ours() is _torch_flag() is True
    for m, flag in ((lf, ours), (torch, _torch_flag)):
        seen = []

        @m.autograd.enforce_grad_layout_policy(False)
        def f(seen=seen, flag=flag):
            seen.append(flag())

        assert flag() is True  # a decorator leaves the flag alone until the call
        f()
        assert seen == [False] and flag() is True
        switch = m.autograd.enforce_grad_layout_policy(False)  # a plain call switches at once, as in torch
        assert flag() is False
        switch.__exit__(None, None, None)
        assert flag() is True


def test_enforce_grad_layout_policy_changes_no_gradient():
    """lazyflow has one dense layout: a gradient is the same with the contract relaxed (torch's, for a contiguous
    parameter, too)."""
    x = np.random.default_rng(6).standard_normal((2, 3, 4)).astype(np.float32)
    grads = []
    for enable in (True, False):
        p = lf.tensor(x, requires_grad=True)
        with lf.autograd.enforce_grad_layout_policy(enable):
            (p.permute(2, 0, 1) * 2).sum().backward()
        grads.append(p.grad.numpy())
    tp = torch.tensor(x, requires_grad=True)
    with torch.autograd.enforce_grad_layout_policy(False):
        (tp.permute(2, 0, 1) * 2).sum().backward()
    np.testing.assert_array_equal(grads[0], grads[1])
    np.testing.assert_array_equal(grads[1], tp.grad.numpy())


def test_grouped_mm_takes_sizes_torchs_kernel_refuses():
    """No 16-byte alignment rule here: odd sizes work (torch's CPU kernel refuses them), against numpy."""
    rng = np.random.default_rng(7)
    a, b = rng.standard_normal((7, 3)).astype(np.float32), rng.standard_normal((2, 3, 5)).astype(np.float32)
    offs = np.array([2, 7], np.int32)
    with pytest.raises(RuntimeError, match="16 bytes"):
        TF.grouped_mm(torch.tensor(a), torch.tensor(b), offs=torch.tensor(offs))
    out = F.grouped_mm(lf.tensor(a), lf.tensor(b), offs=lf.tensor(offs)).numpy()
    np.testing.assert_allclose(out, np.concatenate([a[:2] @ b[0], a[2:] @ b[1]]), rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------- torch.* names that are nn.functional's
def _pair(a, **kw):
    return lf.tensor(a, **kw), torch.tensor(a, **kw)


TOP = [
    ("hardshrink", lambda m, x: m.hardshrink(x, 0.5), (np.array([np.nan, 0.5, -0.5, 0.51, -2.0, 0.0]),)),
    ("prelu", lambda m, x, w: m.prelu(x, w), (np.linspace(-2, 2, 24).reshape(2, 3, 4), np.array([0.1, -0.2, 0.3]))),
    ("channel_shuffle", lambda m, x: m.channel_shuffle(x, 2), (np.arange(24.0).reshape(1, 4, 2, 3),)),
    ("cosine_similarity", lambda m, a, b: m.cosine_similarity(a, b, dim=1, eps=1e-8), (np.eye(3), np.ones((3, 3)))),
    ("pairwise_distance", lambda m, a, b: m.pairwise_distance(a, b, p=3.0, keepdim=True), (np.eye(3), np.ones(3))),
    ("pdist", lambda m, x: m.pdist(x, p=2), (np.array([[0.0, 1.0], [1.0, 2.0], [3.0, -1.0]]),)),
    (
        "conv_tbc",
        lambda m, x, w, b: m.conv_tbc(x, w, b, 1),
        (np.ones((6, 2, 3)) * 0.5, np.eye(3)[None] * 2, np.ones(3)),
    ),
    (
        "conv_transpose3d",
        lambda m, x, w: m.conv_transpose3d(x, w, stride=2, padding=1, output_padding=1),
        (np.linspace(-1, 1, 2 * 8).reshape(1, 2, 2, 2, 2), np.linspace(-1, 1, 2 * 3 * 27).reshape(2, 3, 3, 3, 3)),
    ),
]


@pytest.mark.parametrize("name,call,args", TOP, ids=[t[0] for t in TOP])
def test_top_level_names_match_torch_values_and_grads(name, call, args):
    ours = [lf.tensor(a, requires_grad=True) for a in args]
    theirs = [torch.tensor(a, requires_grad=True) for a in args]
    lo, to = call(lf, *ours), call(torch, *theirs)
    np.testing.assert_allclose(lo.detach().numpy(), to.detach().numpy(), rtol=1e-6, atol=1e-9)
    cot = np.random.default_rng(8).standard_normal(tuple(to.shape))
    (lo * lf.tensor(cot)).sum().backward()
    (to * torch.tensor(cot)).sum().backward()
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-6, atol=1e-9, err_msg=name)


INPLACE = [
    ("celu_", lambda m, x: m.celu_(x, 0.7)),
    ("selu_", lambda m, x: m.selu_(x)),
    ("threshold_", lambda m, x: m.threshold_(x, 0.1, -3.0)),
    ("rrelu_", lambda m, x: m.rrelu_(x, 0.1, 0.3, False)),
]


@pytest.mark.parametrize("name,call", INPLACE, ids=[t[0] for t in INPLACE])
def test_top_level_inplace_activations_write_into_their_input_like_torch(name, call):
    a = np.array([-2.0, -0.1, 0.0, 0.1, 0.2, 3.0])
    lx, tx = lf.tensor(a), torch.tensor(a)
    lr, tr = call(lf, lx), call(torch, tx)
    assert lr is lx and tr is tx
    np.testing.assert_allclose(lx.numpy(), tx.numpy(), rtol=1e-12)


def test_conv_tbc_refuses_wrong_ranks():
    with pytest.raises(RuntimeError):
        torch.conv_tbc(torch.ones(3, 2), torch.ones(1, 2, 2), torch.ones(2))
    with pytest.raises(lf.ShapeError, match="time, batch, channels"):
        lf.conv_tbc(lf.ones(3, 2), lf.ones(1, 2, 2), lf.ones(2))


# ---------------------------------------------------------------- index_reduce
REDUCES = ["prod", "mean", "amax", "amin"]


@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("reduce", REDUCES)
def test_index_reduce_matches_torch_values_and_grads(reduce, include_self):
    rng = np.random.default_rng(9)
    x, src = rng.standard_normal((3, 5, 2)), rng.standard_normal((3, 4, 2))
    idx = np.array([0, 4, 0, 2])  # 0 twice, 1 and 3 never
    lx, tx = lf.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    ls, ts = lf.tensor(src, requires_grad=True), torch.tensor(src, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch: "index_reduce() is in beta" (once per process)
        t = torch.index_reduce(tx, 1, torch.tensor(idx), ts, reduce, include_self=include_self)
    lout = lf.index_reduce(lx, 1, lf.tensor(idx), ls, reduce, include_self=include_self)
    np.testing.assert_allclose(lout.detach().numpy(), t.detach().numpy(), rtol=1e-12, atol=1e-12)
    cot = rng.standard_normal(x.shape)
    (lout * lf.tensor(cot)).sum().backward()
    (t * torch.tensor(cot)).sum().backward()
    np.testing.assert_allclose(lx.grad.numpy(), tx.grad.numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(ls.grad.numpy(), ts.grad.numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("reduce", REDUCES)
def test_index_reduce_inplace_on_integers_like_torch(reduce):
    rng = np.random.default_rng(10)
    x, src, idx = rng.integers(-5, 5, (5, 3)), rng.integers(-5, 5, (4, 3)), np.array([1, 1, 3, 0])
    for include_self in (True, False):
        lx, tx = lf.tensor(x), torch.tensor(x)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tx.index_reduce_(0, torch.tensor(idx), torch.tensor(src), reduce, include_self=include_self)
        assert lx.index_reduce_(0, lf.tensor(idx), lf.tensor(src), reduce, include_self=include_self) is lx
        np.testing.assert_array_equal(lx.numpy(), tx.numpy())
        assert lx.dtype is lf.int64


def test_index_reduce_compiled_equals_torch():
    x, src, idx = np.arange(6.0).reshape(3, 2), np.full((2, 2), 2.0), np.array([2, 2])
    fn = lf.compile(lambda a, i, s: lf.index_reduce(a, 0, i, s, "prod"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = torch.tensor(x).index_reduce(0, torch.tensor(idx), torch.tensor(src), "prod")
    np.testing.assert_array_equal(fn(lf.tensor(x), lf.tensor(idx), lf.tensor(src)).numpy(), t.numpy())


@pytest.mark.parametrize(
    "kwargs,error,match",
    [
        (dict(reduce="sum"), ValueError, "one of prod, mean, amax or amin"),
        (dict(idx=[7]), IndexError, "out of bounds"),
        (dict(src_rows=2), ValueError, "source"),
    ],
)
def test_index_reduce_bad_input(kwargs, error, match):
    idx = kwargs.get("idx", [1])
    src = np.ones((kwargs.get("src_rows", len(idx)), 3))
    with pytest.raises(error if error is not ValueError else (ValueError, RuntimeError)):
        torch.zeros(5, 3, dtype=torch.float64).index_reduce(
            0, torch.tensor(idx), torch.tensor(src), kwargs.get("reduce", "prod")
        )
    with pytest.raises(error, match=match):
        lf.zeros(5, 3, dtype=lf.float64).index_reduce(0, lf.tensor(idx), lf.tensor(src), kwargs.get("reduce", "prod"))


# ---------------------------------------------------------------- frombuffer and small Tensor methods
def test_frombuffer_reads_like_torch_and_copies_once():
    buf = bytearray(np.arange(6, dtype=np.float32).tobytes())
    for kw in (dict(), dict(count=2, offset=4), dict(offset=8)):
        ours = lf.frombuffer(buf, dtype=lf.float32, **kw)
        theirs = torch.frombuffer(buf, dtype=torch.float32, **kw)
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
    t = lf.frombuffer(buf, dtype=lf.int16, requires_grad=False)
    assert t.dtype is lf.int16 and t.shape == (12,)
    ours = lf.frombuffer(buf, dtype=lf.float32)
    buf[0:4] = np.float32(42).tobytes()  # torch's tensor would show this write; lazyflow copied at ingress
    assert ours[0].item() == 0.0 and torch.frombuffer(buf, dtype=torch.float32)[0].item() == 42.0
    assert lf.frombuffer(buf, dtype=lf.float32, requires_grad=True).requires_grad


@pytest.mark.parametrize(
    "data,kw",
    [
        (b"", {}),
        (b"\0" * 8, dict(count=0)),
        (b"\0" * 8, dict(offset=9)),
        (b"\0" * 8, dict(offset=2)),
        (b"\0" * 8, dict(count=3)),
    ],
)
def test_frombuffer_bad_input_raises_torchs_value_error(data, kw):
    with warnings.catch_warnings(), pytest.raises(ValueError) as theirs:
        warnings.simplefilter("ignore")
        torch.frombuffer(bytearray(data), dtype=torch.float32, **kw)
    with pytest.raises(lf.ValueRangeError) as ours:
        lf.frombuffer(bytearray(data), dtype=lf.float32, **kw)
    assert str(ours.value).split("(")[0] == str(theirs.value).split("(")[0]


def test_dense_dim_const_data_ptr_module_load_like_torch():
    for shape in ((), (3,), (2, 3, 4)):
        assert lf.zeros(shape).dense_dim() == torch.zeros(shape).dense_dim()
    t = lf.ones(3)
    assert t.const_data_ptr() == t.data_ptr()
    for m in (lf, torch):
        p, other = m.zeros(3), m.ones(3)
        loaded = p.module_load(other)
        assert loaded is not p and loaded is not other and p.tolist() == [1.0, 1.0, 1.0]
        assigned = p.module_load(m.full((3,), 2.0), assign=True)
        assert assigned.tolist() == [2.0, 2.0, 2.0] and not assigned.requires_grad


# ---------------------------------------------------------------- geqrf / orgqr / ormqr
@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (2, 4, 4), (4, 1)])
def test_geqrf_matches_torch(shape):
    a = np.random.default_rng(11).standard_normal(shape)
    ta, tt = torch.geqrf(torch.tensor(a))
    la, lt = lf.geqrf(lf.tensor(a))
    np.testing.assert_allclose(la.numpy(), ta.numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(lt.numpy(), tt.numpy(), rtol=1e-10, atol=1e-12)
    ma, mt = lf.tensor(a).geqrf()
    np.testing.assert_array_equal(ma.numpy(), la.numpy())


def test_geqrf_of_a_column_already_reduced_has_tau_zero_like_lapack():
    a = np.array([[2.0, 1.0], [0.0, 3.0], [0.0, 4.0]])
    ta, tt = torch.geqrf(torch.tensor(a))
    la, lt = lf.geqrf(lf.tensor(a))
    assert lt.numpy()[0] == tt.numpy()[0] == 0.0
    np.testing.assert_allclose(la.numpy(), ta.numpy(), rtol=1e-12, atol=1e-12)


def test_orgqr_and_ormqr_match_torch_values_and_grads():
    rng = np.random.default_rng(12)
    a = rng.standard_normal((2, 5, 3))
    ta, tt = torch.geqrf(torch.tensor(a))
    cases = [("orgqr", None, None)] + [("ormqr", left, tr) for left in (True, False) for tr in (True, False)]
    for name, left, tr in cases:
        la = lf.tensor(ta.numpy(), requires_grad=True)
        lt = lf.tensor(tt.numpy(), requires_grad=True)
        xa, xt = ta.detach().clone().requires_grad_(), tt.detach().clone().requires_grad_()
        if name == "orgqr":
            lo, to = lf.orgqr(la, lt), torch.orgqr(xa, xt)
        else:
            c = rng.standard_normal((2, 5, 4) if left else (2, 4, 5))
            lc, tc = lf.tensor(c, requires_grad=True), torch.tensor(c, requires_grad=True)
            lo, to = la.ormqr(lt, lc, left, tr), torch.ormqr(xa, xt, tc, left, tr)
        np.testing.assert_allclose(lo.detach().numpy(), to.detach().numpy(), rtol=1e-10, atol=1e-12, err_msg=name)
        cot = rng.standard_normal(tuple(to.shape))
        (lo * lf.tensor(cot)).sum().backward()
        (to * torch.tensor(cot)).sum().backward()
        np.testing.assert_allclose(la.grad.numpy(), xa.grad.numpy(), rtol=1e-8, atol=1e-10, err_msg=f"{name} {left}")
        np.testing.assert_allclose(lt.grad.numpy(), xt.grad.numpy(), rtol=1e-8, atol=1e-10, err_msg=f"{name} {left}")


def test_householder_functions_compile():
    a = np.random.default_rng(13).standard_normal((4, 3))
    ta, tt = torch.geqrf(torch.tensor(a))
    fn = lf.compile(lambda x: lf.orgqr(*lf.geqrf(x)))
    np.testing.assert_allclose(fn(lf.tensor(a)).numpy(), torch.orgqr(ta, tt).numpy(), rtol=1e-10, atol=1e-12)


def test_householder_bad_input_like_torch():
    with pytest.raises(RuntimeError):
        torch.geqrf(torch.ones(3, dtype=torch.float64))
    with pytest.raises(lf.ShapeError, match="at least 2 dimensions"):
        lf.geqrf(lf.ones(3, dtype=lf.float64))
    with pytest.raises(RuntimeError):
        torch.geqrf(torch.ones(3, 3, dtype=torch.int64))
    with pytest.raises(lf.DTypeError, match="floating point"):
        lf.geqrf(lf.ones(3, 3, dtype=lf.int64))
    a, t = lf.geqrf(lf.ones(4, 3, dtype=lf.float64))
    with pytest.raises(lf.ShapeError, match="other"):
        lf.ormqr(a, t, lf.ones(3, 2, dtype=lf.float64))
    with pytest.raises(RuntimeError):
        torch.ormqr(*torch.geqrf(torch.ones(4, 3, dtype=torch.float64)), torch.ones(3, 2, dtype=torch.float64))
    with pytest.raises(lf.ShapeError, match="tau"):
        lf.orgqr(a, lf.ones(2, 3, dtype=lf.float64))


def test_thread_safe_generator_is_none_outside_thread_workers_like_torch():
    assert lf.thread_safe_generator() is None and torch.thread_safe_generator() is None
    assert lf.rand(2, generator=lf.thread_safe_generator()).shape == (2,)  # the default generator serves it
