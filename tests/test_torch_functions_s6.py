"""Issue 12, last names: ``F.grouped_mm`` and ``lf.autograd.enforce_grad_layout_policy`` against torch 2.13 (CPU).

grouped_mm: every grouping (2-D x 3-D with jagged rows, 3-D x 3-D, 2-D x 2-D with a jagged contraction, 3-D x 2-D
with jagged columns) in float32 and bfloat16, values and gradients against torch's CPU kernel, eager and under
``lf.compile``; bad inputs raise lazyflow errors of the class torch raises. (torch's kernel needs 16-byte-aligned
rows, so sizes here are multiples of 8.)
"""

from __future__ import annotations

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
