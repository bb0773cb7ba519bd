"""The eager op-signature cache: a bounded LRU of compiled kernels keyed by plain tuples.

Keys are ``(op, statics, operand descriptions...)`` where a tensor operand is described by its meta tuple
``(shape, dtype, placement id)`` and a Python scalar by its type only (its value is a dynamic operand).
Python's own tuple hash combines the fields (the OneFlow infer-cache slowdown came from an XOR combiner
and a per-view storage offset in the key; neither exists here). The size is bounded: past ``maxsize``
the least recently used entry is evicted, one at a time. Recency is a counter stamped on the entry at each
hit (one attribute store, instead of re-linking an ordered dict on the hot path); the eviction scan happens
only on a miss, which pays for an XLA compile anyway.
"""

from __future__ import annotations

import os
from collections import namedtuple

__all__ = ["CacheInfo", "cache_info", "clear_cache", "set_cache_limit", "get_cache_limit", "DEFAULT_CACHE_SIZE"]

DEFAULT_CACHE_SIZE = 4096

CacheInfo = namedtuple("CacheInfo", "hits misses evictions currsize maxsize backward_compiles")


def _env_limit() -> int:
    raw = os.environ.get("LAZYFLOW_EAGER_CACHE_SIZE")
    if raw is None:
        return DEFAULT_CACHE_SIZE
    try:
        n = int(raw)
    except ValueError:
        raise ValueError(f"LAZYFLOW_EAGER_CACHE_SIZE must be a positive integer, got {raw!r}") from None
    if n < 1:
        raise ValueError(f"LAZYFLOW_EAGER_CACHE_SIZE must be a positive integer, got {raw!r}")
    return n


class _Stats:
    hits = 0
    misses = 0
    evictions = 0
    backward_compiles = 0
    maxsize = _env_limit()


stats = _Stats()
entries: dict = {}
# The default float dtype changes what int->float promotion and Python-float operands produce, so it is part of
# every signature. Rather than adding it to each key on the hot path, the cache keeps one table per default
# dtype and switches tables when it changes (lf.set_default_dtype).
_tables: dict = {}
_switch_hooks: list = []


def use_table(default_dtype) -> None:
    """Make the table for ``default_dtype`` current (called when the default dtype changes)."""
    global entries
    entries = _tables.setdefault(default_dtype, {})
    for fn in _switch_hooks:
        fn(entries)


def _all_entries():
    return [(t, k) for t in _tables.values() for k in t]


def cache_info() -> CacheInfo:
    """Counters of the eager op cache.

    >>> lf.eager.cache_info()
    CacheInfo(hits=..., misses=..., evictions=0, currsize=..., maxsize=4096, backward_compiles=...)
    """
    return CacheInfo(stats.hits, stats.misses, stats.evictions, sum(len(t) for t in _tables.values()),
                     stats.maxsize, stats.backward_compiles)


def clear_cache() -> None:
    """Drop every cached kernel and reset the counters."""
    for t in _tables.values():
        t.clear()
    stats.hits = stats.misses = stats.evictions = stats.backward_compiles = 0


def set_cache_limit(n: int) -> None:
    """Bound the cache to ``n`` entries (default 4096, or ``LAZYFLOW_EAGER_CACHE_SIZE``)."""
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ValueError(f"set_cache_limit expects a positive int, got {n!r}")
    stats.maxsize = n
    while sum(len(t) for t in _tables.values()) > n:
        _evict_one()


def get_cache_limit() -> int:
    return stats.maxsize


def _evict_one() -> None:
    table, victim = min(_all_entries(), key=lambda tk: tk[0][tk[1]].tick)
    del table[victim]
    stats.evictions += 1


def insert(key, entry) -> None:
    entry.tick = stats.hits
    entries[key] = entry
    if sum(len(t) for t in _tables.values()) > stats.maxsize:
        _evict_one()
