"""The rest of torch's shape and index functions: ``atleast_*d``, ``column_stack``/``dstack``, ``h/v/dsplit``,
``ravel``, ``rot90``, ``select``, ``take``/``put``, ``unravel_index``, the ``*_scatter`` family, ``diag``,
``diag_embed``, ``diagflat``, ``index_copy``/``index_fill``/``index_put``, ``masked_scatter``, ``sum_to_size``,
``fill_diagonal_``, ``tril_``/``triu_``, and the ``*_copy`` functions (lazyflow's view ops already return values of
their own, so ``X_copy(...)`` is ``X(...)`` followed by a copy).

Composites over existing primitives (gather, setitem, einsum, where...): gradients come from those primitives.
"""

from __future__ import annotations

import builtins

import numpy as np

from .._core import dtypes as D
from .._core.context import state
from .._core.errors import AutogradError, GraphError, IndexOutOfRangeError, OpError, ShapeError, ValueRangeError
from .._creation import arange, zeros
from .._dispatch import snapshot
from .._tensor import Tensor, _dim, _leave, _rebind, _Tracer
from ..ops.table import REGISTRY as R
from ._common import _apply, _inplace, _t
from .elementwise import clone
from .indexing import diagonal, masked_fill, scatter_reduce, where
from .linalg import einsum
from .reduction import cumsum, sum
from .shape import cat, expand, hstack, movedim, narrow, split, squeeze, tensor_split, unsqueeze, vstack
from .special import _composite_ip

__all__ = [
    "adjoint",
    "alias_copy",
    "atleast_1d",
    "atleast_2d",
    "atleast_3d",
    "column_stack",
    "detach_copy",
    "diag",
    "diag_embed",
    "diagflat",
    "diagonal_copy",
    "diagonal_scatter",
    "dsplit",
    "dstack",
    "expand_copy",
    "hsplit",
    "index_copy",
    "index_fill",
    "index_put",
    "masked_scatter",
    "narrow_copy",
    "nonzero_static",
    "permute_copy",
    "put",
    "ravel",
    "rot90",
    "row_stack",
    "select",
    "select_copy",
    "select_scatter",
    "slice_copy",
    "slice_scatter",
    "split_copy",
    "split_with_sizes_copy",
    "squeeze_copy",
    "sum_to_size",
    "t_copy",
    "take",
    "transpose_copy",
    "unbind_copy",
    "unfold_copy",
    "unravel_index",
    "unsafe_chunk",
    "unsafe_split",
    "unsqueeze_copy",
    "view_copy",
    "vsplit",
]

NOT_METHODS = frozenset(
    {
        "alias_copy",
        "atleast_1d",
        "atleast_2d",
        "atleast_3d",
        "column_stack",
        "detach_copy",
        "diagonal_copy",
        "dstack",
        "expand_copy",
        "permute_copy",
        "row_stack",
        "select_copy",
        "slice_copy",
        "split_copy",
        "split_with_sizes_copy",
        "squeeze_copy",
        "t_copy",
        "transpose_copy",
        "unbind_copy",
        "unfold_copy",
        "unravel_index",
        "unsqueeze_copy",
        "view_copy",
    }
)


def _atleast(n: int, tensors):
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        return tuple(_atleast(n, (t,)) for t in tensors[0])
    if len(tensors) != 1:
        return tuple(_atleast(n, (t,)) for t in tensors)
    t = _t(tensors[0])
    if t.ndim >= n:
        return t
    if n == 3 and t.ndim == 2:
        return unsqueeze(t, -1)
    shape = (1,) * (builtins.min(n, 2) - t.ndim) + tuple(t.shape) + ((1,) if n == 3 else ())
    if n == 3 and t.ndim == 0:
        shape = (1, 1, 1)
    return t.reshape(shape)


def atleast_1d(*tensors):
    """Each tensor with at least 1 dimension (a tuple for several tensors, or a list/tuple of them)."""
    return _atleast(1, tensors)


def atleast_2d(*tensors):
    """Each tensor with at least 2 dimensions (1-D ``(n,)`` becomes ``(1, n)``)."""
    return _atleast(2, tensors)


def atleast_3d(*tensors):
    """Each tensor with at least 3 dimensions (``(n,)`` -> ``(1, n, 1)``, ``(m, n)`` -> ``(m, n, 1)``)."""
    return _atleast(3, tensors)


def column_stack(tensors) -> Tensor:
    """Stack tensors as columns: 0-d and 1-d tensors become ``(n, 1)`` columns, then :func:`hstack`."""
    return hstack([t.reshape(-1, 1) if t.ndim <= 1 else t for t in map(_t, tensors)])


row_stack = vstack


def dstack(tensors) -> Tensor:
    """Concatenate along the third dimension after :func:`atleast_3d`."""
    return cat([atleast_3d(t) for t in tensors], 2)


def _nsplit(name: str, input: Tensor, spec, dim: int, need: int):
    if input.ndim < need:
        raise ShapeError(
            f"torch.{name} requires a tensor with at least {need} dimension, but got a tensor with {input.ndim} "
            "dimensions!"
        )
    if isinstance(spec, builtins.int) and (spec == 0 or input.shape[dim] % spec):
        raise OpError(
            f"torch.{name} attempted to split along dimension {dim}, but the size of the dimension "
            f"{input.shape[dim]} is not divisible by the split_size {spec}!"
        )
    return tensor_split(input, spec, dim)


def hsplit(input: Tensor, indices_or_sections) -> tuple:
    """Split along dim 1 (dim 0 for a 1-D tensor): an exact section count, or split indices."""
    return _nsplit("hsplit", input, indices_or_sections, 1 if input.ndim > 1 else 0, 1)


def vsplit(input: Tensor, indices_or_sections) -> tuple:
    """Split along dim 0 of a tensor with at least 2 dims."""
    return _nsplit("vsplit", input, indices_or_sections, 0, 2)


def dsplit(input: Tensor, indices_or_sections) -> tuple:
    """Split along dim 2 of a tensor with at least 3 dims."""
    return _nsplit("dsplit", input, indices_or_sections, 2, 3)


def adjoint(input: Tensor) -> Tensor:
    """The conjugate transpose of the last two dims (for lazyflow's real dtypes: ``input.mT``).

    Raises:
        ShapeError: fewer than 2 dims.
    """
    if input.ndim < 2:
        raise ShapeError(
            f"tensor.adjoint() is only supported on matrices or batches of matrices. Got {input.ndim}-D tensor."
        )
    return input.transpose(-2, -1)


def nonzero_static(input: Tensor, *, size: int, fill_value: int = -1) -> Tensor:
    """The indices of the first ``size`` non-zero elements as a ``[size, ndim]`` int64 tensor, padded with
    ``fill_value``: a fixed output shape, so it also runs in graph mode (unlike ``nonzero``).

    Raises:
        ValueRangeError: a negative ``size``.
    """
    if not isinstance(size, builtins.int) or size < 0:
        raise ValueRangeError(f"nonzero_static: 'size' must be a non-negative integer, got {size!r}")
    return _apply(R["nonzero_static"], (input,), (size, builtins.int(fill_value)))


def ravel(input: Tensor) -> Tensor:
    """The elements as a 1-D tensor (row-major)."""
    return input.reshape(-1)


def rot90(input: Tensor, k: int = 1, dims=(0, 1)) -> Tensor:
    """Rotate by 90 degrees ``k`` times in the plane ``dims`` (from the first towards the second axis).

    Raises:
        OpError: ``dims`` not two distinct dims, or a tensor with fewer than 2 dims.
    """
    dims = tuple(dims)
    if len(dims) != 2:
        raise OpError(f"expected total rotation dims == 2, but got dims = {len(dims)}")
    if input.ndim < 2:
        raise OpError(f"expected total dims >= 2, but got total dims = {input.ndim}")
    d0, d1 = _dim(dims[0], input.ndim), _dim(dims[1], input.ndim)
    if d0 == d1:
        raise OpError(f"expected rotation dims to be different, but got dim0 = {d0} and dim1 = {d1}")
    k %= 4
    if k == 1:
        return input.flip(d1).transpose(d0, d1)
    if k == 2:
        return input.flip(d0, d1)
    if k == 3:
        return input.flip(d0).transpose(d0, d1)
    return clone(input)


def select(input: Tensor, dim: int, index: int) -> Tensor:
    """The slice at ``index`` along ``dim``, with that dim removed.

    Raises:
        IndexOutOfRangeError: ``index`` out of range.
    """
    d = _dim(dim, input.ndim)
    n = input.shape[d]
    if not -n <= index < n:
        raise IndexOutOfRangeError(
            f"select(): index {index} out of range for tensor of size {list(input.shape)} at dimension {d}"
        )
    return squeeze(narrow(input, d, index % n, 1), d)


def _flat_index(input: Tensor, index: Tensor, name: str) -> Tensor:
    if index.dtype.is_floating_point or index.dtype is D.bool_:
        raise IndexOutOfRangeError(f"{name}(): expected a long index tensor, got {index.dtype}")
    n = input.numel()
    return where(index < 0, index + n, index)


def take(input: Tensor, index: Tensor) -> Tensor:
    """Elements of ``input`` viewed as 1-D at ``index`` (any shape; negative indices count from the end)."""
    idx = _flat_index(input, index, "take")
    return input.reshape(-1).gather(0, idx.reshape(-1)).reshape(index.shape)


def put(input: Tensor, index: Tensor, source: Tensor, accumulate: bool = False) -> Tensor:
    """A copy of ``input`` (viewed as 1-D) with ``source`` written (or added, ``accumulate``) at ``index``.

    Raises:
        IndexOutOfRangeError: ``index`` and ``source`` with different element counts.
    """
    if index.numel() != source.numel():
        raise IndexOutOfRangeError(
            f"put(): expected source and index to have the same number of elements, got {source.numel()} and "
            f"{index.numel()}"
        )
    idx = _flat_index(input, index, "put").reshape(-1)
    flat, src = input.reshape(-1), source.reshape(-1).to(input.dtype)
    out = flat.index_add(0, idx, src) if accumulate else flat.scatter(0, idx, src)
    return out.reshape(input.shape)


def unravel_index(indices, shape) -> tuple:
    """Flat indices into coordinates of a tensor of ``shape``: a tuple of int64 tensors, one per dim.

    Raises:
        IndexOutOfRangeError: an index outside ``[-numel, numel)``.
    """
    shape = (shape,) if isinstance(shape, builtins.int) else tuple(shape)
    idx = _t(indices)
    if idx.dtype.is_floating_point or idx.dtype is D.bool_:
        raise OpError(f"unravel_index: expected 'indices' to be an integer tensor, got {idx.dtype}")
    n = builtins.int(np.prod(shape)) if shape else 1
    out = []
    rem = where(idx < 0, idx + n, idx).to(D.int64)
    for s in reversed(shape):
        out.append(rem % s)
        rem = rem // s
    return tuple(reversed(out))


def _scatter_into(input: Tensor, src, idx, name: str, want) -> Tensor:
    if tuple(src.shape) != tuple(want):
        raise ShapeError(
            f"{name}: expected src to have a size equal to the slice of self, {list(want)}, got {list(src.shape)}"
        )
    out = clone(input)
    out[idx] = src
    return out


def select_scatter(input: Tensor, src: Tensor, dim: int, index: int) -> Tensor:
    """A copy of ``input`` whose slice :func:`select` ``(dim, index)`` is ``src``."""
    d = _dim(dim, input.ndim)
    want = select(input, d, index).shape
    return _scatter_into(input, src, (slice(None),) * d + (index,), "select_scatter", want)


def slice_scatter(input: Tensor, src: Tensor, dim: int = 0, start=None, end=None, step: int = 1) -> Tensor:
    """A copy of ``input`` whose slice ``start:end:step`` along ``dim`` is ``src``."""
    d = _dim(dim, input.ndim)
    idx = (slice(None),) * d + (slice(start, end, step),)
    want = input[idx].shape
    return _scatter_into(input, src, idx, "slice_scatter", want)


def _diag_onehots(n: int, offset: int, dtype):
    """One-hot row and column selectors ``[n, m]`` of the ``offset`` diagonal of an ``m x m`` matrix."""
    m = n + builtins.abs(offset)
    k = arange(n, dtype=D.int64)
    cols = arange(m, dtype=D.int64)
    r = (k.unsqueeze(1) + builtins.max(-offset, 0) == cols).to(dtype)
    c = (k.unsqueeze(1) + builtins.max(offset, 0) == cols).to(dtype)
    return r, c


def diag_embed(input: Tensor, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Tensor:
    """Matrices whose ``offset`` diagonal (in the planes ``dim1, dim2`` of the output) holds the last dim of input."""
    nd = input.ndim + 1
    d1, d2 = _dim(dim1, nd), _dim(dim2, nd)
    if d1 == d2:
        raise OpError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    n = input.shape[-1] if input.ndim else 1
    x = input.reshape(1) if input.ndim == 0 else input
    if x.dtype is D.bool_:
        return diag_embed(x.to(D.int64), offset, dim1, dim2).to(D.bool_)
    r, c = _diag_onehots(n, offset, x.dtype)
    out = einsum("...k,kr,kc->...rc", x, r, c)
    return movedim(out, (nd - 2, nd - 1), (d1, d2)) if (d1, d2) != (nd - 2, nd - 1) else out


_diagonal = diagonal


def diag(input: Tensor, diagonal: int = 0) -> Tensor:
    """A 1-D input: the square matrix with it on the ``diagonal``; a 2-D input: that diagonal as 1-D.

    Raises:
        ShapeError: an input that is neither 1-D nor 2-D.
    """
    if input.ndim == 1:
        return diag_embed(input, diagonal)
    if input.ndim == 2:
        return _diagonal(input, diagonal)
    raise ShapeError(f"diag(): Supports 1D or 2D tensors. Got {input.ndim}D")


def diagflat(input: Tensor, offset: int = 0) -> Tensor:
    """The flattened input as the ``offset`` diagonal of a square matrix."""
    return diag_embed(input.reshape(-1), offset)


def diagonal_scatter(input: Tensor, src: Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor:
    """A copy of ``input`` whose ``offset`` diagonal (of the planes ``dim1, dim2``) is ``src``."""
    d1, d2 = _dim(dim1, input.ndim), _dim(dim2, input.ndim)
    want = diagonal(input, offset, d1, d2).shape
    if tuple(src.shape) != tuple(want):
        raise ShapeError(
            f"diagonal_scatter: expected src to have a size equal to the diagonal, {list(want)}, got {list(src.shape)}"
        )
    n = want[-1]
    rows = arange(n, dtype=D.int64) + builtins.max(-offset, 0)
    cols = arange(n, dtype=D.int64) + builtins.max(offset, 0)
    out = clone(movedim(input, (d1, d2), (-2, -1)))
    out[..., rows, cols] = src
    return movedim(out, (-2, -1), (d1, d2))


def _index_dim(input: Tensor, dim: int, index: Tensor, name: str):
    d = _dim(dim, builtins.max(input.ndim, 1))
    if index.ndim > 1:
        raise ShapeError(f"{name}(): Index is supposed to be a vector, got shape {list(index.shape)}")
    if index.dtype.is_floating_point or index.dtype is D.bool_:
        raise IndexOutOfRangeError(f"{name}(): Expected a long tensor for index, but got {index.dtype}")
    return d, (slice(None),) * d + (index.reshape(-1),)


def index_copy(input: Tensor, dim: int, index: Tensor, source: Tensor) -> Tensor:
    """A copy of ``input`` with ``input[..., index[k], ...] = source[..., k, ...]`` along ``dim``."""
    _, idx = _index_dim(input, dim, index, "index_copy")
    out = clone(input)
    out[idx] = source
    return out


def index_fill(input: Tensor, dim: int, index: Tensor, value) -> Tensor:
    """A copy of ``input`` with the entries at ``index`` along ``dim`` set to ``value`` (a scalar or 0-d tensor)."""
    d, _ = _index_dim(input, dim, index, "index_fill")
    n = input.shape[d] if input.ndim else 1
    idx = where(index.reshape(-1) < 0, index.reshape(-1) + n, index.reshape(-1))
    hit = (arange(n, dtype=D.int64).unsqueeze(1) == idx).any(1)
    shape = [1] * input.ndim
    if input.ndim:
        shape[d] = n
    return masked_fill(input, hit.reshape(shape), value)


def index_put(input: Tensor, indices, values, accumulate: bool = False) -> Tensor:
    """A copy of ``input`` with ``input[indices] = values`` (``+=`` with ``accumulate``, duplicates summed)."""
    indices = tuple(indices)
    out = clone(input)
    if not accumulate:
        out[indices] = values
        return out
    flat_pos = arange(input.numel(), dtype=D.int64).reshape(input.shape)[indices]
    vals = _t(values).to(input.dtype)
    vals = expand(vals, *flat_pos.shape) if tuple(vals.shape) != tuple(flat_pos.shape) else vals
    return input.reshape(-1).index_add(0, flat_pos.reshape(-1), vals.reshape(-1)).reshape(input.shape)


def masked_scatter(input: Tensor, mask: Tensor, source: Tensor) -> Tensor:
    """A copy of ``input`` where the elements at True entries of ``mask`` (broadcast, row-major) are taken in order
    from ``source``.

    Raises:
        OpError: a mask that is not bool.
    """
    if mask.dtype is not D.bool_:
        raise OpError(f"masked_scatter_ only supports boolean masks, but got mask with dtype {mask.dtype}")
    shape = np.broadcast_shapes(tuple(input.shape), tuple(mask.shape))
    m = expand(mask, *shape).reshape(-1)
    x = expand(input, *shape).reshape(-1)
    pos = (cumsum(m.to(D.int64), 0) - 1).clamp(0, builtins.max(source.numel() - 1, 0))
    src = source.reshape(-1).to(input.dtype)
    picked = src.gather(0, pos) if source.numel() else x
    return where(m, picked, x).reshape(shape)


def sum_to_size(input: Tensor, *args, size=None) -> Tensor:
    """``input`` summed to ``size`` (which must broadcast to input's shape), as autograd reduces broadcast grads.

    Raises:
        ShapeError: ``size`` does not broadcast to input's shape.
    """
    if size is None:
        size = tuple(args[0]) if len(args) == 1 and isinstance(args[0], (tuple, list)) else args
    size = tuple(builtins.int(s) for s in size)
    lead = input.ndim - len(size)
    if lead < 0 or any(s not in (1, n) for s, n in zip(size, input.shape[lead:])):
        raise ShapeError(f"size {list(size)} is not expandable to size {list(input.shape)}")
    out = sum(input, tuple(range(lead))) if lead else input
    dims = tuple(i for i, (s, n) in enumerate(zip(size, out.shape)) if s == 1 and n != 1)
    return sum(out, dims, keepdim=True) if dims else out


# ---------------------------------------------------------------- *_copy: lazyflow's views are values already
def alias_copy(input: Tensor) -> Tensor:
    """A copy of ``input`` (``torch.alias_copy``)."""
    return clone(input)


def detach_copy(input: Tensor) -> Tensor:
    """A detached copy of ``input``."""
    return clone(input.detach())


def diagonal_copy(input: Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor:
    """:func:`diagonal` as a new tensor."""
    return clone(diagonal(input, offset, dim1, dim2))


def expand_copy(input: Tensor, size) -> Tensor:
    """``input.expand(size)`` as a new tensor."""
    return clone(expand(input, *size))


def permute_copy(input: Tensor, dims) -> Tensor:
    """``input.permute(dims)`` as a new tensor."""
    return clone(input.permute(*dims))


def select_copy(input: Tensor, dim: int, index: int) -> Tensor:
    """:func:`select` as a new tensor."""
    return clone(select(input, dim, index))


def slice_copy(input: Tensor, dim: int = 0, start=None, end=None, step: int = 1) -> Tensor:
    """``input[..., start:end:step]`` along ``dim`` as a new tensor."""
    return clone(input[(slice(None),) * _dim(dim, input.ndim) + (slice(start, end, step),)])


def split_copy(input: Tensor, split_size, dim: int = 0) -> tuple:
    """:func:`split` with each piece a new tensor."""
    return tuple(clone(t) for t in split(input, split_size, dim))


def split_with_sizes_copy(input: Tensor, split_sizes, dim: int = 0) -> tuple:
    """:func:`split` by a list of sizes, each piece a new tensor."""
    return split_copy(input, list(split_sizes), dim)


def squeeze_copy(input: Tensor, dim=None) -> Tensor:
    """:func:`squeeze` as a new tensor."""
    return clone(squeeze(input, dim))


def t_copy(input: Tensor) -> Tensor:
    """``input.t()`` as a new tensor."""
    return clone(input.t())


def transpose_copy(input: Tensor, dim0: int, dim1: int) -> Tensor:
    """``input.transpose(dim0, dim1)`` as a new tensor."""
    return clone(input.transpose(dim0, dim1))


def unbind_copy(input: Tensor, dim: int = 0) -> tuple:
    """``input.unbind(dim)`` with each piece a new tensor."""
    return tuple(clone(t) for t in input.unbind(dim))


def unfold_copy(input: Tensor, dimension: int, size: int, step: int) -> Tensor:
    """``input.unfold(dimension, size, step)`` as a new tensor."""
    return clone(input.unfold(dimension, size, step))


def unsqueeze_copy(input: Tensor, dim: int) -> Tensor:
    """:func:`unsqueeze` as a new tensor."""
    return clone(unsqueeze(input, dim))


def view_copy(input: Tensor, size) -> Tensor:
    """``input.view(size)`` as a new tensor."""
    return clone(input.view(*size) if isinstance(size, (tuple, list)) else input.view(size))


def narrow_copy(input: Tensor, dim: int, start: int, length: int) -> Tensor:
    """:func:`narrow` as a new tensor."""
    return clone(narrow(input, dim, start, length))


def unsafe_split(input: Tensor, split_size, dim: int = 0) -> tuple:
    """:func:`split` (torch's "unsafe" variant skips a view check that lazyflow has no need for)."""
    return split(input, split_size, dim)


def unsafe_chunk(input: Tensor, chunks: int, dim: int = 0) -> tuple:
    """``input.chunk(chunks, dim)`` (see :func:`unsafe_split`)."""
    return input.chunk(chunks, dim)


# ---------------------------------------------------------------- in-place forms (Tensor methods only)
def _tril_(self: Tensor, diagonal: int = 0) -> Tensor:
    """In-place :func:`tril`."""
    if self.ndim < 2:
        raise ShapeError(f"tril_: input tensor must have at least 2 dimensions, got shape {list(self.shape)}")
    return _inplace(R["tril"], self, (self,), (builtins.int(diagonal),))


def _triu_(self: Tensor, diagonal: int = 0) -> Tensor:
    """In-place :func:`triu`."""
    if self.ndim < 2:
        raise ShapeError(f"triu_: input tensor must have at least 2 dimensions, got shape {list(self.shape)}")
    return _inplace(R["triu"], self, (self,), (builtins.int(diagonal),))


def _fill_diagonal_(self: Tensor, fill_value, wrap: bool = False) -> Tensor:
    """Fill the main diagonal in place (all dims equal when more than 2; ``wrap`` restarts it below tall matrices).

    Raises:
        ShapeError: fewer than 2 dims, or unequal dims beyond 2-D.
    """
    if self.ndim < 2:
        raise ShapeError(f"fill_diagonal_: dimensions must larger than 1, got {self.ndim}")
    if self.ndim > 2 and len(set(self.shape)) != 1:
        raise ShapeError(f"fill_diagonal_: all dimensions of input must be of equal length, got {list(self.shape)}")
    n = self.numel()
    step = builtins.sum(builtins.int(np.prod(self.shape[i + 1 :])) for i in range(self.ndim))
    if self.ndim == 2 and not wrap:
        limit = builtins.min(self.shape[0], self.shape[1]) * self.shape[1]
    else:
        limit = n
    flat = np.zeros(n, bool)
    flat[np.arange(0, limit, step)] = True
    mask = _t(flat.reshape(tuple(self.shape)))
    return self.masked_fill_(mask, fill_value)


def _index_copy_(self: Tensor, dim: int, index: Tensor, source: Tensor) -> Tensor:
    """In-place :func:`index_copy`."""
    _, idx = _index_dim(self, dim, index, "index_copy_")
    self[idx] = source
    return self


def _index_fill_(self: Tensor, dim: int, index: Tensor, value) -> Tensor:
    """In-place :func:`index_fill`."""
    return self.copy_(index_fill(snapshot(self), dim, index, value))


def _index_put_(self: Tensor, indices, values, accumulate: bool = False) -> Tensor:
    """In-place :func:`index_put`."""
    if not accumulate:
        self[tuple(indices)] = values
        return self
    return self.copy_(index_put(snapshot(self), indices, values, True))


def _masked_scatter_(self: Tensor, mask: Tensor, source: Tensor) -> Tensor:
    """In-place :func:`masked_scatter` (``mask`` must broadcast to self's shape)."""
    return self.copy_(masked_scatter(snapshot(self), mask, source))


def _put_(self: Tensor, index: Tensor, source: Tensor, accumulate: bool = False) -> Tensor:
    """In-place :func:`put`."""
    return self.copy_(put(snapshot(self), index, source, accumulate))


METHOD_ONLY = {
    "tril_": _tril_,
    "triu_": _triu_,
    "fill_diagonal_": _fill_diagonal_,
    "index_copy_": _index_copy_,
    "index_fill_": _index_fill_,
    "index_put_": _index_put_,
    "masked_scatter_": _masked_scatter_,
    "put_": _put_,
}
METHOD_ONLY["scatter_reduce_"] = _composite_ip(scatter_reduce, "scatter_reduce")


def _shape_ip(fn, name: str):
    """In-place form of a shape op (``unsqueeze_``, ``t_``...): ``self`` takes the new shape and graph position.

    Eager only: graph mode keeps its traced tensors' shapes fixed, so there the out-of-place op is the way."""

    def f(self: Tensor, *args, **kw) -> Tensor:
        if isinstance(self._value, _Tracer):
            raise GraphError(
                f"{name}_ changes a tensor's shape in place, which graph mode (lf.compile / lf.nn.Graph) does not "
                f"support; use the out-of-place form: x = x.{name}(...)"
            )
        if state.grad_enabled and self._rg and self._node is None:
            raise AutogradError(
                f"a leaf Variable that requires grad is being used in an in-place operation ({name}_); wrap it in "
                "`with lf.no_grad():` or operate on a clone"
            )
        res = fn(snapshot(self), *args, **kw)  # the node must see self's old graph position, not the new one
        # its detach()/.data aliases keep their own shape (in torch they are views with their own sizes; lazyflow
        # cannot keep a view of another shape in sync), so self leaves their storage group first
        _leave(self)
        _rebind(self, res._value, res._meta)
        if res._node is not None:
            self._rg, self._node, self._oidx = True, res._node, res._oidx
        return self

    f.__name__ = f.__qualname__ = name + "_"
    f.__doc__ = f"In-place ``{name}``: ``self`` takes the result's shape (eager only); returns ``self``."
    return f


def _resized(x: Tensor, *sizes) -> Tensor:
    """``x``'s elements (row-major) in a tensor of ``sizes``: truncated, or extended with zeros (torch leaves the new
    elements uninitialised; lazyflow's allocations are zeros, as its ``empty``)."""
    shape = tuple(sizes[0]) if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)) else tuple(sizes)
    shape = tuple(builtins.int(n) for n in shape)
    if any(n < 0 for n in shape):
        raise ShapeError(f"resize_: sizes must be non-negative, got {list(shape)}")
    n = builtins.int(np.prod(shape)) if shape else 1
    flat = x.reshape(-1)
    if n <= flat.shape[0]:
        return flat[:n].reshape(shape)
    return cat([flat, zeros(n - flat.shape[0], dtype=x.dtype)]).reshape(shape)


def _resize_as(x: Tensor, the_template: Tensor) -> Tensor:
    return _resized(x, tuple(the_template.shape))


METHOD_ONLY.update(
    resize_=_shape_ip(_resized, "resize"),
    resize_as_=_shape_ip(_resize_as, "resize_as"),
    squeeze_=_shape_ip(squeeze, "squeeze"),
    unsqueeze_=_shape_ip(unsqueeze, "unsqueeze"),
    t_=_shape_ip(lambda x: x.t(), "t"),
    transpose_=_shape_ip(lambda x, dim0, dim1: x.transpose(dim0, dim1), "transpose"),
    swapaxes_=_shape_ip(lambda x, axis0, axis1: x.transpose(axis0, axis1), "swapaxes"),
    swapdims_=_shape_ip(lambda x, dim0, dim1: x.transpose(dim0, dim1), "swapdims"),
)
