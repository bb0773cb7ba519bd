"""Shared pieces of weight and spectral normalization (both the parametrization and the legacy hook forms)."""

from __future__ import annotations

from ..._tensor import Tensor
from .. import functional as F


def norm_except_dim(v: Tensor, pow: float = 2, dim: int = 0) -> Tensor:
    """The ``pow``-norm of ``v`` over every dim but ``dim`` (kept, size 1 elsewhere); ``dim=-1``: the whole norm."""
    if dim == -1:
        return v.norm(pow)
    dim = dim % v.ndim
    others = tuple(d for d in range(v.ndim) if d != dim)
    if not others:
        return v.abs()
    return v.norm(pow, dim=others, keepdim=True)


def weight_norm_value(v: Tensor, g: Tensor, dim: int) -> Tensor:
    """torch's ``_weight_norm``: ``v * g / ||v||`` (norm over every dim but ``dim``)."""
    return v * (g / norm_except_dim(v, 2, dim))


def weight_to_matrix(weight: Tensor, dim: int) -> Tensor:
    """``weight`` with ``dim`` moved first and the rest flattened: ``(size(dim), -1)``."""
    if dim != 0:
        weight = weight.permute(dim, *(d for d in range(weight.ndim) if d != dim))
    return weight.reshape(weight.shape[0], -1)


def normalize(x: Tensor, eps: float) -> Tensor:
    return F.normalize(x, dim=0, eps=eps)
