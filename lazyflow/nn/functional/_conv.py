"""Convolution and pooling with ``torch.nn.functional``'s signatures (NCHW layout).

Every function validates its arguments in Python (ranks, channel counts, window sizes), normalises them to
static tuples, then makes one call to a primitive of ``lazyflow.ops.nn``. An unbatched input (no N dim)
is accepted like torch and given back unbatched.
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from typing import Any

from ..._core.context import state
from ..._core.errors import DTypeError, ShapeError
from ..._tensor import Tensor
from ...ops import nn as _opsnn
from ...ops.table import REGISTRY as R

__all__ = [
    "conv1d",
    "conv2d",
    "conv3d",
    "conv_transpose1d",
    "conv_transpose2d",
    "conv_transpose3d",
    "conv_tbc",
    "max_pool1d",
    "max_pool2d",
    "avg_pool1d",
    "avg_pool2d",
    "adaptive_avg_pool1d",
    "adaptive_avg_pool2d",
]

_CONV = R["conv"]
_CONV_T = R["conv_transpose"]
_MAX_POOL = R["max_pool"]
_MAX_POOL_IDX = R["max_pool_with_indices"]
_AVG_POOL = R["avg_pool"]
_ADAPTIVE_AVG = R["adaptive_avg_pool"]

IntOrTuple = int | Sequence[int]


def _ntuple(v: Any, n: int, what: str, fn: str) -> tuple[int, ...]:
    if isinstance(v, (builtins.int,)) and not isinstance(v, bool):
        return (v,) * n
    if isinstance(v, bool):  # not an int here, and not iterable either
        raise ValueError(f"{fn}: expected {what} to be a single int or a tuple of {n} ints, got {v!r}")
    t = tuple(v)
    if len(t) == 1:
        t = t * n
    if len(t) != n or not all(isinstance(i, builtins.int) for i in t):
        raise ValueError(f"{fn}: expected {what} to be a single int or a tuple of {n} ints, got {v!r}")
    return tuple(builtins.int(i) for i in t)


def _batched(fn: str, x: Tensor, nd: int) -> bool:
    if not isinstance(x, Tensor):
        raise TypeError(f"{fn}: expected a lazyflow Tensor as input, got {type(x).__name__}")
    if x.ndim == nd + 2:
        return True
    if x.ndim == nd + 1:
        return False
    raise ShapeError(
        f"{fn}: expected a {nd + 1}-D (unbatched) or {nd + 2}-D (batched) input, got input of shape {list(x.shape)}"
    )


def _float(fn: str, *ts) -> None:
    for t in ts:
        if t is not None and not t.dtype.is_floating_point:
            raise DTypeError(f"{fn}: expected floating-point tensors, got {t.dtype.name} (cast with .float())")


def _conv_padding(padding, kernel, dilation, stride, fn):
    nd = len(kernel)
    if isinstance(padding, str):
        if padding == "valid":
            return ((0, 0),) * nd
        if padding == "same":
            if any(s != 1 for s in stride):
                raise ValueError(f"{fn}: padding='same' is not supported for strided convolutions")
            pads = []
            for k, d in zip(kernel, dilation):
                total = d * (k - 1)
                pads.append((total // 2, total - total // 2))  # torch puts the odd extra on the right
            return tuple(pads)
        raise ValueError(f"{fn}: invalid padding string {padding!r}, should be one of 'valid', 'same'")
    p = _ntuple(padding, nd, "padding", fn)
    if any(i < 0 for i in p):
        raise ValueError(f"{fn}: negative padding {p} is not supported")
    return tuple((i, i) for i in p)


def _conv(fn: str, nd: int, input: Tensor, weight: Tensor, bias, stride, padding, dilation, groups) -> Tensor:
    batched = _batched(fn, input, nd)
    _float(fn, input, weight, bias)
    if weight.ndim != nd + 2:
        raise ShapeError(
            f"{fn}: expected a {nd + 2}-D weight (out_channels, in_channels/groups, *kernel), got "
            f"weight of shape {list(weight.shape)}"
        )
    groups = builtins.int(groups)
    if groups < 1 or weight.shape[0] % groups:
        raise ValueError(f"{fn}: groups={groups} must be positive and divide out_channels={weight.shape[0]}")
    stride = _ntuple(stride, nd, "stride", fn)
    dilation = _ntuple(dilation, nd, "dilation", fn)
    if any(s < 1 for s in stride) or any(d < 1 for d in dilation):
        raise ValueError(f"{fn}: stride {stride} and dilation {dilation} must be positive")
    kernel = tuple(weight.shape[2:])
    pads = _conv_padding(padding, kernel, dilation, stride, fn)
    x = input if batched else input.unsqueeze(0)
    if x.shape[1] != weight.shape[1] * groups:
        raise ShapeError(
            f"{fn}: given groups={groups}, weight of size {list(weight.shape)}, expected input"
            f"{list(input.shape)} to have {weight.shape[1] * groups} channels, but got "
            f"{x.shape[1]} channels instead"
        )
    if bias is not None and tuple(bias.shape) != (weight.shape[0],):
        raise ShapeError(f"{fn}: expected bias of shape [{weight.shape[0]}], got {list(bias.shape)}")
    for i in range(nd):
        if x.shape[2 + i] + sum(pads[i]) < dilation[i] * (kernel[i] - 1) + 1:
            raise ShapeError(
                f"{fn}: padded input size {[x.shape[2 + j] + sum(pads[j]) for j in range(nd)]} is "
                f"smaller than the (dilated) kernel size "
                f"{[dilation[j] * (kernel[j] - 1) + 1 for j in range(nd)]} for input of shape "
                f"{list(input.shape)}"
            )
    y = state.interp.apply(_CONV, (x, weight, bias), (stride, pads, dilation, groups, _opsnn.CONV_LOWERING))
    return y if batched else y.squeeze(0)


def conv1d(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride: IntOrTuple = 1,
    padding: IntOrTuple | str = 0,
    dilation: IntOrTuple = 1,
    groups: int = 1,
) -> Tensor:
    """1-D convolution (cross-correlation) over ``(N, C_in, L)``.

    Args:
        input: ``(N, C_in, L)`` or unbatched ``(C_in, L)``.
        weight: ``(C_out, C_in / groups, kL)``.
        bias: ``(C_out,)`` or None.
        stride, padding, dilation: ints or 1-tuples; padding may be ``"valid"`` or ``"same"``.
        groups: number of blocked connections from input to output channels.
    Returns:
        ``(N, C_out, L_out)``.
    Raises:
        ShapeError: wrong rank, channel count, bias shape, or a kernel larger than the padded input.
        DTypeError: non-floating tensors.
    """
    return _conv("conv1d", 1, input, weight, bias, stride, padding, dilation, groups)


def conv_tbc(input: Tensor, weight: Tensor, bias: Tensor, pad: int = 0) -> Tensor:
    """A 1-D convolution over ``(time, batch, channels)`` input (``torch.conv_tbc``): ``weight`` is ``(kernel width,
    in_channels, out_channels)``, ``bias`` ``(out_channels,)``, ``pad`` zero time steps on each side.

    Raises:
        ShapeError: ``input`` not 3-D, or shapes that do not fit (as :func:`conv1d`).
    """
    if input.ndim != 3 or weight.ndim != 3 or bias.ndim != 1:
        raise ShapeError(
            f"conv_tbc: expected input (time, batch, channels), weight (width, in, out) and bias (out,), got "
            f"{list(input.shape)}, {list(weight.shape)} and {list(bias.shape)}"
        )
    y = conv1d(input.permute(1, 2, 0), weight.permute(2, 1, 0), bias, padding=pad)
    return y.permute(2, 0, 1)


def conv2d(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride: IntOrTuple = 1,
    padding: IntOrTuple | str = 0,
    dilation: IntOrTuple = 1,
    groups: int = 1,
) -> Tensor:
    """2-D convolution (cross-correlation) over ``(N, C_in, H, W)``.

    The lowering (XLA convolution, channels-last XLA, or im2col + one dot) is chosen by shape inside the
    op; see :func:`lazyflow.ops.nn.conv_lowering`.

    Args:
        input: ``(N, C_in, H, W)`` or unbatched ``(C_in, H, W)``.
        weight: ``(C_out, C_in / groups, kH, kW)``.
        bias: ``(C_out,)`` or None.
        stride, padding, dilation: ints or pairs; padding may be ``"valid"`` or ``"same"``.
        groups: number of blocked connections from input to output channels.
    Returns:
        ``(N, C_out, H_out, W_out)``.
    Raises:
        ShapeError: wrong rank, channel count, bias shape, or a kernel larger than the padded input.
        DTypeError: non-floating tensors.

    >>> y = lf.nn.functional.conv2d(lf.randn(1, 3, 8, 8), lf.randn(4, 3, 3, 3), padding=1)
    """
    return _conv("conv2d", 2, input, weight, bias, stride, padding, dilation, groups)


def conv3d(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride: IntOrTuple = 1,
    padding: IntOrTuple | str = 0,
    dilation: IntOrTuple = 1,
    groups: int = 1,
) -> Tensor:
    """3-D convolution over ``(N, C_in, D, H, W)``; arguments as :func:`conv2d` with triples."""
    return _conv("conv3d", 3, input, weight, bias, stride, padding, dilation, groups)


def _conv_transpose(fn, nd, input, weight, bias, stride, padding, output_padding, groups, dilation):
    batched = _batched(fn, input, nd)
    _float(fn, input, weight, bias)
    if weight.ndim != nd + 2:
        raise ShapeError(
            f"{fn}: expected a {nd + 2}-D weight (in_channels, out_channels/groups, *kernel), got "
            f"weight of shape {list(weight.shape)}"
        )
    groups = builtins.int(groups)
    x = input if batched else input.unsqueeze(0)
    if groups < 1 or weight.shape[0] % groups:
        raise ValueError(f"{fn}: groups={groups} must be positive and divide in_channels={weight.shape[0]}")
    if x.shape[1] != weight.shape[0]:
        raise ShapeError(
            f"{fn}: given transposed weight of size {list(weight.shape)}, expected input "
            f"{list(input.shape)} to have {weight.shape[0]} channels, but got {x.shape[1]} "
            f"channels instead"
        )
    stride = _ntuple(stride, nd, "stride", fn)
    padding = _ntuple(padding, nd, "padding", fn)
    output_padding = _ntuple(output_padding, nd, "output_padding", fn)
    dilation = _ntuple(dilation, nd, "dilation", fn)
    for op_, s, d in zip(output_padding, stride, dilation):
        if op_ >= s and op_ >= d:
            raise ValueError(
                f"{fn}: output padding {output_padding} must be smaller than either stride "
                f"{stride} or dilation {dilation}"
            )
    cout = weight.shape[1] * groups
    if bias is not None and tuple(bias.shape) != (cout,):
        raise ShapeError(f"{fn}: expected bias of shape [{cout}], got {list(bias.shape)}")
    kernel = weight.shape[2:]
    for i in range(nd):
        out = (x.shape[2 + i] - 1) * stride[i] - 2 * padding[i] + dilation[i] * (kernel[i] - 1) + output_padding[i] + 1
        if out <= 0:
            raise ShapeError(
                f"{fn}: the output size along spatial dim {i} would be {out} for input of shape "
                f"{list(input.shape)}; reduce padding"
            )
    y = state.interp.apply(_CONV_T, (x, weight, bias), (stride, padding, output_padding, dilation, groups))
    return y if batched else y.squeeze(0)


def conv_transpose1d(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride: IntOrTuple = 1,
    padding: IntOrTuple = 0,
    output_padding: IntOrTuple = 0,
    groups: int = 1,
    dilation: IntOrTuple = 1,
) -> Tensor:
    """1-D transposed convolution; arguments as :func:`conv_transpose2d`."""
    return _conv_transpose(
        "conv_transpose1d", 1, input, weight, bias, stride, padding, output_padding, groups, dilation
    )


def conv_transpose2d(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride: IntOrTuple = 1,
    padding: IntOrTuple = 0,
    output_padding: IntOrTuple = 0,
    groups: int = 1,
    dilation: IntOrTuple = 1,
) -> Tensor:
    """2-D transposed convolution ("deconvolution"): the gradient of :func:`conv2d` w.r.t. its input.

    Args:
        input: ``(N, C_in, H, W)`` or unbatched.
        weight: ``(C_in, C_out / groups, kH, kW)``.
        bias: ``(C_out,)`` or None.
        stride, padding, output_padding, dilation: ints or pairs; ``output_padding`` adds to one side of
            the output and must be smaller than stride or dilation.
        groups: blocked connections.
    Returns:
        ``(N, C_out, (H-1)*stride - 2*padding + dilation*(kH-1) + output_padding + 1, ...)``.
    Raises:
        ShapeError: wrong rank, channel count or bias shape; a non-positive output size.
        DTypeError: non-floating tensors.
    """
    return _conv_transpose(
        "conv_transpose2d", 2, input, weight, bias, stride, padding, output_padding, groups, dilation
    )


def conv_transpose3d(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride: IntOrTuple = 1,
    padding: IntOrTuple = 0,
    output_padding: IntOrTuple = 0,
    groups: int = 1,
    dilation: IntOrTuple = 1,
) -> Tensor:
    """3-D transposed convolution over ``(N, C_in, D, H, W)`` or unbatched; arguments as :func:`conv_transpose2d`
    with triples (weight ``(C_in, C_out / groups, kD, kH, kW)``)."""
    return _conv_transpose(
        "conv_transpose3d", 3, input, weight, bias, stride, padding, output_padding, groups, dilation
    )


# ---------------------------------------------------------------- pooling
def _pool_args(fn, nd, input, kernel_size, stride, padding, dilation):
    batched = _batched(fn, input, nd)
    del batched
    kernel = _ntuple(kernel_size, nd, "kernel_size", fn)
    stride = (
        kernel
        if stride is None or (not isinstance(stride, builtins.int) and len(stride) == 0)
        else _ntuple(stride, nd, "stride", fn)
    )
    padding = _ntuple(padding, nd, "padding", fn)
    dilation = _ntuple(dilation, nd, "dilation", fn)
    if any(k < 1 for k in kernel) or any(s < 1 for s in stride) or any(d < 1 for d in dilation):
        raise ValueError(f"{fn}: kernel_size {kernel}, stride {stride} and dilation {dilation} must be positive")
    for p, k, d in zip(padding, kernel, dilation):
        if p < 0 or p > (d * (k - 1) + 1) // 2:
            raise ValueError(
                f"{fn}: pad should be at most half of effective kernel size, but got pad={padding}, "
                f"kernel_size={kernel} and dilation={dilation}"
            )
    sp = input.shape[-nd:]
    for i in range(nd):
        if sp[i] + 2 * padding[i] < dilation[i] * (kernel[i] - 1) + 1:
            raise ShapeError(
                f"{fn}: input of shape {list(input.shape)} is too small for kernel_size {kernel} "
                f"with padding {padding} and dilation {dilation}"
            )
    return kernel, stride, padding, dilation


def _max_pool(fn, nd, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices):
    k, s, p, d = _pool_args(fn, nd, input, kernel_size, stride, padding, dilation)
    statics = (k, s, p, d, builtins.bool(ceil_mode))
    if return_indices:
        return state.interp.apply(_MAX_POOL_IDX, (input,), statics)
    return state.interp.apply(_MAX_POOL, (input,), statics)


def max_pool1d(
    input: Tensor,
    kernel_size: IntOrTuple,
    stride: IntOrTuple | None = None,
    padding: IntOrTuple = 0,
    dilation: IntOrTuple = 1,
    ceil_mode: bool = False,
    return_indices: bool = False,
):
    """1-D max pooling over ``(N, C, L)`` or ``(C, L)``; see :func:`max_pool2d`."""
    return _max_pool("max_pool1d", 1, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)


def max_pool2d(
    input: Tensor,
    kernel_size: IntOrTuple,
    stride: IntOrTuple | None = None,
    padding: IntOrTuple = 0,
    dilation: IntOrTuple = 1,
    ceil_mode: bool = False,
    return_indices: bool = False,
):
    """2-D max pooling over ``(N, C, H, W)`` or ``(C, H, W)``.

    Args:
        input: the input.
        kernel_size: window size (int or pair).
        stride: window step (default: ``kernel_size``).
        padding: implicit -inf padding on both sides, at most half the effective kernel.
        dilation: spacing between window elements.
        ceil_mode: use ceil instead of floor for the output size (a last window must start inside the
            input or the left padding).
        return_indices: also return the flat ``h * W + w`` index of each maximum (int64).
    Returns:
        the pooled tensor, or ``(pooled, indices)``.
    Raises:
        ValueError: bad window arguments. ShapeError: wrong rank or an input smaller than the window.
    """
    return _max_pool("max_pool2d", 2, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)


def _avg_pool(fn, nd, input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override):
    k, s, p, _ = _pool_args(fn, nd, input, kernel_size, stride, padding, 1)
    if divisor_override is not None:
        divisor_override = builtins.int(divisor_override)
        if divisor_override == 0:
            raise ValueError(f"{fn}: divisor must be not zero")
    return state.interp.apply(
        _AVG_POOL, (input,), (k, s, p, builtins.bool(ceil_mode), builtins.bool(count_include_pad), divisor_override)
    )


def avg_pool1d(
    input: Tensor,
    kernel_size: IntOrTuple,
    stride: IntOrTuple | None = None,
    padding: IntOrTuple = 0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
) -> Tensor:
    """1-D average pooling over ``(N, C, L)`` or ``(C, L)``; see :func:`avg_pool2d`."""
    return _avg_pool("avg_pool1d", 1, input, kernel_size, stride, padding, ceil_mode, count_include_pad, None)


def avg_pool2d(
    input: Tensor,
    kernel_size: IntOrTuple,
    stride: IntOrTuple | None = None,
    padding: IntOrTuple = 0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
    divisor_override: int | None = None,
) -> Tensor:
    """2-D average pooling over ``(N, C, H, W)`` or ``(C, H, W)``.

    Args:
        input: the input.
        kernel_size, stride, padding: window arguments (stride defaults to kernel_size).
        ceil_mode: ceil instead of floor for the output size.
        count_include_pad: count the zero padding in the divisor (never the part of a ceil-mode window
            beyond the padding, like torch).
        divisor_override: a fixed divisor instead.
    Returns:
        the pooled tensor.
    Raises:
        ValueError: bad window arguments. ShapeError: wrong rank or an input smaller than the window.
    """
    return _avg_pool(
        "avg_pool2d", 2, input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override
    )


def _adaptive(fn, nd, input, output_size) -> Tensor:
    _batched(fn, input, nd)
    if isinstance(output_size, builtins.int) or output_size is None:
        output_size = (output_size,) * nd
    out = tuple(output_size)
    if len(out) == 1 and nd > 1:
        out = out * nd
    if len(out) != nd:
        raise ValueError(f"{fn}: output_size must be an int or a tuple of {nd}, got {output_size!r}")
    sp = input.shape[-nd:]
    out = tuple(sp[i] if o is None else builtins.int(o) for i, o in enumerate(out))
    if any(o < 1 for o in out) or any(s < 1 for s in sp):
        raise ShapeError(
            f"{fn}: output_size {out} and input spatial size {list(sp)} must be positive "
            f"(input of shape {list(input.shape)})"
        )
    return state.interp.apply(_ADAPTIVE_AVG, (input,), (out,))


def adaptive_avg_pool1d(input: Tensor, output_size: int | Sequence[int]) -> Tensor:
    """Adaptive average pooling to length ``output_size``, with torch's exact bin boundaries."""
    return _adaptive("adaptive_avg_pool1d", 1, input, output_size)


def adaptive_avg_pool2d(input: Tensor, output_size: int | Sequence[int | None]) -> Tensor:
    """Adaptive average pooling to ``output_size`` (int, pair, None keeps that dim).

    Bin ``i`` of a dim of length ``n`` pooled to ``m`` covers ``[floor(i*n/m), ceil((i+1)*n/m))``, exactly
    torch's bins (also when ``m`` does not divide ``n``).

    Raises:
        ShapeError: wrong rank or non-positive sizes.
    """
    return _adaptive("adaptive_avg_pool2d", 2, input, output_size)
