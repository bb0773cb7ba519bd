"""``Upsample``, ``UpsamplingNearest2d`` and ``UpsamplingBilinear2d``: :func:`interpolate` as layers."""

from __future__ import annotations

from collections.abc import Sequence

from ..._tensor import Tensor
from .. import functional as F
from ..module import Module

__all__ = ["Upsample", "UpsamplingNearest2d", "UpsamplingBilinear2d"]


class Upsample(Module):
    """Resize ``(N, C, *spatial)`` by ``size`` or ``scale_factor`` (torch's layer over :func:`interpolate`).

    Args:
        size: output spatial size; scale_factor: multiplier(s) (stored as float / tuple of floats).
        mode: as :func:`lazyflow.nn.functional.interpolate` (default ``"nearest"``).
        align_corners, recompute_scale_factor: passed through.
    Raises:
        as :func:`lazyflow.nn.functional.interpolate`, on call.

    >>> up = lf.nn.Upsample(scale_factor=2, mode="bilinear")
    """

    def __init__(
        self,
        size: int | Sequence[int] | None = None,
        scale_factor: float | Sequence[float] | None = None,
        mode: str = "nearest",
        align_corners: bool | None = None,
        recompute_scale_factor: bool | None = None,
    ) -> None:
        super().__init__()
        self.name = type(self).__name__
        self.size = size
        if isinstance(scale_factor, tuple):
            self.scale_factor = tuple(float(f) for f in scale_factor)
        else:
            self.scale_factor = float(scale_factor) if scale_factor else None  # type: ignore[arg-type]
        self.mode = mode
        self.align_corners = align_corners
        self.recompute_scale_factor = recompute_scale_factor

    def forward(self, input: Tensor) -> Tensor:
        return F.interpolate(
            input,
            self.size,
            self.scale_factor,
            self.mode,
            self.align_corners,
            recompute_scale_factor=self.recompute_scale_factor,
        )

    def extra_repr(self) -> str:
        info = f"scale_factor={self.scale_factor!r}" if self.scale_factor is not None else f"size={self.size!r}"
        return info + f", mode={self.mode!r}"


class UpsamplingNearest2d(Upsample):
    """2-D nearest upsampling: ``Upsample(size, scale_factor, mode="nearest")``."""

    def __init__(self, size: int | Sequence[int] | None = None, scale_factor: float | Sequence[float] | None = None):
        super().__init__(size, scale_factor, mode="nearest")


class UpsamplingBilinear2d(Upsample):
    """2-D bilinear upsampling with ``align_corners=True`` (torch's legacy layer)."""

    def __init__(self, size: int | Sequence[int] | None = None, scale_factor: float | Sequence[float] | None = None):
        super().__init__(size, scale_factor, mode="bilinear", align_corners=True)
