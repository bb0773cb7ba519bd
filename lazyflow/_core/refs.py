"""Buffers safe to donate: what nothing but its owner references, or else a private copy.

Donating a ``jax.Array`` to a program deletes it; any other Python reference (a ``detach()``ed alias, ``p.data``,
an optimizer ``state_dict()`` snapshot, a pending async checkpoint, the user's own ``t.jax()``) would then point at
a deleted buffer. Every donating caller (the eager optimizer step, compiled programs) passes its buffers through
:func:`owned` first: a buffer referenced elsewhere is copied, so that one alone pays a copy and the holder's buffer
stays valid (a value such as ``t.jax()`` keeps what it had; ``detach()``/``.data`` aliases, which share the
tensor's storage, are then handed the new value by the caller's write-back).
"""

from __future__ import annotations

import sys
from typing import Any

import jax

__all__ = ["owned"]

_getrefcount = sys.getrefcount


def _baseline() -> int:
    """References to a value held by one object slot, seen from a loop over a list of such values (measured, not
    assumed: the count depends on the interpreter version)."""
    holder: Any = type("_Holder", (), {})()
    holder.value = object()
    for a in [holder.value]:
        return _getrefcount(a)
    return 0


_BASELINE = _baseline()


def owned(values: list, holders: int = 1) -> list:
    """``values`` with each array that is referenced by more than ``holders`` owners besides the list ``values``
    itself (or that appears twice) replaced by a copy on the same placement; the result is safe to donate.

    Args:
        values: a list of arrays (the caller's own list: it counts as one reference).
        holders: how many known owners reference each array (1: a Tensor; 2: a Tensor and a container).
    """
    limit = _BASELINE + holders - 1
    out = []
    for a in values:
        out.append(a if _getrefcount(a) <= limit else jax.device_put(a, may_alias=False))
    return out
