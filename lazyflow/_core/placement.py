"""Interned placements: each distinct JAX sharding gets a small integer id, so op-cache keys hash an int
instead of a sharding object. Id 0 means "no placement" (a traced value in graph mode)."""

from __future__ import annotations

_ids: dict = {}
_shardings: list = [None]


def pid_of(value) -> int:
    """The placement id of a jax array (0 for tracers)."""
    try:
        s = value.sharding
    except Exception:
        return 0
    pid = _ids.get(s)
    if pid is None:
        pid = _ids[s] = len(_shardings)
        _shardings.append(s)
    return pid


def sharding_of(pid: int):
    return _shardings[pid]
