"""Shape, joining, reordering and gather/scatter primitives."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from .._core import dtypes as D
from .table import op


@op("reshape", static=("shape",), dtypes="none", linear=True)
def _reshape(x, *, shape):
    return jnp.reshape(x, shape)


@op("permute", static=("dims",), dtypes="none", linear=True)
def _permute(x, *, dims):
    return jnp.transpose(x, dims)


@op("expand", static=("shape",), dtypes="none", linear=True)
def _expand(x, *, shape):
    return jnp.broadcast_to(x, shape)


@op("tile", static=("reps",), dtypes="none", linear=True)
def _tile(x, *, reps):
    return jnp.tile(x, reps)


@op("repeat_interleave", static=("repeats", "dim"), dtypes="none", linear=True)
def _repeat_interleave(x, *, repeats, dim):
    if dim is None:
        x, dim = x.reshape(-1), 0
    if isinstance(repeats, tuple):  # one count per element: static, so the output length is known
        return jnp.repeat(x, np.asarray(repeats), axis=dim, total_repeat_length=sum(repeats))
    return jnp.repeat(x, repeats, axis=dim)


@op("cat", static=("dim",), linear=True)
def _cat(*xs, dim):
    return jnp.concatenate(xs, axis=dim)


@op("stack", static=("dim",), linear=True)
def _stack(*xs, dim):
    return jnp.stack(xs, axis=dim)


@op("split", static=("sizes", "dim"), dtypes="none", linear=True)
def _split(x, *, sizes, dim):
    # lax.split, not one slice per piece: its transpose is one concatenate, where the slices' is a zero-padded
    # copy of the whole input per piece, summed (a packed q/k/v projection's backward paid three such passes)
    return tuple(lax.split(x, sizes, axis=dim))


@op("flip", static=("dims",), dtypes="none", linear=True)
def _flip(x, *, dims):
    return jnp.flip(x, dims)


@op("roll", static=("shifts", "dims"), dtypes="none", linear=True)
def _roll(x, *, shifts, dims):
    return jnp.roll(x, shifts, dims)


def _take(x, index, dim):
    # torch lets index be smaller than x outside `dim`: only the leading part of those dims is read
    x = x[tuple(slice(None) if i == dim else slice(0, n) for i, n in enumerate(index.shape))]
    return jnp.take_along_axis(x, index, axis=dim, mode="clip")


@op("gather", static=("dim",), dtypes="none", linear=True)
def _gather(x, index, *, dim):
    return _take(x, index, dim)


def _scatter_index(x, index, dim):
    idx = list(jnp.indices(index.shape, sparse=True))
    idx[dim] = index
    return tuple(idx)


def _value_dtypes(descs, statics):
    # cast the source (tensor or scalar) to the destination's dtype, leave the index alone
    return [None, None, descs[0][1]]


def _used_src(src, index):
    if jnp.ndim(src) == 0:
        return jnp.broadcast_to(src, index.shape)
    return src[tuple(slice(0, s) for s in index.shape)]


def _src_grad(gs, src):
    """The gradient of the part of ``src`` that was read, as a gradient of the whole ``src``."""
    if jnp.ndim(src) == 0:
        return jnp.sum(gs)
    if gs.shape == src.shape:
        return gs
    return jnp.zeros(src.shape, gs.dtype).at[tuple(slice(0, n) for n in gs.shape)].set(gs)


def _scatter_bwd(xs, out, g, *, dim, reduce):
    """torch's scatter/scatter_reduce backward: a plain write sends every listed position's gradient to its
    source element (a repeated index too; autodiff gives it to the one write that lands), a product divides out
    the factor with torch's care for zeros; sums, amax and amin keep autodiff's rule, which is torch's (ties of
    amax/amin split evenly, the destination's own value included)."""
    x, index, src = xs
    if reduce in ("amax", "amin"):
        _, pull = jax.vjp(lambda x_, s_: _scatter_value(x_, index, s_, dim=dim, reduce=reduce), x, src)
        gx, gs = pull(g)
        return gx, None, gs
    s = _used_src(src, index)
    zero, one = jnp.zeros((), g.dtype), jnp.ones((), g.dtype)
    if reduce is None:
        return g.at[_scatter_index(g, index, dim)].set(zero), None, _src_grad(_take(g, index, dim), src)
    if reduce in ("add", "sum"):
        return g, None, _src_grad(_take(g, index, dim), src)
    # product: the factor each element contributed, divided out -- or recomputed without it where it is 0
    masked_x = jnp.where(x == 0, one, x)
    gx = g * _scatter_value(masked_x, index, s, dim=dim, reduce=reduce) / masked_x
    s_zero = s == 0
    n_zero = _take(jnp.zeros_like(x).at[_scatter_index(x, index, dim)].add(s_zero.astype(x.dtype)), index, dim)
    single = s_zero & (n_zero == 1)
    without = _scatter_value(x, index, jnp.where(single, one, s), dim=dim, reduce=reduce)
    gs = jnp.where(single, _take(g * without, index, dim), _take(g * out, index, dim) / jnp.where(s_zero, one, s))
    return gx, None, _src_grad(gs, src)


def _scatter_value(x, index, src, *, dim, reduce):
    src = _used_src(src, index)
    at = x.at[_scatter_index(x, index, dim)]
    if reduce is None:
        return at.set(src)
    if reduce in ("add", "sum"):
        return at.add(src)
    if reduce in ("multiply", "prod"):
        return at.multiply(src)
    if reduce == "amax":
        return at.max(src)
    if reduce == "amin":
        return at.min(src)
    raise ValueError(f"scatter: unknown reduce {reduce!r}")


op("scatter", static=("dim", "reduce"), dtypes=_value_dtypes, bwd=_scatter_bwd)(_scatter_value)


@op("index_select", static=("dim",), dtypes="none", linear=True)
def _index_select(x, index, *, dim):
    return jnp.take(x, index, axis=dim)


@op("index_add", static=("dim", "alpha"), dtypes=_value_dtypes)
def _index_add(x, index, src, *, dim, alpha):
    idx = [slice(None)] * x.ndim
    idx[dim] = index
    return x.at[tuple(idx)].add(src * alpha if alpha != 1 else src)


@op("masked_fill", dtypes=lambda descs, statics: [None, None, descs[0][1]], linear=True)
def _masked_fill(x, mask, value):
    return jnp.where(mask, value, x)


@op("sort", static=("dim", "descending", "stable"), dtypes="none")
def _sort(x, *, dim, descending, stable):
    idx = jnp.argsort(x, axis=dim, stable=True, descending=descending)
    return jnp.take_along_axis(x, idx, axis=dim), idx.astype(D.default_int().to_jax())


@op("topk", static=("k", "dim", "largest", "sorted"), dtypes="none")
def _topk(x, *, k, dim, largest, sorted):
    xm = jnp.moveaxis(x, dim, -1)
    key = xm if largest else -xm
    if jnp.issubdtype(key.dtype, jnp.floating):  # -0.0 and 0.0 tie (the first index wins), as in torch
        key = jnp.where(key == 0, jnp.zeros((), key.dtype), key)
    _, i = lax.top_k(key, k)
    # the values are read at the chosen indices, so the gradient goes to exactly the positions returned
    v = jnp.take_along_axis(xm, i, axis=-1)
    return jnp.moveaxis(v, -1, dim), jnp.moveaxis(i, -1, dim).astype(D.default_int().to_jax())


@op("tril", static=("diagonal",), dtypes="none", linear=True)
def _tril(x, *, diagonal):
    return jnp.tril(x, diagonal)


@op("triu", static=("diagonal",), dtypes="none", linear=True)
def _triu(x, *, diagonal):
    return jnp.triu(x, diagonal)


@op("one_hot", static=("num_classes",), dtypes="none", differentiable=False)
def _one_hot(x, *, num_classes):
    return (x[..., None] == jnp.arange(num_classes, dtype=x.dtype)).astype(D.default_int().to_jax())


@op("pad", static=("pad", "mode", "value"), dtypes="none", linear=True)
def _pad(x, *, pad, mode, value):
    # torch's pad tuple runs from the last dimension backwards: (left, right, top, bottom, ...)
    widths = [(0, 0)] * x.ndim
    for i in range(len(pad) // 2):
        widths[x.ndim - 1 - i] = (pad[2 * i], pad[2 * i + 1])
    if mode == "constant":
        neg = any(lo < 0 or hi < 0 for lo, hi in widths)
        if neg:
            cfg = [(lo, hi, 0) for lo, hi in widths]
            return lax.pad(x, jnp.asarray(value, x.dtype), cfg)
        return jnp.pad(x, widths, mode="constant", constant_values=value)
    jmode = {"reflect": "reflect", "replicate": "edge", "circular": "wrap"}[mode]
    return jnp.pad(x, widths, mode=jmode)


@op("diagonal", static=("offset", "dim1", "dim2"), dtypes="none", linear=True)
def _diagonal(x, *, offset, dim1, dim2):
    return jnp.diagonal(x, offset, dim1, dim2)


@op("copy_into", dtypes=lambda descs, statics: [None, descs[0][1]], linear=True)
def _copy_into(dst, src):
    """The value of ``dst.copy_(src)``: src broadcast and cast to dst's shape and dtype."""
    return jnp.broadcast_to(src, dst.shape)
