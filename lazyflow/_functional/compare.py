"""Comparisons and queries with torch's signatures: isclose, allclose, equal, count_nonzero, is_tensor, numel...

All are composites over the elementwise and reduction families. ``allclose`` and ``equal`` return Python bools, so
they need concrete values: inside ``lf.compile`` they raise GraphError (torch.compile graph-breaks there);
``isclose`` and ``count_nonzero`` return tensors and trace.
"""

from __future__ import annotations

import builtins

from .._core import dtypes as D
from .._core.errors import ArgumentError, DTypeError, ShapeError, ValueRangeError
from .._tensor import Tensor, _concrete
from ._common import _dims
from .elementwise import abs, eq, isfinite, isnan, le, logical_and, logical_or
from .reduction import all, sum
from .shape import broadcast_shapes

__all__ = [
    "allclose",
    "count_nonzero",
    "equal",
    "is_complex",
    "is_floating_point",
    "is_nonzero",
    "is_tensor",
    "isclose",
    "numel",
]


def _tensor_arg(fn: str, name: str, x) -> Tensor:
    if not isinstance(x, Tensor):
        raise ArgumentError(f"{fn}(): argument '{name}' must be a Tensor, got {type(x).__name__}; wrap it in lf.tensor")
    return x


def isclose(input: Tensor, other: Tensor, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> Tensor:
    """Elementwise ``|input - other| <= atol + rtol * |other|`` (or exactly equal, which covers infinities).

    Args:
        input: a tensor.
        other: a tensor of the same dtype, broadcastable with ``input``.
        rtol: relative tolerance (>= 0).
        atol: absolute tolerance (>= 0).
        equal_nan: count two NaNs as close.
    Returns:
        A bool tensor of the broadcast shape.
    Raises:
        ArgumentError: an operand that is not a Tensor.
        DTypeError: operands of different dtypes (torch requires the same dtype; cast one with ``.to``).
        ValueRangeError: a negative ``rtol`` or ``atol``.
        ShapeError: shapes that do not broadcast.
    >>> lf.isclose(lf.tensor([1.0, 2.0]), lf.tensor([1.0, 2.1]))
    tensor([ True, False])
    """
    input, other = _tensor_arg("isclose", "input", input), _tensor_arg("isclose", "other", other)
    if input.dtype is not other.dtype:
        raise DTypeError(
            f"isclose: input and other must have the same dtype, got {input.dtype} and {other.dtype}; "
            "convert one with .to(the other's dtype)"
        )
    if rtol < 0 or atol < 0:
        raise ValueRangeError(f"isclose: rtol and atol must be >= 0, got rtol={rtol} and atol={atol}")
    broadcast_shapes(input.shape, other.shape)
    close = eq(input, other)
    if equal_nan and input.dtype.is_inexact:
        close = logical_or(close, logical_and(isnan(input), isnan(other)))
    if rtol == 0 and atol == 0:
        return close
    if input.dtype is D.bool_:  # as torch: bools are compared as numbers of the default float dtype
        input, other = input.to(D.get_default_dtype()), other.to(D.get_default_dtype())
    allowed = abs(other * rtol) + atol
    actual = abs(input - other)
    return logical_or(close, logical_and(isfinite(actual), le(actual, allowed)))


def allclose(
    input: Tensor, other: Tensor, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False
) -> builtins.bool:
    """``isclose(input, other, ...).all()`` as a Python bool (eager only: GraphError inside ``lf.compile``).

    Raises:
        The errors of :func:`isclose`; GraphError on traced tensors.
    """
    close = all(isclose(input, other, rtol, atol, equal_nan))
    _concrete(close, "allclose (its Python bool result)")
    return builtins.bool(close)


def equal(input: Tensor, other: Tensor) -> builtins.bool:
    """True if both tensors have the same shape and equal elements (NaN is never equal), as a Python bool.

    Operands of different dtypes are compared after torch's type promotion. Eager only (GraphError inside
    ``lf.compile``, whose values are not known while tracing).

    Raises:
        ArgumentError: an operand that is not a Tensor.
    """
    input, other = _tensor_arg("equal", "input", input), _tensor_arg("equal", "other", other)
    if input.shape != other.shape:
        return False
    same = all(eq(input, other))
    _concrete(same, "equal (its Python bool result)")
    return builtins.bool(same)


def is_tensor(obj) -> builtins.bool:
    """True if ``obj`` is a lazyflow Tensor (a Parameter included)."""
    return isinstance(obj, Tensor)


def is_floating_point(input: Tensor) -> builtins.bool:
    """True if ``input``'s dtype is a floating type (float16, bfloat16, float32, float64)."""
    return _tensor_arg("is_floating_point", "input", input).dtype.is_floating_point


def is_complex(input: Tensor) -> builtins.bool:
    """True if ``input``'s dtype is complex; lazyflow has no complex dtypes, so always False for a Tensor."""
    return _tensor_arg("is_complex", "input", input).dtype.is_complex


def is_nonzero(input: Tensor) -> builtins.bool:
    """The truth value of a one-element tensor (eager only).

    Raises:
        ShapeError: a tensor with zero or several elements (a RuntimeError, as in torch).
    """
    input = _tensor_arg("is_nonzero", "input", input)
    if input.numel() != 1:
        raise ShapeError(
            f"is_nonzero: expected a tensor with exactly one element, got shape {list(input.shape)} "
            f"({input.numel()} elements)"
        )
    _concrete(input, "is_nonzero")
    return builtins.bool(input)


def numel(input: Tensor) -> builtins.int:
    """The number of elements of ``input`` (the product of its shape)."""
    n = 1
    for s in _tensor_arg("numel", "input", input).shape:
        n *= s
    return n


def count_nonzero(input: Tensor, dim=None) -> Tensor:
    """The number of non-zero elements over ``dim`` (an int, a tuple, or None for all), as an int64 tensor.

    Raises:
        IndexOutOfRangeError: a dim out of range. OpError: a dim given twice.
    >>> lf.count_nonzero(lf.tensor([[0, 1], [2, 0]]), dim=0)
    tensor([1, 1])
    """
    input = _tensor_arg("count_nonzero", "input", input)
    d = _dims(dim, input.ndim)
    return sum(input != 0, d, dtype=D.int64)
