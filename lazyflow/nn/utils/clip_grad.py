"""Gradient clipping: each function is one fused kernel over all the gradients."""

from __future__ import annotations

import math
from collections.abc import Iterable

from ..._core.context import state
from ..._core.errors import OpError
from ..._creation import zeros
from ..._tensor import Tensor, _rebind
from ...ops.table import REGISTRY as R

__all__ = ["clip_grad_norm_", "clip_grad_norm", "clip_grad_value_", "get_total_norm"]

_CLIP_NORM = R["clip_grad_norm"]
_CLIP_VALUE = R["clip_grad_value"]


def _grads(parameters) -> list[Tensor]:
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    return [p.grad for p in parameters if p.grad is not None]


def _store(g: Tensor, new: Tensor) -> None:
    """Write ``new`` into the gradient tensor ``g`` (the object is kept, like torch's in-place ``mul_``)."""
    _rebind(g, new._value, new._meta)


def _norm_type(norm_type) -> float:
    norm_type = float(norm_type)
    if math.isnan(norm_type) or norm_type < 0:
        raise ValueError(f"norm_type must be a non-negative number or inf, got {norm_type}")
    return norm_type


def get_total_norm(
    tensors: Tensor | Iterable[Tensor],
    norm_type: float = 2.0,
    error_if_nonfinite: bool = False,
    foreach: bool | None = None,
) -> Tensor:
    """The ``norm_type``-norm of the per-tensor norms of ``tensors`` (as if concatenated).

    Raises:
        OpError: ``error_if_nonfinite`` and the norm is nan or inf (eager only: it reads the value).
    """
    tensors = [tensors] if isinstance(tensors, Tensor) else [t for t in tensors if t is not None]
    norm_type = _norm_type(norm_type)
    if not tensors:
        return zeros(())
    total = state.interp.apply(_CLIP_NORM, (float("inf"), *tensors), (norm_type,))[0]
    _check_finite(total, norm_type, error_if_nonfinite)
    return total


def _check_finite(total: Tensor, norm_type: float, error_if_nonfinite: bool) -> None:
    if error_if_nonfinite and not math.isfinite(total.item()):
        raise OpError(
            f"The total norm of order {norm_type} for gradients from `parameters` is non-finite, so "
            "it cannot be clipped. To disable this error and scale the gradients by the non-finite "
            "norm anyway, set `error_if_nonfinite=False`"
        )


def clip_grad_norm_(
    parameters: Tensor | Iterable[Tensor],
    max_norm: float,
    norm_type: float = 2.0,
    error_if_nonfinite: bool = False,
    foreach: bool | None = None,
) -> Tensor:
    """Scale all gradients in place so that their joint ``norm_type``-norm is at most ``max_norm``.

    The scale is ``min(max_norm / (total_norm + 1e-6), 1)`` (torch's). One kernel computes the norm and
    scales every gradient; ``max_norm`` is a runtime operand, so changing it does not recompile.

    Args:
        parameters: tensors (or one tensor) whose ``.grad`` is clipped; those without a gradient are skipped.
        max_norm: the largest allowed norm.
        norm_type: p of the p-norm (``float("inf")`` for the max norm).
        error_if_nonfinite: raise when the total norm is nan/inf (reads the value: eager only).
        foreach: accepted for compatibility (the computation is always fused).
    Returns:
        the total norm of the gradients before clipping (a 0-d tensor).
    Raises:
        ValueError: a negative or nan ``norm_type``.
        OpError: see ``error_if_nonfinite``.
    >>> lf.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
    """
    grads = _grads(parameters)
    norm_type = _norm_type(norm_type)
    if not grads:
        return zeros(())
    out = state.interp.apply(_CLIP_NORM, (float(max_norm), *grads), (norm_type,))
    total = out[0]
    _check_finite(total, norm_type, error_if_nonfinite)
    for g, new in zip(grads, out[1:]):
        _store(g, new)
    return total


def clip_grad_norm(
    parameters, max_norm: float, norm_type: float = 2.0, error_if_nonfinite: bool = False, foreach: bool | None = None
) -> Tensor:
    """Deprecated alias of :func:`clip_grad_norm_`."""
    return clip_grad_norm_(parameters, max_norm, norm_type, error_if_nonfinite, foreach)


def clip_grad_value_(parameters: Tensor | Iterable[Tensor], clip_value: float, foreach: bool | None = None) -> None:
    """Clamp every gradient into ``[-clip_value, clip_value]`` in place (one fused kernel).

    Args:
        parameters: tensors (or one tensor) whose ``.grad`` is clipped.
        clip_value: the bound.
        foreach: accepted for compatibility.
    """
    grads = _grads(parameters)
    if not grads:
        return
    out = state.interp.apply(_CLIP_VALUE, (float(clip_value), *grads), ())
    if isinstance(out, Tensor):
        out = (out,)
    for g, new in zip(grads, out):
        _store(g, new)
