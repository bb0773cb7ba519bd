"""``rnn_packed``: the multi-layer RNN/LSTM/GRU stack of ``rnn`` over a padded batch with per-sample lengths (what
``nn.utils.rnn.PackedSequence`` carries).

Each step past a sample's length leaves that sample's state unchanged and outputs zeros, so the forward direction
ends on the last valid step and the reverse direction (scanning from the end) starts from the initial state at the
sample's last valid step: torch's packed semantics, as one ``lax.scan`` per layer and direction.
"""

from __future__ import annotations

import jax.numpy as jnp
from jax import lax

from .rnn import _gates_out, _project, layers
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

    def direction(mode, x, h0, c0, w, reverse):
        return _masked_direction(mode, x, lengths, h0, c0, w, reverse)

    x, h_n, c_n = layers(
        mode, x, hx, cx, weights, num_layers, bidirectional, has_bias, proj, dropout, seed, offset, direction
    )
    return (x, h_n) if c_n is None else (x, h_n, c_n)
