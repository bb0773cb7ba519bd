"""Margin, ranking, embedding, Gaussian/Poisson likelihood and multi-label losses of ``torch.nn.functional``.

Each is composed once on the Tensor API with torch's formula (the same clamps, epsilons and masks), so
gradients, eager and graph mode come from the ops underneath. ``ctc_loss`` lives in ``_ctc``.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from ... import _functional as _F
from ..._core.errors import DTypeError, ShapeError, ValueRangeError
from ..._creation import full_like
from ..._tensor import Tensor, _Tracer
from ._activation import logsigmoid
from ._activation_more import pairwise_distance
from ._linear import _check_indices
from ._loss import _reduce, _reduction

__all__ = [
    "cosine_embedding_loss",
    "hinge_embedding_loss",
    "margin_ranking_loss",
    "gaussian_nll_loss",
    "poisson_nll_loss",
    "multilabel_margin_loss",
    "multilabel_soft_margin_loss",
    "multi_margin_loss",
    "triplet_margin_loss",
    "triplet_margin_with_distance_loss",
]


def _tensors(fn: str, *ts) -> None:
    for t in ts:
        if not isinstance(t, Tensor):
            raise TypeError(f"{fn}: expected lazyflow Tensors, got {type(t).__name__}")


def _same_shape(fn: str, a: Tensor, b: Tensor, what: str = "target") -> None:
    if tuple(a.shape) != tuple(b.shape):
        raise ShapeError(
            f"{fn}: expected {what} of the input's shape {list(a.shape)}, got {list(b.shape)}; reshape it to match"
        )


def cosine_embedding_loss(
    input1: Tensor,
    input2: Tensor,
    target: Tensor,
    margin: float = 0,
    size_average=None,
    reduce=None,
    reduction: str = "mean",
) -> Tensor:
    """``1 - cos(x1, x2)`` where ``target == 1``, ``max(0, cos(x1, x2) - margin)`` where ``target == -1``.

    Raises:
        ShapeError: inputs not both ``(N, D)`` or ``(D,)``, or a target not ``(N,)`` / ``()``.
    """
    reduction = _reduction(size_average, reduce, reduction)
    _tensors("cosine_embedding_loss", input1, input2, target)
    if input1.ndim not in (1, 2) or tuple(input1.shape) != tuple(input2.shape):
        raise ShapeError(
            f"cosine_embedding_loss: expected input1 and input2 of the same shape (N, D) or (D,), got "
            f"{list(input1.shape)} and {list(input2.shape)}"
        )
    if target.ndim != input1.ndim - 1 or (target.ndim == 1 and target.shape[0] != input1.shape[0]):
        raise ShapeError(
            f"cosine_embedding_loss: expected a target of shape {list(input1.shape[:-1])} for inputs of shape "
            f"{list(input1.shape)}, got {list(target.shape)}"
        )
    d = input1.ndim - 1
    eps = 1e-12
    prod = (input1 * input2).sum(d)
    denom = (((input1 * input1).sum(d) + eps) * ((input2 * input2).sum(d) + eps)).sqrt()
    cos = prod / denom
    out = _F.where(target == 1, 1 - cos, 0.0) + _F.where(target == -1, (cos - margin).clamp(min=0), 0.0)
    return _reduce(out, reduction)


def hinge_embedding_loss(
    input: Tensor, target: Tensor, margin: float = 1.0, size_average=None, reduce=None, reduction: str = "mean"
) -> Tensor:
    """``x`` where ``target == 1``, ``max(0, margin - x)`` where ``target == -1`` (torch's masks: != -1, != 1)."""
    reduction = _reduction(size_average, reduce, reduction)
    _tensors("hinge_embedding_loss", input, target)
    out = _F.where(target != 1, (margin - input).clamp(min=0), 0.0) + _F.where(target != -1, input, 0.0)
    return _reduce(out, reduction)


def margin_ranking_loss(
    input1: Tensor,
    input2: Tensor,
    target: Tensor,
    margin: float = 0,
    size_average=None,
    reduce=None,
    reduction: str = "mean",
) -> Tensor:
    """``max(0, -target * (x1 - x2) + margin)``.

    Raises:
        ShapeError: inputs and target of different shapes.
    """
    reduction = _reduction(size_average, reduce, reduction)
    _tensors("margin_ranking_loss", input1, input2, target)
    if not (tuple(input1.shape) == tuple(input2.shape) == tuple(target.shape)):
        raise ShapeError(
            f"margin_ranking_loss: expected input1, input2 and target of one shape, got {list(input1.shape)}, "
            f"{list(input2.shape)} and {list(target.shape)}"
        )
    return _reduce((-target * (input1 - input2) + margin).clamp(min=0), reduction)


def gaussian_nll_loss(
    input: Tensor,
    target: Tensor,
    var: Tensor | float,
    full: bool = False,
    eps: float = 1e-6,
    reduction: str = "mean",
) -> Tensor:
    """Gaussian negative log-likelihood: ``0.5 * (log(max(var, eps)) + (input - target)**2 / max(var, eps))``.

    As torch, the ``eps`` clamp is not differentiated (the gradient flows to ``var`` as if unclamped).

    Args:
        var: the variance: input's shape, input's shape less the last dim, that with a last dim of 1, or a float.
        full: add the constant ``0.5 * log(2 * pi)``.
    Raises:
        ShapeError: ``var`` of another shape.
        ValueRangeError: a negative variance (checked eagerly; in graph mode it is not checked).
    """
    _tensors("gaussian_nll_loss", input, target)
    if not isinstance(var, Tensor):
        if var < 0:
            raise ValueRangeError(f"gaussian_nll_loss: var has negative entry/entries (got {var}); must be >= 0")
        var = full_like(input, float(var))
    if tuple(var.shape) != tuple(input.shape):
        if tuple(input.shape[:-1]) == tuple(var.shape):
            var = var.unsqueeze(-1)
        elif not (tuple(input.shape[:-1]) == tuple(var.shape[:-1]) and var.ndim and var.shape[-1] == 1):
            raise ShapeError(
                f"gaussian_nll_loss: var is of incorrect size {list(var.shape)} for input of shape "
                f"{list(input.shape)}; expected the input's shape, or it with the last dim 1 or dropped"
            )
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{reduction} is not a valid value for reduction; expected 'none', 'mean' or 'sum'")
    if not isinstance(var._value, _Tracer) and bool((var < 0).any()):
        raise ValueRangeError("gaussian_nll_loss: var has negative entry/entries; a variance must be >= 0")
    var = var + (var.clamp(min=eps) - var).detach()
    loss = 0.5 * (var.log() + (input - target) ** 2 / var)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _reduce(loss, reduction)


def poisson_nll_loss(
    input: Tensor,
    target: Tensor,
    log_input: bool = True,
    full: bool = False,
    size_average=None,
    eps: float = 1e-8,
    reduce=None,
    reduction: str = "mean",
) -> Tensor:
    """Poisson negative log-likelihood: ``exp(input) - target * input`` (``log_input``), else
    ``input - target * log(input + eps)``; ``full`` adds Stirling's term where ``target > 1``."""
    reduction = _reduction(size_average, reduce, reduction)
    _tensors("poisson_nll_loss", input, target)
    loss = input.exp() - target * input if log_input else input - target * (input + eps).log()
    if full:
        safe = _F.where(target > 1, target, 2.0)
        stirling = safe * safe.log() - safe + 0.5 * (2 * math.pi * safe).log()
        loss = loss + _F.where(target > 1, stirling, 0.0)
    return _reduce(loss, reduction)


def _class_input(fn: str, input: Tensor, target: Tensor, multi: bool) -> tuple[Tensor, Tensor, bool]:
    """``(N, C)`` views of a 1-D or 2-D input and its target, and whether the input was 1-D."""
    _tensors(fn, input, target)
    if input.ndim not in (1, 2):
        raise ShapeError(f"{fn}: expected a 1-D (C) or 2-D (N, C) input, got shape {list(input.shape)}")
    if target.dtype.is_floating_point or target.dtype.name == "bool":
        raise DTypeError(f"{fn}: expected an integer (class index) target, got {target.dtype.name} (use .long())")
    vector = input.ndim == 1
    x = input.unsqueeze(0) if vector else input
    want = tuple(x.shape) if multi else (x.shape[0],)
    t = target.reshape(want) if target.numel() == int(math.prod(want)) and target.ndim <= 2 else target
    if tuple(t.shape) != want:
        raise ShapeError(
            f"{fn}: expected a target of shape {list(input.shape) if multi else list(input.shape[:-1])} for input "
            f"of shape {list(input.shape)}, got {list(target.shape)}"
        )
    return x, t, vector


def multilabel_margin_loss(
    input: Tensor, target: Tensor, size_average=None, reduce=None, reduction: str = "mean"
) -> Tensor:
    """Multi-class multi-label hinge loss: target rows list class indices, ended by the first ``-1``.

    ``sum_{j in targets, i not in targets} max(0, 1 - (x[j] - x[i])) / C`` per sample.

    Raises:
        ShapeError: input not 1-D/2-D or target not of the input's shape.
        IndexOutOfRangeError: a target index outside ``[-1, C)``.
    """
    reduction = _reduction(size_average, reduce, reduction)
    x, t, vector = _class_input("multilabel_margin_loss", input, target, True)
    c = x.shape[1]
    _check_indices(t + 1, c + 1, "multilabel_margin_loss: target")
    valid = (t >= 0).long().cumprod(1) > 0
    idx = t.clamp(min=0)
    is_target = (_F.one_hot(idx, c) * valid.long().unsqueeze(-1)).sum(1) > 0
    xy = x.gather(1, idx)
    margins = (1 - xy.unsqueeze(-1) + x.unsqueeze(1)).clamp(min=0)
    mask = valid.unsqueeze(-1) & (~is_target).unsqueeze(1)
    loss = _F.where(mask, margins, 0.0).sum((1, 2)) / c
    return _reduce(loss.squeeze(0) if vector else loss, reduction)


def multilabel_soft_margin_loss(
    input: Tensor,
    target: Tensor,
    weight: Tensor | None = None,
    size_average=None,
    reduce=None,
    reduction: str = "mean",
) -> Tensor:
    """Per-class logistic loss averaged over classes: ``-mean_c(y log s(x) + (1 - y) log s(-x))``.

    Raises:
        ShapeError: target not of the input's shape.
    """
    reduction = _reduction(size_average, reduce, reduction)
    _tensors("multilabel_soft_margin_loss", input, target)
    _same_shape("multilabel_soft_margin_loss", input, target)
    loss = -(target * logsigmoid(input) + (1 - target) * logsigmoid(-input))
    if weight is not None:
        loss = loss * weight
    d = input.ndim - 1
    return _reduce(loss.sum(d) / input.shape[d], reduction)


def multi_margin_loss(
    input: Tensor,
    target: Tensor,
    p: int = 1,
    margin: float = 1.0,
    weight: Tensor | None = None,
    size_average=None,
    reduce=None,
    reduction: str = "mean",
) -> Tensor:
    """Multi-class hinge loss: ``sum_{i != y} max(0, margin - x[y] + x[i]) ** p / C`` per sample
    (each term times ``weight[y]`` when given).

    Raises:
        ValueError: ``p`` not 1 or 2.
        ShapeError: target not ``(N,)`` / ``()``, or ``weight`` not ``(C,)``.
        IndexOutOfRangeError: a target outside ``[0, C)``.
    """
    reduction = _reduction(size_average, reduce, reduction)
    if p not in (1, 2):
        raise ValueError(f"multi_margin_loss: only p == 1 and p == 2 supported, got p={p}")
    x, t, vector = _class_input("multi_margin_loss", input, target, False)
    c = x.shape[1]
    if weight is not None and tuple(weight.shape) != (c,):
        raise ShapeError(f"multi_margin_loss: expected weight of shape [{c}], got {list(weight.shape)}")
    _check_indices(t, c, "multi_margin_loss: target")
    xy = x.gather(1, t.unsqueeze(1))
    z = (margin - xy + x).clamp(min=0)
    if p == 2:
        z = z * z
    if weight is not None:
        z = z * weight.gather(0, t).unsqueeze(1)
    z = _F.where(_F.one_hot(t, c) > 0, 0.0, z)
    loss = z.sum(1) / c
    return _reduce(loss.squeeze(0) if vector else loss, reduction)


def _triplet_dims(fn: str, a: Tensor, p: Tensor, n: Tensor) -> None:
    _tensors(fn, a, p, n)
    if not (a.ndim == p.ndim == n.ndim) or a.ndim not in (1, 2):
        raise ShapeError(
            f"{fn}: expected anchor, positive and negative of one rank, 1-D (D) or 2-D (N, D), got shapes "
            f"{list(a.shape)}, {list(p.shape)} and {list(n.shape)}"
        )


def triplet_margin_loss(
    anchor: Tensor,
    positive: Tensor,
    negative: Tensor,
    margin: float = 1.0,
    p: float = 2,
    eps: float = 1e-6,
    swap: bool = False,
    size_average=None,
    reduce=None,
    reduction: str = "mean",
) -> Tensor:
    """``max(d(a, p) - d(a, n) + margin, 0)`` with ``d`` the :func:`pairwise_distance` (``p``, ``eps``);
    ``swap`` uses ``min(d(a, n), d(p, n))``.

    Raises:
        ShapeError: inputs of different ranks, or not 1-D/2-D.
    """
    reduction = _reduction(size_average, reduce, reduction)
    _triplet_dims("triplet_margin_loss", anchor, positive, negative)
    d_pos = pairwise_distance(anchor, positive, p, eps)
    d_neg = pairwise_distance(anchor, negative, p, eps)
    if swap:
        d_neg = _F.minimum(d_neg, pairwise_distance(positive, negative, p, eps))
    return _reduce((margin + d_pos - d_neg).clamp(min=0), reduction)


def triplet_margin_with_distance_loss(
    anchor: Tensor,
    positive: Tensor,
    negative: Tensor,
    *,
    distance_function: Callable[[Tensor, Tensor], Tensor] | None = None,
    margin: float = 1.0,
    swap: bool = False,
    reduction: str = "mean",
) -> Tensor:
    """:func:`triplet_margin_loss` with any ``distance_function`` (default :func:`pairwise_distance`).

    Raises:
        ValueRangeError: ``margin <= 0``.
        ShapeError: inputs of different ranks, or not 1-D/2-D.
    """
    reduction = _reduction(None, None, reduction)
    if margin <= 0:
        raise ValueRangeError(f"triplet_margin_with_distance_loss: margin must be greater than 0, got {margin}")
    _triplet_dims("triplet_margin_with_distance_loss", anchor, positive, negative)
    dist = distance_function if distance_function is not None else pairwise_distance
    d_pos = dist(anchor, positive)
    d_neg = dist(anchor, negative)
    if swap:
        d_neg = _F.minimum(d_neg, dist(positive, negative))
    return _reduce((margin + d_pos - d_neg).clamp(min=0), reduction)
