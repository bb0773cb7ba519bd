"""Padding layers (``ConstantPad*``, ``ZeroPad*``, ``ReflectionPad*``, ``ReplicationPad*``, ``CircularPad*``) over
:func:`lazyflow.nn.functional.pad`, with torch's constructor arguments, stored ``padding`` tuples and ``repr``."""

from __future__ import annotations

from collections.abc import Sequence

from ..._core.errors import NotSupportedError, ShapeError
from ..._tensor import Tensor
from .. import functional as F
from ..module import Module

__all__ = [
    "ConstantPad1d",
    "ConstantPad2d",
    "ConstantPad3d",
    "ZeroPad1d",
    "ZeroPad2d",
    "ZeroPad3d",
    "ReflectionPad1d",
    "ReflectionPad2d",
    "ReflectionPad3d",
    "ReplicationPad1d",
    "ReplicationPad2d",
    "ReplicationPad3d",
    "CircularPad1d",
    "CircularPad2d",
    "CircularPad3d",
]


def _expand(padding: int | Sequence[int], nd: int) -> tuple[int, ...]:
    """An int pads every side (torch's ``_pair``/``_quadruple``/``_ntuple(6)``); a sequence is kept as given."""
    if isinstance(padding, int):
        return (int(padding),) * (2 * nd)
    return tuple(padding)


class _PadNd(Module):
    _nd = 1
    _mode = "constant"

    def __init__(self, padding: int | Sequence[int]) -> None:
        super().__init__()
        self.padding = _expand(padding, self._nd)

    def _check(self, input: Tensor) -> None:
        if not isinstance(input, Tensor):
            raise TypeError(f"{self._get_name()}: expected a lazyflow Tensor, got {type(input).__name__}")
        nd = self._nd
        if input.ndim not in (nd + 1, nd + 2):
            msg = (
                f"{self._get_name()}: expected {nd + 1}D or {nd + 2}D input (got {input.ndim}D input of shape "
                f"{list(input.shape)}); add or remove a batch dim"
            )
            raise ShapeError(msg) if self._mode == "circular" else NotSupportedError(msg)

    def forward(self, input: Tensor) -> Tensor:
        self._check(input)
        return F.pad(input, self.padding, self._mode)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class _ConstantPadNd(_PadNd):
    def __init__(self, padding: int | Sequence[int], value: float) -> None:
        super().__init__(padding)
        self.value = value

    def forward(self, input: Tensor) -> Tensor:
        if not isinstance(input, Tensor):
            raise TypeError(f"{self._get_name()}: expected a lazyflow Tensor, got {type(input).__name__}")
        return F.pad(input, self.padding, "constant", self.value)

    def extra_repr(self) -> str:
        return f"padding={self.padding}, value={self.value}"


class ConstantPad1d(_ConstantPadNd):
    """Pad the last dim with ``value``: ``padding`` is an int or ``(left, right)`` (negative crops)."""

    _nd = 1


class ConstantPad2d(_ConstantPadNd):
    """Pad the last 2 dims with ``value``: ``padding`` is an int or ``(left, right, top, bottom)``."""

    _nd = 2


class ConstantPad3d(_ConstantPadNd):
    """Pad the last 3 dims with ``value``: ``padding`` is an int or a 6-tuple (last dim first)."""

    _nd = 3


class _ZeroPadNd(_ConstantPadNd):
    def __init__(self, padding: int | Sequence[int]) -> None:
        super().__init__(padding, 0.0)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class ZeroPad1d(_ZeroPadNd):
    """Pad the last dim with zeros; ``padding`` as :class:`ConstantPad1d`."""

    _nd = 1


class ZeroPad2d(_ZeroPadNd):
    """Pad the last 2 dims with zeros; ``padding`` as :class:`ConstantPad2d`."""

    _nd = 2


class ZeroPad3d(_ZeroPadNd):
    """Pad the last 3 dims with zeros; ``padding`` as :class:`ConstantPad3d`."""

    _nd = 3


class ReflectionPad1d(_PadNd):
    """Reflect the last dim about its edges (each pad smaller than the dim); input ``(C, W)`` or ``(N, C, W)``.

    Raises (on call): NotImplementedError for another rank; ShapeError for a pad not smaller than the dim.
    """

    _mode = "reflect"


class ReflectionPad2d(ReflectionPad1d):
    """Reflection padding of the last 2 dims; input ``(C, H, W)`` or ``(N, C, H, W)``."""

    _nd = 2


class ReflectionPad3d(ReflectionPad1d):
    """Reflection padding of the last 3 dims; input ``(C, D, H, W)`` or ``(N, C, D, H, W)``."""

    _nd = 3


class ReplicationPad1d(_PadNd):
    """Repeat the edge values of the last dim; input ``(C, W)`` or ``(N, C, W)``.

    Raises (on call): NotImplementedError for another rank.
    """

    _mode = "replicate"


class ReplicationPad2d(ReplicationPad1d):
    """Replication padding of the last 2 dims; input ``(C, H, W)`` or ``(N, C, H, W)``."""

    _nd = 2


class ReplicationPad3d(ReplicationPad1d):
    """Replication padding of the last 3 dims; input ``(C, D, H, W)`` or ``(N, C, D, H, W)``."""

    _nd = 3


class CircularPad1d(_PadNd):
    """Wrap the last dim around (each pad at most the dim's size); input ``(C, W)`` or ``(N, C, W)``.

    Raises (on call): ValueError (ShapeError) for another rank or a pad larger than the dim.
    """

    _mode = "circular"


class CircularPad2d(CircularPad1d):
    """Circular padding of the last 2 dims; input ``(C, H, W)`` or ``(N, C, H, W)``."""

    _nd = 2


class CircularPad3d(CircularPad1d):
    """Circular padding of the last 3 dims; input ``(C, D, H, W)`` or ``(N, C, D, H, W)``."""

    _nd = 3
