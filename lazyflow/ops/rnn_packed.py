"""``rnn_packed``: the multi-layer RNN/LSTM/GRU stack of ``rnn`` over a padded batch with per-sample lengths (what
``nn.utils.rnn.PackedSequence`` carries).

Each step past a sample's length leaves that sample's state unchanged and outputs zeros, so the forward direction
ends on the last valid step and the reverse direction (scanning from the end) starts from the initial state at the
sample's last valid step: torch's packed semantics, as one ``lax.scan`` per layer and direction.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

from .random import key_of
from .rnn import _gates_out, _project, _unflatten
from .table import op


def _masked_direction(mode, x, lengths, h0, c0, w, reverse):
    w_ih, w_hh, b_ih, b_hh, w_hr = w
    gi = _project(x, w_ih, b_ih)
    steps = jnp.arange(x.shape[0])

    def step(carry, inp):
        g, t = inp
        h, c = _gates_out(mode, g, carry[0], carry[1], w_hh, b_hh, w_hr)
        valid = (t < lengths)[:, None]
        h = jnp.where(valid, h, carry[0])
        if c is not None:
            c = jnp.where(valid, c, carry[1])
        return (h, c), jnp.where(valid, h, jnp.zeros((), h.dtype))

    (h, c), ys = lax.scan(step, (h0, c0), (gi, steps), reverse=reverse)
    return ys, h, c


@op(
    "rnn_packed",
    static=("mode", "num_layers", "bidirectional", "has_bias", "proj", "dropout"),
    dtypes="none",
)
def _rnn_packed(x, lengths, hx, cx, seed, offset, *weights, mode, num_layers, bidirectional, has_bias, proj, dropout):
    """``rnn`` on time-major padded ``x`` ``(T, N, I)`` whose sample ``n`` has ``lengths[n]`` valid steps.

    Returns ``(output, h_n)`` (and ``c_n`` for LSTM): ``output`` ``(T, N, D * H_out)`` is zero past each length,
    ``h_n``/``c_n`` hold each sample's state at its own last step.
    """
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
            y, h, c = _masked_direction(mode, x, lengths, hx[k], None if cx is None else cx[k], ws[k], d == 1)
            ys.append(y)
            hs.append(h)
            cs.append(c)
        x = ys[0] if dirs == 1 else jnp.concatenate(ys, axis=-1)
    h_n = jnp.stack(hs)
    return (x, h_n) if not lstm else (x, h_n, jnp.stack(cs))
