"""The backward engine: walks the tape from the roots in topological order."""

from __future__ import annotations

import weakref
from typing import Any

import jax
import jax.core
import jax.numpy as jnp

from .._core.context import state
from .._core.errors import AutogradError
from .._tensor import Tensor, _make
from .node import _anomaly

_post_accumulate: dict[int, tuple] = {}  # id(leaf) -> (weakref to it, [hooks])
_callbacks: list = []  # queued by hooks during a backward, run once at its end
_leaf_hooks: dict[int, tuple] = {}  # id(leaf) -> (weakref to it, [hooks]): Tensor.register_hook on a leaf


class _Handle:
    def __init__(self, key: int, hook, table: dict | None = None) -> None:
        self._key, self._hook = key, hook
        self._table = _post_accumulate if table is None else table

    def remove(self) -> None:
        """Unregister the hook (a no-op when already removed)."""
        entry = self._table.get(self._key)
        if entry is not None and self._hook in entry[1]:
            entry[1].remove(self._hook)
            if not entry[1]:
                del self._table[self._key]


class _NodeHandle:
    def __init__(self, node, oidx: int, hook) -> None:
        self._node, self._oidx, self._hook = weakref.ref(node), oidx, hook

    def remove(self) -> None:
        """Unregister the hook (a no-op when already removed)."""
        node = self._node()
        hooks = None if node is None or node.hooks is None else node.hooks.get(self._oidx)
        if hooks is not None and self._hook in hooks:
            hooks.remove(self._hook)


def register_hook(t, hook):
    """Call ``hook(grad)`` whenever the gradient of ``t`` is computed; a non-None return replaces it (torch's
    ``Tensor.register_hook``). On a leaf the hook runs before the gradient is accumulated into ``.grad`` (or
    returned by ``lf.autograd.grad``); on a non-leaf once all contributions are summed, before they flow on.
    Returns a handle with ``remove()``."""
    if not t._rg:
        raise AutogradError(
            f"cannot register a hook on a tensor that doesn't require gradient (shape {list(t.shape)}); call "
            "requires_grad_() on a leaf first"
        )
    node = t._node
    if node is None:
        key = id(t)
        entry = _leaf_hooks.get(key)
        if entry is None or entry[0]() is not t:
            # the dict bound now: at interpreter exit the module's globals may already be None when t dies
            entry = _leaf_hooks[key] = (weakref.ref(t, lambda _, k=key, d=_leaf_hooks: d.pop(k, None)), [])
        entry[1].append(hook)
        return _Handle(key, hook, _leaf_hooks)
    if node.hooks is None:
        node.hooks = {}
    node.hooks.setdefault(t._oidx, []).append(hook)
    return _NodeHandle(node, t._oidx, hook)


def _torch_convention(gs):
    """Gradients of complex tensors: the tape holds torch's (``conj`` of JAX's cotangent: for ``L = |z|^2`` torch's
    ``z.grad`` is ``2z``, ``jax.grad`` gives ``2 conj(z)``); the backward functions are JAX's. ``conj`` maps one
    convention onto the other both ways (it is its own inverse), so it is applied to the cotangents going into a
    backward function and to the gradients coming out; real gradients pass unchanged."""
    for g in gs:  # the common case, real array gradients, decided inline (this runs twice per node)
        if g is not None:
            dt = getattr(g, "dtype", None)
            if dt is None or dt.kind == "c":
                break
    else:
        return gs
    if not any(map(_complex, gs)):
        return gs
    return type(gs)(jnp.conj(g) if _complex(g) else g for g in gs)


def _complex(g) -> bool:
    """Whether a gradient value is complex: its dtype's kind where it has one (arrays: a few attribute reads, where
    ``jnp.iscomplexobj`` costs microseconds and ran for every cotangent of every backward)."""
    if g is None:
        return False
    dt = getattr(g, "dtype", None)
    return jnp.iscomplexobj(g) if dt is None else dt.kind == "c"


def _conj_tensors(ts):
    """:func:`_torch_convention` for gradients that are Tensors (``create_graph=True``: the conjugation is recorded
    too, so a double backward through complex tensors also follows torch)."""
    if not any(t is not None and t._meta[1].is_complex for t in ts):
        return ts
    return type(ts)(t.conj() if t is not None and t._meta[1].is_complex else t for t in ts)


def _run_hooks(hooks, g, meta, create_graph):
    """Apply tensor hooks to one gradient value (an array, or a Tensor under create_graph)."""
    for hook in list(hooks):
        gt = g if isinstance(g, Tensor) else _make(g, meta)
        r = hook(gt)
        if r is not None:
            if not isinstance(r, Tensor):
                raise AutogradError(f"a tensor hook returned a {type(r).__name__}; return a Tensor or None")
            if tuple(r.shape) != tuple(gt.shape):
                raise AutogradError(
                    f"hook returned a gradient of shape {list(r.shape)} for a tensor of shape {list(gt.shape)}; "
                    "a hook must keep the gradient's shape"
                )
            g = r if create_graph else r._value
    return g


def _check_nan(node, outs) -> None:
    for i, g in enumerate(outs):
        if g is None:
            continue
        v = g._value if isinstance(g, Tensor) else g
        if jnp.issubdtype(v.dtype, jnp.inexact) and not isinstance(v, jax.core.Tracer) and bool(jnp.isnan(v).any()):
            raise AutogradError(
                f"Function '{node.name()}' returned nan values in its {i}th output. The forward call that created "
                f"it ran at {node.site or '<not recorded: enable detect_anomaly before the forward>'}"
            )


def register_post_accumulate_grad_hook(t, hook) -> _Handle:
    """Call ``hook(t)`` after a backward has finished accumulating into leaf ``t``'s ``.grad`` (torch's
    ``Tensor.register_post_accumulate_grad_hook``): once per backward that reached ``t``, after every leaf's
    ``.grad`` is written and before the callbacks of :func:`queue_callback`. Returns a handle with ``remove()``."""
    key = id(t)
    entry = _post_accumulate.get(key)
    if entry is None or entry[0]() is not t:
        entry = _post_accumulate[key] = (weakref.ref(t, lambda _, k=key: _post_accumulate.pop(k, None)), [])
    entry[1].append(hook)
    return _Handle(key, hook)


def queue_callback(fn) -> None:
    """Run ``fn()`` once when the backward now running has finished (torch's ``queue_callback`` of its engine)."""
    _callbacks.append(fn)


def _finish(touched) -> None:
    try:
        for t in touched:
            entry = _post_accumulate.get(id(t))
            if entry is not None and entry[0]() is t:
                for hook in list(entry[1]):
                    hook(t)
        while _callbacks:
            _callbacks.pop(0)()
    finally:
        _callbacks.clear()


def _topo(roots):
    order, seen = [], set()
    stack = [(n, False) for n in roots]
    while stack:
        node, done = stack.pop()
        if done:
            order.append(node)
            continue
        if id(node) in seen:
            continue
        seen.add(id(node))
        stack.append((node, True))
        if node.inputs is None:
            continue
        edges = node.edges
        for pos in node.diff:
            e = edges[pos]
            if e is not None and node.inputs[pos]._rg and id(e[0]) not in seen:
                stack.append((e[0], False))
    order.reverse()
    return order


def run_backward(roots, grads, *, retain_graph: bool, create_graph: bool, capture=None):
    """Propagate ``grads`` (one per root) back through the tape.

    Args:
        capture: None to accumulate into leaves' ``.grad``; or a dict ``{id(tensor): None}`` whose values
            are filled with the gradient flowing into each listed tensor (``lf.autograd.grad``), leaving
            every ``.grad`` untouched.
    """
    interp = state.interp
    acc = interp.accumulate
    pending: dict[int, list] = {}
    touched: dict[int, object] = {}  # leaves with post-accumulate hooks that got a gradient
    nodes: dict[int, object] = {}
    retained: dict[tuple[int, int], Any] = {}

    def deliver(t, g, edge):
        """Route gradient ``g`` of tensor ``t`` to ``edge`` = (node, output index), or to ``t`` if a leaf."""
        if edge is None and id(t) in _leaf_hooks:
            entry = _leaf_hooks[id(t)]
            if entry[0]() is t:
                g = _run_hooks(entry[1], g, t._meta, create_graph)
        if capture is not None and id(t) in capture:
            prev = capture[id(t)]
            capture[id(t)] = g if prev is None else acc(prev, g)
        if edge is None:
            if capture is None:
                if id(t) in _post_accumulate:
                    touched[id(t)] = t
                if create_graph:
                    t.grad = g if t.grad is None else t.grad + g
                else:
                    t.grad = _make(g, t._meta) if t.grad is None else _make(acc(t.grad._value, g), t._meta)
            return
        n, i = edge
        if t._retain and capture is None:
            retained[(id(n), i)] = t  # written once the node's hooks have run (torch: retain_grad's hook runs last)
        slot = pending.get(id(n))
        if slot is None:
            slot = pending[id(n)] = [None] * n.n_out
            nodes[id(n)] = n
        slot[i] = g if slot[i] is None else acc(slot[i], g)

    root_nodes = []
    for r, g in zip(roots, grads):
        if r._node is not None:
            root_nodes.append(r._node)
        deliver(r, g, None if r._node is None else (r._node, r._oidx))

    for node in _topo(root_nodes):
        gs = pending.pop(id(node), None)
        if gs is None:
            continue
        if node.inputs is None:
            raise AutogradError(
                f"trying to backward through the graph a second time ({node.name()}): its saved values "
                "were freed after the first backward; pass retain_graph=True to the first backward"
            )
        for a, v in zip(node.inputs, node.versions):
            if v is not None and a._version != v:
                raise AutogradError(
                    f"one of the variables needed for gradient computation has been modified by an "
                    f"in-place operation: a tensor of shape {a.shape} used by {node.name()} is at version "
                    f"{a._version}; expected version {v}. Use an out-of-place op or .clone() first"
                )
        if node.hooks:
            for i, hooks in node.hooks.items():
                if hooks and gs[i] is not None:
                    gs[i] = _run_hooks(hooks, gs[i], None, create_graph)
        if retained:
            for i, g in enumerate(gs):
                t = retained.pop((id(node), i), None)
                if t is not None and g is not None:
                    if create_graph:
                        t.grad = g if t.grad is None else t.grad + g
                    else:
                        t.grad = _make(g, t._meta) if t.grad is None else _make(acc(t.grad._value, g), t._meta)
        entry = node.entry
        custom = getattr(entry, "custom_backward", None)
        if custom is not None:
            outs = custom(node, gs, create_graph, retain_graph)
        elif create_graph:
            gts = [None if g is None else (g if hasattr(g, "_value") else _make(g, None)) for g in gs]
            outs = interp.apply(entry.bwd_op(node.diff), tuple(node.inputs) + tuple(_conj_tensors(gts)), ())
            outs = _conj_tensors(outs if isinstance(outs, tuple) else (outs,))
        else:
            vals = [getattr(a, "_value", a) for a in node.inputs]
            outs = _torch_convention(entry.bwd_call(vals, _torch_convention(gs), node.diff))
        if _anomaly[0]:
            _check_nan(node, outs)
        edges = node.edges
        for pos, g in zip(node.diff, outs):
            a = node.inputs[pos]
            if g is not None and a._rg:
                deliver(a, g, edges[pos])
        if not retain_graph:
            node.inputs = None
            node.versions = ()
            node.edges = ()
    if capture is None and (touched or _callbacks):
        _finish(list(touched.values()))
