"""Linear maps, dropout, embeddings and small tensor utilities of ``torch.nn.functional``."""

from __future__ import annotations

import numpy as np

from ... import _functional as _F
from ..._core import dtypes as D
from ..._core.checks import defer_bounds
from ..._core.context import state
from ..._core.errors import DTypeError, IndexOutOfRangeError, ShapeError
from ..._creation import _gen, as_tensor, bernoulli, full
from ..._tensor import Tensor, _concrete, _Tracer
from ...autograd import no_grad
from ...ops.table import REGISTRY as R

__all__ = [
    "linear",
    "bilinear",
    "dropout",
    "dropout1d",
    "dropout2d",
    "dropout3d",
    "embedding",
    "one_hot",
    "pad",
    "normalize",
]

_LINEAR = R["linear"]
_DROPOUT = R["dropout"]
_EMBEDDING = R["embedding"]


def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``input @ weight.T + bias``.

    Args:
        input: ``(*, in_features)``.
        weight: ``(out_features, in_features)``.
        bias: ``(out_features,)`` or None.
    Returns:
        ``(*, out_features)``.
    Raises:
        ShapeError: the shapes do not fit.
    """
    if weight.ndim != 2 or input.ndim == 0 or input.shape[-1] != weight.shape[1]:
        raise ShapeError(
            f"linear: expected input of shape (*, {weight.shape[-1]}) for weight of shape "
            f"{list(weight.shape)}, got input of shape {list(input.shape)}"
        )
    if bias is not None and tuple(bias.shape) not in ((weight.shape[0],), ()):
        raise ShapeError(
            f"linear: bias of shape {list(bias.shape)} does not match weight of shape "
            f"{list(weight.shape)} (expected [{weight.shape[0]}])"
        )
    return state.interp.apply(_LINEAR, (input, weight, bias), ())


def bilinear(input1: Tensor, input2: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``y[..., o] = sum_ij input1[..., i] * weight[o, i, j] * input2[..., j] + bias[o]``.

    Raises:
        ShapeError: the shapes do not fit.
    """
    if (
        weight.ndim != 3
        or input1.shape[:-1] != input2.shape[:-1]
        or input1.ndim == 0
        or (input1.shape[-1], input2.shape[-1]) != tuple(weight.shape[1:])
    ):
        raise ShapeError(
            f"bilinear: expected inputs of shapes (*, {weight.shape[1]}) and (*, {weight.shape[2]}) "
            f"with equal leading dims for weight of shape {list(weight.shape)}, got "
            f"{list(input1.shape)} and {list(input2.shape)}"
        )
    y = _F.einsum("...i,oij,...j->...o", input1, weight, input2)
    return y if bias is None else y + bias


def _check_p(p: float) -> float:
    p = float(p)
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    return p


def dropout(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zero each element with probability ``p`` and scale the rest by ``1 / (1 - p)`` (when training).

    Draws from the default Generator (``lf.manual_seed`` makes it reproducible), as one kernel.

    Raises:
        ValueError: ``p`` outside [0, 1].
    """
    p = _check_p(p)
    if not training or p == 0.0:
        return input
    if p == 1.0:
        out = input * 0.0
    else:
        out = state.interp.apply(_DROPOUT, (*_gen(None)._next(), input), (p,))
    return input.copy_(out) if inplace else out


def _feature_dropout(input, p, training, inplace, batched_ndim, name):
    p = _check_p(p)
    if input.ndim not in (batched_ndim, batched_ndim - 1):
        raise ShapeError(
            f"{name}: expected {batched_ndim - 1}D or {batched_ndim}D input, got shape {list(input.shape)}"
        )
    if not training or p == 0.0:
        return input
    feature_dims = 2 if input.ndim == batched_ndim else 1
    mask_shape = tuple(input.shape[:feature_dims]) + (1,) * (input.ndim - feature_dims)
    dt = input.dtype if input.dtype.is_floating_point else D.get_default_dtype()
    if p == 1.0:
        out = input * 0.0
    else:
        keep = bernoulli(full(mask_shape, 1.0 - p, dtype=dt))
        out = input * (keep / (1.0 - p))
    return input.copy_(out) if inplace else out


def dropout1d(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zero whole channels of ``(N, C, L)`` / ``(C, L)`` input with probability ``p``."""
    return _feature_dropout(input, p, training, inplace, 3, "dropout1d")


def dropout2d(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zero whole channels of ``(N, C, H, W)`` / ``(C, H, W)`` input with probability ``p``."""
    return _feature_dropout(input, p, training, inplace, 4, "dropout2d")


def dropout3d(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zero whole channels of ``(N, C, D, H, W)`` / ``(C, D, H, W)`` input with probability ``p``."""
    return _feature_dropout(input, p, training, inplace, 5, "dropout3d")


def embedding(
    input: Tensor,
    weight: Tensor,
    padding_idx: int | None = None,
    max_norm: float | None = None,
    norm_type: float = 2.0,
    scale_grad_by_freq: bool = False,
    sparse: bool = False,
) -> Tensor:
    """Rows of ``weight`` selected by the integer tensor ``input``: output ``(*input.shape, dim)``.

    Args:
        input: integer indices into the rows of ``weight``.
        weight: ``(num_embeddings, embedding_dim)``.
        padding_idx: a row that never receives gradient (negative counts from the end).
        max_norm: renormalise (in place, without gradient) the selected rows whose ``norm_type``-norm
            exceeds it.
        norm_type: the p of that norm.
        scale_grad_by_freq: divide each row's gradient by its frequency in ``input``.
        sparse: accepted for compatibility; gradients are always dense.
    Raises:
        DTypeError: ``input`` is not an integer tensor.
        IndexOutOfRangeError: an index (or ``padding_idx``) outside ``[0, num_embeddings)``.
        ShapeError: ``weight`` is not 2-D.
    """
    if not isinstance(input, Tensor):
        input = as_tensor(input)
    if input.dtype.is_floating_point or input.dtype is D.bool_:
        raise DTypeError(f"embedding: expected an integer index tensor (int32/int64), got {input.dtype}")
    if weight.ndim != 2:
        raise ShapeError(
            f"embedding: weight must be 2-D (num_embeddings, embedding_dim), got shape {list(weight.shape)}"
        )
    n = weight.shape[0]
    if padding_idx is not None:
        if not -n <= padding_idx < n:
            raise IndexOutOfRangeError(f"embedding: padding_idx must be within [{-n}, {n}), got {padding_idx}")
        padding_idx = padding_idx + n if padding_idx < 0 else int(padding_idx)
    _check_indices(input, n, "embedding")
    if max_norm is not None:
        with no_grad():
            state.interp.apply_inplace(
                R["embedding_renorm"], weight, (weight, input, float(max_norm)), (float(norm_type),)
            )
    return state.interp.apply(_EMBEDDING, (weight, input), (padding_idx, bool(scale_grad_by_freq)))


def _check_indices(index: Tensor, size: int, what: str, ignore: int | None = None) -> None:
    """Bounds check of integer indices: now in eager mode, deferred to after the program in graph mode."""
    value = index._value
    if value.size == 0:
        return
    if isinstance(value, _Tracer):
        defer_bounds(value, size, f"{what}: index {{index}} is out of range [0, {size})", ignore=ignore)
        return
    a = np.asarray(value)
    lo, hi = a.min(), a.max()
    if lo >= 0 and hi < size:
        return
    if ignore is not None:
        a = a[a != ignore]
        if a.size == 0:
            return
        lo, hi = a.min(), a.max()
        if lo >= 0 and hi < size:
            return
    bad = int(hi) if hi >= size else int(lo)
    raise IndexOutOfRangeError(f"{what}: index {bad} is out of range [0, {size})")


def one_hot(input: Tensor, num_classes: int = -1) -> Tensor:
    """One-hot int64 encoding of an integer tensor (``num_classes=-1``: max + 1, eager only)."""
    if num_classes == -1 and isinstance(input, Tensor):
        _concrete(input, "one_hot(num_classes=-1)")
    return _F.one_hot(input, num_classes)


def pad(input: Tensor, pad, mode: str = "constant", value: float | None = None) -> Tensor:
    """Pad with (left, right) pairs from the last dimension backwards: constant/reflect/replicate/circular."""
    return _F.pad(input, pad, mode, value)


def normalize(input: Tensor, p: float = 2.0, dim: int = 1, eps: float = 1e-12, out=None) -> Tensor:
    """``input / max(||input||_p along dim, eps)``."""
    if out is not None:
        raise TypeError("normalize: the out= argument is not supported")
    # _F.norm's p carries no annotation, so pyright reads it as str from its default "fro"; it takes numbers too
    denom = _F.norm(input, p, dim, keepdim=True).clamp(min=eps)  # pyright: ignore[reportArgumentType]
    return input / denom
