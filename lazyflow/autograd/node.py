"""A tape node: one recorded op application."""

from __future__ import annotations


class Node:
    """Records one op for backward.

    ``entry`` is the interpreter's record for the op signature: it exposes ``diff`` (differentiable operand
    positions), ``name``, ``bwd_call(values, cotangents)`` (array-level backward) and ``bwd_op()`` (an
    OpDef computing the same backward, applied through the interpreter when ``create_graph=True``).
    ``inputs`` holds the operands (Tensors and scalars); ``versions`` their version counters at record time.
    """

    __slots__ = ("entry", "inputs", "versions", "n_out", "__weakref__")

    def __init__(self, entry, inputs, versions, n_out):
        self.entry = entry
        self.inputs = inputs
        self.versions = versions
        self.n_out = n_out

    def name(self) -> str:
        return "".join(p.capitalize() for p in self.entry.name.split("_")) + "Backward0"

    def __repr__(self) -> str:
        return f"<{self.name()}>"

    @property
    def next_functions(self):
        if self.inputs is None:
            return ()
        return tuple((getattr(a, "_node", None), getattr(a, "_oidx", 0)) for a in self.inputs
                     if hasattr(a, "_node"))
