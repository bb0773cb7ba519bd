"""``finfo`` and ``iinfo``: the numeric limits of a dtype, with torch's attribute names and values."""

from __future__ import annotations

import builtins

import numpy as np

from . import dtypes as D
from .errors import DTypeError

__all__ = ["finfo", "iinfo"]


class finfo:
    """Limits of a floating dtype (``lf.finfo(lf.float16).eps``); the default float dtype when none is given.

    Attributes: ``bits``, ``eps``, ``max``, ``min``, ``tiny``, ``smallest_normal`` (equal to ``tiny``),
    ``resolution`` (``10 ** -precision``) and ``dtype`` (the dtype's name, as in torch).

    Raises:
        DTypeError: an integer or bool dtype (use :class:`iinfo`).
    >>> lf.finfo(lf.float32).eps
    1.1920928955078125e-07
    """

    __slots__ = ("bits", "eps", "max", "min", "tiny", "smallest_normal", "resolution", "dtype")

    def __init__(self, type=None):
        d = D.get_default_dtype() if type is None else D.to_dtype(type)
        d = D.to_real(d)  # torch: a complex dtype's finfo is its real part's
        if not d.is_floating_point:
            raise DTypeError(f"finfo expects a floating dtype, got {d}; use lf.iinfo for integer dtypes")
        info = np.finfo(d.np)
        self.bits = builtins.int(info.bits)
        self.eps = builtins.float(info.eps)
        self.max = builtins.float(info.max)
        self.min = builtins.float(info.min)
        self.tiny = builtins.float(info.smallest_normal)
        self.smallest_normal = self.tiny
        self.resolution = 10.0 ** -builtins.int(info.precision)
        self.dtype = d.name

    def __eq__(self, other) -> bool:
        return isinstance(other, finfo) and other.dtype == self.dtype

    def __hash__(self) -> builtins.int:
        return hash(("finfo", self.dtype))

    def __repr__(self) -> str:
        return (
            f"finfo(resolution={self.resolution:g}, min={self.min:g}, max={self.max:g}, eps={self.eps:g}, "
            f"smallest_normal={self.smallest_normal:g}, tiny={self.tiny:g}, dtype={self.dtype})"
        )


class iinfo:
    """Limits of an integer dtype: ``bits``, ``max``, ``min`` and ``dtype`` (the dtype's name).

    Raises:
        DTypeError: a floating or bool dtype (torch refuses bool too; use :class:`finfo` for floats).
    >>> lf.iinfo(lf.int8).max
    127
    """

    __slots__ = ("bits", "max", "min", "dtype")

    def __init__(self, type):
        d = D.to_dtype(type)
        if d.is_inexact or d is D.bool_:
            raise DTypeError(f"iinfo expects an integer dtype, got {d}; use lf.finfo for floating dtypes")
        info = np.iinfo(d.np)
        self.bits, self.min, self.max = builtins.int(info.bits), builtins.int(info.min), builtins.int(info.max)
        self.dtype = d.name

    def __eq__(self, other) -> bool:
        return isinstance(other, iinfo) and other.dtype == self.dtype

    def __hash__(self) -> builtins.int:
        return hash(("iinfo", self.dtype))

    def __repr__(self) -> str:
        return f"iinfo(min={float(self.min):g}, max={float(self.max):g}, dtype={self.dtype})"
