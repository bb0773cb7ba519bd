"""Primitives of ``lf.linalg``: factorizations and solves over the last two dims (batched), each a ``jnp.linalg``
call. Gradients are ``jax.vjp`` of the implementation (the standard matrix-calculus rules torch uses too)."""

from __future__ import annotations

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
