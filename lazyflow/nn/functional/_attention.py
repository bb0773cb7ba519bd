"""Attention with ``torch.nn.functional``'s signatures: ``scaled_dot_product_attention`` and
``multi_head_attention_forward``.

Both end in the one ``attention`` primitive of ``lazyflow.ops.nn`` (scores, masks, softmax, dropout and the
weighted sum in one kernel; for multi-head attention the head split/merge too). Dropout draws its
``(seed, offset)`` from the default Generator, so it is reproducible under ``lf.manual_seed`` and graph
mode can feed a traced offset.
"""

from __future__ import annotations

import builtins

from ... import _functional as _F
from ..._core import dtypes as D
from ..._core.context import state
from ..._core.errors import DTypeError, ShapeError
from ..._creation import _gen, zeros
from ..._tensor import Tensor
from ...ops.table import REGISTRY as R
from ._linear import linear

__all__ = ["scaled_dot_product_attention", "multi_head_attention_forward"]

_ATTENTION = R["attention"]


def _rng(p: float):
    return _gen(None)._next() if p > 0.0 else (None, None)


def _check_mask(fn: str, mask, want: tuple, what: str) -> None:
    if mask is None:
        return
    if not isinstance(mask, Tensor):
        raise TypeError(f"{fn}: expected {what} to be a lazyflow Tensor or None, got {type(mask).__name__}")
    if mask.dtype is not D.bool_ and not mask.dtype.is_floating_point:
        raise DTypeError(f"{fn}: only bool and floating types of {what} are supported, got {mask.dtype.name}")
    try:
        _F.broadcast_shapes(tuple(mask.shape), want)
    except (ShapeError, ValueError):
        raise ShapeError(
            f"{fn}: {what} of shape {list(mask.shape)} cannot be broadcast to the attention "
            f"scores of shape {list(want)}"
        ) from None


def scaled_dot_product_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attn_mask: Tensor | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
) -> Tensor:
    """``softmax(query @ key^T * scale + mask) @ value``, torch's SDPA.

    Args:
        query: ``(..., L, E)``.
        key: ``(..., S, E)``.
        value: ``(..., S, Ev)``.
        attn_mask: broadcastable to ``(..., L, S)``: bool (True = take part in attention) or float (added to
            the scores). A fully masked row gives zeros, like torch.
        dropout_p: dropout probability on the attention weights (applied whenever > 0, as in torch).
        is_causal: apply a lower-triangular (top-left aligned) causal mask; exclusive with ``attn_mask``.
        scale: the score scale; default ``1 / sqrt(E)``.
        enable_gqa: grouped-query attention: key/value heads (dim -3) are repeated to the query's heads.
    Returns:
        ``(..., L, Ev)``.
    Raises:
        ShapeError: mismatched shapes or a mask that does not broadcast.
        DTypeError: query/key/value of different dtypes, or a mask that is neither bool nor float.
        ValueError: ``attn_mask`` together with ``is_causal``, or ``dropout_p`` outside [0, 1).
    """
    fn = "scaled_dot_product_attention"
    for t in (query, key, value):
        if not isinstance(t, Tensor):
            raise TypeError(f"{fn}: expected lazyflow Tensors, got {type(t).__name__}")
    if not (query.dtype is key.dtype is value.dtype) or not query.dtype.is_floating_point:
        raise DTypeError(
            f"{fn}: expected query, key and value to have the same floating dtype, got "
            f"{query.dtype.name}, {key.dtype.name} and {value.dtype.name}"
        )
    if (
        query.ndim < 2
        or key.ndim != query.ndim
        or value.ndim != query.ndim
        or query.shape[-1] != key.shape[-1]
        or key.shape[-2] != value.shape[-2]
    ):
        raise ShapeError(
            f"{fn}: expected query (..., L, E), key (..., S, E) and value (..., S, Ev) of equal "
            f"rank, got {list(query.shape)}, {list(key.shape)} and {list(value.shape)}"
        )
    if enable_gqa and query.ndim >= 3 and key.shape[-3] != query.shape[-3]:
        hq, hk = query.shape[-3], key.shape[-3]
        if hq % hk:
            raise ShapeError(f"{fn}: enable_gqa needs the query heads ({hq}) to be a multiple of the key heads ({hk})")
        key = _F.repeat_interleave(key, hq // hk, dim=-3)
        value = _F.repeat_interleave(value, hq // hk, dim=-3)
    try:
        batch = _F.broadcast_shapes(tuple(query.shape[:-2]), tuple(key.shape[:-2]), tuple(value.shape[:-2]))
    except (ShapeError, ValueError):
        raise ShapeError(
            f"{fn}: the batch dims of query {list(query.shape)}, key {list(key.shape)} and value "
            f"{list(value.shape)} do not broadcast"
        ) from None
    if is_causal and attn_mask is not None:
        raise ValueError(f"{fn}: explicit attn_mask should not be set when is_causal=True")
    _check_mask(fn, attn_mask, tuple(batch) + (query.shape[-2], key.shape[-2]), "attn_mask")
    p = builtins.float(dropout_p)
    if not 0.0 <= p < 1.0:
        raise ValueError(f"{fn}: dropout_p must be in [0, 1), got {dropout_p}")
    statics = (
        p,
        builtins.bool(is_causal),
        None if scale is None else builtins.float(scale),
        None,
        False,
        True,
        False,
        False,
    )
    return state.interp.apply(_ATTENTION, (query, key, value, attn_mask, None, *_rng(p)), statics)


def multi_head_attention_forward(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    embed_dim_to_check: int,
    num_heads: int,
    in_proj_weight: Tensor | None,
    in_proj_bias: Tensor | None,
    bias_k: Tensor | None,
    bias_v: Tensor | None,
    add_zero_attn: bool,
    dropout_p: float,
    out_proj_weight: Tensor,
    out_proj_bias: Tensor | None,
    training: bool = True,
    key_padding_mask: Tensor | None = None,
    need_weights: bool = True,
    attn_mask: Tensor | None = None,
    use_separate_proj_weight: bool = False,
    q_proj_weight: Tensor | None = None,
    k_proj_weight: Tensor | None = None,
    v_proj_weight: Tensor | None = None,
    static_k: Tensor | None = None,
    static_v: Tensor | None = None,
    average_attn_weights: bool = True,
    is_causal: bool = False,
    batch_first: bool = False,
):
    """Multi-head attention, torch's ``F.multi_head_attention_forward`` (sequence-first layout).

    Args:
        query: ``(L, N, E)`` or unbatched ``(L, E)`` (``(N, L, E)`` with the lazyflow-only ``batch_first``).
        key, value: ``(S, N, kdim)``, ``(S, N, vdim)``.
        embed_dim_to_check: ``E``; num_heads: ``H`` (must divide ``E``).
        in_proj_weight, in_proj_bias: packed ``(3E, E)`` / ``(3E,)`` projections (or the three
            ``q/k/v_proj_weight`` with ``use_separate_proj_weight``).
        bias_k, bias_v: ``(1, 1, E)`` biases appended to the key/value sequence, or None.
        add_zero_attn: append a zero key/value step.
        dropout_p: attention dropout (only when ``training``).
        out_proj_weight, out_proj_bias: the output projection.
        key_padding_mask: ``(N, S)``; bool True = ignore that key, or float added to the scores.
        need_weights: also return the attention weights.
        attn_mask: ``(L, S)`` or ``(N*H, L, S)``; bool True = not allowed, or float added.
        static_k, static_v: precomputed ``(N*H, S, E/H)`` keys/values replacing the projections.
        average_attn_weights: average the returned weights over heads.
        is_causal: a hint that ``attn_mask`` is the causal mask (which must then be given).
    Returns:
        ``(attn_output, attn_weights)``; the weights are None unless ``need_weights``, else ``(N, L, S)``
        (``(N, H, L, S)`` without averaging).
    Raises:
        ShapeError: inconsistent shapes (named, with both shapes). ValueError/RuntimeError: bad options.
    """
    fn = "multi_head_attention_forward"
    bdim = 0 if batch_first else 1
    batched = query.ndim == 3
    if query.ndim not in (2, 3) or key.ndim != query.ndim or value.ndim != query.ndim:
        raise ShapeError(
            f"{fn}: expected query, key and value all 3-D (batched) or all 2-D (unbatched), got "
            f"{list(query.shape)}, {list(key.shape)} and {list(value.shape)}"
        )
    if not batched:
        query, key, value = (t.unsqueeze(bdim) for t in (query, key, value))
        if key_padding_mask is not None:
            key_padding_mask = key_padding_mask.unsqueeze(0)
    e = query.shape[-1]
    n = query.shape[bdim]
    lq = query.shape[1 - bdim]
    s = key.shape[1 - bdim]
    h = builtins.int(num_heads)
    if e != embed_dim_to_check:
        raise ShapeError(
            f"{fn}: was expecting embedding dimension of {embed_dim_to_check}, but got query of "
            f"shape {list(query.shape)}"
        )
    if h < 1 or e % h:
        raise ValueError(f"{fn}: embed_dim {e} not divisible by num_heads {h}")
    if key.shape[:2] != value.shape[:2] or key.shape[bdim] != n:
        raise ShapeError(
            f"{fn}: key of shape {list(key.shape)} and value of shape {list(value.shape)} must "
            f"share their sequence and batch dims with the query of shape {list(query.shape)}"
        )
    if is_causal and attn_mask is None:
        raise RuntimeError(f"{fn}: need attn_mask if specifying the is_causal hint")
    if is_causal and key_padding_mask is None and not need_weights:
        attn_mask, causal = None, True  # the mask is the causal mask: let the kernel build it
    else:
        causal = False
    # ---- projections
    if not use_separate_proj_weight:
        if in_proj_weight is None or tuple(in_proj_weight.shape) != (3 * e, e):
            raise ShapeError(
                f"{fn}: expected in_proj_weight of shape [{3 * e}, {e}], got "
                f"{None if in_proj_weight is None else list(in_proj_weight.shape)}"
            )
        if key is query and value is query:
            q, k, v = _F.chunk(_linear2d(query, in_proj_weight, in_proj_bias), 3, dim=-1)
        else:
            ws = _F.chunk(in_proj_weight, 3)
            bs = (None,) * 3 if in_proj_bias is None else _F.chunk(in_proj_bias, 3)
            q, k, v = (_linear2d(x, w, b) for x, w, b in zip((query, key, value), ws, bs))
    else:
        checked: list[Tensor] = []
        for name, w, d in (
            ("q_proj_weight", q_proj_weight, e),
            ("k_proj_weight", k_proj_weight, key.shape[-1]),
            ("v_proj_weight", v_proj_weight, value.shape[-1]),
        ):
            if w is None or tuple(w.shape) != (e, d):
                raise ShapeError(
                    f"{fn}: expected {name} of shape [{e}, {d}], got {None if w is None else list(w.shape)}"
                )
            checked.append(w)
        bs = (None,) * 3 if in_proj_bias is None else _F.chunk(in_proj_bias, 3)
        q = _linear2d(query, checked[0], bs[0])
        k = _linear2d(key, checked[1], bs[1])
        v = _linear2d(value, checked[2], bs[2])
    # ---- masks to (N, H|1, L, S)
    if attn_mask is not None:
        if attn_mask.ndim == 2:
            if tuple(attn_mask.shape) != (lq, s):
                raise ShapeError(
                    f"{fn}: the shape of the 2D attn_mask is {list(attn_mask.shape)}, but should be {[lq, s]}"
                )
        elif attn_mask.ndim == 3:
            if tuple(attn_mask.shape) != (n * h, lq, s):
                raise ShapeError(
                    f"{fn}: the shape of the 3D attn_mask is {list(attn_mask.shape)}, but should be {[n * h, lq, s]}"
                )
            attn_mask = attn_mask.reshape(n, h, lq, s)
        else:
            raise ShapeError(f"{fn}: attn_mask's dimension {attn_mask.ndim} is not supported (2-D or 3-D)")
        _check_mask(fn, attn_mask, (n, h, lq, s), "attn_mask")
    if key_padding_mask is not None:
        if tuple(key_padding_mask.shape) != (n, s):
            raise ShapeError(f"{fn}: expected key_padding_mask of shape {[n, s]}, got {list(key_padding_mask.shape)}")
        _check_mask(fn, key_padding_mask, (n, s), "key_padding_mask")
    # ---- extra key/value steps
    if bias_k is not None and bias_v is not None:
        if static_k is not None or static_v is not None:
            raise ValueError(f"{fn}: bias cannot be added to static key/value")
        shp = (1, n, e) if not batch_first else (n, 1, e)
        k = _F.cat([k, bias_k.reshape(1, 1, e).expand(*shp)], dim=1 - bdim)
        v = _F.cat([v, bias_v.reshape(1, 1, e).expand(*shp)], dim=1 - bdim)
        attn_mask, key_padding_mask = _pad_masks(attn_mask, key_padding_mask)
        s += 1
    elif bias_k is not None or bias_v is not None:
        raise ValueError(f"{fn}: bias_k and bias_v must both be given or both be None")
    if static_k is not None:
        k = _unpack_static(fn, static_k, n, h, e, batch_first, "static_k")
        s = k.shape[1 - bdim]
    if static_v is not None:
        v = _unpack_static(fn, static_v, n, h, e, batch_first, "static_v")
    if add_zero_attn:
        zshape = list(k.shape)
        zshape[1 - bdim] = 1
        k = _F.cat([k, _zeros_like_shape(k, zshape)], dim=1 - bdim)
        zshape = list(v.shape)
        zshape[1 - bdim] = 1
        v = _F.cat([v, _zeros_like_shape(v, zshape)], dim=1 - bdim)
        attn_mask, key_padding_mask = _pad_masks(attn_mask, key_padding_mask)
    p = builtins.float(dropout_p) if training else 0.0
    statics = (
        p,
        causal,
        None,
        h,
        not batch_first,
        False,
        builtins.bool(need_weights),
        builtins.bool(average_attn_weights),
    )
    res = state.interp.apply(_ATTENTION, (q, k, v, attn_mask, key_padding_mask, *_rng(p)), statics)
    out, weights = res if need_weights else (res, None)
    out = _linear2d(out, out_proj_weight, out_proj_bias)
    if not batched:
        out = out.squeeze(bdim)
        if weights is not None:
            weights = weights.squeeze(0)
    return out, weights


def _linear2d(x: Tensor, w: Tensor, b: Tensor | None) -> Tensor:
    # projections run on (rows, features): XLA:CPU's backward of a 3-D matmul adds transposes (a whole-step
    # Transformer benchmark went from 249 to 185 ms by keeping activations 2-D)
    if x.ndim == 2:
        return linear(x, w, b)
    return linear(x.reshape(-1, x.shape[-1]), w, b).reshape(*x.shape[:-1], w.shape[0])


def _zeros_like_shape(t: Tensor, shape) -> Tensor:
    return zeros(*shape, dtype=t.dtype)


def _pad_masks(attn_mask, key_padding_mask):
    if attn_mask is not None:
        attn_mask = _F.pad(attn_mask, (0, 1))
    if key_padding_mask is not None:
        key_padding_mask = _F.pad(key_padding_mask, (0, 1))
    return attn_mask, key_padding_mask


def _unpack_static(fn, t, n, h, e, batch_first, what):
    if t.ndim != 3 or t.shape[0] != n * h or t.shape[2] != e // h:
        raise ShapeError(f"{fn}: expected {what} of shape [{n * h}, S, {e // h}], got {list(t.shape)}")
    packed = t.reshape(n, h, t.shape[1], e // h).permute(0, 2, 1, 3).reshape(n, t.shape[1], e)
    return packed if batch_first else packed.transpose(0, 1)
