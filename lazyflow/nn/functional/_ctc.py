"""``ctc_loss``: the Connectionist Temporal Classification loss, torch's signature and reductions.

The forward (alpha) recursion runs in log space over the time steps as Tensor ops, so the gradient is the
tape's (or ``jax.vjp``'s) derivative of it. "Impossible" alignments (a target longer than the input allows)
give ``inf`` like torch; ``zero_infinity`` turns those losses and their gradients into zeros. A finite stand-in
for log(0) keeps the gradient of impossible paths at exactly zero instead of NaN.

Gradient: this is the exact derivative with respect to ``log_probs``. torch's kernel instead returns the
gradient with respect to the logits *before* a log_softmax (``exp(log_probs) - posterior``); the two agree
wherever ``log_probs`` comes from ``log_softmax`` (the documented use), because log_softmax's backward maps
the exact gradient onto torch's.
"""

from __future__ import annotations

import numpy as np

from ... import _functional as _F
from ..._core.errors import ShapeError
from ..._creation import as_tensor, tensor
from ..._tensor import Tensor, _Tracer
from ._linear import _check_indices
from ._loss import _reduction

__all__ = ["ctc_loss"]

_NEG = -1e30  # log(0) stand-in: finite so that logsumexp of all-impossible paths has a zero, not a NaN, gradient


def _lengths(fn: str, x, n: int, what: str) -> Tensor:
    t = x if isinstance(x, Tensor) else as_tensor(list(x))
    t = t.long().reshape(-1)
    if t.shape[0] != n:
        raise ShapeError(f"{fn}: expected {what} of length {n} (one per batch element), got {t.shape[0]}")
    return t


def _padded_targets(targets: Tensor, target_lengths: Tensor, n: int) -> Tensor:
    """``(N, S)`` targets from torch's concatenated 1-D form (needs the lengths' values: eager only)."""
    if isinstance(target_lengths._value, _Tracer) or isinstance(targets._value, _Tracer):
        raise ShapeError(
            "ctc_loss: concatenated 1-D targets need concrete target_lengths; in graph mode pass padded (N, S) "
            "targets instead"
        )
    lens = np.asarray(target_lengths._value)
    flat = np.asarray(targets._value)
    if int(lens.sum()) != flat.shape[0]:
        raise ShapeError(
            f"ctc_loss: 1-D targets hold {flat.shape[0]} labels but target_lengths sum to {int(lens.sum())}"
        )
    s = max(int(lens.max()) if n else 0, 1)
    out = np.zeros((n, s), np.int64)
    start = 0
    for i, k in enumerate(lens.tolist()):
        out[i, :k] = flat[start : start + k]
        start += k
    return tensor(out)


def ctc_loss(
    log_probs: Tensor,
    targets: Tensor,
    input_lengths,
    target_lengths,
    blank: int = 0,
    reduction: str = "mean",
    zero_infinity: bool = False,
) -> Tensor:
    """CTC loss of ``(T, N, C)`` (or unbatched ``(T, C)``) log-probabilities against label sequences.

    Args:
        log_probs: log-softmax outputs over ``C`` classes (``blank`` included).
        targets: ``(N, S)`` padded labels, or all targets concatenated in 1-D (eager only), or ``(S,)`` unbatched.
        input_lengths, target_lengths: per-sample lengths (tensors or sequences of ints).
        blank: the blank label.
        reduction: ``"mean"`` (each loss divided by its target length, then the batch mean), ``"sum"``, ``"none"``.
        zero_infinity: zero infinite losses (impossible alignments) and their gradients.
    Raises:
        ShapeError: shapes that disagree, or lengths longer than the inputs.
        IndexOutOfRangeError: labels or ``blank`` outside ``[0, C)``.
    """
    reduction = _reduction(None, None, reduction)
    if not isinstance(log_probs, Tensor) or not isinstance(targets, Tensor):
        raise TypeError("ctc_loss: expected lazyflow Tensors for log_probs and targets")
    unbatched = log_probs.ndim == 2
    lp = log_probs.unsqueeze(1) if unbatched else log_probs
    if lp.ndim != 3:
        raise ShapeError(f"ctc_loss: expected log_probs of shape (T, N, C) or (T, C), got {list(log_probs.shape)}")
    t_max, n, c = lp.shape
    if not 0 <= blank < c:
        raise ShapeError(f"ctc_loss: blank must be in label range [0, {c}), got {blank}")
    il = _lengths("ctc_loss", input_lengths, n, "input_lengths")
    tl = _lengths("ctc_loss", target_lengths, n, "target_lengths")
    tg = targets.long()
    if unbatched:
        tg = tg.reshape(1, -1)
    elif tg.ndim == 1:
        tg = _padded_targets(tg, tl, n)
    if tg.ndim != 2 or tg.shape[0] != n:
        raise ShapeError(f"ctc_loss: expected targets of shape (N={n}, S) or 1-D, got {list(targets.shape)}")
    if not isinstance(il._value, _Tracer) and not isinstance(tl._value, _Tracer):
        if n and (int(il.max()) > t_max or int(tl.max()) > tg.shape[1] or int(il.min()) < 0 or int(tl.min()) < 0):
            raise ShapeError(
                f"ctc_loss: input_lengths must be in [0, {t_max}] and target_lengths in [0, {tg.shape[1]}], got "
                f"{il.tolist()} and {tl.tolist()}"
            )
    s_len = tg.shape[1]
    _check_indices(tg, c, "ctc_loss: targets")
    # extended labels: blank, l1, blank, l2, ..., blank
    ext = _F.stack([tg * 0 + blank, tg], 2).reshape(n, 2 * s_len)
    ext = _F.cat([ext, tg[:, :1] * 0 + blank], 1)
    width = 2 * s_len + 1
    s_idx = as_tensor(np.arange(width, dtype=np.int64))
    valid = s_idx.unsqueeze(0) < (2 * tl + 1).unsqueeze(1)
    prev2 = _F.cat([ext[:, :2] * 0 - 1, ext[:, :-2]], 1)
    skip = (ext != blank) & (ext != prev2)
    emit = lp.gather(2, ext.unsqueeze(0).expand(t_max, n, width))
    start = _F.where(s_idx.unsqueeze(0) < 2, emit[0], _NEG)
    alpha = _F.where(valid, start, _NEG)
    for t in range(1, t_max):
        a1 = _F.cat([alpha[:, :1] * 0 + _NEG, alpha[:, :-1]], 1)
        a2 = _F.cat([alpha[:, :2] * 0 + _NEG, alpha[:, :-2]], 1)
        a2 = _F.where(skip, a2, _NEG)
        new = _F.stack([alpha, a1, a2], 0).logsumexp(0) + emit[t]
        new = _F.where(valid, new, _NEG)
        alpha = _F.where((il > t).unsqueeze(1), new, alpha)
    last = (2 * tl).unsqueeze(1)
    end1 = alpha.gather(1, last).squeeze(1)
    end2 = _F.where(tl > 0, alpha.gather(1, (last - 1).clamp(min=0)).squeeze(1), _NEG)
    nll = -_F.stack([end1, end2], 0).logsumexp(0)
    nll = _F.where(il == 0, _F.where(tl == 0, 0.0, 2e30), nll)  # no frames: only an empty target fits
    nll = _F.where(nll > 1e29, 0.0 if zero_infinity else float("inf"), nll)
    if reduction == "mean":
        return (nll / tl.clamp(min=1).to(nll.dtype)).mean()
    if reduction == "sum":
        return nll.sum()
    return nll.squeeze(0) if unbatched else nll
