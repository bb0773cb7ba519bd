"""Householder QR in LAPACK's compact form: ``geqrf`` and the products of its reflectors (``orgqr``, ``ormqr``).

Written with ``jax.numpy`` reflector by reflector (a static loop over the columns): JAX's own ``geqrf`` is private
and its ``householder_product``/``ormqr`` have no derivative rules, while torch differentiates ``orgqr`` and
``ormqr``; autodiff of these loops gives those gradients. Reflector ``i`` is ``H_i = I - tau_i v_i v_i^T`` with
``v_i = (0, ..., 0, 1, a[i+1:, i])``; ``geqrf`` follows LAPACK's ``dlarfg`` (``beta = -sign(alpha) * norm``,
``tau = 0`` for a column already zero below the diagonal). Real dtypes.
"""

from __future__ import annotations

import jax.numpy as jnp

from .linalg import _floating
from .table import op

__all__: list[str] = []


def _reflector(a, i):
    """``v_i`` of the compact form ``a (..., m, k)``, shape ``(..., m)``."""
    m = a.shape[-2]
    rows = jnp.arange(m)
    col = a[..., :, i]
    return jnp.where(rows == i, 1.0, jnp.where(rows > i, col, 0.0)).astype(a.dtype)


@op("geqrf", dtypes=_floating("geqrf"), differentiable=False)
def _geqrf(a):
    m, n = a.shape[-2], a.shape[-1]
    taus = []
    rows = jnp.arange(m)
    for j in range(min(m, n)):
        x = jnp.where(rows >= j, a[..., :, j], 0.0)  # (..., m): the column from the diagonal down
        alpha = a[..., j, j]
        below = jnp.where(rows > j, x, 0.0)
        xnorm = jnp.sqrt(jnp.sum(below * below, axis=-1))
        zero = xnorm == 0
        beta = -jnp.where(alpha >= 0, 1.0, -1.0) * jnp.hypot(alpha, xnorm)
        safe_beta = jnp.where(zero, 1.0, beta)
        tau = jnp.where(zero, 0.0, (beta - alpha) / safe_beta)
        scale = jnp.where(zero, 0.0, 1.0 / jnp.where(zero, 1.0, alpha - beta))
        v = jnp.where(rows == j, 1.0, below * scale[..., None]).astype(a.dtype)  # (..., m)
        w = jnp.einsum("...m,...mn->...n", v, a)  # v^T A
        cols = jnp.arange(n)
        update = tau[..., None, None] * v[..., :, None] * w[..., None, :]
        a = a - jnp.where(cols[None, :] > j, update, 0.0)  # H_j applied to the trailing columns
        new_col = jnp.where(rows == j, jnp.where(zero, alpha, beta)[..., None], jnp.where(rows > j, v, a[..., :, j]))
        a = a.at[..., :, j].set(new_col.astype(a.dtype))
        taus.append(tau.astype(a.dtype))
    tau = jnp.stack(taus, axis=-1) if taus else jnp.zeros(a.shape[:-2] + (0,), a.dtype)
    return a, tau


def _apply_reflectors(a, tau, c, *, transpose: bool):
    """``Q @ c`` (``Q^T @ c`` when ``transpose``) for ``Q = H_0 H_1 ... H_{k-1}`` of the compact form."""
    k = tau.shape[-1]
    order = range(k) if transpose else reversed(range(k))
    for i in order:
        v = _reflector(a, i)
        w = jnp.einsum("...m,...mn->...n", v, c)
        c = c - tau[..., i, None, None] * v[..., :, None] * w[..., None, :]
    return c


@op("householder_product", dtypes=_floating("householder_product"))
def _householder_product(a, tau):
    m, n = a.shape[-2], a.shape[-1]
    eye = jnp.broadcast_to(jnp.eye(m, n, dtype=a.dtype), a.shape[:-2] + (m, n))
    return _apply_reflectors(a, tau, eye, transpose=False)


@op("ormqr", static=("left", "transpose"), dtypes=_floating("ormqr"))
def _ormqr(a, tau, c, *, left, transpose):
    if left:
        return _apply_reflectors(a, tau, c, transpose=transpose)
    # c @ op(Q) == (op(Q)^T @ c^T)^T
    ct = jnp.swapaxes(c, -1, -2)
    return jnp.swapaxes(_apply_reflectors(a, tau, ct, transpose=not transpose), -1, -2)
