"""``pixel_shuffle``/``pixel_unshuffle`` (reshape + permute) and ``unfold``/``fold`` (im2col/col2im).

``unfold`` is one ``index_select`` of the zero-padded, flattened image with a host-computed index of every
``(kernel offset, block)`` pair; ``fold`` is its transpose, one ``index_add`` of the columns into a zero image
(overlapping blocks sum, as in torch). Their gradients are each other's, from the existing ops.
"""

from __future__ import annotations

import builtins

import numpy as np

from ..._core.errors import ShapeError, ValueRangeError
from ..._creation import as_tensor, zeros
from ..._tensor import Tensor
from ._conv import IntOrTuple, _ntuple
from ._linear import pad

__all__ = ["pixel_shuffle", "pixel_unshuffle", "unfold", "fold"]


def _tensor_arg(fn: str, x) -> None:
    if not isinstance(x, Tensor):
        raise TypeError(f"{fn}: expected a lazyflow Tensor as input, got {type(x).__name__}")


def pixel_shuffle(input: Tensor, upscale_factor: int) -> Tensor:
    """Rearrange ``(*, C * r^2, H, W)`` into ``(*, C, H * r, W * r)`` (sub-pixel convolution's output step).

    Raises:
        ShapeError: fewer than 3 dims or channels not divisible by ``r^2``.
        ValueRangeError: a non-positive ``upscale_factor``.
    """
    _tensor_arg("pixel_shuffle", input)
    r = builtins.int(upscale_factor)
    if input.ndim < 3:
        raise ShapeError(
            f"pixel_shuffle expects input to have at least 3 dimensions, but got input with {input.ndim} dimension(s)"
        )
    if r <= 0:
        raise ValueRangeError(f"pixel_shuffle expects a positive upscale_factor, but got {r}")
    *lead, c, h, w = input.shape
    if c % (r * r):
        raise ShapeError(
            f"pixel_shuffle expects its input's 'channel' dimension to be divisible by the square of "
            f"upscale_factor, but input.size(-3)={c} is not divisible by {r * r}"
        )
    n = len(lead)
    x = input.reshape(*lead, c // (r * r), r, r, h, w)
    x = x.permute(*range(n), n, n + 3, n + 1, n + 4, n + 2)
    return x.reshape(*lead, c // (r * r), h * r, w * r)


def pixel_unshuffle(input: Tensor, downscale_factor: int) -> Tensor:
    """Inverse of :func:`pixel_shuffle`: ``(*, C, H * r, W * r)`` into ``(*, C * r^2, H, W)``.

    Raises:
        ShapeError: fewer than 3 dims or H/W not divisible by ``r``.
        ValueRangeError: a non-positive ``downscale_factor``.
    """
    _tensor_arg("pixel_unshuffle", input)
    r = builtins.int(downscale_factor)
    if input.ndim < 3:
        raise ShapeError(
            f"pixel_unshuffle expects input to have at least 3 dimensions, but got input with {input.ndim} dimension(s)"
        )
    if r <= 0:
        raise ValueRangeError(f"pixel_unshuffle expects a positive downscale_factor, but got {r}")
    *lead, c, h, w = input.shape
    for name, size, d in (("height", h, -2), ("width", w, -1)):
        if size % r:
            raise ShapeError(
                f"pixel_unshuffle expects {name} to be divisible by downscale_factor, but input.size({d})={size} "
                f"is not divisible by {r}"
            )
    n = len(lead)
    x = input.reshape(*lead, c, h // r, r, w // r, r)
    x = x.permute(*range(n), n, n + 2, n + 4, n + 1, n + 3)
    return x.reshape(*lead, c * r * r, h // r, w // r)


def _fold_args(fn, kernel_size, dilation, padding, stride):
    k = _ntuple(kernel_size, 2, "kernel_size", fn)
    d = _ntuple(dilation, 2, "dilation", fn)
    p = _ntuple(padding, 2, "padding", fn)
    s = _ntuple(stride, 2, "stride", fn)
    for name, v in (("kernel_size", k), ("dilation", d), ("stride", s)):
        if any(i <= 0 for i in v):
            raise ValueRangeError(f"{fn}: {name} should be greater than zero, but got {name}={v}")
    if any(i < 0 for i in p):
        raise ValueRangeError(f"{fn}: padding should be non-negative, but got padding={p}")
    return k, d, p, s


def _blocks(size, k, d, p, s):
    return tuple((size[i] + 2 * p[i] - (d[i] * (k[i] - 1) + 1)) // s[i] + 1 for i in range(2))


def _col_index(hw_pad, blocks, k, d, s) -> np.ndarray:
    """Flat index into the padded ``Hp * Wp`` image of every (ki, kj, block_y, block_x), in torch's order."""
    ki, kj, by, bx = np.meshgrid(
        np.arange(k[0]), np.arange(k[1]), np.arange(blocks[0]), np.arange(blocks[1]), indexing="ij"
    )
    return ((ki * d[0] + by * s[0]) * hw_pad[1] + kj * d[1] + bx * s[1]).reshape(-1)


def unfold(
    input: Tensor, kernel_size: IntOrTuple, dilation: IntOrTuple = 1, padding: IntOrTuple = 0, stride: IntOrTuple = 1
) -> Tensor:
    """Extract sliding blocks (im2col): ``(N, C, H, W)`` -> ``(N, C * kH * kW, L)`` (or unbatched ``(C, H, W)``).

    Column channel ``c * kH * kW + i * kW + j`` holds kernel offset ``(i, j)`` of channel ``c``; ``L`` runs over
    the blocks row by row, as in torch.

    Raises:
        ShapeError: not 3-D/4-D, or no complete block. ValueRangeError: non-positive kernel/dilation/stride.
    """
    _tensor_arg("unfold", input)
    k, d, p, s = _fold_args("unfold", kernel_size, dilation, padding, stride)
    if input.ndim not in (3, 4):
        raise ShapeError(f"unfold: expected 3D or 4D (batch mode) tensor for input, but got shape {list(input.shape)}")
    x = input if input.ndim == 4 else input.unsqueeze(0)
    n, c, h, w = x.shape
    blocks = _blocks((h, w), k, d, p, s)
    if any(b < 1 for b in blocks) or h + 2 * p[0] <= 0:
        raise ShapeError(
            f"unfold: given input with spatial size {(h, w)}, kernel_size={k}, dilation={d}, padding={p}, "
            f"calculated shape of the array of sliding blocks as {blocks}, but its components must be at least one"
        )
    if any(p):
        x = pad(x, (p[1], p[1], p[0], p[0]))
    hp, wp = h + 2 * p[0], w + 2 * p[1]
    idx = _col_index((hp, wp), blocks, k, d, s)
    cols = x.reshape(n, c, hp * wp).index_select(2, as_tensor(idx))
    y = cols.reshape(n, c * k[0] * k[1], blocks[0] * blocks[1])
    return y if input.ndim == 4 else y.squeeze(0)


def fold(
    input: Tensor,
    output_size: IntOrTuple,
    kernel_size: IntOrTuple,
    dilation: IntOrTuple = 1,
    padding: IntOrTuple = 0,
    stride: IntOrTuple = 1,
) -> Tensor:
    """Sum sliding blocks back into an image (col2im): ``(N, C * kH * kW, L)`` -> ``(N, C, *output_size)``.

    The inverse layout of :func:`unfold`; overlapping positions are summed.

    Raises:
        ShapeError: not 2-D/3-D, channels not divisible by ``kH * kW``, or ``L`` not the block count.
        ValueRangeError: non-positive kernel/dilation/stride.
    """
    _tensor_arg("fold", input)
    out = _ntuple(output_size, 2, "output_size", "fold")
    k, d, p, s = _fold_args("fold", kernel_size, dilation, padding, stride)
    if input.ndim not in (2, 3):
        raise ShapeError(f"fold: expected 2D or 3D (batch mode) tensor for input, but got shape {list(input.shape)}")
    x = input if input.ndim == 3 else input.unsqueeze(0)
    n, ck, ell = x.shape
    if ck % (k[0] * k[1]):
        raise ShapeError(
            f"fold: expected size of input's dimension 1 to be divisible by the product of kernel_size, but got "
            f"input.size(1)={ck} and kernel_size={k}"
        )
    blocks = _blocks(out, k, d, p, s)
    if any(b < 1 for b in blocks) or ell != blocks[0] * blocks[1]:
        raise ShapeError(
            f"fold: given output_size={out}, kernel_size={k}, dilation={d}, padding={p}, stride={s}, expected "
            f"size of input's dimension 2 to match the calculated number of sliding blocks "
            f"{blocks[0]} * {blocks[1]} = {blocks[0] * blocks[1]}, but got input.size(2)={ell}"
        )
    c = ck // (k[0] * k[1])
    hp, wp = out[0] + 2 * p[0], out[1] + 2 * p[1]
    idx = _col_index((hp, wp), blocks, k, d, s)
    img = zeros(n, c, hp * wp, dtype=x.dtype).index_add(2, as_tensor(idx), x.reshape(n, c, k[0] * k[1] * ell))
    y = img.reshape(n, c, hp, wp)[:, :, p[0] : p[0] + out[0], p[1] : p[1] + out[1]]
    return y if input.ndim == 3 else y.squeeze(0)
