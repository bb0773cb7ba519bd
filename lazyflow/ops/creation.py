"""Creation primitives: the fill value is a dynamic operand, shape and dtype are static."""

from __future__ import annotations

import jax.numpy as jnp

from .table import op


@op("full", static=("shape", "dtype"), dtypes="none", differentiable=False)
def _full(value, *, shape, dtype):
    return jnp.full(shape, value, dtype.to_jax())


@op("arange", static=("n", "dtype"), dtypes="none", differentiable=False)
def _arange(start, step, *, n, dtype):
    return (start + step * jnp.arange(n, dtype=jnp.float64 if dtype.is_floating_point else None)).astype(dtype.to_jax())


@op("linspace", static=("steps", "dtype"), dtypes="none", differentiable=False)
def _linspace(start, end, *, steps, dtype):
    return jnp.linspace(start, end, steps, dtype=dtype.to_jax())


@op("eye", static=("n", "m", "dtype"), dtypes="none", differentiable=False)
def _eye(*, n, m, dtype):
    return jnp.eye(n, m, dtype=dtype.to_jax())
