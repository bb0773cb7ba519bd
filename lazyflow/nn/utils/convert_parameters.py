"""Flatten parameters into one vector and back."""

from __future__ import annotations

from collections.abc import Iterable

from ... import _functional as _F
from ..._core.errors import ShapeError
from ..._tensor import Tensor

__all__ = ["parameters_to_vector", "vector_to_parameters"]


def parameters_to_vector(parameters: Iterable[Tensor]) -> Tensor:
    """Concatenate the flattened parameters into one 1-D tensor (differentiable).

    Raises:
        ShapeError: no parameters.
    """
    parts = [p.reshape(-1) for p in parameters]
    if not parts:
        raise ShapeError("parameters_to_vector: got no parameters")
    return _F.cat(parts)


def vector_to_parameters(vec: Tensor, parameters: Iterable[Tensor]) -> None:
    """Copy consecutive slices of the 1-D ``vec`` into ``parameters`` (in place, identity kept).

    Raises:
        TypeError: ``vec`` is not a Tensor.
        ShapeError: ``vec`` is not 1-D or its length differs from the total parameter count.
    """
    if not isinstance(vec, Tensor):
        raise TypeError(f"expected vec to be a lazyflow Tensor, but got: {type(vec).__name__}")
    if vec.ndim != 1:
        raise ShapeError(f"vector_to_parameters: vec must be 1-D, got shape {list(vec.shape)}")
    params = list(parameters)
    total = sum(p.numel() for p in params)
    if total != vec.shape[0]:
        raise ShapeError(f"vector_to_parameters: vec has {vec.shape[0]} elements but the parameters hold {total}")
    pointer = 0
    for p in params:
        n = p.numel()
        p.data = vec[pointer : pointer + n].reshape(p.shape).to(p.dtype)
        pointer += n
