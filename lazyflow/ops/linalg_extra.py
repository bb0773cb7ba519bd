"""Linear-algebra primitives beyond torch.linalg's core: the matrix exponential and triangular solves (batched over
leading dims, broadcasting them like torch)."""

from __future__ import annotations

import jax.numpy as jnp
import jax.scipy.linalg as jsl
from jax import lax

from .table import op


@op("matrix_exp", dtypes="float")
def _matrix_exp(a):
    return jsl.expm(a)


@op("triangular_solve", static=("upper", "transpose", "unitriangular"), dtypes="float")
def _triangular_solve(b, a, *, upper, transpose, unitriangular):
    batch = jnp.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    a = jnp.broadcast_to(a, batch + a.shape[-2:])
    b = jnp.broadcast_to(b, batch + b.shape[-2:])
    # torch reads only the chosen triangle: zero the other one so autodiff sees the same function
    tri = jnp.triu(a) if upper else jnp.tril(a)
    if unitriangular:
        eye = jnp.eye(a.shape[-1], dtype=a.dtype)
        tri = tri * (1 - eye) + eye
    return lax.linalg.triangular_solve(
        tri, b, left_side=True, lower=not upper, transpose_a=transpose, unit_diagonal=False
    )


@op("lu_factor", dtypes="float")
def _lu_factor(a):
    lu, piv, _ = lax.linalg.lu(a)
    return lu, (piv + 1).astype(jnp.int32)  # torch's pivots are LAPACK's: 1-based int32


@op("lu_permutation", dtypes="none", differentiable=False)
def _lu_permutation(piv):
    """The permutation matrix ``P`` of LAPACK pivots (1-based), with ``A = P L U``."""
    n = piv.shape[-1]
    perm = lax.linalg.lu_pivots_to_permutation(piv.astype(jnp.int32) - 1, n)
    return jnp.swapaxes(jnp.eye(n, dtype=jnp.float32)[perm], -1, -2)
