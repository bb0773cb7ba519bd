"""Loss functions with ``torch.nn.functional``'s signatures and exact reduction/weighting semantics.

Each is composed once on the Tensor API; only ``nll_loss`` (the gather-and-weight step of cross entropy) is
a primitive, so that ``cross_entropy`` is two kernels (log_softmax, nll_loss) like torch's.
"""

from __future__ import annotations

from ... import _functional as _F
from ..._core.context import state
from ..._core.errors import DTypeError, ShapeError
from ..._creation import as_tensor
from ..._tensor import Tensor
from ...ops.table import REGISTRY as R
from ._linear import _check_indices

__all__ = [
    "cross_entropy",
    "nll_loss",
    "mse_loss",
    "l1_loss",
    "smooth_l1_loss",
    "huber_loss",
    "binary_cross_entropy",
    "binary_cross_entropy_with_logits",
    "kl_div",
    "soft_margin_loss",
]

_NLL = R["nll_loss"]
_REDUCTIONS = ("none", "mean", "sum")


def _reduction(size_average, reduce, reduction: str) -> str:
    """torch's legacy ``size_average``/``reduce`` flags override ``reduction`` when given."""
    if size_average is not None or reduce is not None:
        size_average = True if size_average is None else size_average
        reduce = True if reduce is None else reduce
        return "mean" if (size_average and reduce) else "sum" if reduce else "none"
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{reduction} is not a valid value for reduction; expected 'none', 'mean' or 'sum'")
    return reduction


def _reduce(loss: Tensor, reduction: str) -> Tensor:
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    return loss


def _check_class_target(input: Tensor, target: Tensor, what: str) -> None:
    if input.ndim == 0:
        raise ShapeError(f"{what}: input must have a class dimension, got a 0-d tensor")
    expected = () if input.ndim == 1 else (input.shape[0],) + tuple(input.shape[2:])
    if tuple(target.shape) != expected:
        raise ShapeError(
            f"{what}: expected target of shape {list(expected)} (class indices) for input of "
            f"shape {list(input.shape)}, got target of shape {list(target.shape)}"
        )


def _check_weight(weight, n_classes, what):
    if weight is not None and tuple(weight.shape) != (n_classes,):
        raise ShapeError(
            f"{what}: weight should be a 1-D tensor of size {n_classes} (one per class), got shape {list(weight.shape)}"
        )


def nll_loss(
    input: Tensor,
    target: Tensor,
    weight: Tensor | None = None,
    size_average=None,
    ignore_index: int = -100,
    reduce=None,
    reduction: str = "mean",
) -> Tensor:
    """Negative log-likelihood of class indices given log-probabilities.

    Args:
        input: log-probabilities ``(N, C)``, ``(C,)`` or ``(N, C, d1, ...)``.
        target: class indices ``(N,)``, ``()`` or ``(N, d1, ...)``.
        weight: per-class weights ``(C,)``.
        ignore_index: targets equal to it contribute nothing (not even to the mean's denominator).
        reduction: ``"none"``, ``"mean"`` (divided by the sum of the target weights) or ``"sum"``.
    Raises:
        ShapeError: mismatched shapes.
        DTypeError: a floating target.
        IndexOutOfRangeError: a target outside ``[0, C)`` that is not ``ignore_index`` (eager check).
    """
    reduction = _reduction(size_average, reduce, reduction)
    target = as_tensor(target)
    if target.dtype.is_floating_point:
        raise DTypeError(f"nll_loss: expected integer class indices as target, got {target.dtype}")
    _check_class_target(input, target, "nll_loss")
    n_classes = input.shape[0 if input.ndim == 1 else 1]
    _check_weight(weight, n_classes, "nll_loss")
    _check_indices(target, n_classes, "nll_loss: target", ignore=ignore_index)
    return state.interp.apply(_NLL, (input, target, weight), (int(ignore_index), reduction))


def cross_entropy(
    input: Tensor,
    target: Tensor,
    weight: Tensor | None = None,
    size_average=None,
    ignore_index: int = -100,
    reduce=None,
    reduction: str = "mean",
    label_smoothing: float = 0.0,
) -> Tensor:
    """Cross entropy between logits and class indices or class probabilities (torch's semantics).

    Args:
        input: unnormalised logits ``(N, C)``, ``(C,)`` or ``(N, C, d1, ...)``.
        target: class indices (integer, shape of ``input`` without the class dim) or class
            probabilities (floating, same shape as ``input``).
        weight: per-class weights ``(C,)``.
        ignore_index: index targets equal to it are skipped (class-index targets only).
        reduction: ``"none"``, ``"mean"`` or ``"sum"``. For index targets the mean divides by the summed
            weights of the non-ignored targets; for probability targets by the number of samples.
        label_smoothing: in [0, 1]: mixes the target with the uniform distribution.
    Raises:
        ShapeError, DTypeError, ValueError: bad shapes, dtypes or ``label_smoothing``.
    >>> loss = lf.nn.functional.cross_entropy(logits, labels, label_smoothing=0.1)
    """
    reduction = _reduction(size_average, reduce, reduction)
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing}")
    target = as_tensor(target)
    if input.ndim == 0:
        raise ShapeError("cross_entropy: input must have a class dimension, got a 0-d tensor")
    cdim = 0 if input.ndim == 1 else 1
    n_classes = input.shape[cdim]
    _check_weight(weight, n_classes, "cross_entropy")
    logp = _F.log_softmax(input, cdim)
    wshape = [1] * input.ndim
    wshape[cdim] = n_classes
    if target.dtype.is_floating_point:
        if tuple(target.shape) != tuple(input.shape):
            raise ShapeError(
                f"cross_entropy: probability targets must have the input's shape "
                f"{list(input.shape)}, got {list(target.shape)}"
            )
        if label_smoothing > 0.0:
            target = target * (1.0 - label_smoothing) + label_smoothing / n_classes
        prod = logp * target
        if weight is not None:
            prod = prod * weight.reshape(wshape)
        if reduction == "none":
            return -prod.sum(cdim)
        if reduction == "sum":
            return -prod.sum()
        return -prod.sum() / (input.numel() // n_classes)
    _check_class_target(input, target, "cross_entropy")
    _check_indices(target, n_classes, "cross_entropy: target", ignore=ignore_index)
    nll = state.interp.apply(_NLL, (logp, target, weight), (int(ignore_index), reduction))
    if label_smoothing == 0.0:
        return nll
    keep = target != ignore_index
    smooth = -(logp * weight.reshape(wshape)).sum(cdim) if weight is not None else -logp.sum(cdim)
    smooth = _F.where(keep, smooth, 0.0)
    if reduction == "mean":
        if weight is not None:
            denom = _F.where(keep, weight[_F.where(keep, target, 0)], 0.0).sum()
        else:
            denom = keep.sum()
        smooth = smooth.sum() / denom
    elif reduction == "sum":
        smooth = smooth.sum()
    return nll * (1.0 - label_smoothing) + smooth * (label_smoothing / n_classes)


def _check_same(input, target, what):
    target = as_tensor(target)
    if tuple(target.shape) != tuple(input.shape):
        raise ShapeError(
            f"{what}: using a target size ({list(target.shape)}) that is different to the input "
            f"size ({list(input.shape)}); they must match"
        )
    return target


def _weighted(loss, weight):
    return loss if weight is None else loss * weight


def mse_loss(
    input: Tensor, target: Tensor, size_average=None, reduce=None, reduction: str = "mean", weight: Tensor | None = None
) -> Tensor:
    """Mean squared error ``(input - target)**2`` (optionally weighted), reduced.

    Raises:
        ShapeError: input and target shapes differ.
    """
    reduction = _reduction(size_average, reduce, reduction)
    target = _check_same(input, target, "mse_loss")
    return _reduce(_weighted((input - target) ** 2, weight), reduction)


def l1_loss(
    input: Tensor, target: Tensor, size_average=None, reduce=None, reduction: str = "mean", weight: Tensor | None = None
) -> Tensor:
    """Mean absolute error ``|input - target|`` (optionally weighted), reduced.

    Raises:
        ShapeError: input and target shapes differ.
    """
    reduction = _reduction(size_average, reduce, reduction)
    target = _check_same(input, target, "l1_loss")
    return _reduce(_weighted(_F.abs(input - target), weight), reduction)


def smooth_l1_loss(
    input: Tensor, target: Tensor, size_average=None, reduce=None, reduction: str = "mean", beta: float = 1.0
) -> Tensor:
    """``0.5 d**2 / beta`` where ``|d| < beta``, else ``|d| - 0.5 beta`` (``d = input - target``).

    Raises:
        ShapeError: input and target shapes differ.
        ValueError: ``beta < 0``.
    """
    reduction = _reduction(size_average, reduce, reduction)
    if beta < 0:
        raise ValueError(f"smooth_l1_loss does not support negative values for beta, got {beta}")
    target = _check_same(input, target, "smooth_l1_loss")
    d = _F.abs(input - target)
    if beta == 0.0:
        return _reduce(d, reduction)
    loss = _F.where(d < beta, (d * d) * (0.5 / beta), d - 0.5 * beta)
    return _reduce(loss, reduction)


def huber_loss(
    input: Tensor, target: Tensor, reduction: str = "mean", delta: float = 1.0, weight: Tensor | None = None
) -> Tensor:
    """``0.5 d**2`` where ``|d| < delta``, else ``delta (|d| - 0.5 delta)``.

    Raises:
        ShapeError: input and target shapes differ.
        ValueError: ``delta <= 0``.
    """
    reduction = _reduction(None, None, reduction)
    if delta <= 0:
        raise ValueError(f"huber_loss does not support non-positive values for delta, got {delta}")
    target = _check_same(input, target, "huber_loss")
    d = _F.abs(input - target)
    loss = _F.where(d < delta, (d * d) * 0.5, (d - 0.5 * delta) * delta)
    return _reduce(_weighted(loss, weight), reduction)


def binary_cross_entropy(
    input: Tensor, target: Tensor, weight: Tensor | None = None, size_average=None, reduce=None, reduction: str = "mean"
) -> Tensor:
    """``-(t log p + (1 - t) log(1 - p))`` on probabilities, each log clamped at -100 like torch.

    Raises:
        ShapeError: input and target shapes differ.
    """
    reduction = _reduction(size_average, reduce, reduction)
    target = _check_same(input, target, "binary_cross_entropy")
    log_p = _F.log(input).clamp(min=-100.0)
    log_1p = _F.log(1.0 - input).clamp(min=-100.0)
    loss = -(target * log_p + (1.0 - target) * log_1p)
    return _reduce(_weighted(loss, weight), reduction)


def binary_cross_entropy_with_logits(
    input: Tensor,
    target: Tensor,
    weight: Tensor | None = None,
    size_average=None,
    reduce=None,
    reduction: str = "mean",
    pos_weight: Tensor | None = None,
) -> Tensor:
    """Sigmoid + binary cross entropy in one numerically stable expression.

    Args:
        pos_weight: weight of the positive term, broadcast along the last (class) dimension.
    Raises:
        ShapeError: input and target shapes differ.
    """
    reduction = _reduction(size_average, reduce, reduction)
    target = _check_same(input, target, "binary_cross_entropy_with_logits")
    # torch: (1 - t) x + (1 + (pw - 1) t) (log1p(exp(-|x|)) + max(-x, 0))
    soft = _F.log1p(_F.exp(-_F.abs(input))) + _F.relu(-input)
    if pos_weight is not None:
        loss = (1.0 - target) * input + (1.0 + (pos_weight - 1.0) * target) * soft
    else:
        loss = (1.0 - target) * input + soft
    return _reduce(_weighted(loss, weight), reduction)


def kl_div(
    input: Tensor, target: Tensor, size_average=None, reduce=None, reduction: str = "mean", log_target: bool = False
) -> Tensor:
    """Kullback-Leibler divergence ``target * (log target - input)`` with ``input`` in log space.

    ``reduction="batchmean"`` divides the sum by the batch size (the mathematically correct KL).
    """
    if reduction == "batchmean":
        red = "sum"
    else:
        red = _reduction(size_average, reduce, reduction)
    target = as_tensor(target)
    if log_target:
        loss = _F.exp(target) * (target - input)
    else:
        pos = target > 0  # xlogy: 0 * log 0 = 0
        loss = _F.where(pos, target * (_F.log(_F.where(pos, target, 1.0)) - input), 0.0)
    out = _reduce(loss, red)
    if reduction == "batchmean" and input.ndim != 0:
        out = out / input.shape[0]
    return out


def soft_margin_loss(input: Tensor, target: Tensor, size_average=None, reduce=None, reduction: str = "mean") -> Tensor:
    """``log(1 + exp(-target * input))`` for targets in {-1, 1}."""
    reduction = _reduction(size_average, reduce, reduction)
    target = _check_same(input, target, "soft_margin_loss")
    return _reduce(_F.softplus(-target * input), reduction)
