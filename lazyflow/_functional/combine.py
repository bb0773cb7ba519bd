"""Grids, products and differences with torch's signatures: meshgrid, cartesian_prod, combinations, tril_indices,
triu_indices, block_diag, kron, diff, cdist. All are composites over the shape, elementwise and reduction families
(index sets that depend only on sizes are built on the host, as constants)."""

from __future__ import annotations

import builtins
import functools
import itertools

import numpy as np

from .._core import dtypes as D
from .._core.errors import ArgumentError, DTypeError, ShapeError, ValueRangeError
from .._core.formats import check_layout
from .._creation import tensor
from .._tensor import Tensor, _dim
from ._common import _t
from .elementwise import logical_xor, sub
from .indexing import index_select, pad
from .reduction import norm
from .shape import broadcast_shapes, cat, expand, narrow, reshape, stack, unsqueeze

__all__ = [
    "block_diag",
    "cartesian_prod",
    "cdist",
    "combinations",
    "diff",
    "kron",
    "meshgrid",
    "tril_indices",
    "triu_indices",
]


def _tensor_list(fn, tensors) -> list[Tensor]:
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    for i, t in enumerate(tensors):
        if not isinstance(t, Tensor):
            raise ArgumentError(f"{fn}: argument {i} must be a Tensor, got {type(t).__name__}")
    return list(tensors)


def meshgrid(*tensors, indexing: str | None = None) -> tuple[Tensor, ...]:
    """Coordinate grids from 0-d or 1-D tensors: with ``indexing="ij"`` (torch's default) output ``k`` varies along
    dim ``k``; with ``"xy"`` the first two dims are swapped (numpy's Cartesian convention).

    Raises:
        ShapeError: no tensors, or one with more than one dimension.
        DTypeError: tensors of different dtypes (as torch).
        ValueRangeError: ``indexing`` other than ``"ij"``, ``"xy"`` or None.
    >>> [g.shape for g in lf.meshgrid(lf.arange(2), lf.arange(3), indexing="xy")]
    [(3, 2), (3, 2)]
    """
    ts = _tensor_list("meshgrid", tensors)
    if indexing not in (None, "ij", "xy"):
        raise ValueRangeError(f'meshgrid: indexing must be one of "xy" or "ij", got {indexing!r}')
    if not ts:
        raise ShapeError("meshgrid expects at least one tensor")
    for i, t in enumerate(ts):
        if t.ndim > 1:
            raise ShapeError(f"meshgrid expects 0-d or 1-D tensors, tensor {i} has shape {list(t.shape)}")
        if t.dtype is not ts[0].dtype:
            raise DTypeError(
                f"meshgrid expects all tensors to have the same dtype, got {ts[0].dtype} and {t.dtype} (tensor {i}); "
                "convert them with .to"
            )
    ts = [reshape(t, (-1,)) for t in ts]
    swap = indexing == "xy" and len(ts) >= 2
    if swap:
        ts[0], ts[1] = ts[1], ts[0]
    shape = tuple(t.shape[0] for t in ts)
    out = []
    for k, t in enumerate(ts):
        view = [1] * len(ts)
        view[k] = shape[k]
        out.append(expand(reshape(t, tuple(view)), shape))
    if swap:
        out[0], out[1] = out[1], out[0]
    return tuple(out)


def cartesian_prod(*tensors: Tensor) -> Tensor:
    """All tuples ``(a, b, ...)`` from 1-D tensors, as an ``(n, len(tensors))`` tensor (one tensor: itself).

    Raises:
        ShapeError: a tensor that is not 1-D. DTypeError: tensors of different dtypes (as torch).
    """
    ts = _tensor_list("cartesian_prod", tensors)
    for i, t in enumerate(ts):
        if t.ndim != 1:
            raise ShapeError(f"cartesian_prod expects 1-D tensors, tensor {i} has shape {list(t.shape)}")
    if len(ts) == 1:
        return ts[0]
    return stack([reshape(g, (-1,)) for g in meshgrid(*ts, indexing="ij")], 1)


def combinations(input: Tensor, r: int = 2, with_replacement: bool = False) -> Tensor:
    """The ``r``-length combinations of a 1-D tensor's elements (``itertools.combinations`` order), as an
    ``(n, r)`` tensor; ``r == 0`` gives an empty 1-D tensor.

    Raises:
        ShapeError: ``input`` not 1-D. ValueRangeError: a negative ``r``.
    >>> lf.combinations(lf.tensor([1, 2, 3]))
    tensor([[1, 2],
            [1, 3],
            [2, 3]])
    """
    input = _t(input)
    if input.ndim != 1:
        raise ShapeError(f"combinations expects a 1-D tensor, got shape {list(input.shape)}")
    if r < 0:
        raise ValueRangeError(f"combinations: r must be non-negative, got {r}")
    if r == 0:
        return index_select(input, 0, tensor(np.zeros(0, np.int64)))
    pick = itertools.combinations_with_replacement if with_replacement else itertools.combinations
    idx = np.array(list(pick(range(input.shape[0]), r)), np.int64).reshape(-1, r)
    return reshape(index_select(input, 0, tensor(idx.reshape(-1))), (idx.shape[0], r))


def _tri_indices(name, np_fn, row, col, offset, dtype, device, layout):
    check_layout(layout, f"{name}()")
    dtype = D.to_dtype(dtype)
    if dtype not in (D.int32, D.int64):
        raise DTypeError(f"{name}: dtype must be int32 or int64 (lf.long), got {dtype}")
    for n, v in (("row", row), ("col", col)):
        if builtins.int(v) < 0:
            raise ValueRangeError(f"{name}: {n} must be non-negative, got {v}")
    i, j = np_fn(builtins.int(row), builtins.int(offset), builtins.int(col))
    return tensor(np.stack([i, j]).astype(dtype.np).reshape(2, -1), dtype=dtype, device=device)


def tril_indices(row: int, col: int, offset: int = 0, *, dtype=D.int64, device=None, layout=None) -> Tensor:
    """The ``(2, n)`` indices of the lower triangle (on and below diagonal ``offset``) of a ``row x col`` matrix,
    row by row.

    Raises:
        DTypeError: a dtype other than int32/int64. ValueRangeError: a negative size.
    """
    return _tri_indices("tril_indices", np.tril_indices, row, col, offset, dtype, device, layout)


def triu_indices(row: int, col: int, offset: int = 0, *, dtype=D.int64, device=None, layout=None) -> Tensor:
    """The ``(2, n)`` indices of the upper triangle (on and above diagonal ``offset``), row by row."""
    return _tri_indices("triu_indices", np.triu_indices, row, col, offset, dtype, device, layout)


def block_diag(*tensors: Tensor) -> Tensor:
    """A block-diagonal matrix of the given blocks (0-d is ``1x1``, 1-D is one row), in the promoted dtype.

    Raises:
        ShapeError: a block with more than two dimensions.
    """
    ts = _tensor_list("block_diag", tensors)
    for i, t in enumerate(ts):
        if t.ndim > 2:
            raise ShapeError(f"block_diag: input tensors must have 2 or fewer dimensions, tensor {i} has {t.ndim}")
    if not ts:
        return tensor(np.zeros((1, 0), np.float32), dtype=D.get_default_dtype())
    dtype = functools.reduce(D.promote_types, (t.dtype for t in ts))
    blocks = [reshape(t.to(dtype), (1, -1) if t.ndim < 2 else tuple(t.shape)) for t in ts]
    width = builtins.sum(b.shape[1] for b in blocks)
    rows, left = [], 0
    for b in blocks:
        rows.append(pad(b, (left, width - left - b.shape[1])))
        left += b.shape[1]
    return cat(rows, 0)


def kron(input: Tensor, other: Tensor) -> Tensor:
    """The Kronecker product; the operand with fewer dims gets leading 1s. The result has shape
    ``input.shape[i] * other.shape[i]`` in every dim."""
    a, b = _t(input), _t(other)
    n = builtins.max(a.ndim, b.ndim)
    sa, sb = (1,) * (n - a.ndim) + tuple(a.shape), (1,) * (n - b.ndim) + tuple(b.shape)
    ia = builtins.sum(((s, 1) for s in sa), ())
    ib = builtins.sum(((1, s) for s in sb), ())
    return reshape(reshape(a, ia) * reshape(b, ib), tuple(x * y for x, y in zip(sa, sb, strict=True)))


def diff(input: Tensor, n: int = 1, dim: int = -1, prepend=None, append=None) -> Tensor:
    """The ``n``-th forward difference along ``dim`` (``!=`` for bool tensors), after concatenating ``prepend``
    and ``append`` along ``dim``.

    Raises:
        ShapeError: a 0-d input, or prepend/append whose other dims differ.
        ValueRangeError: a negative ``n``. IndexOutOfRangeError: ``dim`` out of range.
    >>> lf.diff(lf.tensor([1, 4, 9, 16]))
    tensor([3, 5, 7])
    """
    input = _t(input)
    if input.ndim == 0:
        raise ShapeError("diff expects input to be at least one-dimensional, got a 0-d tensor")
    if n < 0:
        raise ValueRangeError(f"diff: order n must be non-negative, got {n}")
    d = _dim(dim, input.ndim)
    parts = []
    for name, extra in (("prepend", prepend), (None, input), ("append", append)):
        if extra is None:
            continue
        extra = _t(extra)
        if name is not None and extra.ndim == 0:  # torch broadcasts a scalar to one slice
            shape = list(input.shape)
            shape[d] = 1
            extra = expand(extra, tuple(shape))
        if extra.ndim != input.ndim or any(s != t for k, (s, t) in enumerate(zip(extra.shape, input.shape)) if k != d):
            raise ShapeError(f"diff: {name} of shape {list(extra.shape)} does not fit input {list(input.shape)}")
        parts.append(extra)
    x = cat(parts, d) if len(parts) > 1 else input
    for _ in range(n):
        m = x.shape[d]
        if m == 0:
            break
        hi, lo = narrow(x, d, 1, m - 1), narrow(x, d, 0, m - 1)
        x = logical_xor(hi, lo) if x.dtype is D.bool_ else sub(hi, lo)
    return x


def cdist(x1: Tensor, x2: Tensor, p: float = 2.0, compute_mode: str = "use_mm_for_euclid_dist_if_necessary") -> Tensor:
    """p-norm distances between the rows of ``x1`` (..., P, M) and of ``x2`` (..., R, M): a (..., P, R) tensor.

    Computed exactly as ``norm(x1_i - x2_j, p)`` for every ``compute_mode`` (torch's matrix-product mode differs
    from it by rounding only); the gradient at zero distance is 0, as in torch.

    Raises:
        ShapeError: fewer than 2 dims, different column counts, or batch dims that do not broadcast.
        ValueRangeError: a negative ``p``, or an unknown ``compute_mode``.
        DTypeError: integer inputs (torch: floating types only).
    """
    x1, x2 = _t(x1), _t(x2)
    modes = ("use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist", "donot_use_mm_for_euclid_dist")
    if compute_mode not in modes:
        raise ValueRangeError(f"cdist: compute_mode must be one of {modes}, got {compute_mode!r}")
    if p < 0:
        raise ValueRangeError(f"cdist only supports non-negative p values, got {p}")
    if x1.ndim < 2 or x2.ndim < 2:
        raise ShapeError(f"cdist expects at least 2-D tensors, got shapes {list(x1.shape)} and {list(x2.shape)}")
    if x1.shape[-1] != x2.shape[-1]:
        raise ShapeError(
            f"cdist: x1 and x2 must have the same number of columns, got {x1.shape[-1]} and {x2.shape[-1]}"
        )
    if not (x1.is_floating_point() and x2.is_floating_point()):
        raise DTypeError(f"cdist only supports floating-point dtypes, got {x1.dtype} and {x2.dtype}")
    broadcast_shapes(x1.shape[:-2], x2.shape[:-2])
    return norm(unsqueeze(x1, -2) - unsqueeze(x2, -3), p, -1)
