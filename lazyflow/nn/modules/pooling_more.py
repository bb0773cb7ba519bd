"""``LPPool1d/2d/3d``, ``AdaptiveMaxPool1d/2d/3d`` and the 3-D ``MaxPool3d``/``AvgPool3d``/``AdaptiveAvgPool3d``
with torch's constructor signatures and ``repr``."""

from __future__ import annotations

from collections.abc import Sequence

from ..._tensor import Tensor
from .. import functional as F
from ..module import Module
from .pooling import AdaptiveAvgPool2d, AvgPool2d, _check, _MaxPoolNd

__all__ = [
    "MaxPool3d",
    "AvgPool3d",
    "AdaptiveAvgPool3d",
    "LPPool1d",
    "LPPool2d",
    "LPPool3d",
    "AdaptiveMaxPool1d",
    "AdaptiveMaxPool2d",
    "AdaptiveMaxPool3d",
]


class MaxPool3d(_MaxPoolNd):
    """3-D max pooling over ``(N, C, D, H, W)``; arguments as :class:`MaxPool2d`."""

    _nd = 3

    def forward(self, input: Tensor):
        _check(self, input, 3)
        return F.max_pool3d(
            input,
            self.kernel_size,
            self.stride,
            self.padding,
            self.dilation,
            ceil_mode=self.ceil_mode,
            return_indices=self.return_indices,
        )


class AvgPool3d(AvgPool2d):
    """3-D average pooling over ``(N, C, D, H, W)``; arguments as :class:`AvgPool2d`."""

    def forward(self, input: Tensor) -> Tensor:
        _check(self, input, 3)
        return F.avg_pool3d(
            input,
            self.kernel_size,
            self.stride,
            self.padding,
            self.ceil_mode,
            self.count_include_pad,
            self.divisor_override,
        )


class AdaptiveAvgPool3d(AdaptiveAvgPool2d):
    """Adaptive average pooling of ``(N, C, D, H, W)`` to ``output_size`` (torch's bins; None keeps a dim)."""

    def forward(self, input: Tensor) -> Tensor:
        _check(self, input, 3)
        return F.adaptive_avg_pool3d(input, self.output_size)


class _LPPoolNd(Module):
    def __init__(
        self,
        norm_type: float,
        kernel_size: int | Sequence[int],
        stride: int | Sequence[int] | None = None,
        ceil_mode: bool = False,
    ) -> None:
        super().__init__()
        self.norm_type = norm_type
        self.kernel_size = kernel_size
        self.stride = stride
        self.ceil_mode = ceil_mode

    def extra_repr(self) -> str:
        return "norm_type={norm_type}, kernel_size={kernel_size}, stride={stride}, ceil_mode={ceil_mode}".format(
            **self.__dict__
        )


class LPPool1d(_LPPoolNd):
    """Power-average pooling of ``(N, C, L)``; see :func:`lazyflow.nn.functional.lp_pool1d`."""

    def forward(self, input: Tensor) -> Tensor:
        _check(self, input, 1)
        return F.lp_pool1d(input, self.norm_type, self.kernel_size, self.stride, self.ceil_mode)


class LPPool2d(_LPPoolNd):
    """Power-average pooling of ``(N, C, H, W)``; see :func:`lazyflow.nn.functional.lp_pool2d`."""

    def forward(self, input: Tensor) -> Tensor:
        _check(self, input, 2)
        return F.lp_pool2d(input, self.norm_type, self.kernel_size, self.stride, self.ceil_mode)


class LPPool3d(_LPPoolNd):
    """Power-average pooling of ``(N, C, D, H, W)``; see :func:`lazyflow.nn.functional.lp_pool2d`."""

    def forward(self, input: Tensor) -> Tensor:
        _check(self, input, 3)
        return F.lp_pool3d(input, self.norm_type, self.kernel_size, self.stride, self.ceil_mode)


class _AdaptiveMaxPoolNd(Module):
    def __init__(self, output_size: int | Sequence[int | None], return_indices: bool = False) -> None:
        super().__init__()
        self.output_size = output_size
        self.return_indices = return_indices

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class AdaptiveMaxPool1d(_AdaptiveMaxPoolNd):
    """Adaptive max pooling of ``(N, C, L)`` to ``output_size`` (``return_indices``: also the argmax)."""

    def forward(self, input: Tensor):
        _check(self, input, 1)
        return F.adaptive_max_pool1d(input, self.output_size, self.return_indices)


class AdaptiveMaxPool2d(_AdaptiveMaxPoolNd):
    """Adaptive max pooling of ``(N, C, H, W)`` to ``output_size`` (int, pair; None keeps a dim)."""

    def forward(self, input: Tensor):
        _check(self, input, 2)
        return F.adaptive_max_pool2d(input, self.output_size, self.return_indices)


class AdaptiveMaxPool3d(_AdaptiveMaxPoolNd):
    """Adaptive max pooling of ``(N, C, D, H, W)`` to ``output_size`` (int, triple; None keeps a dim)."""

    def forward(self, input: Tensor):
        _check(self, input, 3)
        return F.adaptive_max_pool3d(input, self.output_size, self.return_indices)
