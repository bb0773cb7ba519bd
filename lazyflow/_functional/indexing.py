"""Index-based op functions with torch's signatures: gather/scatter, index_select/index_add, masks,
nonzero, sort/topk, triangular parts, one_hot and pad."""

from __future__ import annotations

import builtins
from typing import Any, cast, overload

import numpy as np

from .._core import dtypes as D
from .._core.checks import defer_bounds
from .._core.errors import DTypeError, IndexOutOfRangeError, OpError, ShapeError, ValueRangeError
from .._creation import tensor
from .._tensor import Tensor, _concrete, _dim, _Tracer
from ..ops.table import REGISTRY as R
from ._common import _apply, _MinMax, _t
from .shape import _on_scalar, broadcast_tensors

__all__ = [
    "where",
    "argsort",
    "argwhere",
    "diagonal",
    "gather",
    "index_add",
    "index_select",
    "masked_fill",
    "masked_select",
    "nonzero",
    "one_hot",
    "pad",
    "scatter",
    "scatter_add",
    "scatter_reduce",
    "sort",
    "take_along_dim",
    "topk",
    "tril",
    "triu",
]


@overload
def where(condition, input: None = None, other: None = None) -> tuple[Tensor, ...]: ...


@overload
def where(condition, input: Any, other: Any) -> Tensor: ...


def where(condition, input=None, other=None) -> Tensor | tuple[Tensor, ...]:
    """``input`` where ``condition`` else ``other``, broadcasting all three.

    Args:
        condition: a bool tensor (other dtypes are tested for non-zero).
        input: values where the condition holds (tensor or scalar).
        other: values elsewhere (tensor or scalar).
    Returns:
        A tensor of the promoted dtype of ``input`` and ``other``; ``where(condition)`` alone is
        ``nonzero(condition, as_tuple=True)``.
    Raises:
        ShapeError: shapes that do not broadcast.
    """
    if input is None and other is None:
        return nonzero(condition, as_tuple=True)
    condition = _t(condition)
    if condition.dtype is not D.bool_:
        condition = condition.bool()
    return _apply(R["where"], (condition, input, other))


def _check_index(index, what):
    index = _t(index)
    if index.dtype.is_floating_point or index.dtype is D.bool_:
        raise DTypeError(f"{what}(): Expected dtype int64 for index, got {index.dtype}")
    return index


def _check_bounds(index, size, what, dim=None):
    """Bounds check of an index tensor: now in eager mode, deferred to after the program in graph mode (XLA would
    clamp silently)."""
    if index.numel() == 0:
        return
    where = "" if dim is None else f" {dim}"
    message = f"{what}(): index {{index}} is out of bounds for dimension{where} with size {size}"
    if isinstance(index._value, _Tracer):
        defer_bounds(index._value, size, message)
        return
    a = np.asarray(index._value)
    lo, hi = builtins.int(a.min()), builtins.int(a.max())
    if lo < 0 or hi >= size:
        raise IndexOutOfRangeError(message.replace("{index}", str(hi if hi >= size else lo)))


def _check_index_shape(index, other, d, what, other_name):
    if index.ndim != other.ndim or builtins.any(
        i > o for k, (i, o) in enumerate(zip(index.shape, other.shape)) if k != d
    ):
        raise ShapeError(
            f"{what}(): index of shape {list(index.shape)} must have the same number of dimensions "
            f"as {other_name} {list(other.shape)} and be no larger outside dimension {d}"
        )


def gather(input: Tensor, dim: int, index: Tensor, *, sparse_grad: bool = False) -> Tensor:
    """``out[i][j][k] = input[i][index[i][j][k]][k]`` for ``dim=1`` (and likewise for other dims).

    Args:
        input: the source tensor.
        dim: the dimension to index along.
        index: an integer tensor of the same rank, no larger than ``input`` outside ``dim``.
    Returns:
        A tensor with ``index``'s shape.
    Raises:
        DTypeError: a non-integer index.
        ShapeError: an index of another rank or larger outside ``dim``.
        IndexOutOfRangeError: an index outside ``[0, input.shape[dim])``.
    """
    d = _dim(dim, input.ndim)
    index = _check_index(index, "gather")
    _check_index_shape(index, input, d, "gather", "input")
    _check_bounds(index, input.shape[d] if input.ndim else 1, "gather", d)
    return _apply(R["gather"], (input, index), (d,))


def take_along_dim(input: Tensor, indices: Tensor, dim: int | None = None) -> Tensor:
    """:func:`gather` with torch's ``take_along_dim`` argument order; ``dim=None`` indexes the flattened input."""
    if dim is None:
        return gather(input.reshape(-1), 0, _t(indices).reshape(-1))
    return gather(input, dim, indices)


def _scatter(what, input, dim, index, src, reduce):
    d = _dim(dim, input.ndim)
    index = _check_index(index, what)
    _check_index_shape(index, input, d, what, "self")
    if isinstance(src, Tensor) and src.ndim:
        _check_index_shape(index, src, -1, what, "src")
    _check_bounds(index, input.shape[d] if input.ndim else 1, what, d)
    if reduce not in (None, "add", "sum", "multiply", "prod", "amax", "amin"):
        raise OpError(
            f"{what}(): reduce must be one of 'add', 'multiply', 'sum', 'prod', 'amax', 'amin', got {reduce!r}"
        )
    return d, index


def scatter(input: Tensor, dim: int, index: Tensor, src=None, *, value=None, reduce=None) -> Tensor:
    """Out-of-place scatter: a copy of ``input`` with ``src`` written at ``index`` along ``dim``.

    ``out[i][index[i][j]] = src[i][j]`` for ``dim=1``; with ``reduce="add"``/``"multiply"`` the values are
    combined with what is there instead.

    Args:
        input: the destination values.
        dim: the dimension to scatter along.
        index: an integer tensor of input's rank.
        src: a tensor (at least index's size) or a scalar; ``value=`` is torch's scalar spelling.
        reduce: None, ``"add"``/``"sum"``, ``"multiply"``/``"prod"``, ``"amax"`` or ``"amin"``.
    Raises:
        DTypeError, ShapeError, IndexOutOfRangeError: as :func:`gather`.
        OpError: an unknown ``reduce``.
    """
    if src is None:
        src = value
    d, index = _scatter("scatter", input, dim, index, src, reduce)
    return _apply(R["scatter"], (input, index, src), (d, reduce))


def scatter_add(input: Tensor, dim: int, index: Tensor, src: Tensor) -> Tensor:
    """:func:`scatter` with ``reduce="add"``: duplicates in ``index`` accumulate."""
    return scatter(input, dim, index, src, reduce="add")


def scatter_reduce(
    input: Tensor, dim: int, index: Tensor, src: Tensor, reduce: str, *, include_self: bool = True
) -> Tensor:
    """:func:`scatter` combining with ``reduce`` (``"sum"``, ``"prod"``, ``"amax"``, ``"amin"``).

    Raises:
        OpError: ``include_self=False`` (not implemented) or an unknown ``reduce``.
    """
    if not include_self:
        raise OpError("scatter_reduce(include_self=False) is not supported")
    return scatter(input, dim, index, src, reduce=reduce)


def index_select(input: Tensor, dim: int, index: Tensor) -> Tensor:
    """The slices of ``input`` at positions ``index`` (a 1-D integer tensor) along ``dim``.

    Raises:
        DTypeError: a non-integer index.
        ShapeError: an index with more than one dimension.
        IndexOutOfRangeError: an index outside ``[0, input.shape[dim])``.
    """
    d = _dim(dim, input.ndim)
    index = _check_index(index, "index_select")
    if index.ndim > 1:
        raise ShapeError(f"index_select(): index should be a vector, got shape {list(index.shape)}")
    _check_bounds(index, input.shape[d] if input.ndim else 1, "index_select", d)
    return _apply(R["index_select"], (input, index), (d,))


def _index_add_checks(what, input, dim, index, source):
    d = _dim(dim, input.ndim)
    index = _check_index(index, what)
    source = _t(source)
    if index.ndim > 1:
        raise ShapeError(f"{what}(): index should be a vector, got shape {list(index.shape)}")
    want = input.shape[:d] + (index.numel(),) + input.shape[d + 1 :]
    if source.shape != want and not (source.ndim == 0 and index.numel() == 1):
        raise ShapeError(
            f"{what}(): source of shape {list(source.shape)} must have shape {list(want)} (input "
            f"{list(input.shape)} with dimension {d} of size len(index) = {index.numel()})"
        )
    _check_bounds(index, input.shape[d] if input.ndim else 1, what, d)
    return d, index, source


def index_add(input: Tensor, dim: int, index: Tensor, source: Tensor, *, alpha=1) -> Tensor:
    """A copy of ``input`` with ``alpha * source[k]`` added at position ``index[k]`` along ``dim``.

    Raises:
        ShapeError: ``source`` is not input's shape with ``len(index)`` along ``dim``.
        IndexOutOfRangeError: an index outside the dimension.
    """
    d, index, source = _index_add_checks("index_add", input, dim, index, source)
    return _apply(R["index_add"], (input, index, source), (d, alpha))


def _check_mask(mask, what):
    mask = _t(mask)
    if mask.dtype is not D.bool_:
        raise DTypeError(f"{what} only supports boolean masks, but got mask with dtype {mask.dtype}")
    return mask


def masked_fill(input: Tensor, mask: Tensor, value) -> Tensor:
    """``value`` where ``mask`` is True, else ``input``; the mask broadcasts to input's shape.

    Raises:
        DTypeError: a non-bool mask.
        ShapeError: a non-scalar value tensor, or a mask that does not broadcast.
    """
    mask = _check_mask(mask, "masked_fill")
    if isinstance(value, Tensor) and value.ndim != 0:
        raise ShapeError(f"masked_fill only supports a 0-dimensional value tensor, got shape {list(value.shape)}")
    return _apply(R["masked_fill"], (input, mask, value))


def masked_select(input: Tensor, mask: Tensor) -> Tensor:
    """The elements where ``mask`` (broadcast) is True, as a 1-D tensor (data-dependent size: eager only)."""
    input, mask = broadcast_tensors(input, _check_mask(mask, "masked_select"))
    return input[mask]


def nonzero(input: Tensor, *, as_tuple: bool = False):
    """Indices (int64) of non-zero elements: an ``(n, ndim)`` tensor, or one 1-D tensor per dim.

    Raises:
        GraphError: inside graph mode (the result's size depends on the values).
    """
    _concrete(input, "nonzero()")
    nz = np.nonzero(np.asarray(input._value).reshape(input.shape or (1,)))
    if as_tuple:
        return tuple(tensor(z.astype(np.int64), dtype=D.default_int()) for z in nz[: input.ndim or 1])
    out = np.stack(nz, axis=1).astype(np.int64)
    return tensor(out[:, : input.ndim] if input.ndim == 0 else out, dtype=D.default_int())


def argwhere(input: Tensor) -> Tensor:
    """``nonzero(input)``: an ``(n, ndim)`` int64 tensor of indices."""
    return cast(Tensor, nonzero(input))  # as_tuple=False: one tensor


def sort(input: Tensor, dim: int = -1, descending: bool = False, stable: bool = False):
    """``(values, indices)`` sorted along ``dim``, ascending unless ``descending`` (ties keep their order).

    Raises:
        IndexOutOfRangeError: ``dim`` out of range.
    """
    if input.ndim == 0:
        return _on_scalar(input, lambda x, d: sort(x, d, descending, stable), dim)
    return _MinMax(
        *_apply(R["sort"], (input,), (_dim(dim, input.ndim), builtins.bool(descending), builtins.bool(stable)))
    )


def argsort(input: Tensor, dim: int = -1, descending: bool = False, stable: bool = False) -> Tensor:
    """The int64 indices that sort ``input`` along ``dim`` (see :func:`sort`)."""
    return sort(input, dim, descending, stable)[1]


def topk(input: Tensor, k: int, dim: int = -1, largest: bool = True, sorted: bool = True):
    """The ``k`` largest (or smallest) ``(values, indices)`` along ``dim``, in sorted order.

    Raises:
        IndexOutOfRangeError: ``k`` larger than the dimension, or ``dim`` out of range.
    """
    if input.ndim == 0:
        return _on_scalar(input, lambda x, d: topk(x, k, d, largest, sorted), dim)
    d = _dim(dim, input.ndim)
    if not 0 <= k <= input.shape[d]:
        raise IndexOutOfRangeError(f"topk: k ({k}) is out of range for dimension {d} of size {input.shape[d]}")
    return _MinMax(*_apply(R["topk"], (input,), (builtins.int(k), d, builtins.bool(largest), builtins.bool(sorted))))


def tril(input: Tensor, diagonal: int = 0) -> Tensor:
    """The lower triangle of the last two dims (elements above ``diagonal`` set to 0).

    Raises:
        ShapeError: fewer than 2 dimensions.
    """
    if input.ndim < 2:
        raise ShapeError(f"tril: input tensor must have at least 2 dimensions, got shape {list(input.shape)}")
    return _apply(R["tril"], (input,), (builtins.int(diagonal),))


def triu(input: Tensor, diagonal: int = 0) -> Tensor:
    """The upper triangle of the last two dims (elements below ``diagonal`` set to 0).

    Raises:
        ShapeError: fewer than 2 dimensions.
    """
    if input.ndim < 2:
        raise ShapeError(f"triu: input tensor must have at least 2 dimensions, got shape {list(input.shape)}")
    return _apply(R["triu"], (input,), (builtins.int(diagonal),))


def diagonal(input: Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor:
    """The diagonal of the ``(dim1, dim2)`` planes, moved to the last dimension.

    Raises:
        OpError: ``dim1 == dim2``.
    """
    d1, d2 = _dim(dim1, input.ndim), _dim(dim2, input.ndim)
    if d1 == d2:
        raise OpError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    return _apply(R["diagonal"], (input,), (builtins.int(offset), d1, d2))


def one_hot(input: Tensor, num_classes: int = -1) -> Tensor:
    """One-hot encoding (int64) of a non-negative integer tensor, adding a last dimension of ``num_classes``.

    Args:
        input: class indices.
        num_classes: the number of classes; ``-1`` means ``input.max() + 1`` (eager only).
    Raises:
        DTypeError: a floating or bool tensor.
        IndexOutOfRangeError: a class outside ``[0, num_classes)``.
    """
    input = _t(input)
    if input.dtype.is_floating_point or input.dtype is D.bool_:
        raise DTypeError(f"one_hot is only applicable to index tensors, got {input.dtype}")
    if num_classes == -1:
        num_classes = builtins.int(input.max().item()) + 1 if input.numel() else 0
    _check_bounds(input, num_classes, "one_hot")
    return _apply(R["one_hot"], (input,), (builtins.int(num_classes),))


def pad(input: Tensor, pad, mode: str = "constant", value: float | None = None) -> Tensor:
    """``torch.nn.functional.pad``: ``pad`` lists (before, after) pairs from the last dimension backwards.

    Args:
        input: the tensor.
        pad: ``(left, right)``, ``(left, right, top, bottom)``... (negative values crop in constant mode).
        mode: ``"constant"``, ``"reflect"``, ``"replicate"`` or ``"circular"``.
        value: the fill value of constant mode (0 by default).
    Raises:
        ShapeError: an odd or too long ``pad``; reflect padding not smaller than the dimension.
        OpError: an unknown mode.
    """
    pad = tuple(builtins.int(p) for p in pad)
    if len(pad) % 2 or len(pad) // 2 > input.ndim:
        raise ShapeError(
            f"pad: padding length {len(pad)} must be even and at most 2 * ndim "
            f"({2 * input.ndim}) for input of shape {list(input.shape)}"
        )
    if mode not in ("constant", "reflect", "replicate", "circular"):
        raise OpError(f"pad: unsupported mode {mode!r}; expected constant, reflect, replicate or circular")
    if mode != "constant":
        for i in range(len(pad) // 2):
            n = input.shape[input.ndim - 1 - i]
            lo, hi = pad[2 * i], pad[2 * i + 1]
            if (
                (mode == "reflect" and builtins.max(lo, hi) >= n)
                or (mode == "circular" and builtins.max(lo, hi) > n)
                or builtins.min(lo, hi) < 0
                or n == 0
            ):
                raise ShapeError(
                    f"pad: {mode} padding ({lo}, {hi}) is invalid for dimension "
                    f"{input.ndim - 1 - i} of size {n} (input shape {list(input.shape)})"
                )
    return _apply(R["pad"], (input,), (pad, mode, 0.0 if value is None else value))


def tensor_unfold(self: Tensor, dimension: int, size: int, step: int) -> Tensor:
    """``Tensor.unfold``: every slice of length ``size`` along ``dimension``, ``step`` apart, as a new last dim.

    The result has ``dimension`` of length ``(n - size) // step + 1`` and a trailing dim of length ``size``. torch
    returns a view that shares memory; lazyflow returns a copy (one gather), so writes to it do not reach ``self``.

    Raises:
        ShapeError: ``size`` larger than the dimension. ValueRangeError: ``step`` not positive.
    """
    if self.ndim == 0:
        return tensor_unfold(self.reshape(1), 0, size, step).reshape(builtins.int(size))
    d = _dim(dimension, self.ndim)
    n, size, step = self.shape[d], builtins.int(size), builtins.int(step)
    if step <= 0:
        raise ValueRangeError(f"unfold: step is {step} but must be > 0")
    if size < 0 or size > n:
        raise ShapeError(f"unfold: maximum size for tensor at dimension {d} is {n} but size is {size}")
    count = (n - size) // step + 1
    idx = (np.arange(count)[:, None] * step + np.arange(size)[None, :]).reshape(-1)
    y = index_select(self, d, tensor(idx))
    y = y.reshape(*self.shape[:d], count, size, *self.shape[d + 1 :])
    return y.movedim(d + 1, -1)
