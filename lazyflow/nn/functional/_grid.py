"""``affine_grid`` and ``grid_sample`` (spatial transformers) with ``torch.nn.functional``'s signatures.

Both are composed on the Tensor API: the grid is a batched matmul of a base grid by ``theta``; sampling gathers
the corner taps of each grid point (bilinear) or the nearest one, with torch's coordinate unnormalization,
``padding_mode`` rules (zeros, border, reflection) and round-half-to-even for ``nearest``. Gradients flow to the
input and to the grid. 4-D inputs (2-D images) for ``grid_sample``; 2-D and 3-D grids for ``affine_grid``.
"""

from __future__ import annotations

from ... import _functional as _F
from ..._core.errors import NotSupportedError, ShapeError
from ..._creation import arange, ones
from ..._tensor import Tensor

__all__ = ["affine_grid", "grid_sample"]


def _base(n: int, align_corners: bool, dtype) -> Tensor:
    if n <= 1:
        return arange(n, dtype=dtype) * 0.0
    if align_corners:
        return arange(n, dtype=dtype) * (2.0 / (n - 1)) - 1.0
    return (arange(n, dtype=dtype) * 2.0 + 1.0) / n - 1.0


def affine_grid(theta: Tensor, size: list[int], align_corners: bool | None = None) -> Tensor:
    """Sampling grid ``(N, H, W, 2)`` (or ``(N, D, H, W, 3)``) of the affine maps ``theta`` ``(N, 2, 3)``
    (``(N, 3, 4)``) over the normalized output coordinates of ``size`` ``(N, C, H, W)`` (``(N, C, D, H, W)``).

    Raises:
        ShapeError: ``theta`` not ``(N, 2, 3)`` / ``(N, 3, 4)`` for the size's rank, or a batch mismatch.
        NotSupportedError: a size of another rank.
    """
    align = bool(align_corners)
    size = [int(s) for s in size]
    if len(size) not in (4, 5):
        raise NotSupportedError(
            f"affine_grid only supports 4D and 5D sizes, for 2D and 3D affine transforms; got {size}"
        )
    nd = len(size) - 2
    if not isinstance(theta, Tensor) or not theta.dtype.is_floating_point:
        raise TypeError("affine_grid: expected theta to be a floating-point lazyflow Tensor")
    if tuple(theta.shape) != (size[0], nd, nd + 1):
        raise ShapeError(
            f"affine_grid: expected a batch of {nd}D affine matrices of shape (N={size[0]}, {nd}, {nd + 1}) for size "
            f"{size}, got {list(theta.shape)}"
        )
    spatial = size[2:]
    axes = [_base(s, align, theta.dtype) for s in reversed(spatial)]  # x (W) first, as torch's grid last dim
    mesh = _F.meshgrid(*reversed(axes), indexing="ij")  # (D,) H, W grids of z.., y, x
    coords = list(reversed(mesh)) + [ones(tuple(spatial), dtype=theta.dtype)]
    base = _F.stack(coords, -1).reshape(1, -1, nd + 1)  # (1, prod, nd + 1)
    grid = base.matmul(theta.transpose(1, 2))  # (N, prod, nd)
    return grid.reshape([size[0], *spatial, nd])


def _unnormalize(coord: Tensor, size: int, align: bool) -> Tensor:
    if align:
        return (coord + 1) / 2 * (size - 1)
    return ((coord + 1) * size - 1) / 2


def _reflect(coord: Tensor, twice_low: int, twice_high: int) -> Tensor:
    if twice_low == twice_high:
        return coord * 0.0
    lo = twice_low / 2
    span = (twice_high - twice_low) / 2
    c = (coord - lo).abs()
    extra = _F.fmod(c, span)
    flips = (c / span).floor()
    return _F.where(_F.remainder(flips, 2) == 0, extra + lo, span - extra + lo)


def _source(coord: Tensor, size: int, padding_mode: str, align: bool) -> Tensor:
    c = _unnormalize(coord, size, align)
    if padding_mode == "border":
        return c.clamp(0, size - 1)
    if padding_mode == "reflection":
        c = _reflect(c, 0, 2 * (size - 1)) if align else _reflect(c, -1, 2 * size - 1)
        return c.clamp(0, size - 1)
    return c


def grid_sample(
    input: Tensor,
    grid: Tensor,
    mode: str = "bilinear",
    padding_mode: str = "zeros",
    align_corners: bool | None = None,
) -> Tensor:
    """Sample ``input`` ``(N, C, H, W)`` at the normalized locations ``grid`` ``(N, H_out, W_out, 2)``
    (``x``, ``y`` in [-1, 1]); returns ``(N, C, H_out, W_out)``.

    Args:
        mode: ``"bilinear"`` or ``"nearest"``.
        padding_mode: ``"zeros"``, ``"border"`` or ``"reflection"``: what out-of-range locations read.
        align_corners: -1 and 1 are the centers (True) or the outer edges (False, the default) of the corner pixels.
    Raises:
        ValueError: an unknown mode or padding_mode.
        NotSupportedError: ``"bicubic"``, or a 5-D (volumetric) input.
        ShapeError: grid not ``(N, H_out, W_out, 2)`` for a 4-D input.
    """
    if mode not in ("bilinear", "nearest", "bicubic"):
        raise ValueError(
            f"nn.functional.grid_sample(): expected mode to be 'bilinear', 'nearest' or 'bicubic', got '{mode}'"
        )
    if padding_mode not in ("zeros", "border", "reflection"):
        raise ValueError(
            "nn.functional.grid_sample(): expected padding_mode to be 'zeros', 'border', or 'reflection', "
            f"but got: '{padding_mode}'"
        )
    if mode == "bicubic":
        raise NotSupportedError("grid_sample: mode='bicubic' is not supported yet; use 'bilinear' or 'nearest'")
    if not isinstance(input, Tensor) or not isinstance(grid, Tensor):
        raise TypeError("grid_sample: expected lazyflow Tensors for input and grid")
    if input.ndim == 5:
        raise NotSupportedError("grid_sample: 5-D (volumetric) input is not supported yet; 4-D (N, C, H, W) is")
    if input.ndim != 4 or grid.ndim != 4 or grid.shape[-1] != 2 or grid.shape[0] != input.shape[0]:
        raise ShapeError(
            f"grid_sample: expected input (N, C, H, W) and grid (N, H_out, W_out, 2) with the same N, got "
            f"{list(input.shape)} and {list(grid.shape)}"
        )
    align = bool(align_corners)
    n, c, h, w = input.shape
    ho, wo = grid.shape[1], grid.shape[2]
    x = _source(grid[..., 0], w, padding_mode, align)
    y = _source(grid[..., 1], h, padding_mode, align)
    flat = input.reshape(n, c, h * w)

    def tap(yi: Tensor, xi: Tensor) -> Tensor:
        inside = (xi >= 0) & (xi <= w - 1) & (yi >= 0) & (yi <= h - 1)
        idx = (yi.clamp(0, h - 1) * w + xi.clamp(0, w - 1)).long().reshape(n, 1, ho * wo).expand(n, c, ho * wo)
        vals = flat.gather(2, idx).reshape(n, c, ho, wo)
        return _F.where(inside.unsqueeze(1), vals, 0.0)

    if mode == "nearest":
        return tap(y.round(), x.round())
    x0, y0 = x.floor(), y.floor()
    x1, y1 = x0 + 1, y0 + 1
    wx1, wy1 = x - x0, y - y0
    wx0, wy0 = 1 - wx1, 1 - wy1
    out = (
        tap(y0, x0) * (wy0 * wx0).unsqueeze(1)
        + tap(y0, x1) * (wy0 * wx1).unsqueeze(1)
        + tap(y1, x0) * (wy1 * wx0).unsqueeze(1)
        + tap(y1, x1) * (wy1 * wx1).unsqueeze(1)
    )
    return out
