"""``embedding_bag``: sums, means or maxima of bags of embeddings without building the per-element rows' tensor
shape by hand, with ``torch.nn.functional``'s signature.

Bags come from a 2-D input (one bag per row) or from 1-D indices split at ``offsets`` (host values: they decide
which bag each index belongs to). Rows are gathered once, then reduced per bag with ``index_add`` (sum, mean) or
``scatter_reduce`` (max); ``padding_idx`` entries are left out of every bag, and an empty bag gives zeros.
"""

from __future__ import annotations

import numpy as np

from ... import _functional as _F
from ..._core.errors import DTypeError, NotSupportedError, ShapeError
from ..._creation import tensor, zeros
from ..._tensor import Tensor, _Tracer
from ._linear import _check_indices

__all__ = ["embedding_bag"]


def _host(t, what: str) -> np.ndarray:
    if isinstance(t, Tensor):
        if isinstance(t._value, _Tracer):
            raise ShapeError(f"embedding_bag: {what} must be concrete values (they decide the bags) in graph mode")
        return np.asarray(t._value).astype(np.int64).reshape(-1)
    return np.asarray(list(t), np.int64).reshape(-1)


def embedding_bag(
    input: Tensor,
    weight: Tensor,
    offsets: Tensor | None = None,
    max_norm: float | None = None,
    norm_type: float = 2,
    scale_grad_by_freq: bool = False,
    mode: str = "mean",
    sparse: bool = False,
    per_sample_weights: Tensor | None = None,
    include_last_offset: bool = False,
    padding_idx: int | None = None,
) -> Tensor:
    """``(B, embedding_dim)``: each bag's rows of ``weight`` reduced by ``mode`` (``"sum"``, ``"mean"``, ``"max"``).

    Args:
        input: ``(B, N)`` indices (fixed-size bags), or 1-D indices with ``offsets``.
        offsets: 1-D start of each bag in ``input`` (one more, the end, with ``include_last_offset``).
        per_sample_weights: weights of ``input``'s shape (``mode="sum"`` only).
        padding_idx: an index excluded from every bag.
    Raises:
        ShapeError: offsets with 2-D input or missing with 1-D, offsets not starting at 0 or decreasing,
            per_sample_weights of another shape.
        ValueError: an unknown mode, or per_sample_weights with a mode other than "sum".
        NotSupportedError: ``max_norm`` or ``scale_grad_by_freq`` (use :class:`Embedding` for those).
        IndexOutOfRangeError: an index outside ``weight``'s rows.
    """
    if mode not in ("sum", "mean", "max"):
        raise ValueError(f"embedding_bag: mode has to be one of sum, mean or max, got {mode!r}")
    if max_norm is not None or scale_grad_by_freq:
        raise NotSupportedError("embedding_bag: max_norm and scale_grad_by_freq are not supported yet")
    if not isinstance(input, Tensor) or not isinstance(weight, Tensor):
        raise TypeError("embedding_bag: expected lazyflow Tensors for input and weight")
    if input.dtype.is_floating_point:
        raise DTypeError(f"embedding_bag: expected integer indices, got {input.dtype}")
    if per_sample_weights is not None:
        if mode != "sum":
            raise ValueError(
                f"embedding_bag: per_sample_weights was not None. per_sample_weights is only supported for "
                f"mode='sum' (got mode='{mode}'). Please open a feature request on GitHub."
            )
        if tuple(per_sample_weights.shape) != tuple(input.shape):
            raise ShapeError(
                f"embedding_bag: expected per_sample_weights of the input's shape {list(input.shape)}, got "
                f"{list(per_sample_weights.shape)}"
            )
    if input.ndim == 2:
        if offsets is not None:
            raise ShapeError(
                "embedding_bag: if input is 2D, then offsets has to be None, as input is treated as a "
                "mini-batch of fixed length sequences"
            )
        n_bags, per = input.shape
        seg = np.repeat(np.arange(n_bags), per)
    elif input.ndim == 1:
        if offsets is None:
            raise ShapeError("embedding_bag: offsets has to be a 1D Tensor but got None (needed with 1-D input)")
        off = _host(offsets, "offsets")
        if off.size == 0 or off[0] != 0 or np.any(np.diff(off) < 0) or off[-1] > input.shape[0]:
            raise ShapeError(
                f"embedding_bag: offsets must start at 0, be non-decreasing and stay within the input's "
                f"{input.shape[0]} indices, got {off.tolist()}"
            )
        ends = off[1:] if include_last_offset else np.append(off[1:], input.shape[0])
        starts = off[:-1] if include_last_offset else off
        n_bags = starts.size
        seg = np.repeat(np.arange(n_bags), ends - starts)
        if include_last_offset and ends.size and ends[-1] < input.shape[0]:
            seg = np.append(seg, np.full(input.shape[0] - ends[-1], n_bags))  # past the last offset: dropped
    else:
        raise ShapeError(f"embedding_bag: input has to be 1D or 2D, got shape {list(input.shape)}")
    flat = input.reshape(-1).long()
    _check_indices(flat, weight.shape[0], "embedding_bag: input")
    rows = weight.index_select(0, flat)
    keep = seg < n_bags
    if padding_idx is not None:
        pad = padding_idx + weight.shape[0] if padding_idx < 0 else padding_idx
        keep_t = (flat != pad) & tensor(keep)
    else:
        keep_t = tensor(keep)
    seg_t = tensor(np.minimum(seg, max(n_bags - 1, 0)))
    dim = weight.shape[1]
    if per_sample_weights is not None:
        rows = rows * per_sample_weights.reshape(-1, 1)
    if mode == "max":
        fill = _F.where(keep_t.unsqueeze(1), rows, float("-inf"))
        idx = seg_t.unsqueeze(1).expand(seg_t.shape[0], dim)
        start = zeros((n_bags, dim), dtype=weight.dtype) + float("-inf")
        out = _F.scatter_reduce(start, 0, idx, fill, "amax", include_self=True)
        return _F.where(out == float("-inf"), 0.0, out)
    masked = _F.where(keep_t.unsqueeze(1), rows, 0.0)
    out = _F.index_add(zeros((n_bags, dim), dtype=weight.dtype), 0, seg_t, masked)
    if mode == "mean":
        counts = _F.index_add(zeros(n_bags, dtype=weight.dtype), 0, seg_t, keep_t.to(weight.dtype))
        out = out / counts.clamp(min=1).unsqueeze(1)
    return out
