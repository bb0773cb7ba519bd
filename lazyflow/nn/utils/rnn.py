"""``nn.utils.rnn``: padding and packing batches of variable-length sequences for the recurrent layers.

``PackedSequence`` has torch's layout (``data``, ``batch_sizes``, ``sorted_indices``, ``unsorted_indices``);
``nn.RNN``/``LSTM``/``GRU`` accept one and return one. Lengths are host values (torch keeps them on the CPU).
"""

from __future__ import annotations

import numpy as np

from ... import _functional as _F
from ..._core.errors import OpError, ShapeError
from ..._tensor import Tensor
from .._packed import (
    PackedSequence,
    batch_sizes_of,
    check_packed,
    host_ints,
    int64,
    invert_permutation,
    lengths_of,
    pack_sorted,
    unpack_sorted,
)

__all__ = [
    "PackedSequence",
    "pad_sequence",
    "unpad_sequence",
    "pack_padded_sequence",
    "pad_packed_sequence",
    "pack_sequence",
    "unpack_sequence",
    "invert_permutation",
]


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


def unpad_sequence(padded_sequences: Tensor, lengths, batch_first: bool = False) -> list[Tensor]:
    """The list of sequences ``(L_i, *)`` back from a padded batch and its lengths (inverse of :func:`pad_sequence`)."""
    lens = host_ints(lengths, "unpad_sequence: lengths")
    x = padded_sequences if batch_first else padded_sequences.transpose(0, 1)
    return [x[i, : int(n)] for i, n in enumerate(lens.tolist())]


def pack_padded_sequence(
    input: Tensor, lengths, batch_first: bool = False, enforce_sorted: bool = True
) -> PackedSequence:
    """Pack a padded batch ``(T, B, *)`` (``(B, T, *)`` with ``batch_first``) of sequences of ``lengths``.

    Args:
        lengths: per-sequence lengths (a list or a tensor; host values).
        enforce_sorted: require decreasing lengths; otherwise the batch is sorted and the permutation kept.
    Raises:
        ShapeError: lengths that are not positive, exceed the padded length, do not match the batch, or are not
            decreasing while ``enforce_sorted``.
    """
    if not isinstance(input, Tensor):
        raise TypeError(f"pack_padded_sequence: expected a lazyflow Tensor, got {type(input).__name__}")
    lens = host_ints(lengths, "pack_padded_sequence: lengths")
    x = input.transpose(0, 1) if batch_first else input
    if x.ndim < 2 or lens.size != x.shape[1]:
        raise ShapeError(
            f"pack_padded_sequence: expected {lens.size} sequences (one length each) in input of shape "
            f"{list(input.shape)} (batch_first={batch_first})"
        )
    if lens.size and lens.min() <= 0:
        raise ShapeError(
            "Length of all samples has to be greater than 0, but found an element in 'lengths' that is <= 0"
        )
    if lens.size and lens.max() > x.shape[0]:
        raise ShapeError(f"pack_padded_sequence: a length {int(lens.max())} exceeds the padded length {x.shape[0]}")
    sorted_indices = None
    if enforce_sorted:
        if np.any(np.diff(lens) > 0):
            raise ShapeError(
                "`lengths` array must be sorted in decreasing order when `enforce_sorted` is True. You can pass "
                "`enforce_sorted=False` to pack_padded_sequence and/or pack_sequence to sidestep this requirement "
                "if you do not need ONNX exportability."
            )
    else:
        order = np.argsort(-lens, kind="stable")
        lens = lens[order]
        sorted_indices = int64(order)
        x = x.index_select(1, sorted_indices)
    bs = batch_sizes_of(lens)
    unsorted = None if sorted_indices is None else int64(np.argsort(order, kind="stable"))
    return PackedSequence(pack_sorted(x, bs), int64(bs), sorted_indices, unsorted)


def pad_packed_sequence(
    sequence: PackedSequence, batch_first: bool = False, padding_value: float = 0.0, total_length: int | None = None
) -> tuple[Tensor, Tensor]:
    """The padded batch and the lengths (int64, in the original batch order) of a :class:`PackedSequence`.

    Raises:
        ValueError: ``total_length`` below the longest sequence.
    """
    bs = check_packed(sequence)
    lens = lengths_of(bs)
    longest = bs.size
    if total_length is not None:
        if total_length < longest:
            raise ValueError(
                "Expected total_length to be at least the length of the longest sequence in input, but got "
                f"total_length={total_length} and max sequence length being {longest}"
            )
        longest = total_length
    padded = unpack_sorted(sequence.data, bs, longest, padding_value)
    if sequence.unsorted_indices is not None:
        padded = padded.index_select(1, sequence.unsorted_indices)
        lens = lens[host_ints(sequence.unsorted_indices, "unsorted_indices")]
    return (padded.transpose(0, 1) if batch_first else padded), int64(lens)


def pack_sequence(sequences: list[Tensor], enforce_sorted: bool = True) -> PackedSequence:
    """Pack a list of sequences ``(L_i, *)`` (decreasing lengths unless ``enforce_sorted=False``)."""
    lengths = [s.shape[0] for s in sequences]
    return pack_padded_sequence(pad_sequence(sequences), lengths, enforce_sorted=enforce_sorted)


def unpack_sequence(packed_sequences: PackedSequence) -> list[Tensor]:
    """The list of sequences back from a :class:`PackedSequence` (in the original order)."""
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded, lengths, batch_first=True)
