"""Split, pure function, write back: turn user code over Tensors into a pure function over arrays.

``run_pure`` installs tracer values into the given state tensors (parameters, buffers, lifted captures), runs the
user's body under the trace interpreter, collects the outputs and the final state values, and restores the
original values -- whatever happens. The compiled wrappers (:mod:`.compile`, :mod:`.nn_graph`) jit it and write
results back into the same tensor objects.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from .._core.context import state
from .._core.errors import GraphError, user_frame
from .._creation import default_generator
from .._tensor import Tensor, _make
from .trace import Tracing, _tmeta

_Tracer = jax.core.Tracer


def rng_inputs():
    """The default generator's (seed, offset) as uint32 arrays: graph programs take them as inputs."""
    s = default_generator._seed
    return np.uint32((s ^ (s >> 32)) & 0xFFFFFFFF), np.uint32(default_generator._offset & 0xFFFFFFFF)


class RngCounter:
    """Hands out traced (seed, offset + k) pairs to random ops during a trace; counts them."""

    def __init__(self, seed, offset):
        self.seed, self.offset, self.count = seed, offset, 0

    def __call__(self, gen):
        if gen is not default_generator:
            raise GraphError(f"a random op inside graph mode at {user_frame()} uses a non-default "
                             "lf.Generator; inside compiled code use the default generator (lf.manual_seed)")
        k = self.count
        self.count += 1
        return self.seed, self.offset + jnp.uint32(k)


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
            raise GraphError(f"{where} returned a {type(leaf).__name__} ({leaf!r}); compiled code must return "
                             "Tensors (or tuples/lists/dicts of them); return a tensor and convert it outside")
    return vals, tree


def install(tensors, vals):
    """Swap tracer values into tensors; returns what to restore."""
    saved = []
    for t, v in zip(tensors, vals):
        saved.append((t, t._value, t._meta, t._rg, t._node, t._oidx, t.grad, t._version))
        t._value = v
        t._meta = _tmeta(v)
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
        if isinstance(leaf, Tensor):
            v = next(it)
            t = _make(v, _tmeta(v))
            out.append(t)
        else:
            out.append(leaf)
    return out


def body_call(fn, args_tree, arg_leaves, arg_vals):
    """Rebuild ``(args, kwargs)`` with traced tensors and call ``fn``."""
    args, kwargs = jax.tree_util.tree_unflatten(args_tree, wrap_args(arg_leaves, arg_vals))
    return fn(*args, **kwargs)


def trace_pure(fn, state_tensors, readonly_ids, state_vals, args_tree, arg_leaves, arg_vals, seed, offset,
               *, grad: bool, where: str):
    """Run ``fn`` once under the trace interpreter; returns (out_vals, out_tree, new_state_vals, rng_count,
    captured) -- all values are tracers of the enclosing jax trace."""
    rng = RngCounter(seed, offset)
    saved = install(state_tensors, state_vals)
    prev_grad = state.grad_enabled
    try:
        with Tracing(readonly_ids, rng) as ctx:
            state.grad_enabled = grad
            out = body_call(fn, args_tree, arg_leaves, arg_vals)
            out_vals, out_tree = flatten_out(out, where)
        new_state = [t._value for t in state_tensors]
        for t in state_tensors:
            if id(t) in readonly_ids:
                continue
            if not isinstance(t._value, _Tracer):
                raise GraphError(f"{where}: state tensor of shape {list(t.shape)} was replaced by a concrete value "
                                 "during the trace; update buffers with in-place ops (copy_, mul_, add_)")
        return out_vals, out_tree, new_state, rng.count, ctx.captured
    finally:
        state.grad_enabled = prev_grad
        restore(saved)


def to_tensor_out(out_vals, metas, out_tree):
    leaves = [None if v is None else _make(v, m) for v, m in zip(out_vals, metas)]
    return jax.tree_util.tree_unflatten(out_tree, leaves)


def meta_of_concrete(v):
    from .._tensor import _meta_of

    return None if v is None else _meta_of(v)


