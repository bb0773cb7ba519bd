"""``interpolate`` (``torch.nn.functional.interpolate``) as a composite of gathers and weighted sums.

Each spatial dim is resized separately: at trace time numpy computes, per ``(in, out, mode)``, the source
indices ``(out, K)`` and weights ``(out, K)`` with torch's CPU formulas (nearest: ``floor(i * in/out)`` in
float32; linear: ``scale * (i + 0.5) - 0.5`` clamped at 0; cubic: Keys' kernel with ``A = -0.75`` and
clamped taps; antialias: PIL's triangle / ``A = -0.5`` cubic filters over a widened support). The device
then runs one ``index_select`` of the ``out * K`` taps, one multiply and one sum per dim, so the result
and its gradient come from existing ops (no new primitive). ``area`` is ``adaptive_avg_pool``.
"""

from __future__ import annotations

import builtins
import math
import warnings
from collections.abc import Sequence

import numpy as np

from ..._core.errors import DTypeError, ShapeError
from ..._creation import as_tensor
from ..._tensor import Tensor
from ._conv import adaptive_avg_pool1d, adaptive_avg_pool2d

__all__ = ["interpolate", "upsample", "upsample_nearest", "upsample_bilinear"]

_MODES = ("nearest", "nearest-exact", "linear", "bilinear", "bicubic", "trilinear", "area")
_RANK = {"linear": 3, "bilinear": 4, "bicubic": 4, "trilinear": 5}


def _scale(in_size: int, out_size: int, align_corners: bool, scale: float | None, ct) -> np.floating:
    """torch's ``area_pixel_compute_scale`` in the op-math type ``ct``."""
    if align_corners:
        return ct(in_size - 1) / ct(out_size - 1) if out_size > 1 else ct(0)
    if scale is not None and scale > 0:
        return ct(1.0 / scale)
    return ct(in_size) / ct(out_size)


def _nearest(in_size: int, out_size: int, scale: float | None, exact: bool) -> np.ndarray:
    i = np.arange(out_size)
    s = np.float32(1.0 / scale) if (scale is not None and scale > 0) else np.float32(in_size) / np.float32(out_size)
    if exact:  # (i + 0.5) is a double, the product is rounded to float by floorf
        src = np.floor(((i + 0.5) * np.float64(s)).astype(np.float32))
    else:
        src = np.floor(i.astype(np.float32) * s)
    return np.minimum(src.astype(np.int64), in_size - 1)


def _linear(in_size, out_size, align_corners, scale, ct):
    s = _scale(in_size, out_size, align_corners, scale, ct)
    i = np.arange(out_size).astype(ct)
    real = s * i if align_corners else np.maximum(s * (i + ct(0.5)) - ct(0.5), ct(0))
    i0 = np.minimum(np.floor(real).astype(np.int64), in_size - 1)
    lam = np.clip(real - i0.astype(ct), 0, 1).astype(ct)
    i1 = i0 + (i0 < in_size - 1)
    return np.stack([i0, i1], 1), np.stack([ct(1) - lam, lam], 1)


def _cubic_weights(t, a):
    def c1(x):
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def c2(x):
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a

    return np.stack([c2(t + 1), c1(t), c1(1 - t), c2(2 - t)], 1)


def _cubic(in_size, out_size, align_corners, scale, ct):
    s = _scale(in_size, out_size, align_corners, scale, ct)
    i = np.arange(out_size).astype(ct)
    real = s * i if align_corners else s * (i + ct(0.5)) - ct(0.5)
    i0 = np.minimum(np.floor(real).astype(np.int64), in_size - 1)
    t = np.clip(real - i0.astype(ct), 0, 1).astype(ct)
    idx = np.clip(i0[:, None] + np.arange(-1, 3)[None, :], 0, in_size - 1)
    return idx, _cubic_weights(t, ct(-0.75)).astype(ct)


def _aa_filter(mode: str, x: np.ndarray) -> np.ndarray:
    x = np.abs(x)
    if mode == "bilinear":
        return np.where(x < 1, 1 - x, 0)
    a = -0.5  # PIL's bicubic (torch uses -0.75 only without antialias)
    inner = ((a + 2) * x - (a + 3)) * x * x + 1
    outer = ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
    return np.where(x < 1, inner, np.where(x < 2, outer, 0))


def _antialias(in_size, out_size, align_corners, scale, ct, mode):
    s = float(_scale(in_size, out_size, align_corners, scale, ct))
    interp = 2 if mode == "bilinear" else 4
    support = interp * 0.5 * s if s >= 1.0 else interp * 0.5
    kmax = int(math.ceil(support)) * 2 + 1
    inv = 1.0 / s if s >= 1.0 else 1.0
    idx = np.zeros((out_size, kmax), np.int64)
    w = np.zeros((out_size, kmax), np.float64)
    for i in range(out_size):
        center = s * (i + 0.5)
        xmin = max(int(center - support + 0.5), 0)
        xsize = min(max(min(int(center + support + 0.5), in_size) - xmin, 0), kmax)
        ww = _aa_filter(mode, (np.arange(xsize) + xmin - center + 0.5) * inv)
        tot = ww.sum()
        w[i, :xsize] = ww / tot if tot != 0 else ww
        idx[i, :xsize] = np.arange(xmin, xmin + xsize)
    return idx, w


def _resize_dim(x: Tensor, dim: int, idx: np.ndarray, w: np.ndarray | None) -> Tensor:
    out, k = idx.shape
    y = x.index_select(dim, as_tensor(idx.reshape(-1)))
    if w is None:
        return y
    shape = list(x.shape)
    y = y.reshape(shape[:dim] + [out, k] + shape[dim + 1 :])
    wt = as_tensor(w.reshape((out, k) + (1,) * (x.ndim - dim - 1)), dtype=x.dtype)
    return (y * wt).sum(dim + 1)


def _output_size(x: Tensor, nd: int, size, scale_factor, recompute: bool | None):
    sp = list(x.shape[2:])
    if size is not None and scale_factor is not None:
        raise ValueError("interpolate: only one of size or scale_factor should be defined")
    if size is not None:
        if recompute:
            raise ValueError("interpolate: recompute_scale_factor is not meaningful with an explicit size.")
        if isinstance(size, (list, tuple)):
            if len(size) != nd:
                raise ValueError(
                    f"interpolate: input and output must have the same number of spatial dimensions, but got "
                    f"input with spatial dimensions of {sp} and output size of {size}. Please provide input "
                    f"tensor in (N, C, d1, d2, ...,dK) format and output size in (o1, o2, ...,oK) format."
                )
            if not all(isinstance(s, builtins.int) and not isinstance(s, bool) for s in size):
                raise TypeError(
                    f"interpolate: expected size to be one of int or Tuple[int] or Tuple[int, int] or "
                    f"Tuple[int, int, int], but got size with types {[type(s) for s in size]}"
                )
            out = [builtins.int(s) for s in size]
        else:
            out = [builtins.int(size)] * nd
        scales: list = [None] * nd
    elif scale_factor is not None:
        if isinstance(scale_factor, (list, tuple)):
            if len(scale_factor) != nd:
                raise ValueError(
                    f"interpolate: input and scale_factor must have the same number of spatial dimensions, "
                    f"but got input with spatial dimensions of {sp} and scale_factor of shape {scale_factor}. "
                    f"Please provide input tensor in (N, C, d1, d2, ...,dK) format and scale_factor in "
                    f"(s1, s2, ...,sK) format."
                )
            scales = [float(s) for s in scale_factor]
        else:
            scales = [float(scale_factor)] * nd
        out = [math.floor(float(n) * s) for n, s in zip(sp, scales)]
        if recompute:
            scales = [None] * nd
    else:
        raise ValueError("interpolate: either size or scale_factor should be defined")
    if any(o <= 0 for o in out) or any(n <= 0 for n in sp):
        raise ShapeError(
            f"interpolate: input and output sizes should be greater than 0, but got input (spatial) {sp} and "
            f"output {out}; pass a larger size or scale_factor"
        )
    return out, scales


def interpolate(
    input: Tensor,
    size: int | Sequence[int] | None = None,
    scale_factor: float | Sequence[float] | None = None,
    mode: str = "nearest",
    align_corners: bool | None = None,
    recompute_scale_factor: bool | None = None,
    antialias: bool = False,
) -> Tensor:
    """Resize ``(N, C, *spatial)`` to ``size`` or ``spatial * scale_factor`` with torch's exact formulas.

    Args:
        input: ``(N, C, L)``, ``(N, C, H, W)`` or ``(N, C, D, H, W)``.
        size: output spatial size (int or one per dim); exclusive with ``scale_factor``.
        scale_factor: multiplier(s); the output size is ``floor(in * scale)`` and, unless
            ``recompute_scale_factor=True``, ``1 / scale`` (not ``in / out``) maps output to input indices.
        mode: ``nearest`` | ``nearest-exact`` | ``linear`` (3-D) | ``bilinear`` | ``bicubic`` (4-D) |
            ``trilinear`` (5-D) | ``area`` (adaptive average pooling).
        align_corners: for the linear/cubic modes, map corner pixels onto corner pixels (default False).
        recompute_scale_factor: compute the index scale from the output size instead of ``scale_factor``.
        antialias: for ``bilinear``/``bicubic`` on 4-D input, widen the filter when downsampling (PIL-like).
    Returns:
        the resized tensor (same dtype).
    Raises:
        ValueError: both or neither of size/scale_factor, wrong lengths, ``align_corners`` with a
            nearest/area mode, ``antialias`` with another mode or rank.
        NotImplementedError: unknown mode or a mode that does not fit the input's rank.
        ShapeError: non-positive input or output sizes. DTypeError: non-floating input for an interpolating mode.

    >>> y = lf.nn.functional.interpolate(lf.randn(1, 3, 4, 4), scale_factor=2, mode="bilinear")
    """
    if not isinstance(input, Tensor):
        raise TypeError(f"interpolate: expected a lazyflow Tensor as input, got {type(input).__name__}")
    if mode in ("nearest", "area", "nearest-exact"):
        if align_corners is not None:
            raise ValueError(
                "interpolate: align_corners option can only be set with the interpolating modes: "
                "linear | bilinear | bicubic | trilinear"
            )
    elif align_corners is None:
        align_corners = False
    nd = input.ndim - 2
    if mode not in _MODES or input.ndim not in (3, 4, 5) or (mode in _RANK and _RANK[mode] != input.ndim):
        raise NotImplementedError(
            f"interpolate: got {input.ndim}-D input with mode {mode!r}; supported: nearest | nearest-exact | "
            f"area on 3-D/4-D/5-D input, linear on 3-D, bilinear | bicubic on 4-D, trilinear on 5-D"
        )
    out, scales = _output_size(
        input, nd, size, scale_factor, True if (mode == "area" and size is None) else recompute_scale_factor
    )
    if antialias and not (mode in ("bilinear", "bicubic") and input.ndim == 4):
        raise ValueError(
            "interpolate: anti-alias option is restricted to bilinear and bicubic modes and requires a 4-D "
            f"tensor as input, got mode {mode!r} with a {input.ndim}-D input"
        )
    if mode not in ("nearest", "nearest-exact") and not input.dtype.is_floating_point:
        raise DTypeError(f"interpolate: mode {mode!r} needs a floating input, got {input.dtype.name} (use .float())")
    if mode == "area" and nd == 1:
        return adaptive_avg_pool1d(input, out)
    if mode == "area" and nd == 2:
        return adaptive_avg_pool2d(input, out)
    ct = np.float64 if input.dtype.itemsize == 8 else np.float32
    sp = input.shape[2:]
    x = input
    for d in range(nd):
        n, o, s = sp[d], out[d], scales[d]
        if mode in ("nearest", "nearest-exact"):
            if n != o or s is not None or mode == "nearest-exact":
                x = _resize_dim(x, 2 + d, _nearest(n, o, s, mode == "nearest-exact").reshape(o, 1), None)
            continue
        if mode == "area":
            idx, w = _area(n, o)
        elif antialias:
            idx, w = _antialias(n, o, align_corners, s, ct, mode)
        elif mode == "bicubic":
            idx, w = _cubic(n, o, align_corners, s, ct)
        else:
            idx, w = _linear(n, o, align_corners, s, ct)
        x = _resize_dim(x, 2 + d, idx, w)
    return x


def _area(in_size: int, out_size: int):
    """torch's adaptive-pool bins ``[floor(i*n/m), ceil((i+1)*n/m))`` as (indices, 1/len weights)."""
    start = (np.arange(out_size) * in_size) // out_size
    end = -((-(np.arange(out_size) + 1) * in_size) // out_size)
    k = int((end - start).max())
    idx = np.minimum(start[:, None] + np.arange(k)[None, :], in_size - 1)
    w = ((np.arange(k)[None, :] < (end - start)[:, None]) / (end - start)[:, None]).astype(np.float64)
    return idx, w


def upsample(
    input: Tensor,
    size: int | Sequence[int] | None = None,
    scale_factor: float | Sequence[float] | None = None,
    mode: str = "nearest",
    align_corners: bool | None = None,
) -> Tensor:
    """Deprecated alias of :func:`interpolate` (torch keeps it); warns like torch."""
    warnings.warn("`nn.functional.upsample` is deprecated. Use `nn.functional.interpolate` instead.", stacklevel=2)
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(
    input: Tensor, size: int | Sequence[int] | None = None, scale_factor: float | Sequence[float] | None = None
) -> Tensor:
    """Deprecated: ``interpolate(..., mode="nearest")``; warns like torch."""
    warnings.warn(
        "`nn.functional.upsample_nearest` is deprecated. Use `nn.functional.interpolate` instead.", stacklevel=2
    )
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(
    input: Tensor, size: int | Sequence[int] | None = None, scale_factor: float | Sequence[float] | None = None
) -> Tensor:
    """Deprecated: ``interpolate(..., mode="bilinear", align_corners=True)``; warns like torch."""
    warnings.warn(
        "`nn.functional.upsample_bilinear` is deprecated. Use `nn.functional.interpolate` instead.", stacklevel=2
    )
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)
