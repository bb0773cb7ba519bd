"""Shape op functions with torch's signatures: reshape/view, squeeze/permute/transpose, expand/repeat,
cat/stack/split, flip/roll."""

from __future__ import annotations

import builtins
import math
from typing import Any

import numpy as np
from jax.export import is_symbolic_dim

from .._core import dtypes as D
from .._core.errors import DTypeError, IndexOutOfRangeError, OpError, ShapeError
from .._creation import _keyword_sizes, arange
from .._tensor import Tensor, _dim, _make
from ..ops.table import REGISTRY as R
from ._common import _apply, _dims, _MinMax, _t
from .elementwise import clone

__all__ = [
    "broadcast_shapes",
    "broadcast_tensors",
    "broadcast_to",
    "cat",
    "chunk",
    "concat",
    "concatenate",
    "expand",
    "expand_as",
    "flatten",
    "flip",
    "fliplr",
    "flipud",
    "hstack",
    "moveaxis",
    "movedim",
    "narrow",
    "permute",
    "repeat",
    "repeat_interleave",
    "reshape",
    "reshape_as",
    "roll",
    "split",
    "squeeze",
    "stack",
    "swapaxes",
    "swapdims",
    "t",
    "tensor_split",
    "tile",
    "transpose",
    "unbind",
    "unflatten",
    "unsqueeze",
    "view",
    "view_as",
    "vstack",
]


def _on_scalar(input, fn, dim) -> Any:
    """Run a one-dim op ``fn(x, d)`` on a 0-d ``input`` as on its 1-element view (torch accepts dim 0/-1)."""
    _dim(dim, 0)
    out = fn(reshape(input, 1), 0)
    if isinstance(out, _MinMax):
        return _MinMax(*(reshape(o, ()) for o in out))
    if isinstance(out, tuple):
        return tuple(reshape(o, ()) for o in out)
    return reshape(out, ())


# ---------------------------------------------------------------- shape ops
def _infer_shape(shape, numel, what):
    # a jax.export symbolic dimension (lf.export / lf.onnx dynamic axes) stays symbolic: jax does its arithmetic
    shape = [s if is_symbolic_dim(s) else builtins.int(s) for s in shape]
    neg = [i for i, s in enumerate(shape) if s == -1]
    if len(neg) > 1:
        raise ShapeError(f"{what}: only one dimension can be inferred, got {shape}")
    if builtins.any(s < -1 for s in shape):
        raise ShapeError(f"{what}: invalid shape dimension in {shape}")
    known = 1
    for s in shape:
        if s != -1:
            known *= s
    if neg:
        if known == 0 or numel % known:
            raise ShapeError(f"{what}: shape {shape} is invalid for input of size {numel}")
        shape[neg[0]] = numel // known
    elif known != numel:
        raise ShapeError(f"{what}: shape {shape} is invalid for input of size {numel}")
    return tuple(shape)


def _shape_args(shape):
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        return tuple(shape[0])
    return shape


def reshape(input: Tensor, *args, shape=None) -> Tensor:
    """The same elements in a new shape (one ``-1`` is inferred): ``reshape(2, 3)``, ``reshape((2, 3))`` or
    ``reshape(shape=(2, 3))``.

    lazyflow has no storage views: the result never aliases ``input`` for writes.

    Raises:
        ShapeError: the element counts differ, or more than one ``-1``.
    """
    if shape is not None:
        args = _keyword_sizes("reshape", "shape", args, shape)
    shape = _infer_shape(_shape_args(args), input.numel(), "reshape")
    if shape == input.shape:
        # no record needed: a fresh alias (not detach(), which cuts a compiled VJP's gradient too)
        return _apply(R["reshape"], (input,), (shape,)) if input._rg else _make(input._value, input._meta)
    return _apply(R["reshape"], (input,), (shape,))


def view(input: Tensor, *args, size=None, dtype=None) -> Tensor:
    """``reshape`` under torch's other name (a copy-on-write value, not a storage view; see the README):
    ``view(2, 3)``, ``view((2, 3))`` or ``view(size=(2, 3))``.

    Raises:
        ShapeError: as :func:`reshape`.
        DTypeError: ``view(dtype)`` bit reinterpretation, which lazyflow does not support.
    """
    if size is not None:
        args = _keyword_sizes("view", "size", args, size)
    if dtype is not None or (len(args) == 1 and isinstance(args[0], D.DType)):
        raise DTypeError(
            f"view(dtype) bit reinterpretation is not supported (got {dtype or args[0]}); "
            "use .to(dtype) to convert the values"
        )
    return reshape(input, *args)


def view_as(input: Tensor, other: Tensor) -> Tensor:
    """``input`` reshaped to ``other.shape``."""
    return reshape(input, other.shape)


def reshape_as(input: Tensor, other: Tensor) -> Tensor:
    """``input`` reshaped to ``other.shape``."""
    return reshape(input, other.shape)


def flatten(input: Tensor, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    """Merge dimensions ``start_dim..end_dim`` (inclusive) into one; a 0-d input becomes 1-D.

    Raises:
        IndexOutOfRangeError: a dim out of range.
        OpError: ``start_dim`` after ``end_dim``.
    """
    if input.ndim == 0:
        return reshape(input, 1)
    s, e = _dim(start_dim, input.ndim), _dim(end_dim, input.ndim)
    if s > e:
        raise OpError(f"flatten() has invalid args: start_dim {start_dim} cannot come after end_dim {end_dim}")
    shp = input.shape
    return reshape(input, shp[:s] + (math.prod(shp[s : e + 1]),) + shp[e + 1 :])


def unflatten(input: Tensor, dim: int, sizes) -> Tensor:
    """Split dimension ``dim`` into ``sizes`` (one ``-1`` is inferred).

    Raises:
        ShapeError: ``sizes`` does not multiply to the size of ``dim``.
    """
    d = _dim(dim, input.ndim)
    sizes = _infer_shape(sizes, input.shape[d], "unflatten")
    return reshape(input, input.shape[:d] + sizes + input.shape[d + 1 :])


def squeeze(input: Tensor, dim=None) -> Tensor:
    """Drop size-1 dimensions: all of them, or those among ``dim`` (int or tuple); other sizes stay."""
    if dim is None:
        return reshape(input, tuple(s for s in input.shape if s != 1))
    dims = _dims(dim, input.ndim) or ()
    return reshape(input, tuple(s for i, s in enumerate(input.shape) if not (i in dims and s == 1)))


def unsqueeze(input: Tensor, dim: int) -> Tensor:
    """Insert a size-1 dimension at ``dim`` (in ``[-ndim-1, ndim]``)."""
    d = _dim(dim, input.ndim + 1)
    return reshape(input, input.shape[:d] + (1,) + input.shape[d:])


def permute(input: Tensor, *args, dims=None) -> Tensor:
    """Reorder dimensions: ``permute(2, 0, 1)``, ``permute((2, 0, 1))`` or ``permute(dims=(2, 0, 1))``.

    Raises:
        ShapeError: not one entry per dimension.
        OpError: a repeated dimension.
    """
    if dims is not None:
        args = _keyword_sizes("permute", "dims", args, dims)
    dims = _shape_args(args)
    if len(dims) != input.ndim:
        raise ShapeError(
            f"permute: number of dims {len(dims)} doesn't match the tensor's {input.ndim} (shape {list(input.shape)})"
        )
    nd = tuple(_dim(d, input.ndim) for d in dims)
    if len(set(nd)) != len(nd):
        raise OpError(f"permute: repeated dim in {tuple(dims)}")
    if nd == tuple(range(input.ndim)):
        return reshape(input, input.shape)
    return _apply(R["permute"], (input,), (nd,))


def transpose(input: Tensor, dim0: int, dim1: int) -> Tensor:
    """Swap dimensions ``dim0`` and ``dim1``."""
    if input.ndim == 0:
        _dim(dim0, 0)
        _dim(dim1, 0)
        return reshape(input, ())
    a, b = _dim(dim0, input.ndim), _dim(dim1, input.ndim)
    p = list(range(input.ndim))
    p[a], p[b] = p[b], p[a]
    return permute(input, *p)


swapdims = transpose


def swapaxes(input: Tensor, axis0: int, axis1: int) -> Tensor:
    """:func:`transpose` under numpy's name and argument names."""
    return transpose(input, axis0, axis1)


def t(input: Tensor) -> Tensor:
    """Transpose of a matrix (0-D and 1-D tensors are returned as they are).

    Raises:
        ShapeError: more than 2 dimensions.
    """
    if input.ndim > 2:
        raise ShapeError(f"t() expects a tensor with <= 2 dimensions, but self is {input.ndim}D")
    return transpose(input, 0, 1) if input.ndim == 2 else reshape(input, input.shape)


def movedim(input: Tensor, source, destination) -> Tensor:
    """Move dimension(s) ``source`` to position(s) ``destination``; the others keep their order."""
    src = [source] if isinstance(source, builtins.int) else list(source)
    dst = [destination] if isinstance(destination, builtins.int) else list(destination)
    if len(src) != len(dst):
        raise ShapeError(f"movedim: source {src} and destination {dst} must have the same number of dims")
    src = [_dim(s, input.ndim) for s in src]
    dst = [_dim(d, input.ndim) for d in dst]
    order = [i for i in range(input.ndim) if i not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return permute(input, *order)


moveaxis = movedim


def expand(input: Tensor, *args, size=None) -> Tensor:
    """Broadcast size-1 dimensions to the given sizes (``-1`` keeps a size; new leading dims may be added):
    ``expand(3, 4)``, ``expand((3, 4))`` or ``expand(size=(3, 4))``.

    Raises:
        ShapeError: fewer sizes than dimensions, a non-singleton size that differs, or ``-1`` for a new
            leading dimension.
    """
    if size is not None:
        args = _keyword_sizes("expand", "size", args, size)
    sizes = tuple(builtins.int(s) for s in _shape_args(args))
    if len(sizes) < input.ndim:
        raise ShapeError(
            f"expand: the number of sizes provided ({len(sizes)}) must be greater or equal to "
            f"the number of dimensions in the tensor ({input.ndim})"
        )
    lead = len(sizes) - input.ndim
    shp = (1,) * lead + input.shape
    out = []
    for i, (s, cur) in enumerate(zip(sizes, shp)):
        if s == -1:
            if i < lead:
                raise ShapeError(
                    f"expand: the expanded size -1 isn't allowed in a leading, non-existing "
                    f"dimension {i}; target sizes {list(sizes)}, tensor shape {list(input.shape)}"
                )
            s = cur
        if s < 0 or (cur != 1 and cur != s):
            raise ShapeError(
                f"expand: the expanded size of the tensor ({s}) must match the existing size "
                f"({cur}) at non-singleton dimension {i}; target sizes {list(sizes)}, tensor "
                f"shape {list(input.shape)}"
            )
        out.append(s)
    out = tuple(out)
    if out == input.shape:
        return reshape(input, out)
    return _apply(R["expand"], (input,), (out,))


def broadcast_to(input: Tensor, size) -> Tensor:
    """``input`` broadcast to ``size`` (see :func:`expand`)."""
    return expand(input, *size)


def expand_as(input: Tensor, other: Tensor) -> Tensor:
    """``input`` expanded to ``other.shape``."""
    return expand(input, *other.shape)


def broadcast_shapes(*shapes) -> tuple:
    """The shape that ``shapes`` broadcast to (torch's rules, which are numpy's).

    Raises:
        ShapeError: shapes that do not broadcast.
    """
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        raise ShapeError(f"shapes {[list(s) for s in shapes]} cannot be broadcast together") from None


def broadcast_tensors(*tensors) -> tuple:
    """The tensors expanded to their common broadcast shape."""
    shape = broadcast_shapes(*[t.shape for t in tensors])
    return tuple(expand(t, *shape) for t in tensors)


def _check_reps(reps, what):
    if builtins.any(r < 0 for r in reps):
        raise ShapeError(f"{what}: repeats must be non-negative, got {list(reps)}")


def repeat(input: Tensor, *args, repeats=None) -> Tensor:
    """Tile the tensor ``repeats[i]`` times along each dimension (``Tensor.repeat``; extra counts add leading dims):
    ``repeat(2, 3)``, ``repeat((2, 3))`` or ``repeat(repeats=(2, 3))``.

    Raises:
        ShapeError: fewer counts than dimensions, or a negative count.
    """
    if repeats is not None:
        args = _keyword_sizes("repeat", "repeats", args, repeats)
    sizes = tuple(builtins.int(s) for s in _shape_args(args))
    if len(sizes) < input.ndim:
        raise ShapeError(
            f"repeat: number of repeat dims ({len(sizes)}) can not be smaller than number of tensor dims ({input.ndim})"
        )
    _check_reps(sizes, "repeat")
    return _apply(R["tile"], (input,), (sizes,))


def tile(input: Tensor, *args, dims=None) -> Tensor:
    """Like :func:`repeat`, but fewer ``dims`` than dimensions are padded with leading 1s: ``tile(2, 3)``,
    ``tile((2, 3))`` or ``tile(dims=(2, 3))``.

    Raises:
        ShapeError: a negative repetition.
    """
    if dims is not None:
        args = _keyword_sizes("tile", "dims", args, dims)
    dims = tuple(builtins.int(s) for s in _shape_args(args))
    _check_reps(dims, "tile")
    if len(dims) < input.ndim:
        dims = (1,) * (input.ndim - len(dims)) + dims
    return _apply(R["tile"], (input,), (dims,))


def repeat_interleave(input: Tensor, repeats=None, dim: int | None = None, *, output_size: int | None = None) -> Tensor:
    """Repeat each element ``repeats`` times (int, or one count per element) along ``dim``.

    With ``dim=None`` the input is flattened first. Counts given as a tensor are read eagerly. Called with the
    counts alone (``repeat_interleave(counts)``), repeats ``0, 1, 2, ...`` by ``counts``, like torch.

    Args:
        input: the tensor (or, alone, the counts).
        repeats: an int or one count per element along ``dim``.
        dim: the dimension to repeat along (None: the flattened input).
        output_size: the size of the result along ``dim``, checked when given (torch uses it to avoid a sync).
    Raises:
        ShapeError: a negative count, a count list whose length differs from the dimension, or an
            ``output_size`` that differs from the result's size.
    """
    if repeats is None:
        counts = _t(input)
        if counts.ndim != 1 or counts.dtype.is_floating_point or counts.dtype is D.bool_:
            raise ShapeError(
                f"repeat_interleave(repeats): repeats must be a 1-D integer tensor, got "
                f"{counts.dtype} of shape {list(counts.shape)}"
            )
        return repeat_interleave(arange(counts.shape[0], dtype=counts.dtype), counts, 0, output_size=output_size)
    if isinstance(repeats, Tensor):
        repeats = repeats.item() if repeats.ndim == 0 else tuple(repeats.tolist())
    elif not isinstance(repeats, (builtins.int, np.integer)):
        repeats = tuple(builtins.int(r) for r in repeats)
    n = input.numel() if dim is None else input.shape[_dim(dim, input.ndim)]
    reps = repeats if isinstance(repeats, tuple) else (repeats,)
    _check_reps(reps, "repeat_interleave")
    if isinstance(repeats, tuple) and len(repeats) not in (1, n):
        raise ShapeError(
            f"repeat_interleave: repeats must have the same size as input along dim ({n}), got {len(repeats)}"
        )
    if isinstance(repeats, tuple) and len(repeats) == 1:
        repeats = repeats[0]
    if output_size is not None:
        total = builtins.sum(repeats) if isinstance(repeats, tuple) else builtins.int(repeats) * n
        if builtins.int(output_size) != total:
            raise ShapeError(
                f"repeat_interleave: output_size={output_size} does not match the result's size "
                f"{total} along the repeated dimension"
            )
    return _apply(
        R["repeat_interleave"],
        (input,),
        (
            builtins.int(repeats) if not isinstance(repeats, tuple) else repeats,
            None if dim is None else _dim(dim, input.ndim),
        ),
    )


def _tensor_list(tensors, what):
    if isinstance(tensors, Tensor):
        raise OpError(f"{what} expects a list or tuple of tensors, got a single Tensor of shape {list(tensors.shape)}")
    ts = [_t(x) for x in tensors]
    if not ts:
        raise OpError(f"{what} expects a non-empty list of tensors")
    return ts


def cat(tensors, dim: int = 0) -> Tensor:
    """Concatenate along ``dim``; shapes must match except in ``dim`` (dtypes promote like torch).

    Args:
        tensors: a sequence of tensors (1-D empty tensors are skipped, like torch).
        dim: the dimension to join along.
    Raises:
        ShapeError: ranks or sizes outside ``dim`` differ.
        OpError: an empty list.
    """
    ts = _tensor_list(tensors, "cat")
    ts = [x for x in ts if not (x.ndim == 1 and x.shape[0] == 0)] or ts[:1]
    nd = ts[0].ndim
    if nd == 0:
        raise ShapeError("cat: zero-dimensional tensor cannot be concatenated; unsqueeze it first")
    d = _dim(dim, nd)
    for x in ts:
        if x.ndim != nd or builtins.any(a != b for i, (a, b) in enumerate(zip(x.shape, ts[0].shape)) if i != d):
            raise ShapeError(
                f"cat: sizes of tensors must match except in dimension {d}; got shapes {[list(y.shape) for y in ts]}"
            )
    if len(ts) == 1:
        return clone(ts[0])
    return _apply(R["cat"], tuple(ts), (d,))


concat = cat


def concatenate(tensors, axis: int = 0) -> Tensor:
    """:func:`cat` under numpy's name and argument name."""
    return cat(tensors, axis)


def stack(tensors, dim: int = 0) -> Tensor:
    """Join equally-shaped tensors along a new dimension ``dim``.

    Raises:
        ShapeError: shapes differ.
        OpError: an empty list.
    """
    ts = _tensor_list(tensors, "stack")
    for x in ts:
        if x.shape != ts[0].shape:
            raise ShapeError(f"stack expects each tensor to be equal size, got shapes {[list(y.shape) for y in ts]}")
    return _apply(R["stack"], tuple(ts), (_dim(dim, ts[0].ndim + 1),))


def hstack(tensors) -> Tensor:
    """Concatenate along dimension 1 (dimension 0 for 1-D tensors)."""
    ts = _tensor_list(tensors, "hstack")
    return cat(ts, 0 if ts[0].ndim == 1 else 1)


def vstack(tensors) -> Tensor:
    """Concatenate along dimension 0, 1-D tensors first becoming rows."""
    return cat([x if x.ndim > 1 else x.reshape(1, -1) for x in _tensor_list(tensors, "vstack")], 0)


def split(tensor: Tensor, split_size_or_sections, dim: int = 0) -> tuple:
    """Split into pieces of ``split_size`` (int; the last may be smaller) or of the listed sizes.

    Raises:
        ShapeError: sizes that do not sum to the dimension.
        OpError: a non-positive split size.
    """
    d = _dim(dim, tensor.ndim)
    n = tensor.shape[d]
    if isinstance(split_size_or_sections, (builtins.int, np.integer)):
        s = builtins.int(split_size_or_sections)
        if s <= 0 and not (s == 0 and n == 0):
            raise OpError(f"split expects split_size be positive, got {s}")
        sizes = [s] * (n // s) + ([n % s] if n % s else []) if s else [0]
        if not sizes:
            sizes = [0]
    else:
        sizes = [builtins.int(s) for s in split_size_or_sections]
        if builtins.sum(sizes) != n or builtins.any(s < 0 for s in sizes):
            raise ShapeError(
                f"split_with_sizes expects split_sizes to sum exactly to {n} (input tensor's size "
                f"at dimension {d}), but got split_sizes={sizes}"
            )
    out = _apply(R["split"], (tensor,), (tuple(sizes), d))
    return out if isinstance(out, tuple) else (out,)


def chunk(input: Tensor, chunks: int, dim: int = 0) -> tuple:
    """Split into ``chunks`` pieces of ``ceil(size / chunks)`` (fewer pieces when that covers the dimension).

    Raises:
        OpError: ``chunks`` < 1.
    """
    if chunks <= 0:
        raise OpError(f"chunk expects `chunks` to be greater than 0, got: {chunks}")
    n = input.shape[_dim(dim, input.ndim)]
    return split(input, builtins.max(1, math.ceil(n / chunks)), dim)


def tensor_split(input: Tensor, indices_or_sections=None, dim: int = 0, *, sections=None, indices=None) -> tuple:
    """Split into ``n`` nearly equal pieces (an int: the first ``size % n`` get one more), or at the listed indices.

    Args:
        input: the tensor.
        indices_or_sections: a section count (int or 0-d tensor) or a sequence of split indices; torch's keyword
            spellings are ``sections=`` and ``indices=``.
        dim: the dimension to split.
    Raises:
        OpError: a section count < 1.
        TypeError: no sections/indices, or more than one spelling of them.
    """
    given = [v for v in (indices_or_sections, sections, indices) if v is not None]
    if len(given) != 1:
        raise TypeError(
            f"tensor_split() takes exactly one of indices_or_sections, sections= or indices=, got {len(given)}"
        )
    spec = given[0]
    if isinstance(spec, Tensor):
        spec = spec.tolist()
    d = _dim(dim, input.ndim)
    n = input.shape[d]
    if isinstance(spec, (builtins.int, np.integer)):
        count = builtins.int(spec)
        if count < 1:
            raise OpError(f"tensor_split: number of sections must be at least 1, got {count}")
        q, r = divmod(n, count)
        return split(input, [q + 1] * r + [q] * (count - r), d)
    bounds = [builtins.min(builtins.max(builtins.int(i) + (n if i < 0 else 0), 0), n) for i in spec]
    edges = [0] + bounds + [n]
    sizes = [builtins.max(0, b - a) for a, b in zip(edges[:-1], edges[1:])]
    starts = edges[:-1]
    return tuple(narrow(input, d, builtins.min(s, n), sz) for s, sz in zip(starts, sizes))


def narrow(input: Tensor, dim: int, start: int, length: int) -> Tensor:
    """The slice ``start : start + length`` along ``dim``.

    Raises:
        IndexOutOfRangeError: the slice leaves the dimension.
    """
    d = _dim(dim, input.ndim)
    n = input.shape[d]
    if start < 0:
        start += n
    if not (0 <= start <= n and 0 <= length and start + length <= n):
        raise IndexOutOfRangeError(f"narrow: start {start} + length {length} exceeds dimension {d} of size {n}")
    return input[(slice(None),) * d + (slice(start, start + length),)]


def unbind(input: Tensor, dim: int = 0) -> tuple:
    """The slices along ``dim``, each without that dimension."""
    d = _dim(dim, input.ndim)
    if input.shape[d] == 0:
        return ()
    parts = split(input, 1, d)
    return tuple(squeeze(p, d) for p in parts)


def flip(input: Tensor, *args, dims=None) -> Tensor:
    """Reverse the order of elements along ``dims``: ``flip(0, 1)``, ``flip((0, 1))`` or ``flip(dims=(0, 1))``."""
    if dims is not None:
        args = _keyword_sizes("flip", "dims", args, dims)
    dims = _shape_args(args)
    if len(dims) == 1 and isinstance(dims[0], (builtins.int, np.integer)):
        dims = (builtins.int(dims[0]),)
    return _apply(R["flip"], (input,), (_dims(tuple(dims), input.ndim) or (),))


def fliplr(input: Tensor) -> Tensor:
    """Reverse dimension 1 (needs at least 2 dims)."""
    if input.ndim < 2:
        raise ShapeError(f"fliplr: input must be >= 2-d, got shape {list(input.shape)}")
    return flip(input, (1,))


def flipud(input: Tensor) -> Tensor:
    """Reverse dimension 0 (needs at least 1 dim)."""
    if input.ndim < 1:
        raise ShapeError("flipud: input must be >= 1-d, got a 0-d tensor")
    return flip(input, (0,))


def roll(input: Tensor, shifts, dims=None) -> Tensor:
    """Shift elements circularly by ``shifts`` along ``dims`` (the flattened tensor when ``dims`` is None).

    Raises:
        OpError: ``shifts`` and ``dims`` of different lengths.
    """
    if dims is None:
        if not isinstance(shifts, (builtins.int, np.integer)):
            shifts = tuple(shifts)
            if len(shifts) != 1:
                raise OpError(f"roll: shifts {shifts} need dims when there is more than one")
            shifts = shifts[0]
        return roll(flatten(input), shifts, 0).reshape(input.shape)
    shifts = (builtins.int(shifts),) if isinstance(shifts, (builtins.int, np.integer)) else tuple(shifts)
    dims = (builtins.int(dims),) if isinstance(dims, (builtins.int, np.integer)) else tuple(dims)
    if len(shifts) != len(dims):
        raise OpError(f"roll: shifts {shifts} and dims {dims} must have the same length")
    if input.ndim == 0:
        return reshape(input, ())
    return _apply(R["roll"], (input,), (shifts, tuple(_dim(d, input.ndim) for d in dims)))
