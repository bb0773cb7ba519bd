"""Pooling layers with torch's constructor signatures and ``repr``."""

from __future__ import annotations

from collections.abc import Sequence

from ..._tensor import Tensor
from .. import functional as F
from ..module import Module
from .conv import layer_shape_error

__all__ = ["MaxPool1d", "MaxPool2d", "AvgPool1d", "AvgPool2d", "AdaptiveAvgPool1d", "AdaptiveAvgPool2d"]

_SP = {1: "L", 2: "H, W", 3: "D, H, W"}


def _check(layer: Module, input: Tensor, nd: int) -> None:
    if not isinstance(input, Tensor):
        raise TypeError(f"{layer._get_name()}: expected a lazyflow Tensor, got {type(input).__name__}")
    if input.ndim not in (nd + 1, nd + 2):
        raise layer_shape_error(layer, f"(N, C, {_SP[nd]}) or (C, {_SP[nd]})", input)


class _MaxPoolNd(Module):
    _nd = 2

    def __init__(
        self,
        kernel_size: int | Sequence[int],
        stride: int | Sequence[int] | None = None,
        padding: int | Sequence[int] = 0,
        dilation: int | Sequence[int] = 1,
        return_indices: bool = False,
        ceil_mode: bool = False,
    ) -> None:
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if (stride is not None) else kernel_size
        self.padding = padding
        self.dilation = dilation
        self.return_indices = return_indices
        self.ceil_mode = ceil_mode

    def extra_repr(self) -> str:
        return (
            "kernel_size={kernel_size}, stride={stride}, padding={padding}, dilation={dilation}, "
            "ceil_mode={ceil_mode}".format(**self.__dict__)
        )


class MaxPool1d(_MaxPoolNd):
    """1-D max pooling over ``(N, C, L)``; arguments as :class:`MaxPool2d`."""

    _nd = 1

    def forward(self, input: Tensor):
        _check(self, input, 1)
        return F.max_pool1d(
            input,
            self.kernel_size,
            self.stride,
            self.padding,
            self.dilation,
            ceil_mode=self.ceil_mode,
            return_indices=self.return_indices,
        )


class MaxPool2d(_MaxPoolNd):
    """2-D max pooling over ``(N, C, H, W)``.

    Args:
        kernel_size: window size; stride: step (default ``kernel_size``); padding: implicit -inf padding
            (at most half the kernel); dilation: spacing in the window.
        return_indices: also return the flat index of each maximum (for ``MaxUnpool2d``).
        ceil_mode: ceil instead of floor for the output size.
    Raises:
        ShapeError (on call): wrong rank.
    """

    _nd = 2

    def forward(self, input: Tensor):
        _check(self, input, 2)
        return F.max_pool2d(
            input,
            self.kernel_size,
            self.stride,
            self.padding,
            self.dilation,
            ceil_mode=self.ceil_mode,
            return_indices=self.return_indices,
        )


class AvgPool1d(Module):
    """1-D average pooling over ``(N, C, L)``.

    Args:
        kernel_size, stride (default ``kernel_size``), padding: window arguments.
        ceil_mode: ceil instead of floor for the output size.
        count_include_pad: count the zero padding in the divisor.
    Raises:
        ShapeError (on call): wrong rank.
    """

    def __init__(
        self,
        kernel_size: int | Sequence[int],
        stride: int | Sequence[int] | None = None,
        padding: int | Sequence[int] = 0,
        ceil_mode: bool = False,
        count_include_pad: bool = True,
    ) -> None:
        super().__init__()
        self.kernel_size = _single(kernel_size)
        self.stride = _single(stride if (stride is not None) else kernel_size)
        self.padding = _single(padding)
        self.ceil_mode = ceil_mode
        self.count_include_pad = count_include_pad

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"

    def forward(self, input: Tensor) -> Tensor:
        _check(self, input, 1)
        return F.avg_pool1d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode, self.count_include_pad)


def _single(v):
    return (v,) if isinstance(v, int) else tuple(v)


class AvgPool2d(Module):
    """2-D average pooling over ``(N, C, H, W)``.

    Args:
        kernel_size, stride (default ``kernel_size``), padding: window arguments.
        ceil_mode: ceil instead of floor for the output size.
        count_include_pad: count the zero padding in the divisor.
        divisor_override: a fixed divisor instead.
    Raises:
        ShapeError (on call): wrong rank.
    """

    def __init__(
        self,
        kernel_size: int | Sequence[int],
        stride: int | Sequence[int] | None = None,
        padding: int | Sequence[int] = 0,
        ceil_mode: bool = False,
        count_include_pad: bool = True,
        divisor_override: int | None = None,
    ) -> None:
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if (stride is not None) else kernel_size
        self.padding = padding
        self.ceil_mode = ceil_mode
        self.count_include_pad = count_include_pad
        self.divisor_override = divisor_override

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"

    def forward(self, input: Tensor) -> Tensor:
        _check(self, input, 2)
        return F.avg_pool2d(
            input,
            self.kernel_size,
            self.stride,
            self.padding,
            self.ceil_mode,
            self.count_include_pad,
            self.divisor_override,
        )


class AdaptiveAvgPool1d(Module):
    """Adaptive average pooling of ``(N, C, L)`` to length ``output_size`` (torch's exact bins)."""

    def __init__(self, output_size: int | Sequence[int]) -> None:
        super().__init__()
        self.output_size = output_size

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"

    def forward(self, input: Tensor) -> Tensor:
        _check(self, input, 1)
        return F.adaptive_avg_pool1d(input, self.output_size)


class AdaptiveAvgPool2d(Module):
    """Adaptive average pooling of ``(N, C, H, W)`` to ``output_size`` (int, pair; None keeps a dim).

    Raises:
        ShapeError (on call): wrong rank.

    >>> lf.nn.AdaptiveAvgPool2d((5, 7))(lf.randn(1, 64, 8, 9)).shape
    (1, 64, 5, 7)
    """

    def __init__(self, output_size: int | Sequence[int | None]) -> None:
        super().__init__()
        self.output_size = output_size

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"

    def forward(self, input: Tensor) -> Tensor:
        _check(self, input, 2)
        return F.adaptive_avg_pool2d(input, self.output_size)
