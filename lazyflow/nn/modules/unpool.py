"""MaxUnpool1d/2d/3d: the partial inverses of max pooling (torch's constructor arguments and reprs)."""

from __future__ import annotations

from collections.abc import Sequence

from ..._tensor import Tensor
from .. import functional as F
from ..module import Module

__all__ = ["MaxUnpool1d", "MaxUnpool2d", "MaxUnpool3d"]


def _ntuple(v, n: int) -> tuple[int, ...]:
    return (v,) * n if isinstance(v, int) else tuple(v)


class _MaxUnpoolNd(Module):
    _fn = staticmethod(F.max_unpool2d)
    _nd = 2

    def __init__(
        self,
        kernel_size: int | Sequence[int],
        stride: int | Sequence[int] | None = None,
        padding: int | Sequence[int] = 0,
    ) -> None:
        super().__init__()
        n = self._nd  # torch stores tuples (its _single/_pair/_triple), which show in the repr
        self.kernel_size = _ntuple(kernel_size, n)
        self.stride = _ntuple(stride if stride is not None else kernel_size, n)
        self.padding = _ntuple(padding, n)

    def forward(self, input: Tensor, indices: Tensor, output_size: Sequence[int] | None = None) -> Tensor:
        return type(self)._fn(input, indices, self.kernel_size, self.stride, self.padding, output_size)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class MaxUnpool1d(_MaxUnpoolNd):
    """Inverse of :class:`MaxPool1d` given its indices: ``(N, C, L_in)`` -> ``(N, C, L_out)``."""

    _fn = staticmethod(F.max_unpool1d)
    _nd = 1


class MaxUnpool2d(_MaxUnpoolNd):
    """Inverse of :class:`MaxPool2d` given its indices; ``output_size`` resolves ambiguous sizes."""

    _fn = staticmethod(F.max_unpool2d)


class MaxUnpool3d(_MaxUnpoolNd):
    """Inverse of :class:`MaxPool3d` given its indices."""

    _fn = staticmethod(F.max_unpool3d)
    _nd = 3
