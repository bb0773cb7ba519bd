"""MultiheadAttention, TransformerEncoderLayer and TransformerEncoder with torch's parameter names.

The attention core (head split, scores, masks, softmax, dropout, weighted sum, head merge) is one primitive
(``lazyflow.ops.nn`` ``attention``), so eager multi-head attention is: one packed input projection, one
attention kernel and one output projection. ``state_dict`` keys equal torch's (``in_proj_weight``,
``in_proj_bias``, ``out_proj.weight``, ``layers.0.self_attn...``, ``layers.0.linear1.weight``...).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from ..._core.errors import ShapeError
from ..._creation import empty
from ..._tensor import Tensor
from .. import functional as F
from .. import init
from ..module import Module
from ..parameter import Parameter
from .container import ModuleList
from .conv import layer_shape_error
from .dropout import Dropout
from .linear import Linear
from .normalization import LayerNorm

__all__ = ["MultiheadAttention", "TransformerEncoderLayer", "TransformerEncoder"]


class NonDynamicallyQuantizableLinear(Linear):
    """torch's name for MultiheadAttention's output projection (a plain Linear; kept for ``repr`` parity)."""


class MultiheadAttention(Module):
    """Multi-head attention ``softmax(Q K^T / sqrt(d)) V`` over ``num_heads`` heads, torch's layer.

    Args:
        embed_dim: model dimension ``E``.
        num_heads: heads (must divide ``E``).
        dropout: dropout on the attention weights (training only).
        bias: learn ``in_proj_bias`` and ``out_proj.bias``.
        add_bias_kv: learn ``bias_k``/``bias_v`` appended to the key/value sequence.
        add_zero_attn: append a zero key/value step.
        kdim, vdim: key/value feature sizes (default ``E``; when different, ``q/k/v_proj_weight`` replace
            ``in_proj_weight``).
        batch_first: inputs are ``(N, L, E)`` instead of ``(L, N, E)``.
    Attributes:
        in_proj_weight: ``(3E, E)``, xavier_uniform_; in_proj_bias: ``(3E,)`` zeros; out_proj: Linear(E, E)
            with a zero bias.
    Raises:
        ValueError: ``E`` not divisible by ``num_heads``.
        ShapeError (on call): inputs of the wrong rank or feature size.
    """

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        dropout: float = 0.0,
        bias: bool = True,
        add_bias_kv: bool = False,
        add_zero_attn: bool = False,
        kdim: int | None = None,
        vdim: int | None = None,
        batch_first: bool = False,
        device=None,
        dtype=None,
    ) -> None:
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError(
                f"embed_dim and num_heads must be greater than 0, got embed_dim={embed_dim} and "
                f"num_heads={num_heads} instead"
            )
        super().__init__()
        self.embed_dim = embed_dim
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.num_heads = num_heads
        self.dropout = dropout
        self.batch_first = batch_first
        self.head_dim = embed_dim // num_heads
        if self.head_dim * num_heads != embed_dim:
            raise ValueError("embed_dim must be divisible by num_heads")
        kw: dict[str, Any] = {"device": device, "dtype": dtype}
        if not self._qkv_same_embed_dim:
            self.q_proj_weight = Parameter(empty((embed_dim, embed_dim), **kw))
            self.k_proj_weight = Parameter(empty((embed_dim, self.kdim), **kw))
            self.v_proj_weight = Parameter(empty((embed_dim, self.vdim), **kw))
            self.register_parameter("in_proj_weight", None)
        else:
            self.in_proj_weight = Parameter(empty((3 * embed_dim, embed_dim), **kw))
            self.register_parameter("q_proj_weight", None)
            self.register_parameter("k_proj_weight", None)
            self.register_parameter("v_proj_weight", None)
        if bias:
            self.in_proj_bias = Parameter(empty(3 * embed_dim, **kw))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = NonDynamicallyQuantizableLinear(embed_dim, embed_dim, bias=bias, **kw)
        if add_bias_kv:
            self.bias_k = Parameter(empty((1, 1, embed_dim), **kw))
            self.bias_v = Parameter(empty((1, 1, embed_dim), **kw))
        else:
            self.bias_k = self.bias_v = None
        self.add_zero_attn = add_zero_attn
        self._reset_parameters()

    def _reset_parameters(self) -> None:
        if self._qkv_same_embed_dim:
            init.xavier_uniform_(self.in_proj_weight)
        else:
            init.xavier_uniform_(self.q_proj_weight)
            init.xavier_uniform_(self.k_proj_weight)
            init.xavier_uniform_(self.v_proj_weight)
        if self.in_proj_bias is not None:
            init.constant_(self.in_proj_bias, 0.0)
            init.constant_(self.out_proj.bias, 0.0)
        if self.bias_k is not None:
            init.xavier_normal_(self.bias_k)
        if self.bias_v is not None:
            init.xavier_normal_(self.bias_v)

    def _check(self, query: Tensor, key: Tensor, value: Tensor) -> None:
        for t, name, d in ((query, "query", self.embed_dim), (key, "key", self.kdim), (value, "value", self.vdim)):
            if not isinstance(t, Tensor):
                raise TypeError(f"{self._get_name()}: expected {name} to be a lazyflow Tensor, got {type(t).__name__}")
            if t.ndim not in (2, 3) or t.shape[-1] != d:
                layout = "(N, L, {d})" if self.batch_first else "(L, N, {d})"
                raise ShapeError(
                    f"{self._get_name()}(embed_dim={self.embed_dim}, num_heads={self.num_heads}): "
                    f"expected {name} of shape {layout.format(d=d)} or (L, {d}), got {name} of "
                    f"shape {list(t.shape)}"
                )

    def forward(
        self,
        query: Tensor,
        key: Tensor,
        value: Tensor,
        key_padding_mask: Tensor | None = None,
        need_weights: bool = True,
        attn_mask: Tensor | None = None,
        average_attn_weights: bool = True,
        is_causal: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        """Attend from ``query`` to ``key``/``value``.

        Args:
            query: ``(L, N, E)`` (``(N, L, E)`` with ``batch_first``) or unbatched ``(L, E)``.
            key, value: ``(S, N, kdim)``, ``(S, N, vdim)`` (batch-first likewise).
            key_padding_mask: ``(N, S)``: bool True = ignore that key, or float added to the scores.
            need_weights: also return the attention weights.
            attn_mask: ``(L, S)`` or ``(N*num_heads, L, S)``; bool True = not allowed, or float added.
            average_attn_weights: average the returned weights over heads.
            is_causal: hint that ``attn_mask`` is the causal mask.
        Returns:
            ``(attn_output, attn_weights)``: the output shaped like ``query`` and the weights ``(N, L, S)``
            (``(N, num_heads, L, S)`` unaveraged) or None.
        """
        self._check(query, key, value)
        return F.multi_head_attention_forward(
            query,
            key,
            value,
            self.embed_dim,
            self.num_heads,
            self.in_proj_weight,
            self.in_proj_bias,
            self.bias_k,
            self.bias_v,
            self.add_zero_attn,
            self.dropout,
            self.out_proj.weight,
            self.out_proj.bias,
            training=self.training,
            key_padding_mask=key_padding_mask,
            need_weights=need_weights,
            attn_mask=attn_mask,
            use_separate_proj_weight=not self._qkv_same_embed_dim,
            q_proj_weight=self.q_proj_weight,
            k_proj_weight=self.k_proj_weight,
            v_proj_weight=self.v_proj_weight,
            average_attn_weights=average_attn_weights,
            is_causal=is_causal,
            batch_first=self.batch_first,
        )


def _activation_fn(activation: str | Callable) -> Callable:
    if activation == "relu":
        return F.relu
    if activation == "gelu":
        return F.gelu
    if isinstance(activation, str):
        raise RuntimeError(f"activation should be relu/gelu, not {activation}")
    return activation


class TransformerEncoderLayer(Module):
    """Self-attention and a feed-forward block, each with a residual and a LayerNorm (torch's layer).

    Args:
        d_model: model dimension; nhead: attention heads.
        dim_feedforward: hidden size of the feed-forward block.
        dropout: dropout after attention, inside and after the feed-forward block, and on attention weights.
        activation: ``"relu"``, ``"gelu"`` or a callable/module.
        layer_norm_eps: LayerNorm eps.
        batch_first: ``(N, S, E)`` instead of ``(S, N, E)``.
        norm_first: pre-LayerNorm (``x + sa(norm1(x))``) instead of post-LayerNorm.
        bias: biases in the linear layers, attention and LayerNorms.
    Raises:
        ShapeError (on call): an input whose last dim is not ``d_model``.
    """

    def __init__(
        self,
        d_model: int,
        nhead: int,
        dim_feedforward: int = 2048,
        dropout: float = 0.1,
        activation: str | Callable[[Tensor], Tensor] = "relu",
        layer_norm_eps: float = 1e-5,
        batch_first: bool = False,
        norm_first: bool = False,
        bias: bool = True,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__()
        kw: dict[str, Any] = {"device": device, "dtype": dtype}
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias, batch_first=batch_first, **kw)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, **kw)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, **kw)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.activation = _activation_fn(activation)

    def forward(
        self,
        src: Tensor,
        src_mask: Tensor | None = None,
        src_key_padding_mask: Tensor | None = None,
        is_causal: bool = False,
    ) -> Tensor:
        """One encoder layer over ``src`` (``(S, N, E)``, ``(N, S, E)`` with ``batch_first``, or ``(S, E)``).

        Args:
            src: the sequence.
            src_mask: ``(S, S)`` or ``(N*nhead, S, S)`` attention mask (bool True = not allowed, or float).
            src_key_padding_mask: ``(N, S)`` (bool True = padding, or float).
            is_causal: hint that ``src_mask`` is the causal mask.
        Returns:
            a tensor shaped like ``src``.
        """
        if not isinstance(src, Tensor) or src.ndim not in (2, 3) or src.shape[-1] != self.self_attn.embed_dim:
            if not isinstance(src, Tensor):
                raise TypeError(f"{self._get_name()}: expected a lazyflow Tensor, got {type(src).__name__}")
            e = self.self_attn.embed_dim
            raise layer_shape_error(self, f"(N, S, {e})" if self.self_attn.batch_first else f"(S, N, {e})", src)
        # residuals, norms and the feed-forward block run on 2-D (tokens, d_model) activations: XLA:CPU's
        # backward of 3-D matmuls/reductions adds transposes (torch's math is unchanged by the reshape)
        shape = src.shape
        x = src.reshape(-1, shape[-1]) if src.ndim == 3 else src
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x).reshape(shape), src_mask, src_key_padding_mask, is_causal).reshape(
                x.shape
            )
            x = x + self._ff_block(self.norm2(x))
        else:
            x = self.norm1(
                x + self._sa_block(x.reshape(shape), src_mask, src_key_padding_mask, is_causal).reshape(x.shape)
            )
            x = self.norm2(x + self._ff_block(x))
        return x.reshape(shape)

    def _sa_block(self, x: Tensor, attn_mask, key_padding_mask, is_causal: bool) -> Tensor:
        x = self.self_attn(
            x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask, need_weights=False, is_causal=is_causal
        )[0]
        return self.dropout1(x)

    def _ff_block(self, x: Tensor) -> Tensor:
        x = self.linear2(self.dropout(self.activation(self.linear1(x))))
        return self.dropout2(x)


class TransformerEncoder(Module):
    """A stack of ``num_layers`` deep copies of ``encoder_layer`` and an optional final norm.

    Args:
        encoder_layer: the layer to clone (its parameters are copied, not shared).
        num_layers: how many layers.
        norm: applied to the output, or None.
        enable_nested_tensor, mask_check: accepted for torch compatibility; lazyflow always runs the padded
            path (padded positions keep their computed values instead of torch's fast-path zeros).
    """

    def __init__(
        self,
        encoder_layer: TransformerEncoderLayer,
        num_layers: int,
        norm: Module | None = None,
        enable_nested_tensor: bool = True,
        mask_check: bool = True,
    ) -> None:
        super().__init__()
        self.layers = ModuleList([copy.deepcopy(encoder_layer) for _ in range(num_layers)])
        self.num_layers = num_layers
        self.norm = norm
        self.enable_nested_tensor = enable_nested_tensor
        self.use_nested_tensor = False
        self.mask_check = mask_check

    def forward(
        self,
        src: Tensor,
        mask: Tensor | None = None,
        src_key_padding_mask: Tensor | None = None,
        is_causal: bool | None = None,
    ) -> Tensor:
        """Run every layer on ``src`` with the same masks, then ``norm``.

        Args:
            src: the sequence (layout as the layers' ``batch_first``).
            mask: attention mask for every layer.
            src_key_padding_mask: ``(N, S)`` padding mask.
            is_causal: hint that ``mask`` is the causal mask (never inferred from the mask's values).
        Returns:
            a tensor shaped like ``src``.
        """
        out = src
        for mod in self.layers:
            out = mod(out, src_mask=mask, src_key_padding_mask=src_key_padding_mask, is_causal=bool(is_causal))
        if self.norm is not None:
            out = self.norm(out)
        return out
