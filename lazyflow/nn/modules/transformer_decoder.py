"""TransformerDecoderLayer, TransformerDecoder and Transformer with torch's parameter names and defaults.

Built from :class:`MultiheadAttention`, ``Linear``, ``LayerNorm`` and ``Dropout``, so ``state_dict`` keys equal
torch's (``decoder.layers.0.multihead_attn.in_proj_weight``, ``encoder.norm.weight``...) and a torch model's
weights load unchanged. ``tgt_is_causal`` / ``is_causal`` are hints, as in torch: the mask passed is always
applied, so the result never depends on the hint (lazyflow does not compare mask values to detect causality,
which would need a host sync).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from ..._core.errors import ShapeError
from ..._creation import full
from ..._tensor import Tensor
from .. import functional as F
from .. import init
from ..module import Module
from .container import ModuleList
from .conv import layer_shape_error
from .dropout import Dropout
from .linear import Linear
from .normalization import LayerNorm
from .transformer import MultiheadAttention, TransformerEncoder, TransformerEncoderLayer, _activation_fn

__all__ = ["TransformerDecoderLayer", "TransformerDecoder", "Transformer"]


class TransformerDecoderLayer(Module):
    """Self-attention, attention over ``memory`` and a feed-forward block, each with a residual and a LayerNorm.

    Args:
        d_model: model dimension; nhead: attention heads.
        dim_feedforward: hidden size of the feed-forward block.
        dropout: dropout after each block, inside the feed-forward block, and on attention weights.
        activation: ``"relu"``, ``"gelu"`` or a callable/module (default ``F.relu``).
        layer_norm_eps: LayerNorm eps.
        batch_first: ``(N, T, E)`` instead of ``(T, N, E)``.
        norm_first: pre-LayerNorm instead of post-LayerNorm.
        bias: biases in the linear layers, attention and LayerNorms.
    Raises:
        RuntimeError: an unknown activation string. ShapeError (on call): inputs whose last dim is not ``d_model``.
    """

    def __init__(
        self,
        d_model: int,
        nhead: int,
        dim_feedforward: int = 2048,
        dropout: float = 0.1,
        activation: str | Callable[[Tensor], Tensor] = F.relu,
        layer_norm_eps: float = 1e-5,
        batch_first: bool = False,
        norm_first: bool = False,
        bias: bool = True,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__()
        kw: dict[str, Any] = {"device": device, "dtype": dtype}
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, batch_first=batch_first, bias=bias, **kw)
        self.multihead_attn = MultiheadAttention(
            d_model, nhead, dropout=dropout, batch_first=batch_first, bias=bias, **kw
        )
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, **kw)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, **kw)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.norm3 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.dropout3 = Dropout(dropout)
        self.activation = _activation_fn(activation)

    def _check(self, name: str, t: Tensor) -> None:
        e = self.self_attn.embed_dim
        if not isinstance(t, Tensor):
            raise TypeError(f"{self._get_name()}: expected {name} to be a lazyflow Tensor, got {type(t).__name__}")
        if t.ndim not in (2, 3) or t.shape[-1] != e:
            raise layer_shape_error(self, f"(N, T, {e})" if self.self_attn.batch_first else f"(T, N, {e})", t)

    def forward(
        self,
        tgt: Tensor,
        memory: Tensor,
        tgt_mask: Tensor | None = None,
        memory_mask: Tensor | None = None,
        tgt_key_padding_mask: Tensor | None = None,
        memory_key_padding_mask: Tensor | None = None,
        tgt_is_causal: bool = False,
        memory_is_causal: bool = False,
    ) -> Tensor:
        """One decoder layer: ``tgt`` attends to itself (``tgt_mask``) and to ``memory`` (``memory_mask``).

        Args:
            tgt: ``(T, N, E)`` (``(N, T, E)`` with ``batch_first``) or unbatched ``(T, E)``.
            memory: the encoder output, ``(S, N, E)`` likewise.
            tgt_mask: ``(T, T)`` or ``(N*nhead, T, T)`` (bool True = not allowed, or float added).
            memory_mask: ``(T, S)`` or ``(N*nhead, T, S)``.
            tgt_key_padding_mask, memory_key_padding_mask: ``(N, T)`` / ``(N, S)``.
            tgt_is_causal, memory_is_causal: hints that the masks are causal.
        Returns:
            a tensor shaped like ``tgt``.
        """
        self._check("tgt", tgt)
        self._check("memory", memory)
        x = tgt
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), tgt_mask, tgt_key_padding_mask, tgt_is_causal)
            x = x + self._mha_block(self.norm2(x), memory, memory_mask, memory_key_padding_mask, memory_is_causal)
            x = x + self._ff_block(self.norm3(x))
        else:
            x = self.norm1(x + self._sa_block(x, tgt_mask, tgt_key_padding_mask, tgt_is_causal))
            x = self.norm2(x + self._mha_block(x, memory, memory_mask, memory_key_padding_mask, memory_is_causal))
            x = self.norm3(x + self._ff_block(x))
        return x

    def _sa_block(self, x: Tensor, attn_mask, key_padding_mask, is_causal: bool) -> Tensor:
        x = self.self_attn(
            x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask, is_causal=is_causal, need_weights=False
        )[0]
        return self.dropout1(x)

    def _mha_block(self, x: Tensor, mem: Tensor, attn_mask, key_padding_mask, is_causal: bool) -> Tensor:
        x = self.multihead_attn(
            x, mem, mem, attn_mask=attn_mask, key_padding_mask=key_padding_mask, is_causal=is_causal, need_weights=False
        )[0]
        return self.dropout2(x)

    def _ff_block(self, x: Tensor) -> Tensor:
        return self.dropout3(self.linear2(self.dropout(self.activation(self.linear1(x)))))


class TransformerDecoder(Module):
    """A stack of ``num_layers`` deep copies of ``decoder_layer`` and an optional final norm.

    Args:
        decoder_layer: the layer to clone (parameters copied, not shared).
        num_layers: how many layers.
        norm: applied to the output, or None.
    """

    def __init__(self, decoder_layer: TransformerDecoderLayer, num_layers: int, norm: Module | None = None) -> None:
        super().__init__()
        self.layers = ModuleList([copy.deepcopy(decoder_layer) for _ in range(num_layers)])
        self.num_layers = num_layers
        self.norm = norm

    def forward(
        self,
        tgt: Tensor,
        memory: Tensor,
        tgt_mask: Tensor | None = None,
        memory_mask: Tensor | None = None,
        tgt_key_padding_mask: Tensor | None = None,
        memory_key_padding_mask: Tensor | None = None,
        tgt_is_causal: bool | None = None,
        memory_is_causal: bool = False,
    ) -> Tensor:
        """Run every layer with the same ``memory`` and masks, then ``norm``; arguments as the layer's.

        ``tgt_is_causal=None`` is taken as False (torch would compare ``tgt_mask`` with the causal mask to
        choose a kernel; the numbers are the same either way since the mask is applied).
        """
        out = tgt
        for mod in self.layers:
            out = mod(
                out,
                memory,
                tgt_mask=tgt_mask,
                memory_mask=memory_mask,
                tgt_key_padding_mask=tgt_key_padding_mask,
                memory_key_padding_mask=memory_key_padding_mask,
                tgt_is_causal=bool(tgt_is_causal),
                memory_is_causal=memory_is_causal,
            )
        if self.norm is not None:
            out = self.norm(out)
        return out


class Transformer(Module):
    """torch's encoder-decoder Transformer (Vaswani et al. 2017): ``encoder`` and ``decoder`` stacks with final norms.

    Args:
        d_model, nhead, num_encoder_layers, num_decoder_layers, dim_feedforward, dropout, activation,
            layer_norm_eps, batch_first, norm_first, bias: as the layers (torch's defaults: 512, 8, 6, 6, 2048,
            0.1, relu, 1e-5, False, False, True).
        custom_encoder, custom_decoder: modules used instead of the default stacks.
    Every parameter with more than one dim is re-initialised with ``xavier_uniform_``, as in torch.
    Raises:
        ShapeError (on call): batch sizes of ``src`` and ``tgt`` differ, or a feature size is not ``d_model``.

    >>> model = lf.nn.Transformer(d_model=16, nhead=2, num_encoder_layers=1, num_decoder_layers=1)
    """

    def __init__(
        self,
        d_model: int = 512,
        nhead: int = 8,
        num_encoder_layers: int = 6,
        num_decoder_layers: int = 6,
        dim_feedforward: int = 2048,
        dropout: float = 0.1,
        activation: str | Callable[[Tensor], Tensor] = F.relu,
        custom_encoder: Any | None = None,
        custom_decoder: Any | None = None,
        layer_norm_eps: float = 1e-5,
        batch_first: bool = False,
        norm_first: bool = False,
        bias: bool = True,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__()
        kw: dict[str, Any] = {"device": device, "dtype": dtype}
        args = (d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps, batch_first, norm_first, bias)
        if custom_encoder is not None:
            self.encoder = custom_encoder
        else:
            norm = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
            self.encoder = TransformerEncoder(TransformerEncoderLayer(*args, **kw), num_encoder_layers, norm)
        if custom_decoder is not None:
            self.decoder = custom_decoder
        else:
            norm = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
            self.decoder = TransformerDecoder(TransformerDecoderLayer(*args, **kw), num_decoder_layers, norm)
        self._reset_parameters()
        self.d_model = d_model
        self.nhead = nhead
        self.batch_first = batch_first

    def _reset_parameters(self) -> None:
        for p in self.parameters():
            if p.dim() > 1:
                init.xavier_uniform_(p)

    def forward(
        self,
        src: Tensor,
        tgt: Tensor,
        src_mask: Tensor | None = None,
        tgt_mask: Tensor | None = None,
        memory_mask: Tensor | None = None,
        src_key_padding_mask: Tensor | None = None,
        tgt_key_padding_mask: Tensor | None = None,
        memory_key_padding_mask: Tensor | None = None,
        src_is_causal: bool | None = None,
        tgt_is_causal: bool | None = None,
        memory_is_causal: bool = False,
    ) -> Tensor:
        """Encode ``src`` and decode ``tgt`` against it.

        Args:
            src: ``(S, N, E)`` (``(N, S, E)`` with ``batch_first``) or unbatched ``(S, E)``.
            tgt: ``(T, N, E)`` likewise.
            src_mask, tgt_mask, memory_mask: ``(S, S)``, ``(T, T)``, ``(T, S)`` masks (or per batch*head).
            src_key_padding_mask, tgt_key_padding_mask, memory_key_padding_mask: ``(N, S)``, ``(N, T)``, ``(N, S)``.
            src_is_causal, tgt_is_causal, memory_is_causal: causality hints.
        Returns:
            ``(T, N, E)`` (layout as ``tgt``).
        """
        for name, t in (("src", src), ("tgt", tgt)):
            if not isinstance(t, Tensor):
                raise TypeError(f"Transformer: expected {name} to be a lazyflow Tensor, got {type(t).__name__}")
        if src.ndim == 3 and tgt.ndim == 3:
            b = 0 if self.batch_first else 1
            if src.shape[b] != tgt.shape[b]:
                raise ShapeError(
                    f"Transformer: the batch number of src and tgt must be equal, got src of shape "
                    f"{list(src.shape)} and tgt of shape {list(tgt.shape)} (batch_first={self.batch_first})"
                )
        if src.shape[-1] != self.d_model or tgt.shape[-1] != self.d_model:
            raise ShapeError(
                f"Transformer: the feature number of src and tgt must be equal to d_model={self.d_model}, got src "
                f"of shape {list(src.shape)} and tgt of shape {list(tgt.shape)}"
            )
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask, is_causal=src_is_causal)
        return self.decoder(
            tgt,
            memory,
            tgt_mask=tgt_mask,
            memory_mask=memory_mask,
            tgt_key_padding_mask=tgt_key_padding_mask,
            memory_key_padding_mask=memory_key_padding_mask,
            tgt_is_causal=tgt_is_causal,
            memory_is_causal=memory_is_causal,
        )

    @staticmethod
    def generate_square_subsequent_mask(sz: int, device=None, dtype=None) -> Tensor:
        """The ``(sz, sz)`` causal mask: ``-inf`` above the diagonal, ``0`` on and below it (float)."""
        return full((sz, sz), float("-inf"), dtype=dtype, device=device).triu(diagonal=1)
