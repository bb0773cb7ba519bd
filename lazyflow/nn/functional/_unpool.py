"""``max_pool{1,2,3}d_with_indices`` and ``max_unpool{1,2,3}d`` with ``torch.nn.functional``'s signatures.

Unpooling writes each value at its flat index (per sample and channel) into a zero tensor of the output size: one
``scatter`` along the flattened spatial dims, so the gradient is the matching ``gather``.
"""

from __future__ import annotations

from collections.abc import Sequence

from ... import _functional as _F
from ..._core.errors import DTypeError, ShapeError
from ..._creation import zeros
from ..._tensor import Tensor
from ._conv import max_pool1d, max_pool2d
from ._linear import _check_indices
from ._pool import max_pool3d

__all__ = [
    "max_pool1d_with_indices",
    "max_pool2d_with_indices",
    "max_pool3d_with_indices",
    "max_unpool1d",
    "max_unpool2d",
    "max_unpool3d",
]

IntOrTuple = int | Sequence[int]


def max_pool1d_with_indices(
    input: Tensor,
    kernel_size: IntOrTuple,
    stride: IntOrTuple | None = None,
    padding: IntOrTuple = 0,
    dilation: IntOrTuple = 1,
    ceil_mode: bool = False,
    return_indices: bool = False,
):
    """:func:`max_pool1d` returning ``(output, indices)`` (``return_indices`` is ignored, as torch's)."""
    return max_pool1d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def max_pool2d_with_indices(
    input: Tensor,
    kernel_size: IntOrTuple,
    stride: IntOrTuple | None = None,
    padding: IntOrTuple = 0,
    dilation: IntOrTuple = 1,
    ceil_mode: bool = False,
    return_indices: bool = False,
):
    """:func:`max_pool2d` returning ``(output, indices)`` (``return_indices`` is ignored, as torch's)."""
    return max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def max_pool3d_with_indices(
    input: Tensor,
    kernel_size: IntOrTuple,
    stride: IntOrTuple | None = None,
    padding: IntOrTuple = 0,
    dilation: IntOrTuple = 1,
    ceil_mode: bool = False,
    return_indices: bool = False,
):
    """:func:`max_pool3d` returning ``(output, indices)`` (``return_indices`` is ignored, as torch's)."""
    return max_pool3d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def _tuple(v, nd: int, what: str) -> tuple[int, ...]:
    if isinstance(v, int):
        return (v,) * nd
    t = tuple(int(i) for i in v)
    if len(t) == 1:
        return t * nd
    if len(t) != nd:
        raise ShapeError(f"max_unpool{nd}d: {what} must be an int or a tuple of {nd} ints, got {v}")
    return t


def _unpool(fn, nd, input, indices, kernel_size, stride, padding, output_size):
    if not isinstance(input, Tensor) or not isinstance(indices, Tensor):
        raise TypeError(f"{fn}: expected lazyflow Tensors for input and indices")
    if input.ndim not in (nd + 1, nd + 2):
        raise ShapeError(f"{fn}: expected a {nd + 1}-D or {nd + 2}-D input, got shape {list(input.shape)}")
    if tuple(indices.shape) != tuple(input.shape):
        raise ShapeError(f"{fn}: expected indices of the input's shape {list(input.shape)}, got {list(indices.shape)}")
    if indices.dtype.is_floating_point:
        raise DTypeError(
            f"{fn}: expected integer indices (from max_pool with return_indices=True), got {indices.dtype}"
        )
    k = _tuple(kernel_size, nd, "kernel_size")
    s = _tuple(stride if stride is not None else kernel_size, nd, "stride")
    p = _tuple(padding, nd, "padding")
    spatial = tuple(input.shape[-nd:])
    default = tuple((spatial[d] - 1) * s[d] - 2 * p[d] + k[d] for d in range(nd))
    if output_size is None:
        out = default
    else:
        out = tuple(int(i) for i in output_size)
        if len(out) == nd + 2 or (len(out) == nd + 1 and input.ndim == nd + 1):
            out = out[-nd:]
        if len(out) != nd:
            raise ShapeError(f"{fn}: output_size must have {nd} or {nd + 2} elements, got {list(output_size)}")
        for d in range(nd):
            lo, hi = default[d] - s[d], default[d] + s[d]
            if not lo < out[d] < hi:
                raise ShapeError(
                    f"{fn}: invalid output_size {list(output_size)} (dim {d} must be between {lo + 1} and {hi - 1})"
                )
    lead = tuple(input.shape[:-nd])
    n_out = 1
    for v in out:
        n_out *= v
    _check_indices(indices, n_out, f"{fn}: indices")
    flat_in = input.reshape(lead + (-1,))
    flat_idx = indices.reshape(lead + (-1,)).long()
    res = _F.scatter(zeros(lead + (n_out,), dtype=input.dtype), -1, flat_idx, flat_in)
    return res.reshape(lead + out)


def max_unpool1d(
    input: Tensor,
    indices: Tensor,
    kernel_size: IntOrTuple,
    stride: IntOrTuple | None = None,
    padding: IntOrTuple = 0,
    output_size: Sequence[int] | None = None,
) -> Tensor:
    """Partial inverse of :func:`max_pool1d`: each value back at its index, zeros elsewhere.

    Raises:
        ShapeError: input and indices of different shapes, a wrong rank, or an output_size out of range.
        IndexOutOfRangeError: an index outside the output.
    """
    return _unpool("max_unpool1d", 1, input, indices, kernel_size, stride, padding, output_size)


def max_unpool2d(
    input: Tensor,
    indices: Tensor,
    kernel_size: IntOrTuple,
    stride: IntOrTuple | None = None,
    padding: IntOrTuple = 0,
    output_size: Sequence[int] | None = None,
) -> Tensor:
    """Partial inverse of :func:`max_pool2d` (flat ``h * W + w`` indices); errors as :func:`max_unpool1d`."""
    return _unpool("max_unpool2d", 2, input, indices, kernel_size, stride, padding, output_size)


def max_unpool3d(
    input: Tensor,
    indices: Tensor,
    kernel_size: IntOrTuple,
    stride: IntOrTuple | None = None,
    padding: IntOrTuple = 0,
    output_size: Sequence[int] | None = None,
) -> Tensor:
    """Partial inverse of :func:`max_pool3d`; errors as :func:`max_unpool1d`."""
    return _unpool("max_unpool3d", 3, input, indices, kernel_size, stride, padding, output_size)
