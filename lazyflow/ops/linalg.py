"""Primitives of ``lf.linalg``: factorizations and solves over the last two dims (batched), each a ``jnp.linalg``
call. Gradients are ``jax.vjp`` of the implementation (the standard matrix-calculus rules torch uses too)."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from .._core import dtypes as D
from .._core.errors import DTypeError, OpError
from .table import ValueCheck, is_tensor_desc, op


def _floating(name):
    def rule(descs, statics):
        for d in descs:
            if is_tensor_desc(d) and not d[1].is_floating_point:
                raise DTypeError(
                    f"linalg.{name}: expected a floating point tensor, got {d[1].name}; convert it with .float()"
                )
            if is_tensor_desc(d) and d[1] in (D.float16, D.bfloat16):
                raise DTypeError(
                    f"linalg.{name}: {d[1].name} is not supported (as in torch's CPU kernels); use float32 or float64"
                )
        return [None] * len(descs)

    return rule


def _not_finite(x):
    return ~jnp.all(jnp.isfinite(x))


_SINGULAR = ValueCheck(
    lambda a, *_: _not_finite(jnp.linalg.inv(a)) & jnp.all(jnp.isfinite(a)),
    OpError,
    "linalg.inv/linalg.solve: the input matrix is singular (a zero pivot in its LU factorization), so it has "
    "no inverse; use lf.linalg.pinv or lf.linalg.lstsq",
    reads=(0,),
)
_NOT_PD = ValueCheck(
    lambda a, *_: _not_finite(jnp.linalg.cholesky(a)) & jnp.all(jnp.isfinite(a)),
    OpError,
    "linalg.cholesky: the input is not positive-definite (a leading minor is not positive); "
    "check that the matrix is symmetric positive-definite",
    reads=(0,),
)


@op("linalg_inv", dtypes=_floating("inv"), check=lambda descs, statics: _SINGULAR)
def _inv(a):
    return jnp.linalg.inv(a)


def _first_bad(diag_ok):
    """torch's ``info``: 1 + the index of the first failing diagonal position, 0 when none fails (int32)."""
    n = diag_ok.shape[-1]
    first = jnp.argmin(diag_ok, axis=-1)
    return (
        jnp.where(jnp.all(diag_ok, axis=-1), 0, first + 1).astype(jnp.int32)
        if n
        else jnp.zeros(diag_ok.shape[:-1], jnp.int32)
    )


@op("linalg_inv_ex", dtypes=_floating("inv_ex"))
def _inv_ex(a):
    """The inverse with torch's ``info`` (the first zero pivot of the LU factorization), without raising."""
    lu = jax.lax.linalg.lu(a)[0] if a.shape[-1] else a
    info = _first_bad(jnp.diagonal(lu, axis1=-2, axis2=-1) != 0)
    return jnp.linalg.inv(a), info


@op("linalg_solve", static=("left",), dtypes=_floating("solve"), check=lambda descs, statics: _SINGULAR)
def _solve(a, b, *, left):
    if not left:  # X A = B  <=>  A^T X^T = B^T
        return jnp.swapaxes(jnp.linalg.solve(jnp.swapaxes(a, -1, -2), jnp.swapaxes(b, -1, -2)), -1, -2)
    if b.ndim == a.ndim - 1:  # a batch of vectors
        return jnp.linalg.solve(a, b[..., None])[..., 0]
    return jnp.linalg.solve(a, b)


@op("linalg_det", dtypes=_floating("det"))
def _det(a):
    return jnp.linalg.det(a)


@op("linalg_slogdet", dtypes=_floating("slogdet"))
def _slogdet(a):
    sign, logabs = jnp.linalg.slogdet(a)
    return sign, logabs


@op("linalg_cholesky", static=("upper",), dtypes=_floating("cholesky"), check=lambda descs, statics: _NOT_PD)
def _cholesky(a, *, upper):
    low = jnp.linalg.cholesky(a)
    return jnp.swapaxes(low, -1, -2) if upper else low


@op("linalg_cholesky_ex", static=("upper",), dtypes=_floating("cholesky_ex"))
def _cholesky_ex(a, *, upper):
    """The factor with torch's ``info`` (the order of the first leading minor that is not positive), without
    raising; where the factorization fails the factor holds NaNs (torch leaves a partial factor)."""
    low = jnp.linalg.cholesky(a)
    return (jnp.swapaxes(low, -1, -2) if upper else low), _cholesky_info(a)


def _cholesky_info(a):
    """The first pivot of an unpivoted Cholesky factorization that is not positive (1-based; 0 when none): jnp's
    factor is all NaN on failure, so the position is found with a column-by-column pass."""
    n = a.shape[-1]
    rows = jnp.arange(n)

    def body(k, carry):
        low, info = carry
        row = low[..., k, :]
        d = a[..., k, k] - jnp.sum(row * row, -1)
        info = jnp.where((info == 0) & ~(d > 0), k + 1, info)
        lkk = jnp.sqrt(jnp.where(d > 0, d, 1))
        col = (a[..., :, k] - jnp.sum(low * row[..., None, :], -1)) / lkk[..., None]
        col = jnp.where(rows == k, lkk[..., None], jnp.where(rows > k, col, 0))
        return low.at[..., :, k].set(col), info

    info = jnp.zeros(a.shape[:-2], jnp.int32)
    return jax.lax.fori_loop(0, n, body, (jnp.zeros_like(a), info))[1]


@op("linalg_qr", static=("mode",), dtypes=_floating("qr"))
def _qr(a, *, mode):
    if mode == "r":
        return jnp.zeros((0,), a.dtype), jnp.linalg.qr(a, mode="r")
    q, r = jnp.linalg.qr(a, mode=mode)
    return q, r


@op("linalg_eigh", static=("UPLO",), dtypes=_floating("eigh"))
def _eigh(a, *, UPLO):
    w, v = jnp.linalg.eigh(a, UPLO=UPLO, symmetrize_input=False)
    return w, v


@op("linalg_svd", static=("full_matrices",), dtypes=_floating("svd"))
def _svd(a, *, full_matrices):
    u, s, vh = jnp.linalg.svd(a, full_matrices=full_matrices)
    return u, s, vh


@op("linalg_svdvals", dtypes=_floating("svdvals"))
def _svdvals(a):
    return jnp.linalg.svd(a, compute_uv=False)
