"""RNN, LSTM, GRU and their cells with torch's constructors, parameter names, gate order, init and forward contracts.

A layer's whole forward (every layer and direction, the time loop as a ``lax.scan``, dropout between layers) is one
``rnn`` primitive of ``lazyflow.ops.rnn``, so an eager call is one kernel whatever the sequence length and its
backward is another; a cell's step is one ``rnn_cell`` primitive. ``state_dict`` keys and shapes equal torch's
(``weight_ih_l0``, ``weight_hh_l0``, ``bias_ih_l0``, ``bias_hh_l0``, ``..._reverse``, ``weight_hr_l0``), so a torch
model's weights load and give torch's numbers.

A ``PackedSequence`` (``nn.utils.rnn.pack_padded_sequence``) runs as one ``rnn_packed`` primitive (the same scan
with a per-sample length mask) and comes back packed, with ``h_n``/``c_n`` at each sample's own last step, as
torch's. Anything else but a Tensor raises ``ArgumentError``.
"""

from __future__ import annotations

import math
import numbers
import warnings
from typing import Any

from ..._core.context import state
from ..._core.errors import ArgumentError, DTypeError, OpError, ShapeError
from ..._creation import _gen, empty
from ..._tensor import Tensor
from ...ops.table import REGISTRY as R
from .. import init
from .._packed import PackedSequence, check_packed, int64, lengths_of, pack_sorted, unpack_sorted
from ..module import Module
from ..parameter import Parameter

__all__ = ["RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell"]

_RNN = R["rnn"]
_CELL = R["rnn_cell"]
_GATES = {"LSTM": 4, "GRU": 3, "RNN_TANH": 1, "RNN_RELU": 1}
_RNN_PACKED = R["rnn_packed"]
_PACKED = (
    "a lazyflow Tensor or lazyflow PackedSequence is expected (pack with lf.nn.utils.rnn.pack_padded_sequence or "
    "pack_sequence)"
)


def _check_tensor(layer: Module, what: str, t) -> None:
    if what == "input" and isinstance(t, PackedSequence):
        return
    if not isinstance(t, Tensor):
        extra = f" ({_PACKED})" if what == "input" else ""
        raise ArgumentError(
            f"{layer._get_name()}: expected {what} to be a lazyflow Tensor, got {type(t).__name__}{extra}"
        )


class RNNBase(Module):
    """The shared base of :class:`RNN`, :class:`LSTM` and :class:`GRU` (torch's ``nn.RNNBase``).

    Args:
        mode: ``"RNN_TANH"``, ``"RNN_RELU"``, ``"LSTM"`` or ``"GRU"``.
        input_size, hidden_size: features of the input and of the hidden state.
        num_layers: stacked recurrent layers.
        bias: learn ``bias_ih``/``bias_hh``.
        batch_first: batched input and output are ``(N, L, H)`` instead of ``(L, N, H)`` (not the states).
        dropout: dropout on every layer's output but the last's, in training mode.
        bidirectional: also run each layer backwards in time; outputs are concatenated.
        proj_size: LSTM only: project ``h`` to this size with ``weight_hr_l{k}``.
        device, dtype: where and in which floating dtype to create the parameters.
    Raises:
        ValueError: a dropout outside [0, 1], non-positive sizes, ``proj_size`` negative or ``>= hidden_size``,
            an unknown mode. TypeError: ``bias``/``batch_first`` not bool, sizes not int.
    """

    def __init__(
        self,
        mode: str,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        bias: bool = True,
        batch_first: bool = False,
        dropout: float = 0.0,
        bidirectional: bool = False,
        proj_size: int = 0,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__()
        if not isinstance(dropout, numbers.Number) or isinstance(dropout, bool) or not 0 <= dropout <= 1:
            raise ValueError(
                f"dropout should be a number in range [0, 1] representing the probability of an element being "
                f"zeroed, got {dropout!r}"
            )
        if dropout > 0 and num_layers == 1:
            warnings.warn(
                "dropout option adds dropout after all but last recurrent layer, so non-zero dropout expects "
                f"num_layers greater than 1, but got dropout={dropout} and num_layers={num_layers}",
                stacklevel=2,
            )
        for name, v in (("bias", bias), ("batch_first", batch_first)):
            if not isinstance(v, bool):
                raise TypeError(f"{name} should be of type bool, got: {type(v).__name__}")
        for name, v in (("input_size", input_size), ("hidden_size", hidden_size)):
            if not isinstance(v, int):
                raise TypeError(f"{name} should be of type int, got: {type(v).__name__}")
            if v <= 0:
                raise ValueError(f"{name} must be greater than zero, got {v}")
        if num_layers <= 0:
            raise ValueError(f"num_layers must be greater than zero, got {num_layers}")
        if proj_size < 0:
            raise ValueError(f"proj_size should be a positive integer or zero to disable projections, got {proj_size}")
        if proj_size >= hidden_size:
            raise ValueError(
                f"proj_size has to be smaller than hidden_size, got proj_size={proj_size} >= {hidden_size}"
            )
        if mode not in _GATES:
            raise ValueError(f"Unrecognized RNN mode: {mode}")
        self.mode = mode
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.bias = bias
        self.batch_first = batch_first
        self.dropout = float(dropout)
        self.bidirectional = bidirectional
        self.proj_size = proj_size
        dirs = 2 if bidirectional else 1
        gate = _GATES[mode] * hidden_size
        real = proj_size if proj_size > 0 else hidden_size
        kw: dict[str, Any] = {"device": device, "dtype": dtype}
        self._flat_weights_names: list[str] = []
        self._all_weights: list[list[str]] = []
        for layer in range(num_layers):
            for d in range(dirs):
                shapes = [(gate, input_size if layer == 0 else real * dirs), (gate, real)]
                names = ["weight_ih_l{}{}", "weight_hh_l{}{}"]
                if bias:
                    shapes += [(gate,), (gate,)]
                    names += ["bias_ih_l{}{}", "bias_hh_l{}{}"]
                if proj_size > 0:
                    shapes.append((proj_size, hidden_size))
                    names.append("weight_hr_l{}{}")
                names = [n.format(layer, "_reverse" if d else "") for n in names]
                for n, s in zip(names, shapes):
                    setattr(self, n, Parameter(empty(s, **kw)))
                self._flat_weights_names.extend(names)
                self._all_weights.append(names)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Every weight and bias from U(-1/sqrt(hidden_size), 1/sqrt(hidden_size)), as torch."""
        stdv = 1.0 / math.sqrt(self.hidden_size)
        for w in self.parameters():
            init.uniform_(w, -stdv, stdv)

    def flatten_parameters(self) -> None:
        """A no-op (torch packs weights for cuDNN here; XLA needs no packed buffer)."""

    @property
    def _flat_weights(self) -> list[Tensor]:
        return [getattr(self, n) for n in self._flat_weights_names]

    @property
    def all_weights(self) -> list[list[Parameter]]:
        """The parameters per layer and direction, in torch's order."""
        return [[getattr(self, n) for n in names] for names in self._all_weights]

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size != 0:
            s += f", proj_size={self.proj_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if self.batch_first is not False:
            s += f", batch_first={self.batch_first}"
        if self.dropout != 0:
            s += f", dropout={self.dropout}"
        if self.bidirectional is not False:
            s += f", bidirectional={self.bidirectional}"
        return s

    def _run_packed(self, packed: PackedSequence, hx: Tensor | None, cx: Tensor | None) -> Any:
        """One ``rnn_packed`` op over the padded, length-sorted batch: ``(packed output, h_n[, c_n])``."""
        name = type(self).__name__
        bs = check_packed(packed)
        data = packed.data
        if data.ndim != 2 or data.shape[-1] != self.input_size:
            raise ShapeError(
                f"{name}: expected PackedSequence data of shape (sum(lengths), {self.input_size}), got "
                f"{list(data.shape)}"
            )
        w = self._flat_weights
        if data.dtype is not w[0].dtype:
            raise DTypeError(f"{name}: input dtype ({data.dtype}) does not match weight dtype ({w[0].dtype})")
        n = int(bs[0]) if bs.size else 0
        dirs = 2 if self.bidirectional else 1
        real = self.proj_size if self.proj_size > 0 else self.hidden_size
        states = [] if hx is None else [("hx" if cx is None else "hx[0]", hx, real)]
        if cx is not None:
            states.append(("hx[1]", cx, self.hidden_size))
        for what, t, size in states:
            _check_tensor(self, what, t)
            want = (self.num_layers * dirs, n, size)
            if tuple(t.shape) != want:
                raise ShapeError(f"{name}: Expected hidden size {want}, got {list(t.shape)}")
        if packed.sorted_indices is not None:
            hx = None if hx is None else hx.index_select(1, packed.sorted_indices)
            cx = None if cx is None else cx.index_select(1, packed.sorted_indices)
        padded = unpack_sorted(data, bs, bs.size, 0.0)
        lengths = int64(lengths_of(bs))
        p = self.dropout if self.training and self.num_layers > 1 else 0.0
        seed, offset = _gen(None)._next() if p > 0.0 else (None, None)
        statics = (self.mode, self.num_layers, self.bidirectional, self.bias, self.proj_size > 0, p)
        res = state.interp.apply(_RNN_PACKED, (padded, lengths, hx, cx, seed, offset, *w), statics)
        out = PackedSequence(
            pack_sorted(res[0], bs), packed.batch_sizes, packed.sorted_indices, packed.unsorted_indices
        )
        finals = [
            t.index_select(1, packed.unsorted_indices) if packed.unsorted_indices is not None else t for t in res[1:]
        ]
        return (out, *finals)

    def _run(self, input: Tensor | PackedSequence, hx: Tensor | None, cx: Tensor | None) -> Any:
        """Validate like torch, then one ``rnn`` op: ``(output, h_n)`` or ``(output, h_n, c_n)``."""
        name = type(self).__name__
        _check_tensor(self, "input", input)
        if isinstance(input, PackedSequence):
            return self._run_packed(input, hx, cx)
        if input.ndim not in (2, 3):
            raise ShapeError(f"{name}: Expected input to be 2D or 3D, got {input.ndim}D tensor instead")
        batched = input.ndim == 3
        states = [("hx", hx)] if cx is None else [("hx[0]", hx), ("hx[1]", cx)]
        for what, t in states:
            if t is None:
                continue
            _check_tensor(self, what, t)
            if t.ndim != input.ndim:
                raise ShapeError(
                    f"{name}: for {'batched 3-D' if batched else 'unbatched 2-D'} input, {what} should also be "
                    f"{input.ndim}-D but got {t.ndim}-D tensor"
                )
        w = self._flat_weights
        if input.dtype is not w[0].dtype:
            raise DTypeError(
                f"{name}: input dtype ({input.dtype}) does not match weight dtype ({w[0].dtype}). Convert input: "
                f"input.to({w[0].dtype}), or convert model: model.to({input.dtype})"
            )
        if input.shape[-1] != self.input_size:
            raise ShapeError(
                f"{name}: input.size(-1) must be equal to input_size. Expected {self.input_size}, got {input.shape[-1]}"
            )
        if input.shape[1 if batched and self.batch_first else 0] == 0:
            raise ShapeError(
                f"{name}: Expected sequence length to be larger than 0 in RNN, got input of shape {list(input.shape)}"
            )
        dirs = 2 if self.bidirectional else 1
        lead = (self.num_layers * dirs,) + ((input.shape[0 if self.batch_first else 1],) if batched else ())
        real = self.proj_size if self.proj_size > 0 else self.hidden_size
        for i, (what, t) in enumerate(states):
            want = lead + (real if i == 0 else self.hidden_size,)
            if t is not None and tuple(t.shape) != want:
                shown = want if batched else (want[0], 1, want[1])
                got = list(t.shape) if batched else [t.shape[0], 1, *t.shape[1:]]
                raise ShapeError(f"{name}: Expected hidden{'' if cx is None else f'[{i}]'} size {shown}, got {got}")
            if t is not None and t.dtype is not input.dtype:
                raise DTypeError(f"{name}: expected {what} of dtype {input.dtype}, got {t.dtype}")
        p = self.dropout if self.training and self.num_layers > 1 else 0.0
        seed, offset = _gen(None)._next() if p > 0.0 else (None, None)
        statics = (
            self.mode,
            self.num_layers,
            self.bidirectional,
            self.batch_first,
            batched,
            self.bias,
            self.proj_size > 0,
            p,
        )
        return state.interp.apply(_RNN, (input, hx, cx, seed, offset, *w), statics)


class RNN(RNNBase):
    """Elman RNN: ``h_t = tanh(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh)`` (or ReLU), torch's ``nn.RNN``.

    Args:
        input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional, device, dtype: as
            :class:`RNNBase`.
        nonlinearity: ``"tanh"`` or ``"relu"``.
    Attributes:
        weight_ih_l{k}: ``(hidden_size, input_size)`` for k = 0, else ``(hidden_size, D * hidden_size)``;
        weight_hh_l{k}: ``(hidden_size, hidden_size)``; bias_ih_l{k}, bias_hh_l{k}: ``(hidden_size,)``;
        ``..._reverse`` for the backward direction. All from U(-1/sqrt(hidden_size), 1/sqrt(hidden_size)).
    Raises:
        ValueError: an unknown ``nonlinearity``, ``proj_size`` given, or RNNBase's errors.
    >>> rnn = lf.nn.RNN(10, 20, 2)
    >>> output, h_n = rnn(lf.randn(5, 3, 10), lf.randn(2, 3, 20))
    >>> output.shape, h_n.shape
    ((5, 3, 20), (2, 3, 20))
    """

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        nonlinearity: str = "tanh",
        bias: bool = True,
        batch_first: bool = False,
        dropout: float = 0.0,
        bidirectional: bool = False,
        device=None,
        dtype=None,
    ) -> None:
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or 'relu'.")
        self.nonlinearity = nonlinearity
        mode = "RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU"
        super().__init__(
            mode, input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional, 0, device, dtype
        )

    def forward(self, input: Tensor | PackedSequence, hx: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """Run over the sequence.

        Args:
            input: ``(L, N, input_size)`` (``(N, L, input_size)`` with ``batch_first``), unbatched
                ``(L, input_size)``, or a PackedSequence (then ``output`` is one too).
            hx: initial state ``(D * num_layers, N, hidden_size)`` (``(D * num_layers, hidden_size)`` unbatched);
                zeros if None.
        Returns:
            ``(output, h_n)``: every step's last-layer state ``(L, N, D * hidden_size)`` and the final states.
        Raises:
            ShapeError: input not 2-D/3-D, a wrong feature size or state shape. DTypeError: input dtype differs
            from the weights'. ArgumentError: input neither a Tensor nor a lazyflow PackedSequence.
        """
        return self._run(input, hx, None)


class LSTM(RNNBase):
    """Long short-term memory, torch's ``nn.LSTM`` (gates ``i, f, g, o``; optional projection ``proj_size``).

    Args:
        input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional, device, dtype: as
            :class:`RNNBase`.
        proj_size: if > 0, ``h_t = (o * tanh(c_t)) W_hr^T`` of size ``proj_size``.
    Attributes:
        weight_ih_l{k}: ``(4 * hidden_size, input_size or D * H_out)``; weight_hh_l{k}: ``(4 * hidden_size, H_out)``;
        bias_ih_l{k}, bias_hh_l{k}: ``(4 * hidden_size,)``; weight_hr_l{k}: ``(proj_size, hidden_size)``.
    >>> lstm = lf.nn.LSTM(10, 20, 2)
    >>> output, (h_n, c_n) = lstm(lf.randn(5, 3, 10))
    >>> output.shape, h_n.shape, c_n.shape
    ((5, 3, 20), (2, 3, 20), (2, 3, 20))
    """

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        bias: bool = True,
        batch_first: bool = False,
        dropout: float = 0.0,
        bidirectional: bool = False,
        proj_size: int = 0,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__(
            "LSTM",
            input_size,
            hidden_size,
            num_layers,
            bias,
            batch_first,
            dropout,
            bidirectional,
            proj_size,
            device,
            dtype,
        )

    def forward(
        self, input: Tensor | PackedSequence, hx: tuple[Tensor, Tensor] | None = None
    ) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        """Run over the sequence.

        Args:
            input: ``(L, N, input_size)`` (``(N, L, input_size)`` with ``batch_first``) or unbatched
                ``(L, input_size)``.
            hx: ``(h_0, c_0)``: ``(D * num_layers, N, H_out)`` and ``(D * num_layers, N, hidden_size)`` (no ``N``
                unbatched); zeros if None.
        Returns:
            ``(output, (h_n, c_n))``; ``output`` is ``(L, N, D * H_out)`` with ``H_out = proj_size or hidden_size``.
        Raises:
            ShapeError: input not 2-D/3-D, a wrong feature size or state shape. DTypeError: input dtype differs
            from the weights'. ArgumentError: input neither a Tensor nor a
            lazyflow PackedSequence, or hx not a pair.
        """
        h0 = c0 = None
        if hx is not None:
            if not isinstance(hx, (tuple, list)) or len(hx) != 2:
                raise ArgumentError(f"LSTM: expected hx to be a tuple (h_0, c_0), got {type(hx).__name__}")
            h0, c0 = hx
            _check_tensor(self, "hx[1]", c0)
        out, h, c = self._run(input, h0, c0) if c0 is not None else self._run(input, None, None)
        return out, (h, c)


class GRU(RNNBase):
    """Gated recurrent unit, torch's ``nn.GRU`` (gates ``r, z, n``; ``n = tanh(W_in x + b_in + r * (W_hn h + b_hn))``).

    Args:
        input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional, device, dtype: as
            :class:`RNNBase`.
    Attributes:
        weight_ih_l{k}: ``(3 * hidden_size, input_size or D * hidden_size)``; weight_hh_l{k}:
        ``(3 * hidden_size, hidden_size)``; bias_ih_l{k}, bias_hh_l{k}: ``(3 * hidden_size,)``.
    >>> gru = lf.nn.GRU(10, 20, 2)
    >>> output, h_n = gru(lf.randn(5, 3, 10))
    """

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        bias: bool = True,
        batch_first: bool = False,
        dropout: float = 0.0,
        bidirectional: bool = False,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__(
            "GRU", input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional, 0, device, dtype
        )

    def forward(self, input: Tensor | PackedSequence, hx: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """Run over the sequence; arguments, results and errors as :meth:`RNN.forward`."""
        return self._run(input, hx, None)


class RNNCellBase(Module):
    """The shared base of the cells (torch's ``nn.RNNCellBase``): ``weight_ih`` ``(chunks * H, input_size)``,
    ``weight_hh`` ``(chunks * H, H)``, ``bias_ih``/``bias_hh`` ``(chunks * H,)`` (None without ``bias``), all from
    U(-1/sqrt(hidden_size), 1/sqrt(hidden_size))."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool, num_chunks: int, device=None, dtype=None) -> None:
        super().__init__()
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.bias = bias
        kw: dict[str, Any] = {"device": device, "dtype": dtype}
        self.weight_ih = Parameter(empty((num_chunks * hidden_size, input_size), **kw))
        self.weight_hh = Parameter(empty((num_chunks * hidden_size, hidden_size), **kw))
        if bias:
            self.bias_ih = Parameter(empty(num_chunks * hidden_size, **kw))
            self.bias_hh = Parameter(empty(num_chunks * hidden_size, **kw))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Every weight and bias from U(-1/sqrt(hidden_size), 1/sqrt(hidden_size)), as torch."""
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for w in self.parameters():
            init.uniform_(w, -stdv, stdv)

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        nl = getattr(self, "nonlinearity", "tanh")
        if nl != "tanh":
            s += f", nonlinearity={nl}"
        return s

    def _step(self, mode: str, input: Tensor, states: list[tuple[str, Tensor | None]]) -> Any:
        name = type(self).__name__
        _check_tensor(self, "input", input)
        if input.ndim not in (1, 2):
            raise ShapeError(f"{name}: Expected input to be 1D or 2D, got {input.ndim}D instead")
        batched = input.ndim == 2
        for what, t in states:
            if t is None:
                continue
            _check_tensor(self, what, t)
            if t.ndim not in (1, 2):
                raise ShapeError(f"{name}: Expected {what} to be 1D or 2D, got {t.ndim}D instead")
        if input.dtype is not self.weight_ih.dtype:
            raise DTypeError(
                f"{name}: input dtype ({input.dtype}) does not match weight dtype ({self.weight_ih.dtype})"
            )
        if input.shape[-1] != self.input_size:
            raise ShapeError(
                f"{name}: input has inconsistent input_size: got {input.shape[-1]} expected {self.input_size}"
            )
        if not batched:
            input = input.unsqueeze(0)
        vals: list[Tensor | None] = []
        for what, t in states:
            if t is not None:
                if t.ndim != input.ndim - (0 if batched else 1) or tuple(t.shape[-1:]) != (self.hidden_size,):
                    want = [input.shape[0], self.hidden_size] if batched else [self.hidden_size]
                    raise ShapeError(f"{name}: expected {what} of shape {want}, got {list(t.shape)}")
                if batched and t.shape[0] != input.shape[0]:
                    raise ShapeError(
                        f"{name}: Input batch size {input.shape[0]} doesn't match {what} batch size {t.shape[0]}"
                    )
                if t.dtype is not input.dtype:
                    raise DTypeError(f"{name}: expected {what} of dtype {input.dtype}, got {t.dtype}")
                t = t if batched else t.unsqueeze(0)
            vals.append(t)
        hx, cx = (vals + [None])[:2]
        out = state.interp.apply(
            _CELL, (input, hx, cx, self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh), (mode,)
        )
        if batched:
            return out
        return tuple(o.squeeze(0) for o in out) if isinstance(out, tuple) else out.squeeze(0)


class RNNCell(RNNCellBase):
    """One Elman RNN step ``h' = tanh(x W_ih^T + b_ih + h W_hh^T + b_hh)`` (or ReLU), torch's ``nn.RNNCell``.

    Args:
        input_size, hidden_size: features of the input and the state.
        bias: learn ``bias_ih``/``bias_hh``.
        nonlinearity: ``"tanh"`` or ``"relu"`` (another value raises RuntimeError on call, as in torch).
    >>> cell = lf.nn.RNNCell(10, 20)
    >>> cell(lf.randn(3, 10)).shape
    (3, 20)
    """

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        bias: bool = True,
        nonlinearity: str = "tanh",
        device=None,
        dtype=None,
    ) -> None:
        super().__init__(input_size, hidden_size, bias, 1, device, dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:
        """One step from ``input`` ``(N, input_size)`` or ``(input_size,)`` and ``hx`` (zeros if None).

        Raises:
            ShapeError: wrong ranks, feature or batch sizes. OpError (a RuntimeError): an unknown nonlinearity.
        """
        if self.nonlinearity not in ("tanh", "relu"):
            raise OpError(f"Unknown nonlinearity: {self.nonlinearity!r}. Select from 'tanh' or 'relu'.")
        mode = "RNN_TANH" if self.nonlinearity == "tanh" else "RNN_RELU"
        return self._step(mode, input, [("hidden", hx)])


class LSTMCell(RNNCellBase):
    """One LSTM step (gates ``i, f, g, o``), torch's ``nn.LSTMCell``: ``forward(input, (h, c)) -> (h', c')``.

    >>> cell = lf.nn.LSTMCell(10, 20)
    >>> h, c = cell(lf.randn(3, 10))
    """

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None, dtype=None) -> None:
        super().__init__(input_size, hidden_size, bias, 4, device, dtype)

    def forward(self, input: Tensor, hx: tuple[Tensor, Tensor] | None = None) -> tuple[Tensor, Tensor]:
        """One step from ``input`` ``(N, input_size)`` or ``(input_size,)`` and ``hx = (h, c)`` (zeros if None).

        Raises:
            ShapeError: wrong ranks, feature or batch sizes. ArgumentError: hx not a pair.
        """
        h = c = None
        if hx is not None:
            if not isinstance(hx, (tuple, list)) or len(hx) != 2:
                raise ArgumentError(f"LSTMCell: expected hx to be a tuple (h, c), got {type(hx).__name__}")
            h, c = hx
        return self._step("LSTM", input, [("hx[0]", h), ("hx[1]", c)])


class GRUCell(RNNCellBase):
    """One GRU step (gates ``r, z, n``), torch's ``nn.GRUCell``.

    >>> cell = lf.nn.GRUCell(10, 20)
    >>> cell(lf.randn(3, 10)).shape
    (3, 20)
    """

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None, dtype=None) -> None:
        super().__init__(input_size, hidden_size, bias, 3, device, dtype)

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:
        """One step from ``input`` ``(N, input_size)`` or ``(input_size,)`` and ``hx`` (zeros if None)."""
        return self._step("GRU", input, [("hidden", hx)])
