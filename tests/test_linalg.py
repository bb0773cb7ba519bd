"""lf.linalg against torch.linalg 2.13: values (or, for sign-ambiguous factors, reconstructions and invariants as
torch's own tests compare them), gradients, named-tuple fields, errors; eager and under lf.compile."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import lazyflow as lf
from tests._harness import MODES, run

L, T = lf.linalg, torch.linalg


def _mats(seed=0):
    r = np.random.default_rng(seed)
    a = r.normal(size=(2, 3, 3)) + 3 * np.eye(3)  # well conditioned
    b = r.normal(size=(2, 3, 2))
    s = r.normal(size=(3, 3))
    return a, b, s @ s.T + np.eye(3)


def _close(g, w, rtol=1e-9, atol=1e-10):
    w = w.detach() if isinstance(w, torch.Tensor) else w
    assert tuple(g.shape) == tuple(w.shape), (g.shape, w.shape)
    assert str(g.dtype).split(".")[-1] == str(w.dtype).split(".")[-1], (g.dtype, w.dtype)
    np.testing.assert_allclose(np.asarray(g), w.numpy(), rtol=rtol, atol=atol)


def _same_fields(got, want):
    """The named-tuple fields of torch's return type, in torch's order."""
    assert len(got) == len(want)
    for k, name in enumerate(got._fields):
        assert getattr(want, name) is want[k], name


def _solves(a, b, spd):
    return (
        L.inv(a),
        L.solve(a, b),
        L.solve(a, b[..., 0]),
        L.solve(a[0], b[0].mT, left=False),
        L.det(a),
        *L.slogdet(a),
        L.cholesky(spd),
        L.cholesky(spd, upper=True),
        L.norm(a),
        L.norm(a, dim=(1, 2), ord="fro"),
        L.vector_norm(b, 3.0, dim=1),
        L.vector_norm(b, math.inf),
        L.matrix_norm(a, 1),
        L.matrix_norm(a, -math.inf, keepdim=True),
        L.norm(a[0], 2),
        L.matrix_norm(a, "nuc"),
        L.pinv(b),
        L.matrix_rank(b),
        L.cross(a, a.flip(1)),
        L.vecdot(a, a.flip(2), dim=1),
        L.multi_dot([b[0, :, 0], a[0], a[1], b[1]]),
        L.matmul(a, b),
    )


def _torch_solves(a, b, spd):
    return (
        T.inv(a),
        T.solve(a, b),
        T.solve(a, b[..., 0]),
        T.solve(a[0], b[0].mT, left=False),
        T.det(a),
        *T.slogdet(a),
        T.cholesky(spd),
        T.cholesky(spd, upper=True),
        T.norm(a),
        T.norm(a, dim=(1, 2), ord="fro"),
        T.vector_norm(b, 3.0, dim=1),
        T.vector_norm(b, math.inf),
        T.matrix_norm(a, 1),
        T.matrix_norm(a, -math.inf, keepdim=True),
        T.norm(a[0], 2),
        T.matrix_norm(a, "nuc"),
        T.pinv(b),
        T.matrix_rank(b),
        T.cross(a, a.flip(1)),
        T.vecdot(a, a.flip(2), dim=1),
        T.multi_dot([b[0, :, 0], a[0], a[1], b[1]]),
        T.matmul(a, b),
    )


@pytest.mark.parametrize("mode", MODES)
def test_values_and_gradients_match_torch(mode):
    a, b, spd = _mats()
    la, lb, ls = (lf.tensor(x, requires_grad=True) for x in (a, b, spd))
    got = run(mode, _solves, la, lb, ls)
    ta, tb, ts = (torch.tensor(x, requires_grad=True) for x in (a, b, spd))
    want = _torch_solves(ta, tb, ts)
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        _close(g, w, rtol=1e-8, atol=1e-9)
    r = np.random.default_rng(5)
    cots = [None if not w.dtype.is_floating_point else r.normal(size=tuple(w.shape)) for w in want]
    sum((g * lf.tensor(c)).sum() for g, c in zip(got, cots, strict=True) if c is not None).backward()
    sum((w * torch.tensor(c)).sum() for w, c in zip(want, cots, strict=True) if c is not None).backward()
    for x, t in ((la, ta), (lb, tb), (ls, ts)):
        np.testing.assert_allclose(np.asarray(x.grad), t.grad.numpy(), rtol=1e-7, atol=1e-8)


def test_factorizations_reconstruct_and_match_torch_invariants():
    r = np.random.default_rng(1)
    x = r.normal(size=(2, 4, 3))
    for mode in ("reduced", "complete"):
        q, rr = L.qr(lf.tensor(x), mode=mode)
        tq, tr = T.qr(torch.tensor(x), mode=mode)
        assert q.shape == tuple(tq.shape) and rr.shape == tuple(tr.shape)
        np.testing.assert_allclose(np.asarray(q @ rr), x, atol=1e-12)
        np.testing.assert_allclose(np.abs(np.asarray(rr)), tr.abs().numpy(), atol=1e-12)
        np.testing.assert_allclose(np.asarray(q.mT @ q), np.eye(q.shape[-1]) + 0 * np.asarray(q.mT @ q), atol=1e-12)
    q, rr = L.qr(lf.tensor(x), mode="r")
    assert q.shape == (0,) and np.allclose(np.abs(np.asarray(rr)), T.qr(torch.tensor(x), mode="r").R.abs().numpy())
    u, s, vh = L.svd(lf.tensor(x))
    tu, ts, tvh = T.svd(torch.tensor(x))
    assert (u.shape, s.shape, vh.shape) == (tuple(tu.shape), tuple(ts.shape), tuple(tvh.shape))
    _close(s, ts)
    np.testing.assert_allclose(np.asarray((u[..., :3] * s.unsqueeze(-2)) @ vh), x, atol=1e-12)
    _close(L.svdvals(lf.tensor(x)), T.svdvals(torch.tensor(x)))
    sym = x[:, :3] + x[:, :3].transpose(0, 2, 1)
    for uplo in ("L", "U"):
        skew = np.triu(sym, 1) * 5 if uplo == "L" else np.tril(sym, -1) * 5  # the other triangle is not read
        w, v = L.eigh(lf.tensor(sym + skew), UPLO=uplo)
        tw, tv = T.eigh(torch.tensor(sym + skew), UPLO=uplo)
        _close(w, tw)
        np.testing.assert_allclose(np.abs(np.asarray(v)), tv.abs().numpy(), atol=1e-10)
        _close(L.eigvalsh(lf.tensor(sym + skew), uplo), T.eigvalsh(torch.tensor(sym + skew), uplo))
    for fn in ("eigh", "svd", "qr", "slogdet"):
        _same_fields(getattr(L, fn)(lf.tensor(sym)), getattr(T, fn)(torch.tensor(sym)))


def test_lstsq_matches_torch():
    r = np.random.default_rng(2)
    a, b = r.normal(size=(5, 3)), r.normal(size=(5, 2))
    for driver in (None, "gelsd", "gelss"):
        got, want = (
            L.lstsq(lf.tensor(a), lf.tensor(b), driver=driver),
            T.lstsq(torch.tensor(a), torch.tensor(b), driver=driver),
        )
        _same_fields(got, want)
        for g, w in zip(got, want, strict=True):
            _close(g, w, rtol=1e-8, atol=1e-9)
    sq = r.normal(size=(3, 3)) + 3 * np.eye(3)
    got, want = L.lstsq(lf.tensor(sq), lf.tensor(b[:3])), T.lstsq(torch.tensor(sq), torch.tensor(b[:3]))
    for g, w in zip(got, want, strict=True):
        _close(g, w, rtol=1e-8, atol=1e-9)
    low = np.outer(r.normal(size=4), r.normal(size=3))  # rank 1
    _close(L.matrix_rank(lf.tensor(low)), T.matrix_rank(torch.tensor(low)))
    _close(L.matrix_rank(lf.tensor(low), atol=1e9), T.matrix_rank(torch.tensor(low), atol=1e9))
    _close(L.pinv(lf.tensor(low)), T.pinv(torch.tensor(low)), rtol=1e-7, atol=1e-9)


def test_singular_and_bad_inputs_raise():
    sing = lf.tensor([[1.0, 2.0], [2.0, 4.0]])
    with pytest.raises(RuntimeError, match="singular"):
        L.inv(sing)
    with pytest.raises(RuntimeError):  # torch's LinAlgError is a RuntimeError too
        T.inv(torch.tensor([[1.0, 2.0], [2.0, 4.0]]))
    with pytest.raises(RuntimeError, match="singular"):
        L.solve(sing, lf.ones(2))
    with pytest.raises(RuntimeError, match="singular"):
        lf.compile(lambda x: L.inv(x))(sing)
    with pytest.raises(RuntimeError, match="positive-definite"):
        L.cholesky(sing)
    with pytest.raises(RuntimeError, match="positive-definite"):
        lf.compile(lambda x: L.cholesky(x, upper=True))(sing)
    with pytest.raises(RuntimeError, match="square"):
        L.inv(lf.ones(2, 3))
    with pytest.raises(RuntimeError, match="at least 2"):
        L.det(lf.ones(3))
    with pytest.raises(TypeError, match="floating"):
        L.det(lf.ones(2, 2, dtype=lf.int64))
    with pytest.raises(RuntimeError, match="incompatible"):
        L.solve(lf.eye(2), lf.ones(3, 1))
    with pytest.raises(ValueError, match="mode"):
        L.qr(lf.eye(2), mode="full")
    with pytest.raises(ValueError, match="UPLO"):
        L.eigh(lf.eye(2), UPLO="X")
    with pytest.raises(ValueError, match="ord"):
        L.matrix_norm(lf.eye(2), 3)
    with pytest.raises(RuntimeError, match="1-D or 2-D"):
        L.norm(lf.ones(2, 2, 2), ord=2)
    with pytest.raises(RuntimeError, match="size 3"):
        L.cross(lf.ones(2), lf.ones(2))
    with pytest.raises(RuntimeError, match="at least 2"):
        L.multi_dot([lf.ones(2)])
    with pytest.raises(ValueError, match="driver"):
        L.lstsq(lf.eye(2), lf.ones(2, 1), driver="magic")
    with pytest.raises(RuntimeError, match="same number of rows"):
        L.lstsq(lf.eye(2), lf.ones(3, 1))


def test_inv_ex_and_cholesky_ex_info_match_torch():
    r = np.random.default_rng(4)
    s = r.normal(size=(6, 4, 4))
    mats = [
        np.array([[1.0, 2.0], [2.0, 4.0]]),
        np.array([[4.0, 2.0], [2.0, 3.0]]),
        np.array([[0.0, 1.0], [1.0, 0.0]]),
        s @ s.transpose(0, 2, 1) - 1.5 * np.eye(4),  # leading minors fail at different orders
        s @ s.transpose(0, 2, 1) + np.eye(4),
    ]
    for m in mats:
        got, want = L.cholesky_ex(lf.tensor(m)), T.cholesky_ex(torch.tensor(m))
        _same_fields(got, want)
        _close(got.info, want.info)
        ok = (want.info == 0).numpy()
        np.testing.assert_allclose(np.asarray(got.L)[ok], want.L.numpy()[ok], rtol=1e-10, atol=1e-12)
        got, want = L.inv_ex(lf.tensor(m)), T.inv_ex(torch.tensor(m))
        _same_fields(got, want)
        _close(got.info, want.info)
        ok = (want.info == 0).numpy()
        np.testing.assert_allclose(np.asarray(got.inverse)[ok], want.inverse.numpy()[ok], rtol=1e-9, atol=1e-10)
    info = lf.compile(lambda x: L.cholesky_ex(x, upper=True).info)(lf.tensor(mats[3]))
    _close(info, T.cholesky_ex(torch.tensor(mats[3]), upper=True).info)
    with pytest.raises(RuntimeError, match="positive-definite"):
        L.cholesky_ex(lf.tensor(mats[0]), check_errors=True)
    with pytest.raises(RuntimeError, match="singular"):
        L.inv_ex(lf.tensor(mats[0]), check_errors=True)
