"""``lf.utils.checkpoint``: activation checkpointing with ``torch.utils.checkpoint``'s names and semantics.

A checkpointed segment keeps only its inputs for backward and recomputes its activations when the gradient
reaches it.

* Eagerly (and inside an ``lf.nn.Graph``, whose backward runs on the tape) the segment runs once recording its tape
  to find the tensors it reads (inputs, parameters); then one tape node replaces its whole sub-tape, which is freed.
  Backward re-runs the segment under grad with the same random state and backpropagates through the recomputation.
* Inside ``lf.compile`` (and ``lf.func.functional_call`` under a JAX transform), where JAX differentiates the whole
  program, the segment is ``jax.checkpoint`` of its pure function, with an optional rematerialisation policy.

Either way the gradients are those of the un-checkpointed code, and dropout draws the same mask in the
recomputation (``preserve_rng_state``: lazyflow's random numbers are a function of the generator's seed and
offset, which the recomputation replays).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.core
import jax.numpy as jnp

from .._core.context import state
from .._core.errors import ArgumentError, AutogradError
from .._creation import default_generator
from .._tensor import Tensor, _make
from ..autograd.engine import run_backward
from ..autograd.node import Node, next_seq

__all__ = ["checkpoint", "checkpoint_sequential"]

_Tracer = jax.core.Tracer
_is_tensor = lambda x: isinstance(x, Tensor)


def _resolve_policy(policy):
    if policy is None or callable(policy):
        return policy
    if isinstance(policy, str):
        p = getattr(jax.checkpoint_policies, policy, None)
        if p is not None:
            return p
    names = [n for n in dir(jax.checkpoint_policies) if not n.startswith("_")]
    raise ArgumentError(f"checkpoint: policy must be None, a callable or one of {names}, got {policy!r}")


class _RngState:
    """The random state a recomputation must replay: the default generator's offset (eager), or the trace's
    draw counter (graph mode)."""

    def __init__(self):
        self.hook = state.rng_hook
        self.saved = self.hook.count if self.hook is not None else default_generator._offset

    def replay(self):
        """Set the state back to the saved point; returns a function that puts the current state back."""
        if self.hook is not None:
            cur = self.hook.count
            self.hook.count = self.saved
            return lambda: setattr(self.hook, "count", cur)
        cur = default_generator._offset
        default_generator._offset = self.saved
        return lambda: setattr(default_generator, "_offset", cur)


def _fresh(v, rg: bool) -> Tensor:
    t = _make(v)
    t._rg = rg
    return t


def _call(fn, leaves, tree, pos, tensors):
    flat = list(leaves)
    for i, t in zip(pos, tensors):
        flat[i] = t
    args, kwargs = jax.tree_util.tree_unflatten(tree, flat)
    return fn(*args, **kwargs)


def _boundary(outs, inner_ids, fence) -> list[Tensor]:
    """Tensors requiring grad that the sub-tape of ``outs`` reads from outside, other than the segment's own inputs:
    leaves (parameters), and non-leaves recorded before the segment (``seq < fence``: tensors it closes over)."""
    found: dict[int, Tensor] = {}
    seen: set[int] = set()
    stack = [t._node for t in outs if t._node is not None]
    while stack:
        node = stack.pop()
        if id(node) in seen or node.inputs is None:
            continue
        seen.add(id(node))
        for p in node.diff:
            a = node.inputs[p]
            e = node.edges[p]
            if e is not None and e[0].seq > fence:
                stack.append(e[0])
            elif getattr(a, "_rg", False) and id(a) not in inner_ids:
                found.setdefault(id(a), a)
    return list(found.values())


class _CheckpointEntry:
    """The tape entry of one checkpointed segment: its backward recomputes the segment (see module docstring)."""

    __slots__ = ("fn", "leaves", "tree", "pos", "n_args", "rng", "float_outs", "params", "ctx", "metas")
    name = "checkpoint"

    def __init__(self, fn, leaves, tree, pos, rng, float_outs, params, ctx, metas):
        self.fn, self.leaves, self.tree, self.pos, self.rng = fn, leaves, tree, pos, rng
        self.ctx, self.metas = ctx, metas
        self.n_args = len(pos)
        self.float_outs = float_outs
        self.params = params

    def bwd_call(self, vals, gs, diff):
        n = self.n_args
        arg_vals = list(vals[:n])
        if any(isinstance(v, _Tracer) for v in arg_vals):  # graph mode: keep XLA from reusing the forward's values
            arg_vals = list(jax.lax.optimization_barrier(arg_vals))
        fresh = [_fresh(v, i in diff) for i, v in enumerate(arg_vals)]
        # a non-leaf the segment closes over is a boundary: a leaf while the segment is re-run and differentiated,
        # so the inner backward stops there; the tape routes its gradient onward
        cut = [(t, t._node, t._oidx) for t in self.params if t._node is not None]
        undo = self.rng.replay() if self.rng is not None else None
        prev = state.grad_enabled
        try:
            for t, _, _ in cut:
                t._node = None
            state.grad_enabled = True
            with self.ctx:
                out = _call(self.fn, self.leaves, self.tree, self.pos, fresh)
            return self._differentiate(out, fresh, gs, diff)
        finally:
            state.grad_enabled = prev
            for t, node, oidx in cut:
                t._node, t._oidx = node, oidx
            if undo is not None:
                undo()

    def _differentiate(self, out, fresh, gs, diff):
        n = self.n_args
        outs = [o for o in jax.tree_util.tree_leaves(out, is_leaf=_is_tensor) if isinstance(o, Tensor)]
        outs = [outs[i] for i in self.float_outs] if len(outs) > max(self.float_outs) else []
        if self.metas is not None:
            metas = [(tuple(o.shape), o.dtype) for o in outs]
            if metas != self.metas:
                raise AutogradError(
                    f"checkpoint: the recomputation gave outputs {metas}, the forward gave {self.metas} (shape, "
                    "dtype); the function must compute the same thing when re-run (or pass determinism_check='none')"
                )
        params = [None] * n + list(self.params)
        targets = {}
        for i in diff:
            t = fresh[i] if i < n else params[i]
            targets[id(t)] = None
        roots = [(o, g) for o, g in zip(outs, gs) if g is not None and o._rg]
        if roots:
            run_backward(
                [o for o, _ in roots], [g for _, g in roots], retain_graph=False, create_graph=False, capture=targets
            )
        res = []
        for i in diff:
            t = fresh[i] if i < n else params[i]
            g = targets[id(t)]
            res.append(jnp.zeros(t._value.shape, t._value.dtype) if g is None else g)
        return tuple(res)

    def bwd_op(self, diff=None):
        raise AutogradError(
            "create_graph=True (double backward) through lf.utils.checkpoint is not supported; differentiate the "
            "segment without checkpointing"
        )


def _tape_checkpoint(fn, args, kwargs, preserve_rng_state, recompute_ctx, check):
    leaves, tree = jax.tree_util.tree_flatten((args, kwargs), is_leaf=_is_tensor)
    pos = [i for i, x in enumerate(leaves) if isinstance(x, Tensor)]
    originals = [leaves[i] for i in pos]
    inner = [_fresh(t._value, t._rg) for t in originals]
    rng = _RngState() if preserve_rng_state else None
    fence = next_seq()
    out = _call(fn, leaves, tree, pos, inner)
    back = {id(t): o for t, o in zip(inner, originals)}
    orig_ids = {id(o) for o in originals}
    out = jax.tree_util.tree_map(  # an input returned as it is: the caller's tensor, not the segment's private copy
        lambda o: back.get(id(o), o) if isinstance(o, Tensor) else o, out, is_leaf=_is_tensor
    )
    out_leaves = [o for o in jax.tree_util.tree_leaves(out, is_leaf=_is_tensor) if isinstance(o, Tensor)]
    recorded = [o for o in out_leaves if o._node is not None and id(o) not in orig_ids]
    if not recorded:
        return out
    params = _boundary(recorded, {id(t) for t in inner}, fence)
    float_outs = [i for i, o in enumerate(out_leaves) if o._node is not None and id(o) not in orig_ids]
    metas = [(tuple(out_leaves[i].shape), out_leaves[i].dtype) for i in float_outs] if check else None
    entry = _CheckpointEntry(fn, leaves, tree, pos, rng, float_outs, params, recompute_ctx, metas)
    inputs = tuple(originals) + tuple(params)
    node = Node(
        entry,
        inputs,
        tuple(t._version for t in inputs),
        len(float_outs),
        tuple(i for i, t in enumerate(inputs) if t._rg),
    )
    for k, i in enumerate(float_outs):  # the sub-tape loses its last reference here and is freed
        o = out_leaves[i]
        o._node, o._oidx = node, k
    return out


def _remat_checkpoint(fn, args, kwargs, policy):
    leaves, tree = jax.tree_util.tree_flatten((args, kwargs), is_leaf=_is_tensor)
    pos = [i for i, x in enumerate(leaves) if isinstance(x, Tensor)]
    box = {}

    def pure(*vals):
        out = _call(fn, leaves, tree, pos, [_make(v) for v in vals])
        out_leaves, box["tree"] = jax.tree_util.tree_flatten(out, is_leaf=_is_tensor)
        for o in out_leaves:
            if not isinstance(o, Tensor):
                raise ArgumentError(
                    f"checkpoint: inside compiled code the function must return tensors (or pytrees of them), "
                    f"got a {type(o).__name__} leaf"
                )
        return [o._value for o in out_leaves]

    arrays = jax.checkpoint(pure, policy=policy)(*[leaves[i]._value for i in pos])
    return jax.tree_util.tree_unflatten(box["tree"], [_make(a) for a in arrays])


def _noop_context_fn():
    return contextlib.nullcontext(), contextlib.nullcontext()


def checkpoint(
    function: Callable,
    *args: Any,
    use_reentrant: bool | None = None,
    context_fn: Callable[[], tuple[Any, Any]] = _noop_context_fn,
    determinism_check: str = "default",
    debug: bool = False,
    early_stop: bool = True,
    preserve_rng_state: bool = True,
    policy: Any = None,
    **kwargs: Any,
) -> Any:
    """Run ``function(*args, **kwargs)`` without keeping its activations; recompute them in backward.

    Args:
        function: the segment; tensors it reads besides ``args`` (parameters) get their gradients too.
        use_reentrant: accepted for torch compatibility; both values behave as torch's ``use_reentrant=False``
            (``lf.autograd.grad`` works, inputs need not require grad).
        context_fn: returns two context managers, entered around the forward run and around the recomputation.
        determinism_check: ``"default"`` checks that the recomputation gives outputs of the same shapes and dtypes
            (raising otherwise), ``"none"`` skips the check.
        debug, early_stop: accepted for torch compatibility (no effect: the recomputation always runs whole).
        preserve_rng_state: the recomputation replays the random numbers of the forward (dropout masks match).
        policy: inside compiled code, ``jax.checkpoint``'s rematerialisation policy: a callable or the name of
            one in ``jax.checkpoint_policies`` (``"dots_saveable"``...); None recomputes everything.
        kwargs: keyword arguments of ``function``.
    Returns:
        ``function``'s result.
    Raises:
        ArgumentError: a non-callable function, an unknown policy name or determinism_check.
        AutogradError: (in backward) ``create_graph=True`` through a checkpoint, or a recomputation whose outputs
            differ in shape or dtype from the forward's.

    >>> y = lf.utils.checkpoint.checkpoint(block, x, use_reentrant=False)
    """
    if not callable(function):
        raise ArgumentError(f"checkpoint: function must be callable, got {type(function).__name__}")
    if determinism_check not in ("default", "none"):
        raise ArgumentError(f"checkpoint: determinism_check must be 'default' or 'none', got {determinism_check!r}")
    policy = _resolve_policy(policy)
    if not state.grad_enabled:
        if state.tracing:  # JAX differentiates the program (lf.compile, functional_call): rematerialise there
            return _remat_checkpoint(function, args, kwargs, policy)
        return function(*args, **kwargs)
    fwd_ctx, recompute_ctx = context_fn()
    with fwd_ctx:
        return _tape_checkpoint(
            function, args, kwargs, preserve_rng_state, recompute_ctx, determinism_check == "default"
        )


def checkpoint_sequential(
    functions: Sequence[Callable] | Any,
    segments: int,
    input: Any,
    use_reentrant: bool | None = None,
    *,
    preserve_rng_state: bool = True,
    policy: Any = None,
) -> Any:
    """Run a sequence of modules/functions in ``segments`` chunks, checkpointing all but the last (torch's split).

    Args:
        functions: an ``lf.nn.Sequential`` or a list of callables applied one after another.
        segments: how many chunks (1 <= segments <= number of functions).
        input: the first function's input.
        use_reentrant, preserve_rng_state, policy: passed to :func:`checkpoint`.
    Raises:
        ArgumentError: ``segments`` out of range.
    """
    children = getattr(functions, "children", None)
    fns = list(children()) if children is not None else list(functions)
    if not isinstance(segments, int) or not 1 <= segments <= max(len(fns), 1):
        raise ArgumentError(f"checkpoint_sequential: segments must be an int in [1, {len(fns)}], got {segments!r}")
    size = len(fns) // segments

    def run(start, end):
        def seg(x):
            for f in fns[start : end + 1]:
                x = f(x)
            return x

        return seg

    end = -1
    for start in range(0, size * (segments - 1), size):
        end = start + size - 1
        input = checkpoint(
            run(start, end), input, use_reentrant=use_reentrant, preserve_rng_state=preserve_rng_state, policy=policy
        )
    return run(end + 1, len(fns) - 1)(input)
