"""Searching, counting and running extrema with torch's signatures: searchsorted, bucketize, histc, unique,
unique_consecutive, cummax, cummin, logcumsumexp.

``unique`` and ``unique_consecutive`` have value-dependent result sizes: they run eagerly on the host and raise
GraphError inside ``lf.compile`` (where torch.compile graph-breaks); the others are primitives that trace.
"""

from __future__ import annotations

import builtins
import collections

import numpy as np

from .._core import dtypes as D
from .._core.errors import ArgumentError, ShapeError, ValueRangeError
from .._creation import tensor
from .._tensor import Tensor, _concrete, _dim
from ..ops.table import REGISTRY as R
from ._common import _apply, _t
from .indexing import take_along_dim

__all__ = [
    "bucketize",
    "cummax",
    "cummin",
    "histc",
    "logcumsumexp",
    "searchsorted",
    "unique",
    "unique_consecutive",
]

_Cummax = collections.namedtuple("cummax", ["values", "indices"])
_Cummin = collections.namedtuple("cummin", ["values", "indices"])


def searchsorted(
    sorted_sequence: Tensor,
    input,
    *,
    out_int32: bool = False,
    right: bool = False,
    side: str | None = None,
    sorter: Tensor | None = None,
) -> Tensor:
    """Indices where ``input``'s values would be inserted into the innermost dim of ``sorted_sequence`` to keep it
    sorted (``right``/``side="right"``: after equal elements).

    Args:
        sorted_sequence: 1-D, or (..., n) with the same leading dims as ``input``.
        input: a tensor or a Python scalar (then the result is 0-d).
        out_int32: return int32 instead of int64.
        right: as ``side="right"``.
        side: ``"left"`` or ``"right"``; must agree with ``right``.
        sorter: indices that sort an unsorted ``sorted_sequence`` along its last dim.
    Raises:
        ShapeError: leading dims that differ. ValueRangeError: a bad ``side``, or ``side="left"`` with ``right=True``.
    >>> lf.searchsorted(lf.tensor([1, 3, 5, 7]), lf.tensor([3, 6]))
    tensor([1, 3])
    """
    seq = _t(sorted_sequence)
    if side is not None:
        if side not in ("left", "right"):
            raise ValueRangeError(f"searchsorted: side must be 'left' or 'right', got {side!r}")
        if side == "left" and right:
            raise ValueRangeError("searchsorted: side='left' and right=True contradict each other; pass only one")
        right = side == "right"
    scalar = not isinstance(input, Tensor)
    x = _t(input).reshape(1) if scalar else input
    if seq.ndim == 0:
        raise ShapeError("searchsorted: sorted_sequence must have at least one dimension, got a 0-d tensor")
    if sorter is not None:
        if tuple(sorter.shape) != tuple(seq.shape):
            raise ShapeError(
                f"searchsorted: sorter shape {list(sorter.shape)} must equal sorted_sequence's {list(seq.shape)}"
            )
        seq = take_along_dim(seq, sorter, -1)
    if seq.ndim > 1 and (x.ndim != seq.ndim or tuple(x.shape[:-1]) != tuple(seq.shape[:-1])):
        raise ShapeError(
            f"searchsorted: sorted_sequence {list(seq.shape)} and input {list(x.shape)} must have the same leading "
            "dims (or use a 1-D sorted_sequence)"
        )
    out = _apply(R["searchsorted"], (seq, x), (builtins.bool(right), builtins.bool(out_int32)))
    return out.reshape(()) if scalar else out


def bucketize(input, boundaries: Tensor, *, out_int32: bool = False, right: bool = False) -> Tensor:
    """The bucket of each element of ``input`` given 1-D sorted ``boundaries``: ``searchsorted(boundaries, input,
    right=right)`` (``right=False``: ``boundaries[i-1] < x <= boundaries[i]``).

    Raises:
        ShapeError: ``boundaries`` not 1-D.
    """
    if _t(boundaries).ndim != 1:
        raise ShapeError(f"bucketize: boundaries must be 1-D, got shape {list(_t(boundaries).shape)}")
    return searchsorted(boundaries, input, out_int32=out_int32, right=right)


def histc(input: Tensor, bins: int = 100, min: float = 0, max: float = 0) -> Tensor:
    """A histogram of ``bins`` equal-width bins over ``[min, max]`` (the data's range when ``min == max``);
    elements outside are ignored, ``max`` falls in the last bin. Result: a 1-D tensor of ``input``'s dtype.

    Raises:
        ValueRangeError: ``bins <= 0`` or ``min > max``. DTypeError: a non-floating input (as torch's CPU kernel).
    """
    input = _t(input)
    if builtins.int(bins) <= 0:
        raise ValueRangeError(f"histc: bins must be > 0, got {bins}")
    if min > max:
        raise ValueRangeError(f"histc: max must be larger than min, got min={min} and max={max}")
    return _apply(R["histc"], (input,), (builtins.int(bins), builtins.float(min), builtins.float(max)))


def _scan_pair(name, input, dim, cls):
    input = _t(input)
    d = _dim(dim, builtins.max(input.ndim, 1))  # a 0-d tensor takes dim 0 or -1, as in torch
    values, indices = _apply(R[name], (input,), (d,))
    return cls(values, indices)


def cummax(input: Tensor, dim: int):
    """``(values, indices)``: the running maximum along ``dim`` and where it was found (the last position of a tie;
    a NaN propagates with its index), as in torch.

    Raises:
        IndexOutOfRangeError: ``dim`` out of range.
    """
    return _scan_pair("cummax", input, dim, _Cummax)


def cummin(input: Tensor, dim: int):
    """``(values, indices)``: the running minimum along ``dim`` (ties and NaNs as in :func:`cummax`)."""
    return _scan_pair("cummin", input, dim, _Cummin)


def logcumsumexp(input: Tensor, dim: int) -> Tensor:
    """``log(cumsum(exp(input), dim))`` computed stably (floating inputs only, as torch).

    Raises:
        DTypeError: an integer or bool input. IndexOutOfRangeError: ``dim`` out of range.
    """
    input = _t(input)
    d = _dim(dim, builtins.max(input.ndim, 1))  # a 0-d tensor takes dim 0 or -1, as in torch
    return _apply(R["logcumsumexp"], (input,), (d,))


def _host(fn, input):
    if not isinstance(input, Tensor):
        raise ArgumentError(f"{fn}: input must be a Tensor, got {type(input).__name__}")
    _concrete(input, f"{fn}() (its result size depends on the values)")
    return np.asarray(input._value)


def _results(input, values, inverse, counts, return_inverse, return_counts):
    out = [tensor(values, dtype=input.dtype)]
    if return_inverse:
        out.append(tensor(np.asarray(inverse, np.int64), dtype=D.int64))
    if return_counts:
        out.append(tensor(np.asarray(counts, np.int64), dtype=D.int64))
    return out[0] if len(out) == 1 else tuple(out)


def unique(
    input: Tensor,
    sorted: bool = True,
    return_inverse: bool = False,
    return_counts: bool = False,
    dim: int | None = None,
):
    """The unique elements (or, with ``dim``, unique slices along ``dim``), in ascending order, with optional
    inverse indices and counts (int64). The result is always sorted (``sorted=False`` allows any order; lazyflow
    picks the sorted one). Eager only.

    Returns:
        A tensor, or a tuple ``(output, inverse_indices?, counts?)`` when a flag is set, as in torch.
    Raises:
        GraphError: inside ``lf.compile`` (the result's size depends on the values).
        IndexOutOfRangeError: ``dim`` out of range.
    >>> lf.unique(lf.tensor([3, 1, 3, 2]), return_counts=True)
    (tensor([1, 2, 3]), tensor([1, 1, 2]))
    """
    a = _host("unique", input)
    if dim is None:
        values, inverse, counts = np.unique(a.reshape(-1), return_inverse=True, return_counts=True)
        inverse = inverse.reshape(a.shape)
    else:
        d = _dim(dim, input.ndim)
        values, inverse, counts = np.unique(a, return_inverse=True, return_counts=True, axis=d)
        inverse = inverse.reshape(-1)
    return _results(input, values, inverse, counts, return_inverse, return_counts)


def unique_consecutive(
    input: Tensor, return_inverse: bool = False, return_counts: bool = False, dim: int | None = None
):
    """Keep the first element (or slice along ``dim``) of every run of equal consecutive ones, with optional
    inverse indices and run lengths (int64). Eager only.

    Raises:
        GraphError: inside ``lf.compile``. IndexOutOfRangeError: ``dim`` out of range.
    >>> lf.unique_consecutive(lf.tensor([1, 1, 2, 2, 1]))
    tensor([1, 2, 1])
    """
    a = _host("unique_consecutive", input)
    if dim is None:
        flat = a.reshape(-1)
        axis, moved = 0, flat
    else:
        axis = _dim(dim, input.ndim)
        moved = np.moveaxis(a, axis, 0)
    n = moved.shape[0]
    if n == 0:
        starts = np.zeros(0, bool)
    else:
        rows = moved.reshape(n, -1)
        starts = np.ones(n, bool)
        starts[1:] = (rows[1:] != rows[:-1]).any(axis=1)
    keep = np.flatnonzero(starts)
    values = moved[keep] if dim is None else np.moveaxis(moved[keep], 0, axis)
    inverse = np.cumsum(starts) - 1
    counts = np.diff(np.append(keep, n))
    if dim is None:
        inverse = inverse.reshape(a.shape)
    return _results(input, values, inverse, counts, return_inverse, return_counts)
