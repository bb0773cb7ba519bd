"""``linear_cross_entropy``: ``cross_entropy(linear(input, linear_weight, linear_bias), target)`` with torch 2.13's
signature. torch's chunked path (``options``) exists to avoid materializing the logits; XLA fuses the projection
and the loss itself, so ``options`` is accepted and the reference formula is computed."""

from __future__ import annotations

from ..._core.errors import NotSupportedError
from ..._tensor import Tensor
from ._linear import linear
from ._loss import cross_entropy

__all__ = ["linear_cross_entropy"]

_NO_IGNORE = -(2**62)  # ignore_index=None: no class is ignored


def linear_cross_entropy(
    input: Tensor,
    linear_weight: Tensor,
    target: Tensor,
    *,
    linear_bias: Tensor | None = None,
    weight: Tensor | None = None,
    reduction: str = "mean",
    ignore_index: int | None = None,
    label_smoothing: float = 0.0,
    options=None,
) -> Tensor:
    """Cross entropy of the logits ``input @ linear_weight.T + linear_bias`` against ``target``.

    Args:
        input: ``(N, in_features)`` (or ``(in_features,)``).
        linear_weight: ``(C, in_features)``.
        target, weight, reduction, label_smoothing: as :func:`cross_entropy`.
        ignore_index: a target value to skip, or None (nothing skipped).
        options: torch's chunking options; accepted, no effect (XLA fuses the two steps).
    Raises:
        NotSupportedError: a K-dimensional ``linear_weight`` (``out_features != ()``).
        ShapeError, IndexOutOfRangeError: as :func:`linear` and :func:`cross_entropy`.
    """
    if linear_weight.ndim != 2:
        raise NotSupportedError(
            f"linear_cross_entropy: only a 2-D linear_weight (C, in_features) is supported, got shape "
            f"{list(linear_weight.shape)}"
        )
    logits = linear(input, linear_weight, linear_bias)
    return cross_entropy(
        logits,
        target,
        weight=weight,
        ignore_index=_NO_IGNORE if ignore_index is None else ignore_index,
        reduction=reduction,
        label_smoothing=label_smoothing,
    )
