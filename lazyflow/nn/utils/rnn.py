"""``nn.utils.rnn``: padding a batch of variable-length sequences for the recurrent layers.

PackedSequence (``pack_padded_sequence``, ``pack_sequence``...) is not provided: the layers take padded batches.
"""

from __future__ import annotations

from ... import _functional as _F
from ..._core.errors import OpError, ShapeError
from ..._tensor import Tensor

__all__ = ["pad_sequence"]


def pad_sequence(
    sequences: Tensor | list[Tensor],
    batch_first: bool = False,
    padding_value: float = 0.0,
    padding_side: str = "right",
) -> Tensor:
    """Stack sequences ``(L_i, *)`` into ``(L_max, B, *)`` (``(B, L_max, *)`` with ``batch_first``), padding each
    with ``padding_value`` on ``padding_side``; differentiable w.r.t. every sequence (torch's ``pad_sequence``).

    Args:
        sequences: a list (or tuple) of tensors with equal trailing dims, or one tensor (split along dim 0).
        batch_first: put the batch dimension first.
        padding_value: the value of the padded elements.
        padding_side: ``"right"`` (pad after each sequence) or ``"left"``.
    Returns:
        the padded batch.
    Raises:
        OpError (a RuntimeError, as torch): an unknown ``padding_side``.
        ShapeError: no sequences, or trailing dims that differ.
    >>> lf.nn.utils.rnn.pad_sequence([lf.ones(3, 2), lf.ones(1, 2)]).shape
    (3, 2, 2)
    """
    if padding_side not in ("left", "right"):
        raise OpError(f"pad_sequence: expected padding_side to be one of left or right, but got {padding_side}.")
    seqs = list(_F.unbind(sequences, 0)) if isinstance(sequences, Tensor) else list(sequences)
    if not seqs:
        raise ShapeError("pad_sequence: received an empty list of sequences")
    for i, s in enumerate(seqs):
        if not isinstance(s, Tensor):
            raise TypeError(f"pad_sequence: expected a list of lazyflow Tensors, got {type(s).__name__} at index {i}")
        if s.ndim < 1 or tuple(s.shape[1:]) != tuple(seqs[0].shape[1:]):
            raise ShapeError(
                f"pad_sequence: every sequence must be (L, *trailing) with the same trailing dims, got shapes "
                f"{[list(t.shape) for t in seqs]}"
            )
    longest = max(s.shape[0] for s in seqs)
    trail = (0, 0) * (seqs[0].ndim - 1)
    padded = []
    for s in seqs:
        extra = longest - s.shape[0]
        if extra:
            s = _F.pad(s, trail + ((0, extra) if padding_side == "right" else (extra, 0)), value=padding_value)
        padded.append(s)
    return _F.stack(padded, 0 if batch_first else 1)
