"""``index_reduce`` / ``Tensor.index_reduce_``: torch's reduction of ``source`` slices into ``input`` at ``index``.

A composite: ``source``'s slices are laid against a one-hot ``(len(index), input.shape[dim])`` mask, reduced over
the index axis (product, mean, max, min), then combined with ``input`` (``include_self``) or put in its place
where an index hit (positions no index names keep ``input``, as in torch). Its gradients come from the
primitives' rules (where, prod, sum, amax/amin). Memory is ``len(index) * input.numel()``.
"""

from __future__ import annotations

import math

import numpy as np

from .._core.errors import DTypeError, ValueRangeError
from .._creation import arange
from .._tensor import Tensor
from ._common import _t
from .elementwise import maximum, minimum
from .indexing import _index_add_checks, where
from .reduction import amax, amin, prod, sum
from .special import _composite_ip

__all__ = ["index_reduce"]

_REDUCES = ("prod", "mean", "amax", "amin")


def index_reduce(
    input: Tensor, dim: int, index: Tensor, source: Tensor, reduce: str, *, include_self: bool = True
) -> Tensor:
    """``input`` with ``source[k]`` (the k-th slice along ``dim``) reduced into position ``index[k]``.

    Args:
        input: the tensor reduced into. dim: the dimension ``index`` indexes.
        index: 1-D integer positions, one per slice of ``source``. source: ``input``'s shape with
            ``len(index)`` along ``dim``.
        reduce: ``"prod"``, ``"mean"``, ``"amax"`` or ``"amin"``.
        include_self: whether ``input``'s own values take part (else they are replaced where an index hits).
    Returns:
        A new tensor of ``input``'s shape and dtype (``"mean"`` of integers rounds down, as torch).
    Raises:
        ValueRangeError: an unknown ``reduce``.  ShapeError: a ``source`` of the wrong shape, or an index that
            is not a vector.  IndexOutOfRangeError: an index outside the dimension.  DTypeError: amax/amin of
            a bool tensor.
    """
    if reduce not in _REDUCES:
        raise ValueRangeError(f"index_reduce(): Expected reduce to be one of prod, mean, amax or amin, got {reduce!r}")
    d, index, source = _index_add_checks("index_reduce", input, dim, index, source)
    x = input if input.ndim else input.reshape(1)
    src = _t(source).reshape(x.shape[:d] + (index.numel(),) + x.shape[d + 1 :]) if x.ndim else source.reshape(1)
    xm, sm = x.movedim(d, 0), src.movedim(d, 0)  # (n, ...), (k, ...)
    hit = index.reshape(-1, 1) == arange(xm.shape[0], device=x.device)  # (k, n)
    mask = hit.reshape(hit.shape + (1,) * (xm.ndim - 1))  # (k, n, 1...)
    spread = sm.unsqueeze(1)  # (k, 1, ...)
    count = sum(hit, 0).reshape((xm.shape[0],) + (1,) * (xm.ndim - 1))  # (n, 1...)
    floating = x.dtype.is_floating_point
    if reduce == "prod":
        red = prod(where(mask, spread, 1), 0).to(x.dtype)
        out = xm * red if include_self else red
    elif reduce == "mean":
        total = sum(where(mask, spread, 0), 0).to(x.dtype)
        n = count + 1 if include_self else count.clamp(min=1)
        total = total + xm if include_self else total
        out = total / n if floating else total.div(n, rounding_mode="floor")
    else:
        lo = -math.inf if floating else _int_bound(x.dtype, low=True)
        hi = math.inf if floating else _int_bound(x.dtype, low=False)
        fill = lo if reduce == "amax" else hi
        pick, both = (amax, maximum) if reduce == "amax" else (amin, minimum)
        red = pick(where(mask, spread, fill), 0).to(x.dtype)
        out = both(xm, red) if include_self else red
    out = out.to(x.dtype)
    if not include_self:
        out = where(count > 0, out, xm)
    out = out.movedim(0, d)
    return out.reshape(input.shape)


def _int_bound(dtype, *, low: bool) -> int:
    if dtype.name == "bool":
        raise DTypeError("index_reduce(): amax/amin of bool tensors is not supported; convert to an integer dtype")
    info = np.iinfo(dtype.np)
    return int(info.min if low else info.max)


METHOD_ONLY = {"index_reduce_": _composite_ip(index_reduce, "index_reduce")}
