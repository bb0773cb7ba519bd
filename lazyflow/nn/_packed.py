"""``PackedSequence`` and the index arithmetic of packing (used by ``nn.utils.rnn`` and the recurrent layers).

A packed batch stores the steps of sequences sorted by decreasing length, time-major: step ``t`` of the first
``batch_sizes[t]`` sequences, then step ``t + 1``... (torch's layout, so ``data`` and ``batch_sizes`` match
torch's element for element). Packing and unpacking are ``index_select`` gathers (differentiable, any mode);
the lengths themselves are host values, as torch keeps ``batch_sizes`` on the CPU.
"""

from __future__ import annotations

import weakref
from typing import Any, NamedTuple

import numpy as np

from .. import _functional as _F
from .._core import dtypes as D
from .._core.errors import ShapeError
from .._creation import full, tensor
from .._tensor import Tensor, _Tracer


class PackedSequence(NamedTuple):
    """A batch of variable-length sequences, packed (torch's ``nn.utils.rnn.PackedSequence``).

    Attributes:
        data: ``(sum(lengths), *)`` the steps, time-major over the length-sorted batch.
        batch_sizes: int64 ``(T,)``: how many sequences are still running at each step.
        sorted_indices: the batch order used for packing (None when the input was already sorted).
        unsorted_indices: its inverse permutation (None when sorted).
    """

    data: Tensor
    batch_sizes: Tensor
    sorted_indices: Tensor | None = None
    unsorted_indices: Tensor | None = None

    def to(self, *args: Any, **kwargs: Any) -> PackedSequence:
        """``data.to(...)`` (dtype or device); the index tensors follow a device move."""
        return self._replace(data=self.data.to(*args, **kwargs))

    def float(self) -> PackedSequence:
        return self._replace(data=self.data.float())

    def double(self) -> PackedSequence:
        return self._replace(data=self.data.double())

    def half(self) -> PackedSequence:
        return self._replace(data=self.data.half())

    def cpu(self) -> PackedSequence:
        return self

    @property
    def is_cuda(self) -> bool:
        return self.data.is_cuda

    def is_pinned(self) -> bool:
        return False


# host copies of the index tensors this module creates: inside lf.compile a new tensor is traced, but its values
# (batch sizes, permutations) were known on the host when it was made, and they decide shapes
_HOST: dict[int, tuple[weakref.ref, np.ndarray]] = {}


def host_ints(t, what: str) -> np.ndarray:
    """The integer values of ``t`` (a Tensor or a sequence) on the host.

    Raises:
        ShapeError: a traced tensor of unknown values (lengths decide shapes, so they must be known when packing).
    """
    if isinstance(t, Tensor):
        known = _HOST.get(id(t))
        if known is not None and known[0]() is t:
            return known[1]
        if isinstance(t._value, _Tracer):
            raise ShapeError(
                f"{what} must be concrete values (they decide the packed shape); inside lf.compile pass them as a "
                "Python list or compute the PackedSequence outside the compiled function"
            )
        return np.asarray(t._value).astype(np.int64).reshape(-1)
    return np.asarray(list(t), dtype=np.int64).reshape(-1)


def invert_permutation(permutation: Tensor | None) -> Tensor | None:
    """The inverse of a permutation of ``0..n-1`` (None stays None)."""
    if permutation is None:
        return None
    p = host_ints(permutation, "permutation")
    inv = np.empty_like(p)
    inv[p] = np.arange(p.size)
    return int64(inv)


def batch_sizes_of(sorted_lengths: np.ndarray) -> np.ndarray:
    """``batch_sizes[t]`` = how many of the (decreasing) lengths exceed ``t``."""
    steps = np.arange(int(sorted_lengths[0]) if sorted_lengths.size else 0)
    return (sorted_lengths[None, :] > steps[:, None]).sum(1).astype(np.int64)


def pack_rows(batch_sizes: np.ndarray, n: int) -> np.ndarray:
    """Rows of a flattened time-major ``(T * n, *)`` batch, in packed order."""
    return (
        np.concatenate([t * n + np.arange(b) for t, b in enumerate(batch_sizes)])
        if batch_sizes.size
        else (np.zeros(0, np.int64))
    )


def pack_sorted(padded: Tensor, batch_sizes: np.ndarray) -> Tensor:
    """Pack a time-major ``(T, N, *)`` batch already sorted by decreasing length."""
    t, n = padded.shape[0], padded.shape[1]
    flat = padded.reshape((t * n,) + tuple(padded.shape[2:]))
    return flat.index_select(0, tensor(pack_rows(batch_sizes, n)))


def unpack_sorted(data: Tensor, batch_sizes: np.ndarray, total: int, padding_value: float) -> Tensor:
    """``(total, N, *)`` time-major padded batch (still in sorted order) from packed ``data``."""
    n = int(batch_sizes[0]) if batch_sizes.size else 0
    rows = pack_rows(batch_sizes, n)
    src = np.full(total * n, data.shape[0], np.int64)  # the padding row appended below
    src[rows] = np.arange(rows.size)
    pad = full((1,) + tuple(data.shape[1:]), padding_value, dtype=data.dtype)
    padded = _F.cat([data, pad], 0).index_select(0, tensor(src))
    return padded.reshape((total, n) + tuple(data.shape[1:]))


def lengths_of(batch_sizes: np.ndarray) -> np.ndarray:
    """The sorted lengths back from ``batch_sizes``."""
    n = int(batch_sizes[0]) if batch_sizes.size else 0
    return (batch_sizes[None, :] > np.arange(n)[:, None]).sum(1).astype(np.int64)


def check_packed(p: PackedSequence) -> np.ndarray:
    bs = host_ints(p.batch_sizes, "PackedSequence.batch_sizes")
    if bs.size and (np.any(np.diff(bs) > 0) or bs[-1] <= 0 or int(bs.sum()) != p.data.shape[0]):
        raise ShapeError(
            f"PackedSequence: batch_sizes must be positive, non-increasing and sum to data.size(0)="
            f"{p.data.shape[0]}, got {bs.tolist()}"
        )
    return bs


def int64(values: np.ndarray) -> Tensor:
    """An int64 tensor of ``values`` whose host copy :func:`host_ints` can read even inside a trace."""
    a = np.asarray(values, np.int64)
    t = tensor(a, dtype=D.int64)
    key = id(t)
    _HOST[key] = (weakref.ref(t, lambda _r: _HOST.pop(key, None)), a)
    return t
