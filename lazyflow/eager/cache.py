"""The eager op-signature cache: an LRU of compiled kernels keyed by plain tuples, bounded by entries and by bytes.

Keys are ``(op, statics, operand descriptions...)`` where a tensor operand is described by its meta tuple
``(shape, dtype, placement id)`` and a Python scalar by its type only (its value is a dynamic operand).
Python's own tuple hash combines the fields (the OneFlow infer-cache slowdown came from an XOR combiner
and a per-view storage offset in the key; neither exists here). Recency is a counter stamped on the entry at each
hit (one attribute store, instead of re-linking an ordered dict on the hot path); the eviction scan happens
only on a miss, which pays for an XLA compile anyway. The stamps come from one C-level counter (:data:`tick`), which
also counts the hits: every stamp not taken by a hit (an insert, a ``cache_info`` read, a clear) is counted aside.

Two bounds, whichever is reached first: ``maxsize`` entries (default 4096) and ``maxbytes`` bytes (default 1 GiB)
of compiled kernels; past either, least recently used entries are evicted one at a time. An entry's bytes are
estimated when each of its executables is compiled (the forward kernel on the miss, each backward kernel on first
use), from the optimized HLO of that executable::

    bytes = EXECUTABLE_BASE_BYTES + HLO_CHAR_BYTES * len(compiled.as_text())

JAX reports no size for a CPU executable (``memory_analysis().generated_code_size_in_bytes`` and
``size_of_generated_code_in_bytes()`` are 0), so the two constants are measured: the resident-memory growth per
live executable, in fresh processes each holding 40-100 (2-core x86-64 box, jax/jaxlib 0.10.2, 2026-12-01).
lazyflow's primitives (HLO text of 1-6 KiB) measured 1.45-1.50 MiB (neg, isnan, mul by a scalar, matmul, the
forward and backward kernels of a small MLP step) to 1.6-1.8 MiB (sum over a dim, softmax, conv2d, layer_norm),
estimated 1.63-1.76 MiB; chains of 1 / 16 / 128 fused elementwise ops (HLO 1.4 / 6.4 / 45 KiB) measured
1.47 / 1.62 / 2.59 MiB, and 1 / 16 / 128 unfusable reduce+tanh layers (HLO 3.4 / 28 / 222 KiB) 1.56 / 1.96 /
4.95 MiB: a base of ~1.5-1.7 MiB plus 16-25 bytes per HLO character. The base is taken from the top of that range,
so the estimate errs high (by up to ~15% for the smallest kernels) rather than letting RSS outgrow the budget.

Evicting releases for real: every entry jits a function object of its own, so the entry holds the only reference
to it, and JAX's caches that outlive a ``jax.jit`` wrapper -- the C++ executable cache shared by every wrapper of
the same function (8192 executables), the trace and lowering caches -- are keyed by weak references to that
function and drop the executable with it. (Jitting an op's shared implementation directly, as happened for ops
without dtype casts or static attributes, left every executable alive there after its entry was evicted.)
"""

from __future__ import annotations

import itertools
import operator
import os
import re
from collections import namedtuple

from .._core.errors import LazyflowError

__all__ = [
    "CacheInfo",
    "CacheLimitError",
    "CacheLimitTypeError",
    "cache_info",
    "clear_cache",
    "set_cache_limit",
    "get_cache_limit",
    "DEFAULT_CACHE_SIZE",
    "DEFAULT_CACHE_BYTES",
]

DEFAULT_CACHE_SIZE = 4096
# 1 GiB: ~600 small kernels. One eager training step (forward, backward, SGD) of benchmarks/models.py's ResNet-50
# compiles 129 forward and 57 backward kernels, estimated 361 MiB (ResNet-18: 77 + 31, 211 MiB; the transformer:
# 39 + 17, 110 MiB), so the budget holds a step and a differently shaped last batch of an epoch with room to spare,
# while a stream of new shapes stays within a laptop's memory (4096 entries unbounded by size: ~6 GiB)
DEFAULT_CACHE_BYTES = 1 << 30
EXECUTABLE_BASE_BYTES = 1_700_000  # measured, see the module docstring
HLO_CHAR_BYTES = 20

CacheInfo = namedtuple("CacheInfo", "hits misses evictions currsize maxsize backward_compiles currbytes maxbytes")


class CacheLimitError(LazyflowError, ValueError):
    """A cache limit that is not a positive integer (``set_cache_limit``, ``LAZYFLOW_EAGER_CACHE_*``)."""


class CacheLimitTypeError(CacheLimitError, TypeError):
    """A cache limit of the wrong type (a float, a string, a bool, None)."""


def _check_limit(value, what: str) -> int:
    try:
        if isinstance(value, bool):
            raise TypeError
        n = operator.index(value)  # ints and numpy integers; not 2.0, "8", None or numpy bools
    except TypeError:
        raise CacheLimitTypeError(
            f"set_cache_limit: {what} must be a positive int, got {type(value).__name__} "
            f"{value!r}; pass e.g. {what}={_EXAMPLE[what]}"
        ) from None
    if n < 1:
        raise CacheLimitError(
            f"set_cache_limit: {what} must be a positive int, got {n}; pass e.g. {what}={_EXAMPLE[what]}"
        )
    return n


_EXAMPLE = {"n": "4096", "bytes": "2 ** 30"}
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def _env_limit(name: str = "LAZYFLOW_EAGER_CACHE_SIZE", default: int = DEFAULT_CACHE_SIZE, units: bool = False) -> int:
    """A positive integer from environment variable ``name`` (with ``units``: an optional K/M/G/T suffix, binary)."""
    raw = os.environ.get(name)
    if raw is None:
        return default
    m = re.fullmatch(r"\s*(\d+)\s*(?:([kKmMgGtT])(?:i?[bB])?)?\s*", raw) if units else None
    if units and m:
        n = int(m.group(1)) * _UNITS[(m.group(2) or "").lower()]
    else:
        try:
            n = int(raw)
        except ValueError:
            n = 0
    if n < 1:
        form = (
            "a positive integer of bytes, optionally with a K, M, G or T suffix (1G)" if units else "a positive integer"
        )
        raise CacheLimitError(f"{name} must be {form}, got {raw!r}")
    return n


# The recency stamp of a hit: the next value of a counter that every hit advances (a C call on the hot path)
tick = itertools.count(1).__next__


class _Stats:
    not_hits = 0  # stamps taken by something other than a hit (inserts, hit-count reads, clears)
    misses = 0
    evictions = 0
    backward_compiles = 0
    currbytes = 0
    maxsize = _env_limit()
    maxbytes = _env_limit("LAZYFLOW_EAGER_CACHE_BYTES", DEFAULT_CACHE_BYTES, units=True)

    @property
    def hits(self) -> int:
        """Cache hits since the last clear: stamps issued minus those no hit took (this read takes one)."""
        n = tick()
        self.not_hits += 1
        return n - self.not_hits


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


def _count() -> int:
    return sum(len(t) for t in _tables.values())


def cache_info() -> CacheInfo:
    """Counters of the eager op cache; ``currbytes``/``maxbytes`` are the estimated bytes of compiled kernels.

    >>> lf.eager.cache_info()
    CacheInfo(hits=..., misses=..., evictions=0, currsize=..., maxsize=4096, backward_compiles=..., currbytes=...,
              maxbytes=1073741824)
    """
    return CacheInfo(
        stats.hits,
        stats.misses,
        stats.evictions,
        _count(),
        stats.maxsize,
        stats.backward_compiles,
        stats.currbytes,
        stats.maxbytes,
    )


def clear_cache() -> None:
    """Drop every cached kernel and reset the counters."""
    for t in _tables.values():
        t.clear()
    stats.misses = stats.evictions = stats.backward_compiles = stats.currbytes = 0
    stats.not_hits = tick()  # every stamp so far: no hit since the clear


def set_cache_limit(n: int | None = None, *, bytes: int | None = None) -> None:
    """Bound the cache to ``n`` entries and/or ``bytes`` bytes of compiled kernels; evicts down to the new bounds.

    Args:
        n: the most entries (default 4096, or ``LAZYFLOW_EAGER_CACHE_SIZE``); None leaves it unchanged.
        bytes: the most estimated bytes of compiled kernels (default 1 GiB, or ``LAZYFLOW_EAGER_CACHE_BYTES``,
            e.g. ``512M``); None leaves it unchanged.
    Raises:
        CacheLimitTypeError: a limit that is not an int (a ``TypeError`` and a ``ValueError``).
        CacheLimitError: a limit below 1 (a ``ValueError``). Nothing changes when either limit is bad.

    >>> lf.eager.set_cache_limit(bytes=256 * 2 ** 20)   # 256 MiB of kernels, the entry limit as it was
    """
    if n is None and bytes is None:
        raise CacheLimitTypeError("set_cache_limit: pass n (entries), bytes, or both; got neither")
    if n is not None:
        n = _check_limit(n, "n")
    if bytes is not None:
        bytes = _check_limit(bytes, "bytes")
    if n is not None:
        stats.maxsize = n
    if bytes is not None:
        stats.maxbytes = bytes
    _shrink(None)


def get_cache_limit() -> int:
    """The entry limit (``cache_info().maxbytes`` is the byte limit)."""
    return stats.maxsize


def executable_bytes(jitted, args) -> int:
    """Estimated resident bytes of ``jitted``'s executable for ``args`` (already compiled: the lowering and the
    compilation are looked up in JAX's caches, not redone)."""
    return hlo_bytes(len(jitted.lower(*args).compile().as_text()))


def hlo_bytes(hlo_chars: int) -> int:
    """Estimated resident bytes of an executable whose optimized HLO text has ``hlo_chars`` characters."""
    return EXECUTABLE_BASE_BYTES + HLO_CHAR_BYTES * hlo_chars


def _over() -> bool:
    return stats.currbytes > stats.maxbytes or _count() > stats.maxsize


def _shrink(keep) -> None:
    """Evict least recently used entries until both bounds hold; never ``keep`` (the entry just compiled: one
    kernel larger than the whole budget stays until the next miss rather than recompiling on every call)."""
    while _over():
        candidates = [(t, k) for t in _tables.values() for k, e in t.items() if e is not keep]
        if not candidates:
            return
        table, victim = min(candidates, key=lambda tk: tk[0][tk[1]].tick)
        stats.currbytes -= table.pop(victim).nbytes
        stats.evictions += 1


def insert(key, entry) -> None:
    """Cache ``entry`` (its ``nbytes`` already estimated) under ``key`` in the current table."""
    entry.tick = tick()
    stats.not_hits += 1
    entry.key = key
    entries[key] = entry
    stats.currbytes += entry.nbytes
    _shrink(entry)


def charge(entry, nbytes: int) -> None:
    """Add ``nbytes`` (a backward kernel compiled for ``entry``) to the entry and, if it is cached, to the total."""
    entry.nbytes += nbytes
    if any(t.get(entry.key) is entry for t in _tables.values()):
        stats.currbytes += nbytes
        _shrink(entry)
