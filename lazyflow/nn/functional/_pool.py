"""``lp_pool1d/2d`` (torch's composite over ``avg_pool``) and ``adaptive_max_pool1d/2d`` (a gather of each bin).

Adaptive max pooling gathers every bin ``[floor(i*n/m), ceil((i+1)*n/m))`` (padded to the longest bin by
repeating its first element) with one host-computed index table, takes the first maximum in row-major order
(torch's CPU loop), and reads the value back with ``gather`` at that flat index, so the gradient goes to that one
element, as in torch.
"""

from __future__ import annotations

import builtins
import math
from collections.abc import Sequence

import numpy as np

from ..._core.errors import ShapeError
from ..._creation import as_tensor
from ..._tensor import Tensor
from ._activation import relu
from ._conv import (
    IntOrTuple,
    _adaptive,
    _avg_pool,
    _batched,
    _max_pool,
    _ntuple,
    avg_pool1d,
    avg_pool2d,
    max_pool1d,
    max_pool2d,
)

__all__ = [
    "max_pool3d",
    "avg_pool3d",
    "adaptive_avg_pool3d",
    "lp_pool1d",
    "lp_pool2d",
    "lp_pool3d",
    "adaptive_max_pool3d",
    "adaptive_max_pool3d_with_indices",
    "adaptive_max_pool1d",
    "adaptive_max_pool2d",
    "adaptive_max_pool1d_with_indices",
    "adaptive_max_pool2d_with_indices",
]


def max_pool3d(
    input: Tensor,
    kernel_size: IntOrTuple,
    stride: IntOrTuple | None = None,
    padding: IntOrTuple = 0,
    dilation: IntOrTuple = 1,
    ceil_mode: bool = False,
    return_indices: bool = False,
):
    """3-D max pooling over ``(N, C, D, H, W)`` or ``(C, D, H, W)``; arguments as :func:`max_pool2d` (indices are
    flat ``(d * H + h) * W + w``)."""
    return _max_pool("max_pool3d", 3, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)


def avg_pool3d(
    input: Tensor,
    kernel_size: IntOrTuple,
    stride: IntOrTuple | None = None,
    padding: IntOrTuple = 0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
    divisor_override: int | None = None,
) -> Tensor:
    """3-D average pooling over ``(N, C, D, H, W)`` or ``(C, D, H, W)``; arguments as :func:`avg_pool2d`."""
    return _avg_pool(
        "avg_pool3d", 3, input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override
    )


def adaptive_avg_pool3d(input: Tensor, output_size: int | Sequence[int | None]) -> Tensor:
    """Adaptive average pooling of ``(N, C, D, H, W)`` to ``output_size`` with torch's bins (None keeps a dim)."""
    return _adaptive("adaptive_avg_pool3d", 3, input, output_size)


_MAXP = {1: max_pool1d, 2: max_pool2d, 3: max_pool3d}
_AVGP = {1: avg_pool1d, 2: avg_pool2d, 3: avg_pool3d}


def _lp(fn, nd, input, norm_type, kernel_size, stride, ceil_mode):
    if norm_type == math.inf:
        return _MAXP[nd](input.abs(), kernel_size, stride, 0, 1, ceil_mode)
    if norm_type == -math.inf:
        return -_MAXP[nd](-input.abs(), kernel_size, stride, 0, 1, ceil_mode)
    k = _ntuple(kernel_size, nd, "kernel_size", fn)
    out = _AVGP[nd](input.pow(norm_type), kernel_size, stride, 0, ceil_mode)
    return (out.sign() * relu(out.abs())).mul(math.prod(k)).pow(1.0 / norm_type)


def lp_pool1d(
    input: Tensor, norm_type: float, kernel_size: IntOrTuple, stride: IntOrTuple | None = None, ceil_mode: bool = False
) -> Tensor:
    """Power-average pooling ``(sum x^p)^(1/p)`` over windows of ``(N, C, L)``; ``p = inf`` is max of ``|x|``."""
    return _lp("lp_pool1d", 1, input, norm_type, kernel_size, stride, ceil_mode)


def lp_pool2d(
    input: Tensor, norm_type: float, kernel_size: IntOrTuple, stride: IntOrTuple | None = None, ceil_mode: bool = False
) -> Tensor:
    """Power-average pooling over windows of ``(N, C, H, W)``: ``(sum x^p)^(1/p)`` computed as torch does
    (``avg_pool(x^p) * kH * kW``, negative averages clamped to 0 before the root).

    Raises:
        as :func:`avg_pool2d`.
    """
    return _lp("lp_pool2d", 2, input, norm_type, kernel_size, stride, ceil_mode)


def lp_pool3d(
    input: Tensor, norm_type: float, kernel_size: IntOrTuple, stride: IntOrTuple | None = None, ceil_mode: bool = False
) -> Tensor:
    """Power-average pooling over windows of ``(N, C, D, H, W)``; see :func:`lp_pool2d`."""
    return _lp("lp_pool3d", 3, input, norm_type, kernel_size, stride, ceil_mode)


def _bin_table(sp: Sequence[int], out: Sequence[int]) -> np.ndarray:
    """Flat input index of every (output cell, window position), window positions in row-major order."""
    per_dim = []
    for n, m in zip(sp, out):
        i = np.arange(m)
        start = (i * n) // m
        end = -((-(i + 1) * n) // m)
        k = int((end - start).max())
        off = np.arange(k)[None, :]
        per_dim.append(np.where(off < (end - start)[:, None], start[:, None] + off, start[:, None]))
    strides = [math.prod(sp[d + 1 :]) for d in range(len(sp))]
    table = np.zeros([1, 1], np.int64)
    for d, idx in enumerate(per_dim):  # outer "sum" over dims: (cells, window) grows dim by dim
        m, k = idx.shape
        table = (table[:, None, :, None] + idx[None, :, None, :] * strides[d]).reshape(table.shape[0] * m, -1)
    return table


def _adaptive_max(fn: str, nd: int, input: Tensor, output_size) -> tuple[Tensor, Tensor]:
    batched = _batched(fn, input, nd)
    if isinstance(output_size, builtins.int) or output_size is None:
        output_size = (output_size,) * nd
    out = tuple(output_size)
    if len(out) == 1 and nd > 1:
        out = out * nd
    if len(out) != nd:
        raise ValueError(f"{fn}: output_size must be an int or a tuple of {nd}, got {output_size!r}")
    sp = tuple(input.shape[-nd:])
    out = tuple(sp[i] if o is None else builtins.int(o) for i, o in enumerate(out))
    if any(o < 1 for o in out) or any(s < 1 for s in sp):
        raise ShapeError(
            f"{fn}: output_size {out} and input spatial size {list(sp)} must be positive "
            f"(input of shape {list(input.shape)})"
        )
    x = input if batched else input.unsqueeze(0)
    n, c = x.shape[:2]
    table = _bin_table(sp, out)
    cells, k = table.shape
    flat = x.reshape(n, c, math.prod(sp))
    windows = flat.index_select(2, as_tensor(table.reshape(-1))).reshape(n, c, cells, k)
    pos = windows.argmax(-1, keepdim=True)
    idx = as_tensor(table).reshape(1, 1, cells, k).expand(n, c, cells, k).gather(3, pos).squeeze(-1)
    y = flat.gather(2, idx)
    y, idx = y.reshape(n, c, *out), idx.reshape(n, c, *out)
    return (y, idx) if batched else (y.squeeze(0), idx.squeeze(0))


def adaptive_max_pool1d_with_indices(
    input: Tensor, output_size: int | Sequence[int], return_indices: bool = False
) -> tuple[Tensor, Tensor]:
    """:func:`adaptive_max_pool1d` returning ``(values, indices)``."""
    return _adaptive_max("adaptive_max_pool1d", 1, input, output_size)


def adaptive_max_pool2d_with_indices(
    input: Tensor, output_size: int | Sequence[int | None], return_indices: bool = False
) -> tuple[Tensor, Tensor]:
    """:func:`adaptive_max_pool2d` returning ``(values, indices)``."""
    return _adaptive_max("adaptive_max_pool2d", 2, input, output_size)


def adaptive_max_pool1d(input: Tensor, output_size: int | Sequence[int | None], return_indices: bool = False):
    """Adaptive max pooling of ``(N, C, L)`` / ``(C, L)`` to ``output_size``, with torch's bins; with
    ``return_indices`` also the int64 position of each maximum along ``L``."""
    y, i = _adaptive_max("adaptive_max_pool1d", 1, input, output_size)
    return (y, i) if return_indices else y


def adaptive_max_pool2d(input: Tensor, output_size: int | Sequence[int | None], return_indices: bool = False):
    """Adaptive max pooling of ``(N, C, H, W)`` / ``(C, H, W)`` to ``output_size`` (int, pair, None keeps a dim).

    Bins are torch's ``[floor(i*n/m), ceil((i+1)*n/m))``; the first maximum in row-major order wins (and gets the
    gradient); ``return_indices`` also gives its flat ``h * W + w`` index (int64).

    Raises:
        ShapeError: wrong rank or non-positive sizes. ValueError: a malformed ``output_size``.
    """
    y, i = _adaptive_max("adaptive_max_pool2d", 2, input, output_size)
    return (y, i) if return_indices else y


def adaptive_max_pool3d_with_indices(
    input: Tensor, output_size: int | Sequence[int | None], return_indices: bool = False
) -> tuple[Tensor, Tensor]:
    """:func:`adaptive_max_pool3d` returning ``(values, indices)``."""
    return _adaptive_max("adaptive_max_pool3d", 3, input, output_size)


def adaptive_max_pool3d(input: Tensor, output_size: int | Sequence[int | None], return_indices: bool = False):
    """Adaptive max pooling of ``(N, C, D, H, W)`` / ``(C, D, H, W)``; see :func:`adaptive_max_pool2d` (indices
    are flat ``(d * H + h) * W + w``)."""
    y, i = _adaptive_max("adaptive_max_pool3d", 3, input, output_size)
    return (y, i) if return_indices else y
