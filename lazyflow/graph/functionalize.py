"""Split, pure function, write back: turn user code over Tensors into a pure function over arrays.

:func:`trace_pure` installs tracer values into the given state tensors (parameters, buffers, lifted captures), runs
a body under the trace interpreter, collects the outputs and the final state values, and restores the original
values -- whatever happens. :mod:`.compile` jits it and writes the results back into the same tensor objects; it is
the one pipeline under ``lf.compile`` and ``lf.nn.Graph``.
"""

from __future__ import annotations

import jax
import jax.core
import jax.numpy as jnp
import numpy as np

from .._core.checks import DeferredCheck
from .._core.context import state
from .._core.errors import GraphError, user_frame
from .._creation import default_generator
from .._tensor import Tensor, _make
from .trace import Tracing, _tmeta

_Tracer = jax.core.Tracer


# The last (seed, offset) handed out, with its device arrays: a host scalar argument costs every compiled call a
# host-to-device transfer (~3 us each on CPU, ~6 us of a ~100 us lf.compile'd MLP forward), and most calls (no
# random op in the program) see the same pair as the call before.
_last_rng: tuple = (None, None, None)


def rng_inputs():
    """The default generator's (seed, offset) as uint32 device arrays: graph programs take them as inputs."""
    global _last_rng
    s, o = default_generator._seed, default_generator._offset
    last = _last_rng
    if last[0] == s and last[1] == o:
        return last[2]
    pair = (jnp.asarray(np.uint32((s ^ (s >> 32)) & 0xFFFFFFFF)), jnp.asarray(np.uint32(o & 0xFFFFFFFF)))
    _last_rng = (s, o, pair)
    return pair


class RngCounter:
    """Hands out traced (seed, offset + k) pairs to random ops during a trace; counts them."""

    def __init__(self, seed, offset):
        self.seed, self.offset, self.count = seed, offset, 0

    def __call__(self, gen):
        if gen is not default_generator:
            raise GraphError(
                f"a random op inside graph mode at {user_frame()} uses a non-default "
                "lf.Generator; inside compiled code use the default generator (lf.manual_seed)"
            )
        k = self.count
        self.count += 1
        return self.seed, self.offset + jnp.uint32(k)


def traced(v) -> Tensor:
    """A Tensor over a traced value."""
    return _make(v, _tmeta(v))


def flatten_out(out, where: str):
    """Flatten a result pytree; every leaf must be a Tensor (or None)."""
    leaves, tree = jax.tree_util.tree_flatten(out, is_leaf=lambda x: isinstance(x, Tensor) or x is None)
    vals = []
    for leaf in leaves:
        if leaf is None:
            vals.append(None)
        elif isinstance(leaf, Tensor):
            vals.append(leaf._value)
        else:
            raise GraphError(
                f"{where} returned a {type(leaf).__name__} ({leaf!r}); compiled code must return "
                "Tensors (or tuples/lists/dicts of them); return a tensor and convert it outside"
            )
    return vals, tree


def set_traced(t: Tensor, v) -> None:
    """Give a state tensor a new traced value inside the trace (e.g. an optimizer's updated parameter)."""
    t._value = v
    t._meta = _tmeta(v)


def install(tensors, vals):
    """Swap tracer values into tensors; returns what to restore."""
    saved = []
    for t, v in zip(tensors, vals):
        saved.append((t, t._value, t._meta, t._rg, t._node, t._oidx, t.grad, t._version))
        set_traced(t, v)
        t._node = None
    return saved


def restore(saved):
    for t, v, m, rg, node, oidx, g, ver in saved:
        t._value, t._meta, t._rg, t._node, t._oidx, t.grad, t._version = v, m, rg, node, oidx, g, ver


def wrap_args(leaves, vals):
    """Tensors for the traced positional leaves (non-Tensor leaves pass through unchanged)."""
    out = []
    it = iter(vals)
    for leaf in leaves:
        out.append(traced(next(it)) if isinstance(leaf, Tensor) else leaf)
    return out


def trace_pure(
    body, state_tensors, readonly_ids, state_vals, seed, offset, *, grad: bool, where: str, checks: bool = False
):
    """Run ``body()`` once under the trace interpreter with ``state_vals`` installed in ``state_tensors``.

    ``body`` returns ``(out, aux_out)``: ``out`` a pytree of Tensors, ``aux_out`` any pytree of arrays. With
    ``checks``, index checks that cannot run on tracers are collected (:mod:`lazyflow._core.checks`).
    Returns ``(out_vals, out_tree, new_state_vals, rng_count, captured, aux_out, deferred_checks)``; every value is
    a tracer of the enclosing jax trace.
    """
    rng = RngCounter(seed, offset)
    saved = install(state_tensors, state_vals)
    prev_grad, prev_checks = state.grad_enabled, state.checks
    deferred: list[DeferredCheck] = []
    try:
        with Tracing(readonly_ids, rng, tape=grad) as ctx:
            if not grad and not prev_grad:  # lf.compile called under no_grad: nothing inside carries a gradient
                ctx.stop = True
            state.grad_enabled = grad
            state.checks = deferred if checks else None
            out, aux_out = body()
            out_vals, out_tree = flatten_out(out, where)
        new_state = [t._value for t in state_tensors]
        for t in state_tensors:
            if id(t) in readonly_ids:
                continue
            if not isinstance(t._value, _Tracer):
                raise GraphError(
                    f"{where}: state tensor of shape {list(t.shape)} was replaced by a concrete value "
                    "during the trace; update buffers with in-place ops (copy_, mul_, add_)"
                )
        return out_vals, out_tree, new_state, rng.count, ctx.captured, aux_out, deferred
    finally:
        state.grad_enabled, state.checks = prev_grad, prev_checks
        restore(saved)
