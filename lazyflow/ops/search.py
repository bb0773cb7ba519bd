"""Primitives of the search and scan family: searchsorted, histc, cummax/cummin (values with indices) and
logcumsumexp."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

from .._core import dtypes as D
from .._core.errors import DTypeError
from .table import is_tensor_desc, op


def _floating(name):
    def rule(descs, statics):
        for d in descs:
            if is_tensor_desc(d) and not d[1].is_floating_point:
                raise DTypeError(
                    f"{name} is not implemented for {d[1].name} tensors (as in torch); convert the input with .float()"
                )
        return [None] * len(descs)

    return rule


@op("searchsorted", static=("right", "out_int32"), differentiable=False)
def _searchsorted(seq, x, *, right, out_int32):
    """``seq`` 1-D with any ``x``, or ``seq`` (..., n) and ``x`` (..., m) with the same leading dims."""
    side = "right" if right else "left"
    if seq.ndim == 1:
        i = jnp.searchsorted(seq, x, side=side)
    else:
        lead = seq.shape[:-1]
        i = jax.vmap(lambda s, v: jnp.searchsorted(s, v, side=side))(
            seq.reshape(-1, seq.shape[-1]), x.reshape(-1, x.shape[-1])
        ).reshape(*lead, x.shape[-1])
    return i.astype(jnp.int32 if out_int32 else D.default_int().to_jax())


@op("histc", static=("bins", "min", "max"), dtypes=_floating("histc"), differentiable=False)
def _histc(x, *, bins, min, max):
    x = x.reshape(-1)
    if min == max:  # torch: the data's range, widened by 1 on each side when it is a single value
        finite = jnp.isfinite(x)
        lo = jnp.min(jnp.where(finite, x, jnp.inf), initial=jnp.inf) if x.size else jnp.asarray(0.0, x.dtype)
        hi = jnp.max(jnp.where(finite, x, -jnp.inf), initial=-jnp.inf) if x.size else jnp.asarray(0.0, x.dtype)
        lo, hi = jnp.where(lo == hi, lo - 1, lo), jnp.where(lo == hi, hi + 1, hi)
    else:
        lo, hi = jnp.asarray(min, x.dtype), jnp.asarray(max, x.dtype)
    idx = jnp.floor((x - lo) * bins / (hi - lo)).astype(jnp.int32)
    idx = jnp.where(x == hi, bins - 1, jnp.clip(idx, 0, bins - 1))
    valid = (x >= lo) & (x <= hi)
    return jnp.zeros((bins,), x.dtype).at[jnp.where(valid, idx, 0)].add(valid.astype(x.dtype))


def _cum_extremum(x, dim, better):
    """Running extremum with torch's indices: the last position of a tie wins, and a NaN sticks (its index too)."""
    if x.ndim == 0:
        return x, jnp.zeros((), D.default_int().to_jax())
    idx = lax.broadcasted_iota(jnp.int32, x.shape, dim)

    def combine(a, b):
        (va, ia), (vb, ib) = a, b
        take_b = better(vb, va) | (vb == va)
        if jnp.issubdtype(x.dtype, jnp.floating):
            take_b = (take_b & ~jnp.isnan(va)) | jnp.isnan(vb)
        return jnp.where(take_b, vb, va), jnp.where(take_b, ib, ia)

    _, i = lax.associative_scan(combine, (lax.stop_gradient(x), idx), axis=dim)
    # the values are read at the chosen indices, so each gradient goes to exactly the position returned
    return jnp.take_along_axis(x, i, axis=dim), i.astype(D.default_int().to_jax())


@op("cummax", static=("dim",), dtypes="none")
def _cummax(x, *, dim):
    return _cum_extremum(x, dim, lambda a, b: a > b)


@op("cummin", static=("dim",), dtypes="none")
def _cummin(x, *, dim):
    return _cum_extremum(x, dim, lambda a, b: a < b)


def _logcumsumexp_bwd(xs, out, g, *, dim):
    """torch's logcumsumexp_backward (signed log-space reverse scans), so -inf inputs give torch's NaN/0 gradients."""
    x = xs[0]
    if x.ndim == 0:
        return (g,)

    def rev(v):
        return jnp.flip(lax.cumlogsumexp(jnp.flip(v, dim), axis=dim), dim)

    lowest = jnp.finfo(g.dtype).min
    log_abs = jnp.log(jnp.abs(g))
    pos = jnp.exp(rev(jnp.where(g > 0, log_abs, lowest) - out) + x)
    neg = jnp.exp(rev(jnp.where(g < 0, log_abs, lowest) - out) + x)
    # a compiled program passes an all-zero cotangent for an unused output, where torch runs no backward at all
    return (jnp.where(jnp.all(g == 0), jnp.zeros_like(x), pos - neg),)


@op("logcumsumexp", static=("dim",), dtypes=_floating("logcumsumexp"), bwd=_logcumsumexp_bwd)
def _logcumsumexp(x, *, dim):
    if x.ndim == 0:
        return x
    return lax.cumlogsumexp(x, axis=dim)
