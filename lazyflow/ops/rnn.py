"""Recurrent primitives: a whole multi-layer RNN/LSTM/GRU stack (``rnn``) and one cell step (``rnn_cell``).

The time loop is a ``lax.scan`` inside the implementation, so an eager call is one kernel whatever the sequence
length, graph mode traces the same op, and the backward is ``jax.vjp`` of the scan (one kernel too). Weights are
torch's flat list, layer by layer and direction by direction: ``w_ih, w_hh[, b_ih, b_hh][, w_hr]`` with torch's
gate order (LSTM ``i, f, g, o``; GRU ``r, z, n``).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

from .random import key_of
from .table import op

MODES = ("RNN_TANH", "RNN_RELU", "LSTM", "GRU")


def _gates_out(mode, gi, h, c, w_hh, b_hh, w_hr):
    """One step from the input projection ``gi = x W_ih^T + b_ih`` and the state ``(h, c)``: the new ``(h, c)``."""
    gh = h @ w_hh.T
    if b_hh is not None:
        gh = gh + b_hh
    if mode == "RNN_TANH":
        return jnp.tanh(gi + gh), c
    if mode == "RNN_RELU":
        return jax.nn.relu(gi + gh), c
    if mode == "LSTM":
        i, f, g, o = jnp.split(gi + gh, 4, axis=-1)
        c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
        h = jax.nn.sigmoid(o) * jnp.tanh(c)
        if w_hr is not None:
            h = h @ w_hr.T
        return h, c
    # GRU: torch's n = tanh(W_in x + b_in + r * (W_hn h + b_hn))
    ir, iz, i_n = jnp.split(gi, 3, axis=-1)
    hr, hz, hn = jnp.split(gh, 3, axis=-1)
    r = jax.nn.sigmoid(ir + hr)
    z = jax.nn.sigmoid(iz + hz)
    n = jnp.tanh(i_n + r * hn)
    return (1 - z) * n + z * h, c


def _project(x, w_ih, b_ih):
    gi = jnp.einsum("...i,gi->...g", x, w_ih)
    return gi if b_ih is None else gi + b_ih


def _direction(mode, x, h0, c0, w, reverse):
    """One layer in one direction over time-major ``x`` ``(T, N, I)``: outputs ``(T, N, H_out)`` and the last state."""
    w_ih, w_hh, b_ih, b_hh, w_hr = w
    gi = _project(x, w_ih, b_ih)  # every step's input projection as one matmul, outside the loop

    def step(carry, g):
        h, c = _gates_out(mode, g, carry[0], carry[1], w_hh, b_hh, w_hr)
        return (h, c), h

    (h, c), ys = lax.scan(step, (h0, c0), gi, reverse=reverse)
    return ys, h, c


def _unflatten(weights, num_layers, dirs, has_bias, proj):
    per = 2 + 2 * has_bias + proj
    out = []
    for k in range(num_layers * dirs):
        w = list(weights[k * per : (k + 1) * per])
        w_ih, w_hh = w[0], w[1]
        b_ih, b_hh = (w[2], w[3]) if has_bias else (None, None)
        w_hr = w[-1] if proj else None
        out.append((w_ih, w_hh, b_ih, b_hh, w_hr))
    return out


def layers(mode, x, hx, cx, weights, num_layers, bidirectional, has_bias, proj, dropout, seed, offset, direction):
    """The layer/direction stack shared by ``rnn`` and ``rnn_packed`` on time-major ``x`` ``(T, N, I)``:
    ``direction(mode, x, h0, c0, w, reverse) -> (y, h, c)`` runs one direction of one layer; dropout between layers
    with a mask per layer from ``(seed, offset)``. Returns ``(output, h_n, c_n or None)``."""
    dirs = 2 if bidirectional else 1
    ws = _unflatten(weights, num_layers, dirs, has_bias, proj)
    lstm = mode == "LSTM"
    w_hh = ws[0][1]
    if hx is None:
        hx = jnp.zeros((num_layers * dirs, x.shape[1], w_hh.shape[1]), x.dtype)
    if cx is None and lstm:
        cx = jnp.zeros((num_layers * dirs, x.shape[1], w_hh.shape[0] // 4), x.dtype)
    hs, cs = [], []
    for layer in range(num_layers):
        if layer and dropout > 0.0:
            key = jax.random.fold_in(key_of(seed, offset), layer)
            keep = jax.random.bernoulli(key, 1.0 - dropout, x.shape)
            x = jnp.where(keep, x / jnp.asarray(1.0 - dropout, x.dtype), jnp.zeros((), x.dtype))
        ys = []
        for d in range(dirs):
            k = layer * dirs + d
            y, h, c = direction(mode, x, hx[k], None if cx is None else cx[k], ws[k], d == 1)
            ys.append(y)
            hs.append(h)
            cs.append(c)
        x = ys[0] if dirs == 1 else jnp.concatenate(ys, axis=-1)
    return x, jnp.stack(hs), (jnp.stack(cs) if lstm else None)


@op(
    "rnn",
    static=("mode", "num_layers", "bidirectional", "batch_first", "batched", "has_bias", "proj", "dropout"),
    dtypes="none",
)
def _rnn(
    x, hx, cx, seed, offset, *weights, mode, num_layers, bidirectional, batch_first, batched, has_bias, proj, dropout
):
    """torch's ``_VF.rnn_tanh/rnn_relu/lstm/gru`` on a padded sequence.

    ``x`` is ``(T, N, I)`` (``(N, T, I)`` with ``batch_first``; ``(T, I)`` unless ``batched``), ``hx``
    ``(L*D, N, H_out)`` and ``cx`` ``(L*D, N, H)`` (LSTM only), without the ``N`` axis unless ``batched``; None
    means zeros. ``dropout`` (already 0 outside training) zeroes each layer's output but the last's, with a mask
    drawn from ``(seed, offset)``. Returns ``(output, h_n)``, and ``c_n`` for LSTM.
    """
    if not batched:
        x = x[:, None]
        hx = None if hx is None else hx[:, None]
        cx = None if cx is None else cx[:, None]
    elif batch_first:
        x = jnp.swapaxes(x, 0, 1)
    x, h_n, c_n = layers(
        mode, x, hx, cx, weights, num_layers, bidirectional, has_bias, proj, dropout, seed, offset, _direction
    )
    if not batched:
        x, h_n = x[:, 0], h_n[:, 0]
        c_n = None if c_n is None else c_n[:, 0]
    elif batch_first:
        x = jnp.swapaxes(x, 0, 1)
    return (x, h_n) if c_n is None else (x, h_n, c_n)


@op("rnn_cell", static=("mode",), dtypes="none")
def _rnn_cell(x, hx, cx, w_ih, w_hh, b_ih, b_hh, *, mode):
    """torch's ``_VF.rnn_tanh_cell/rnn_relu_cell/lstm_cell/gru_cell``: one step on ``(N, I)`` from ``hx``/``cx``
    ``(N, H)`` (None: zeros); returns ``h'`` (and ``c'`` for LSTM)."""
    if hx is None:
        hx = jnp.zeros((x.shape[0], w_hh.shape[1]), x.dtype)
    if cx is None and mode == "LSTM":
        cx = jnp.zeros((x.shape[0], w_hh.shape[1]), x.dtype)
    h, c = _gates_out(mode, _project(x, w_ih, b_ih), hx, cx, w_hh, b_hh, None)
    return h if mode != "LSTM" else (h, c)
