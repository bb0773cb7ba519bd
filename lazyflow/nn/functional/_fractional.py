"""Fractional max pooling (Graham, 2014) with ``torch.nn.functional``'s signatures: pseudo-random window starts
from one uniform sample per (sample, channel, dim), torch's interval formula, the maximum (first in scan order)
of each ``kernel_size`` window, and flat indices for ``max_unpool``."""

from __future__ import annotations

from ..._core.errors import ShapeError
from ..._creation import arange, rand
from ..._tensor import Tensor

__all__ = [
    "fractional_max_pool2d",
    "fractional_max_pool2d_with_indices",
    "fractional_max_pool3d",
    "fractional_max_pool3d_with_indices",
]


def _tuple(v, nd: int) -> tuple:
    return (v,) * nd if not isinstance(v, (tuple, list)) else tuple(v)


def _starts(u: Tensor, in_size: int, out_size: int, k: int) -> Tensor:
    """torch's sequence: ``int((i + u) * alpha) - int(u * alpha)``, the last start ``in_size - k``."""
    if out_size == 1:
        return (u * 0).long().unsqueeze(-1) + (in_size - k)
    alpha = (in_size - k) / (out_size - 1)
    i = arange(out_size - 1, dtype=u.dtype)
    s = ((i + u.unsqueeze(-1)) * alpha).trunc().long() - (u * alpha).trunc().long().unsqueeze(-1)
    last = (u * 0).long().unsqueeze(-1) + (in_size - k)
    return s.new_zeros(tuple(s.shape[:-1]) + (out_size,)).index_add(-1, arange(out_size - 1), s) + (
        last * (arange(out_size) == out_size - 1).long()
    )


def _fractional(fn, nd, input, kernel_size, output_size, output_ratio, return_indices, _random_samples):
    if not isinstance(input, Tensor) or input.ndim not in (nd + 1, nd + 2):
        raise ShapeError(f"{fn}: expected a {nd + 1}D or {nd + 2}D input, got {getattr(input, 'shape', input)}")
    batched = input.ndim == nd + 2
    x = input if batched else input.unsqueeze(0)
    n, c = x.shape[0], x.shape[1]
    spatial = tuple(x.shape[2:])
    k = _tuple(kernel_size, nd)
    if output_size is None:
        if output_ratio is None:
            raise ValueError(f"{fn} requires specifying either an output_size or an output_ratio")
        ratio = _tuple(output_ratio, nd)
        out = tuple(int(spatial[d] * ratio[d]) for d in range(nd))
    else:
        out = _tuple(output_size, nd)
    for d in range(nd):
        if out[d] + k[d] - 1 > spatial[d] or out[d] <= 0:
            raise ShapeError(
                f"{fn}: output size {out[d]} + kernel size {k[d]} - 1 is too large for input size {spatial[d]} "
                f"(dim {d}); need output_size + kernel_size - 1 <= input size"
            )
    samples = _random_samples if _random_samples is not None else rand(n, c, nd, dtype=x.dtype)
    if tuple(samples.shape) != (n, c, nd):
        raise ShapeError(f"{fn}: expected _random_samples of shape {[n, c, nd]}, got {list(samples.shape)}")
    vals = x
    strides = [1] * nd
    for d in range(nd - 2, -1, -1):
        strides[d] = strides[d + 1] * spatial[d + 1]
    # gather each spatial dim's windows: dim d of size spatial[d] -> out[d] * k[d]
    pos_sum = None
    for d in range(nd):
        # torch's 2-D samples are ordered (w, h); its 3-D ones (t, h, w)
        u = samples[:, :, nd - 1 - d] if nd == 2 else samples[:, :, d]
        st = _starts(u, spatial[d], out[d], k[d])  # (N, C, out)
        idx = (st.unsqueeze(-1) + arange(k[d])).reshape(n, c, out[d] * k[d])  # (N, C, out*k)
        shape = [n, c] + [1] * nd
        shape[2 + d] = out[d] * k[d]
        full = list(vals.shape)
        full[2 + d] = out[d] * k[d]
        vals = vals.gather(2 + d, idx.reshape(shape).expand(*full))
        pos = (idx * strides[d]).reshape(shape)
        pos_sum = pos if pos_sum is None else pos_sum + pos
    flat_idx = pos_sum.expand(*list(vals.shape)) if pos_sum is not None else vals
    # (N, C, o0*k0, o1*k1[, o2*k2]) -> windows last
    split = [n, c]
    for d in range(nd):
        split += [out[d], k[d]]
    perm = [0, 1] + [2 + 2 * d for d in range(nd)] + [3 + 2 * d for d in range(nd)]
    win = vals.reshape(split).permute(*perm).reshape(n, c, *out, -1)
    widx = flat_idx.reshape(split).permute(*perm).reshape(n, c, *out, -1)
    best = win.argmax(-1, keepdim=True)
    y = win.gather(-1, best).squeeze(-1)
    ind = widx.gather(-1, best).squeeze(-1)
    if not batched:
        y, ind = y.squeeze(0), ind.squeeze(0)
    return (y, ind) if return_indices else y


def fractional_max_pool2d(
    input: Tensor,
    kernel_size,
    output_size=None,
    output_ratio=None,
    return_indices: bool = False,
    _random_samples: Tensor | None = None,
):
    """Fractional max pooling over ``(N, C, H, W)`` (or unbatched) to ``output_size`` (or ``output_ratio`` of the
    input size), windows of ``kernel_size``.

    Raises:
        ValueError: neither output_size nor output_ratio.
        ShapeError: a wrong rank, an output too large for the kernel, or ``_random_samples`` not ``(N, C, 2)``.
    """
    return _fractional(
        "fractional_max_pool2d", 2, input, kernel_size, output_size, output_ratio, return_indices, _random_samples
    )


def fractional_max_pool2d_with_indices(
    input: Tensor,
    kernel_size,
    output_size=None,
    output_ratio=None,
    return_indices: bool = False,
    _random_samples: Tensor | None = None,
):
    """:func:`fractional_max_pool2d` returning ``(output, indices)``."""
    return _fractional("fractional_max_pool2d", 2, input, kernel_size, output_size, output_ratio, True, _random_samples)


def fractional_max_pool3d(
    input: Tensor,
    kernel_size,
    output_size=None,
    output_ratio=None,
    return_indices: bool = False,
    _random_samples: Tensor | None = None,
):
    """:func:`fractional_max_pool2d` over ``(N, C, T, H, W)``; ``_random_samples`` is ``(N, C, 3)``."""
    return _fractional(
        "fractional_max_pool3d", 3, input, kernel_size, output_size, output_ratio, return_indices, _random_samples
    )


def fractional_max_pool3d_with_indices(
    input: Tensor,
    kernel_size,
    output_size=None,
    output_ratio=None,
    return_indices: bool = False,
    _random_samples: Tensor | None = None,
):
    """:func:`fractional_max_pool3d` returning ``(output, indices)``."""
    return _fractional("fractional_max_pool3d", 3, input, kernel_size, output_size, output_ratio, True, _random_samples)
