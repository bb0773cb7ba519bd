"""Matrix products with torch's signatures: matmul, mm, bmm, mv, dot, outer, einsum."""

from __future__ import annotations

import numpy as np

from .._core.context import state
from .._core.errors import ShapeError
from .._tensor import Tensor
from ..ops.table import REGISTRY as R
from ._common import _apply, _t

__all__ = [
    "bmm",
    "dot",
    "einsum",
    "matmul",
    "mm",
    "mv",
    "outer",
]


# ---------------------------------------------------------------- linear algebra
def matmul(input: Tensor, other: Tensor) -> Tensor:
    """Matrix product with torch's rules: 1-D operands are vectors, batch dimensions broadcast.

    Args:
        input: a tensor with at least one dimension.
        other: a tensor with at least one dimension.
    Returns:
        The product, of the promoted dtype.
    Raises:
        ShapeError: a 0-d operand, inner sizes that differ, or batch shapes that do not broadcast.
    >>> (lf.ones(2, 3) @ lf.ones(3)).shape
    (2,)
    """
    if isinstance(input, Tensor) and isinstance(other, Tensor):  # hot path: plain 2-D product, shapes that fit
        sa, sb = input._meta[0], other._meta[0]
        if len(sa) == 2 and len(sb) == 2:
            (_, ka), (kb, _) = sa, sb  # unpacked in C (Size's indexing is a Python method)
            if ka == kb:
                return state.interp.apply(_MATMUL, (input, other), ())
    a, b = _t(input), _t(other)
    if a.ndim == 0 or b.ndim == 0:
        raise ShapeError(
            f"matmul: both arguments need at least 1 dimension, got shapes {list(a.shape)} and {list(b.shape)}"
        )
    ka = a.shape[-1]
    kb = b.shape[-2] if b.ndim > 1 else b.shape[0]
    if ka != kb:
        raise ShapeError(f"matmul: shapes {list(a.shape)} and {list(b.shape)} cannot be multiplied ({ka} != {kb})")
    if a.ndim > 2 or b.ndim > 2:
        try:
            np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
        except ValueError:
            raise ShapeError(
                f"matmul: batch dimensions of shapes {list(a.shape)} and {list(b.shape)} do not broadcast"
            ) from None
    return state.interp.apply(_MATMUL, (a, b), ())


_MATMUL = R["matmul"]


def mm(input: Tensor, mat2: Tensor) -> Tensor:
    """Product of two matrices (2-D only; see :func:`matmul`).

    Raises:
        ShapeError: an operand that is not 2-D, or inner sizes that differ.
    """
    if input.ndim != 2 or mat2.ndim != 2:
        raise ShapeError(f"mm expects 2-D tensors, got shapes {list(input.shape)} and {list(mat2.shape)}")
    return matmul(input, mat2)


def bmm(input: Tensor, mat2: Tensor) -> Tensor:
    """Batched matrix product of ``(b, n, m)`` and ``(b, m, p)`` tensors (no broadcasting).

    Raises:
        ShapeError: operands that are not 3-D, batch sizes or inner sizes that differ.
    """
    if input.ndim != 3 or mat2.ndim != 3 or input.shape[0] != mat2.shape[0]:
        raise ShapeError(
            f"bmm expects 3-D tensors with equal batch sizes, got shapes {list(input.shape)} and {list(mat2.shape)}"
        )
    return matmul(input, mat2)


def mv(input: Tensor, vec: Tensor) -> Tensor:
    """Matrix-vector product of a 2-D and a 1-D tensor.

    Raises:
        ShapeError: wrong ranks or sizes.
    """
    if input.ndim != 2 or vec.ndim != 1:
        raise ShapeError(f"mv expects a 2-D and a 1-D tensor, got shapes {list(input.shape)} and {list(vec.shape)}")
    return matmul(input, vec)


def dot(input: Tensor, tensor: Tensor) -> Tensor:
    """Inner product of two 1-D tensors of equal length.

    Raises:
        ShapeError: wrong ranks or sizes.
    """
    if input.ndim != 1 or tensor.ndim != 1:
        raise ShapeError(f"dot expects 1-D tensors, got shapes {list(input.shape)} and {list(tensor.shape)}")
    return matmul(input, tensor)


def outer(input: Tensor, vec2: Tensor) -> Tensor:
    """Outer product ``input[i] * vec2[j]`` of two 1-D tensors.

    Raises:
        ShapeError: an operand that is not 1-D.
    """
    if input.ndim != 1 or vec2.ndim != 1:
        raise ShapeError(f"outer expects 1-D tensors, got shapes {list(input.shape)} and {list(vec2.shape)}")
    return _apply(R["outer"], (input, vec2))


def einsum(equation: str, *operands) -> Tensor:
    """Einstein summation, e.g. ``einsum("bij,bjk->bik", a, b)`` (operands may also come as one list).

    Raises:
        ShapeError: the equation does not fit the operands' ranks or sizes.
    """
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    return _apply(R["einsum"], tuple(_t(o) for o in operands), (equation.replace(" ", ""),))
