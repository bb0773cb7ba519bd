"""A tape node: one recorded op application."""

from __future__ import annotations

import itertools

from .._core.errors import user_frame

_seq = itertools.count()
_anomaly = [False]  # lf.autograd.set_detect_anomaly: nodes remember where the forward ran, backward checks NaN


def next_seq() -> int:
    """A number below every later node's ``seq`` and above every earlier one's: a fence between nodes recorded
    before and after it (``lf.utils.checkpoint`` tells a segment's own nodes from the graph it reads)."""
    return next(_seq)


class Node:
    """Records one op for backward.

    ``entry`` is the interpreter's record for the op signature: it exposes ``diff`` (differentiable operand
    positions), ``name``, ``bwd_call(values, cotangents)`` (array-level backward) and ``bwd_op()`` (an
    OpDef computing the same backward, applied through the interpreter when ``create_graph=True``).
    ``inputs`` holds the operands (Tensors and scalars); ``versions`` their version counters at record time.
    ``edges`` fixes, at record time, where each operand's gradient goes: ``(node, output index)`` for a non-leaf,
    None for a leaf or a non-tensor -- an in-place op that later rebases the operand tensor onto a new node
    must not reroute gradients recorded before it (torch's saved variables keep their grad_fn the same way).
    """

    __slots__ = ("entry", "inputs", "versions", "n_out", "edges", "diff", "seq", "hooks", "site", "__weakref__")

    def __init__(self, entry, inputs, versions, n_out, diff=None):
        self.entry = entry
        # the operand positions this backward differentiates: those that require grad at record time
        self.diff = entry.diff if diff is None else diff
        self.inputs = inputs
        self.versions = versions
        self.n_out = n_out
        self.seq = next(_seq)  # recording order
        self.hooks = None  # {output index: [hook]}: Tensor.register_hook on a non-leaf output
        self.site = user_frame() if _anomaly[0] else None
        edges = []
        for a in inputs:  # a loop, not a generator: this runs once per recorded op
            n = getattr(a, "_node", None)
            edges.append(None if n is None else (n, a._oidx))
        self.edges = tuple(edges)

    def name(self) -> str:
        custom = getattr(self.entry, "node_name", None)
        if custom is not None:
            return custom
        return "".join(p.capitalize() for p in self.entry.name.split("_")) + "Backward0"

    def __repr__(self) -> str:
        return f"<{self.name()}>"

    @property
    def next_functions(self):
        if self.inputs is None:
            return ()
        return tuple(e if e is not None else (None, 0) for a, e in zip(self.inputs, self.edges) if hasattr(a, "_node"))
