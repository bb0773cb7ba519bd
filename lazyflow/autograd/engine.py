"""The backward engine: walks the tape from the roots in topological order."""

from __future__ import annotations

import weakref

from .._core.context import state
from .._core.errors import AutogradError
from .._tensor import _make

_post_accumulate: dict[int, tuple] = {}  # id(leaf) -> (weakref to it, [hooks])
_callbacks: list = []  # queued by hooks during a backward, run once at its end


class _Handle:
    def __init__(self, key: int, hook) -> None:
        self._key, self._hook = key, hook

    def remove(self) -> None:
        """Unregister the hook (a no-op when already removed)."""
        entry = _post_accumulate.get(self._key)
        if entry is not None and self._hook in entry[1]:
            entry[1].remove(self._hook)
            if not entry[1]:
                del _post_accumulate[self._key]


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

    def deliver(t, g, edge):
        """Route gradient ``g`` of tensor ``t`` to ``edge`` = (node, output index), or to ``t`` if a leaf."""
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
        if t._retain and capture is None:
            if create_graph:
                t.grad = g if t.grad is None else t.grad + g
            else:
                t.grad = _make(g, t._meta) if t.grad is None else _make(acc(t.grad._value, g), t._meta)
        n, i = edge
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
        entry = node.entry
        if create_graph:
            outs = interp.apply(
                entry.bwd_op(node.diff),
                tuple(node.inputs)
                + tuple(None if g is None else (g if hasattr(g, "_value") else _make(g, None)) for g in gs),
                (),
            )
            if not isinstance(outs, tuple):
                outs = (outs,)
        else:
            vals = [getattr(a, "_value", a) for a in node.inputs]
            outs = entry.bwd_call(vals, gs, node.diff)
        edges = node.edges
        for pos, g in zip(node.diff, outs):
            a = node.inputs[pos]
            if a._rg:
                deliver(a, g, edges[pos])
        if not retain_graph:
            node.inputs = None
            node.versions = ()
            node.edges = ()
    if capture is None and (touched or _callbacks):
        _finish(list(touched.values()))
