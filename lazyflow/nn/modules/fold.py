"""``Fold``/``Unfold`` (col2im / im2col) and ``PixelShuffle``/``PixelUnshuffle`` as layers (no parameters)."""

from __future__ import annotations

from ..._tensor import Tensor
from .. import functional as F
from ..functional._conv import IntOrTuple
from ..module import Module

__all__ = ["Fold", "Unfold", "PixelShuffle", "PixelUnshuffle"]


class Fold(Module):
    """Sum sliding blocks into an image: :func:`lazyflow.nn.functional.fold` with the stored arguments.

    Args:
        output_size: spatial size ``(H, W)`` of the result.
        kernel_size, dilation, padding, stride: as :class:`Unfold`.
    """

    def __init__(
        self,
        output_size: IntOrTuple,
        kernel_size: IntOrTuple,
        dilation: IntOrTuple = 1,
        padding: IntOrTuple = 0,
        stride: IntOrTuple = 1,
    ) -> None:
        super().__init__()
        self.output_size = output_size
        self.kernel_size = kernel_size
        self.dilation = dilation
        self.padding = padding
        self.stride = stride

    def forward(self, input: Tensor) -> Tensor:
        return F.fold(input, self.output_size, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self) -> str:
        return (
            "output_size={output_size}, kernel_size={kernel_size}, dilation={dilation}, padding={padding}, "
            "stride={stride}".format(**self.__dict__)
        )


class Unfold(Module):
    """Extract sliding blocks (im2col): :func:`lazyflow.nn.functional.unfold` with the stored arguments.

    Args:
        kernel_size: block size; dilation: spacing inside a block; padding: implicit zeros on both sides;
            stride: step between blocks.
    """

    def __init__(
        self, kernel_size: IntOrTuple, dilation: IntOrTuple = 1, padding: IntOrTuple = 0, stride: IntOrTuple = 1
    ) -> None:
        super().__init__()
        self.kernel_size = kernel_size
        self.dilation = dilation
        self.padding = padding
        self.stride = stride

    def forward(self, input: Tensor) -> Tensor:
        return F.unfold(input, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self) -> str:
        return "kernel_size={kernel_size}, dilation={dilation}, padding={padding}, stride={stride}".format(
            **self.__dict__
        )


class PixelShuffle(Module):
    """``(*, C * r^2, H, W)`` -> ``(*, C, H * r, W * r)``; see :func:`lazyflow.nn.functional.pixel_shuffle`."""

    def __init__(self, upscale_factor: int) -> None:
        super().__init__()
        self.upscale_factor = upscale_factor

    def forward(self, input: Tensor) -> Tensor:
        return F.pixel_shuffle(input, self.upscale_factor)

    def extra_repr(self) -> str:
        return f"upscale_factor={self.upscale_factor}"


class PixelUnshuffle(Module):
    """``(*, C, H * r, W * r)`` -> ``(*, C * r^2, H, W)``; see :func:`lazyflow.nn.functional.pixel_unshuffle`."""

    def __init__(self, downscale_factor: int) -> None:
        super().__init__()
        self.downscale_factor = downscale_factor

    def forward(self, input: Tensor) -> Tensor:
        return F.pixel_unshuffle(input, self.downscale_factor)

    def extra_repr(self) -> str:
        return f"downscale_factor={self.downscale_factor}"
