"""Shared helpers of lf.distributions: broadcasting parameters, probs <-> logits, draws from lazyflow's generator."""

from __future__ import annotations

import functools
import numbers

from .. import _functional as F
from .._core import dtypes as D
from .._core.finfo import finfo
from .._core.size import Size
from .._creation import rand, randn, tensor
from .._tensor import Tensor

__all__ = ["broadcast_all", "logits_to_probs", "probs_to_logits", "clamp_probs", "lazy_property"]


def broadcast_all(*values) -> tuple[Tensor, ...]:
    """Numbers and tensors broadcast to one shape; numbers take the dtype of the first tensor (default float).

    Raises:
        ValueError: a value is neither a number nor a Tensor.
    """
    if not all(isinstance(v, (Tensor, numbers.Number)) for v in values):
        raise ValueError(
            "Input arguments must all be instances of numbers.Number or Tensor, got "
            f"{[type(v).__name__ for v in values]}; pass floats or lf.tensor(...)"
        )
    if not all(isinstance(v, Tensor) for v in values):
        dtype = next((v.dtype for v in values if isinstance(v, Tensor)), D.get_default_dtype())
        values = tuple(v if isinstance(v, Tensor) else tensor(v, dtype=dtype) for v in values)
    return tuple(F.broadcast_tensors(*values))


def standard_normal(shape, dtype) -> Tensor:
    """N(0, 1) noise of ``shape`` from the default generator (fresh per call, also inside lf.compile)."""
    return randn(tuple(shape), dtype=dtype)


def standard_uniform(shape, dtype) -> Tensor:
    return rand(tuple(shape), dtype=dtype)


def uniform_open(shape, dtype) -> Tensor:
    """Uniform noise on the open interval (0, 1) (torch's clamp to [tiny, 1 - eps])."""
    fi = finfo(dtype)
    return standard_uniform(shape, dtype).clamp(fi.tiny, 1 - fi.eps)


def sum_rightmost(value: Tensor, dim: int) -> Tensor:
    """Sum over the ``dim`` rightmost dimensions (``dim == 0``: unchanged)."""
    if dim == 0:
        return value
    return value.reshape(tuple(value.shape[: value.ndim - dim]) + (-1,)).sum(-1)


def clamp_probs(probs: Tensor) -> Tensor:
    """Probabilities clamped to [eps, 1 - eps] of their dtype."""
    eps = finfo(probs.dtype).eps
    return probs.clamp(eps, 1 - eps)


def logits_to_probs(logits: Tensor, is_binary: bool = False) -> Tensor:
    """Logits to probabilities: a sigmoid when ``is_binary``, else a softmax over the last dimension."""
    return F.sigmoid(logits) if is_binary else F.softmax(logits, dim=-1)


def probs_to_logits(probs: Tensor, is_binary: bool = False) -> Tensor:
    """Probabilities to logits (clamped away from 0 and 1 first, as torch does)."""
    p = clamp_probs(probs)
    return p.log() - (-p).log1p() if is_binary else p.log()


def extended(sample_shape, batch_shape, event_shape) -> Size:
    if not isinstance(sample_shape, Size):
        sample_shape = Size(tuple(sample_shape))
    return Size(tuple(sample_shape) + tuple(batch_shape) + tuple(event_shape))


lazy_property = functools.cached_property  # torch's lazy_property: computed once, stored in the instance dict
