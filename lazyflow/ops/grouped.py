"""The grouped matrix multiply of ``F.grouped_mm`` (mixture-of-experts GEMMs with jagged groups), one record."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from .table import op

__all__: list[str] = []


def _segments(offs, length: int):
    """``mask[g, i]``: index ``i`` of the jagged dimension lies in group ``g`` (``offs[g-1] <= i < offs[g]``)."""
    ends = offs.astype(jnp.int32)
    starts = jnp.concatenate([jnp.zeros((1,), jnp.int32), ends[:-1]])
    i = jnp.arange(length, dtype=jnp.int32)
    return (i[None, :] >= starts[:, None]) & (i[None, :] < ends[:, None])


@op("grouped_mm", static=("mode",), dtypes="none", linear="multi")
def _grouped_mm(a, b, offs, *, mode):
    """``mode`` is how the operands are grouped (the caller has checked shapes): ``"3d3d"`` a batched matmul;
    ``"2d3d"`` rows of ``a`` in jagged groups, each times its matrix of ``b`` (``lax.ragged_dot``; rows past
    ``offs[-1]`` are 0); ``"2d2d"`` the shared contraction dimension in jagged groups, one ``(m, n)`` output per
    group; ``"3d2d"`` the columns of ``b`` in jagged groups, each times its matrix of ``a`` (columns past
    ``offs[-1]`` are 0)."""
    dt = a.dtype
    if dt in (jnp.bfloat16, jnp.float16):  # accumulate in float32 as the grouped GEMM kernels do (products exact)
        a, b = a.astype(jnp.float32), b.astype(jnp.float32)
    if mode == "3d3d":
        out = jnp.matmul(a, b)
    elif mode == "2d3d":
        out = jax.lax.ragged_dot(a, b, jnp.diff(offs.astype(jnp.int32), prepend=0))
    elif mode == "2d2d":
        out = jnp.einsum("mk,gk,kn->gmn", a, _segments(offs, a.shape[1]).astype(a.dtype), b)
    else:  # "3d2d"
        out = jnp.einsum("gmk,kn,gn->mn", a, b, _segments(offs, b.shape[1]).astype(b.dtype))
    return out.astype(dt)
