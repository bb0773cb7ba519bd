"""``LPPool1d/2d`` and ``AdaptiveMaxPool1d/2d`` with torch's constructor signatures and ``repr``."""

from __future__ import annotations

from collections.abc import Sequence

from ..._tensor import Tensor
from .. import functional as F
from ..module import Module
from .pooling import _check

__all__ = ["LPPool1d", "LPPool2d", "AdaptiveMaxPool1d", "AdaptiveMaxPool2d"]


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
