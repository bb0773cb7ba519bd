"""Whether a buffer may be donated: nothing but its owner references it.

Donating a ``jax.Array`` to a program deletes it; any other Python reference (a ``detach()``ed alias, an optimizer
``state_dict()`` snapshot, a pending async checkpoint, the user's own ``t.jax()``) would then point at a deleted
buffer. Every donating caller (the eager optimizer step, compiled programs) asks :func:`only_owned` first.
"""

from __future__ import annotations

import sys

__all__ = ["only_owned"]

_getrefcount = sys.getrefcount


def _baseline() -> int:
    """References to a value held by one object slot, seen from a loop over a list of such values (measured, not
    assumed: the count depends on the interpreter version)."""
    holder = type("_Holder", (), {})()
    holder.value = object()
    for a in [holder.value]:
        return _getrefcount(a)
    return 0


_BASELINE = _baseline()


def only_owned(values, holders: int = 1) -> bool:
    """True when each of ``values`` is referenced only by ``holders`` owners (a Tensor's value slot, a state dict
    entry...) besides the list ``values`` itself; then XLA may reuse its buffer.

    Args:
        values: a list of arrays (the caller's own list: it counts as one reference).
        holders: how many known owners reference each array (1: a Tensor; 2: a Tensor and a container).
    """
    limit = _BASELINE + holders - 1
    for a in values:
        if _getrefcount(a) > limit:
            return False
    return True
