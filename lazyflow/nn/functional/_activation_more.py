"""More of ``torch.nn.functional``: shrinkage and randomized activations, alpha dropout, Gumbel-softmax,
distances, channel shuffle and local response normalization.

Each is composed once on the Tensor API (no new primitive), so eager, the tape and graph mode share it.
"""

from __future__ import annotations

import math

from ... import _functional as _F
from ..._core.errors import ShapeError, ValueRangeError
from ..._creation import bernoulli, full, rand_like, zeros_like
from ..._tensor import Tensor
from ...autograd import no_grad

__all__ = [
    "hardshrink",
    "softshrink",
    "prelu",
    "rrelu",
    "rrelu_",
    "gumbel_softmax",
    "alpha_dropout",
    "feature_alpha_dropout",
    "cosine_similarity",
    "pairwise_distance",
    "pdist",
    "channel_shuffle",
    "local_response_norm",
]

# SELU's negative saturation value, -scale * alpha: alpha dropout drops to it (torch's constant)
_ALPHA = 1.7580993408473766


def _tensor(fn: str, x) -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(f"{fn}: expected a lazyflow Tensor, got {type(x).__name__}")
    return x


def _finish(input: Tensor, out: Tensor, inplace: bool) -> Tensor:
    return input.copy_(out) if inplace else out


def hardshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    """``x`` where ``|x| > lambd``, else 0 (NaN stays NaN, as in torch): ``Tensor.hardshrink``."""
    return _tensor("hardshrink", input).hardshrink(lambd)


def softshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    """``x - lambd`` above ``lambd``, ``x + lambd`` below ``-lambd``, else 0.

    Raises:
        ValueRangeError: a negative ``lambd``.
    """
    x = _tensor("softshrink", input)
    if lambd < 0:
        raise ValueRangeError(f"softshrink: lambd must be greater or equal to 0, got {lambd}")
    return _F.where(x > lambd, x - lambd, _F.where(x < -lambd, x + lambd, 0.0))


def prelu(input: Tensor, weight: Tensor) -> Tensor:
    """``max(0, x) + weight * min(0, x)``, one slope per channel (dim 1) or one shared slope.

    Raises:
        ShapeError: ``weight`` neither one value nor one per channel of ``input``.
    """
    x = _tensor("prelu", input)
    w = _tensor("prelu", weight)
    channels = x.shape[1] if x.ndim >= 2 else 1
    if w.numel() != 1 and (w.ndim != 1 or w.shape[0] != channels):
        raise ShapeError(
            f"prelu: expected weight of 1 element or {channels} elements (one per channel of input of shape "
            f"{list(x.shape)}), got weight of shape {list(w.shape)}"
        )
    if w.numel() != 1 and x.ndim >= 2:
        w = w.reshape((channels,) + (1,) * (x.ndim - 2))
    elif w.numel() == 1:
        w = w.reshape(())
    return _F.where(x > 0, x, w * x)


def rrelu(
    input: Tensor, lower: float = 1.0 / 8, upper: float = 1.0 / 3, training: bool = False, inplace: bool = False
) -> Tensor:
    """Randomized leaky ReLU: slopes drawn from ``U(lower, upper)`` per element when training, else their mean.

    Raises:
        ValueRangeError: ``lower > upper``.
    """
    x = _tensor("rrelu", input)
    if lower > upper:
        raise ValueRangeError(f"rrelu: lower bound must be less than or equal to upper bound, got {lower} > {upper}")
    if training:
        with no_grad():
            slope = rand_like(x) * (upper - lower) + lower
    else:
        slope = (lower + upper) / 2
    return _finish(x, _F.where(x >= 0, x, x * slope) if training else _F.where(x > 0, x, x * slope), inplace)


def rrelu_(input: Tensor, lower: float = 1.0 / 8, upper: float = 1.0 / 3, training: bool = False) -> Tensor:
    """In-place :func:`rrelu`."""
    return rrelu(input, lower, upper, training, True)


def gumbel_softmax(logits: Tensor, tau: float = 1, hard: bool = False, eps: float = 1e-10, dim: int = -1) -> Tensor:
    """Samples from the Gumbel-softmax distribution; ``hard`` returns one-hot vectors with soft gradients.

    Args:
        logits: unnormalized log-probabilities.
        tau: the temperature.
        hard: one-hot output (straight-through gradient of the soft sample).
        eps: unused (kept for torch's signature).
        dim: the category dimension.
    """
    x = _tensor("gumbel_softmax", logits)
    with no_grad():
        gumbels = -(x.new_empty(tuple(x.shape)).exponential_().log())
    y_soft = ((x + gumbels) / tau).softmax(dim)
    if not hard:
        return y_soft
    index = y_soft.argmax(dim, keepdim=True)
    y_hard = _F.scatter(zeros_like(x), dim, index, 1.0)
    return y_hard - y_soft.detach() + y_soft


def _alpha_dropout(input: Tensor, p: float, training: bool, inplace: bool, feature: bool, fn: str) -> Tensor:
    x = _tensor(fn, input)
    if not 0.0 <= p <= 1.0:
        raise ValueRangeError(f"{fn}: dropout probability has to be between 0 and 1, but got {p}")
    if p == 0 or not training or x.numel() == 0:
        return x
    if p == 1:
        return _finish(x, x * 0.0, inplace)
    if feature:
        if x.ndim < 2:
            raise ShapeError(f"{fn}: expected an input of at least 2 dims (N, C, *), got shape {list(x.shape)}")
        shape = tuple(x.shape[:2]) + (1,) * (x.ndim - 2)
    else:
        shape = tuple(x.shape)
    keep = bernoulli(full(shape, 1.0 - p, dtype=x.dtype))
    a = 1.0 / math.sqrt((_ALPHA * _ALPHA * p + 1) * (1 - p))
    b = (keep - 1.0) * (_ALPHA * a) + _ALPHA * a * p
    return _finish(x, x * (keep * a) + b, inplace)


def alpha_dropout(input: Tensor, p: float = 0.5, training: bool = False, inplace: bool = False) -> Tensor:
    """Dropout that keeps SELU's self-normalizing mean and variance (drops to SELU's saturation value).

    Raises:
        ValueRangeError: ``p`` outside [0, 1].
    """
    return _alpha_dropout(input, p, training, inplace, False, "alpha_dropout")


def feature_alpha_dropout(input: Tensor, p: float = 0.5, training: bool = False, inplace: bool = False) -> Tensor:
    """:func:`alpha_dropout` of whole channels (dim 1) of ``(N, C, *)`` input."""
    return _alpha_dropout(input, p, training, inplace, True, "feature_alpha_dropout")


def cosine_similarity(x1: Tensor, x2: Tensor, dim: int = 1, eps: float = 1e-8) -> Tensor:
    """``x1 . x2 / (max(|x1|, eps) * max(|x2|, eps))`` along ``dim`` (inputs broadcast).

    Raises:
        ShapeError: shapes that do not broadcast.
    """
    a, b = _F.broadcast_tensors(_tensor("cosine_similarity", x1), _tensor("cosine_similarity", x2))
    na = a.norm(dim=dim, keepdim=True).clamp(min=eps)
    nb = b.norm(dim=dim, keepdim=True).clamp(min=eps)
    return ((a / na) * (b / nb)).sum(dim)


def pairwise_distance(x1: Tensor, x2: Tensor, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False) -> Tensor:
    """The ``p``-norm of ``x1 - x2 + eps`` over the last dimension (inputs broadcast)."""
    a, b = _tensor("pairwise_distance", x1), _tensor("pairwise_distance", x2)
    diff = a - b + eps
    if diff.ndim == 0:
        return diff.abs()
    return diff.norm(p=p, dim=-1, keepdim=keepdim)


def pdist(input: Tensor, p: float = 2.0) -> Tensor:
    """The ``p``-norm distances between every pair of rows of an ``(N, M)`` input: ``N * (N - 1) / 2`` values.

    Raises:
        ShapeError: input not 2-D.
    """
    x = _tensor("pdist", input)
    if x.ndim != 2:
        raise ShapeError(f"pdist: expected a 2-D input (N, M), got shape {list(x.shape)}")
    n = x.shape[0]
    rows, cols = _F.triu_indices(n, n, 1)
    return (x.index_select(0, rows) - x.index_select(0, cols)).norm(p=p, dim=-1)


def channel_shuffle(input: Tensor, groups: int) -> Tensor:
    """Interleave ``groups`` groups of channels: ``(N, g * k, *)`` -> channel ``i * g + j`` from group ``j``.

    Raises:
        ShapeError: channels not divisible by ``groups``, or an input below 3 dims.
        ValueRangeError: ``groups`` not positive.
    """
    x = _tensor("channel_shuffle", input)
    if groups <= 0:
        raise ValueRangeError(f"channel_shuffle: number of groups to divide channels in must be positive, got {groups}")
    if x.ndim < 3:
        raise ShapeError(f"channel_shuffle: expected an input of at least 3 dims (N, C, *), got {list(x.shape)}")
    c = x.shape[1]
    if c % groups:
        raise ShapeError(
            f"channel_shuffle: number of channels ({c}) must be divisible by groups ({groups}); pick a divisor of {c}"
        )
    rest = tuple(x.shape[2:])
    return x.reshape((x.shape[0], groups, c // groups) + rest).transpose(1, 2).reshape(tuple(x.shape))


def local_response_norm(input: Tensor, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1.0) -> Tensor:
    """Normalize each element by the squares of ``size`` neighbouring channels:
    ``x / (k + alpha * mean_window(x ** 2)) ** beta`` (the window zero-padded at the edges, as torch's).

    Raises:
        ShapeError: an input below 3 dims.
    """
    x = _tensor("local_response_norm", input)
    if x.ndim < 3:
        raise ShapeError(
            f"local_response_norm: expected 3D or higher dimensionality input (N, C, *), got shape {list(x.shape)}"
        )
    if x.numel() == 0:
        return x
    c = x.shape[1]
    sq = x * x
    pad = [0, 0] * (x.ndim - 2) + [size // 2, (size - 1) // 2]
    padded = _F.pad(sq, pad)
    window = padded.narrow(1, 0, c)
    for j in range(1, size):
        window = window + padded.narrow(1, j, c)
    div = (window / size * alpha + k).pow(beta)
    return x / div
