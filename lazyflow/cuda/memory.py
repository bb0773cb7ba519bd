"""``lf.cuda.memory``: torch.cuda's memory statistics over JAX's allocator counters (``device.memory_stats()``).

JAX reports current and peak bytes in use, the pool it holds and its limit. These become torch's keys:

=============================  =============================================
torch's ``memory_stats`` key   JAX's ``memory_stats()`` entry
=============================  =============================================
``allocated_bytes.all.current``  ``bytes_in_use``
``allocated_bytes.all.peak``     ``peak_bytes_in_use`` (see the peak reset)
``reserved_bytes.all.current``   ``pool_bytes`` (else ``bytes_reserved``, else ``bytes_in_use``)
``reserved_bytes.all.peak``      ``peak_pool_bytes`` (else the current reserve)
``num_alloc_retries``/``num_ooms`` not reported: JAX counts neither
=============================  =============================================

Without a GPU every query answers as torch's CPU build: counters 0, ``memory_stats()`` an empty OrderedDict, and the
calls that need a device raise :class:`lazyflow.NoCudaError` (also the built-in torch raises there).
"""

from __future__ import annotations

import os
import warnings
from collections import OrderedDict
from typing import Any

from .._core.errors import ValueRangeError
from ._common import DeviceLike, NoCudaBindingError, NoCudaKeyError, is_available, jax_device, no_cuda

__all__ = [
    "memory_stats",
    "memory_stats_as_nested_dict",
    "memory_summary",
    "memory_allocated",
    "max_memory_allocated",
    "memory_reserved",
    "max_memory_reserved",
    "memory_cached",
    "max_memory_cached",
    "mem_get_info",
    "reset_peak_memory_stats",
    "reset_max_memory_allocated",
    "reset_max_memory_cached",
    "reset_accumulated_memory_stats",
    "empty_cache",
    "set_per_process_memory_fraction",
    "get_per_process_memory_fraction",
    "host_memory_stats",
    "host_memory_stats_as_nested_dict",
    "reset_peak_host_memory_stats",
    "reset_accumulated_host_memory_stats",
]

_peak_floor: dict[int, int] = {}  # device id -> JAX's peak when reset_peak_memory_stats was called


def _raw(device: DeviceLike, what: str) -> tuple[Any, dict] | None:
    if not is_available():
        return None  # torch's CPU build answers 0 / {} whatever the argument
    d = jax_device(device, what)
    return d, (d.memory_stats() or {})


def memory_stats(device: DeviceLike = None) -> OrderedDict[str, int]:
    """torch's allocator statistics (the keys in the module docstring), sorted by key; an empty OrderedDict without
    a GPU, as torch's CPU build."""
    got = _raw(device, "memory_stats()")
    if got is None:
        return OrderedDict()
    d, s = got
    now = int(s.get("bytes_in_use", 0))
    peak = int(s.get("peak_bytes_in_use", now))
    floor = _peak_floor.get(d.id)
    if floor is not None and peak <= floor:  # JAX cannot reset its peak: the current usage bounds it from below
        peak = now
    reserved = int(s.get("pool_bytes", s.get("bytes_reserved", now)))
    out = {
        "allocated_bytes.all.current": now,
        "allocated_bytes.all.peak": peak,
        "active_bytes.all.current": now,
        "active_bytes.all.peak": peak,
        "reserved_bytes.all.current": reserved,
        "reserved_bytes.all.peak": int(s.get("peak_pool_bytes", reserved)),
    }
    if "num_allocs" in s:
        out["allocation.all.allocated"] = int(s["num_allocs"])
    return OrderedDict(sorted(out.items()))


def memory_stats_as_nested_dict(device: DeviceLike = None) -> dict[str, Any]:
    """:func:`memory_stats` nested at its dots (``{'allocated_bytes': {'all': {'current': ...}}}``); ``{}`` without a
    GPU."""
    out: dict[str, Any] = {}
    for key, value in memory_stats(device).items():
        *parents, leaf = key.split(".")
        node = out
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = value
    return out


def memory_summary(device: DeviceLike = None, abbreviated: bool = False) -> str:
    """A printable table of :func:`memory_stats` (``abbreviated`` is accepted; the table is short either way).

    Raises:
        NoCudaError: JAX has no GPU (also a KeyError, as torch's CPU build raises on its empty statistics).
    """
    stats = memory_stats(device)
    if not stats:
        raise no_cuda("memory_summary()", NoCudaKeyError)
    width = max(len(k) for k in stats)
    rows = [f"lazyflow memory summary (JAX allocator), device {device if device is not None else 'current'}"]
    rows += [f"  {k:<{width}}  {v:>16,}" for k, v in stats.items()]
    return "\n".join(rows) + "\n"


def memory_allocated(device: DeviceLike = None) -> int:
    """Bytes held by arrays on the GPU (JAX's ``bytes_in_use``); 0 without a GPU, as torch's CPU build."""
    return memory_stats(device).get("allocated_bytes.all.current", 0)


def max_memory_allocated(device: DeviceLike = None) -> int:
    """The peak of :func:`memory_allocated` (JAX's ``peak_bytes_in_use``); 0 without a GPU.

    JAX cannot reset its peak: after :func:`reset_peak_memory_stats` this is JAX's peak once that has risen past the
    value at the reset, and until then the current usage (a lower bound of the true peak since the reset).
    """
    return memory_stats(device).get("allocated_bytes.all.peak", 0)


def memory_reserved(device: DeviceLike = None) -> int:
    """Bytes JAX's allocator holds from the GPU (``pool_bytes``, else ``bytes_reserved``); 0 without a GPU."""
    return memory_stats(device).get("reserved_bytes.all.current", 0)


def max_memory_reserved(device: DeviceLike = None) -> int:
    """The peak of :func:`memory_reserved` (JAX's ``peak_pool_bytes`` where it reports one); 0 without a GPU."""
    return memory_stats(device).get("reserved_bytes.all.peak", 0)


def memory_cached(device: DeviceLike = None) -> int:
    """Deprecated name of :func:`memory_reserved` (as in torch)."""
    return memory_reserved(device)


def max_memory_cached(device: DeviceLike = None) -> int:
    """Deprecated name of :func:`max_memory_reserved` (as in torch)."""
    return max_memory_reserved(device)


def mem_get_info(device: DeviceLike = None) -> tuple[int, int]:
    """``(free, total)`` bytes of the GPU as JAX's allocator sees it: total is its ``bytes_limit`` (the share of the
    GPU JAX may use, see ``XLA_PYTHON_CLIENT_MEM_FRACTION``), free is that less ``bytes_in_use``.

    Raises:
        NoCudaError: JAX has no GPU (an AssertionError, as torch's CPU build raises).
    """
    s = jax_device(device, "mem_get_info()").memory_stats() or {}
    total = int(s.get("bytes_limit", 0))
    return total - int(s.get("bytes_in_use", 0)), total


def _binding(what: str, device: DeviceLike):
    if not is_available():
        raise no_cuda(what, NoCudaBindingError)
    return jax_device(device, what)


def reset_peak_memory_stats(device: DeviceLike = None) -> None:
    """Start :func:`max_memory_allocated` afresh (see there for what JAX allows).

    Raises:
        NoCudaError: JAX has no GPU (also an AttributeError, as torch's CPU build raises).
    """
    d = _binding("reset_peak_memory_stats()", device)
    _peak_floor[d.id] = int((d.memory_stats() or {}).get("peak_bytes_in_use", 0))


def reset_max_memory_allocated(device: DeviceLike = None) -> None:
    """Deprecated: :func:`reset_peak_memory_stats` (torch also warns: FutureWarning)."""
    warnings.warn(
        "lf.cuda.reset_max_memory_allocated now calls lf.cuda.reset_peak_memory_stats, which resets all peak memory "
        "stats.",
        FutureWarning,
        stacklevel=2,
    )
    reset_peak_memory_stats(device)


def reset_max_memory_cached(device: DeviceLike = None) -> None:
    """Deprecated: :func:`reset_peak_memory_stats` (torch also warns: FutureWarning)."""
    warnings.warn(
        "lf.cuda.reset_max_memory_cached now calls lf.cuda.reset_peak_memory_stats, which resets all peak memory "
        "stats.",
        FutureWarning,
        stacklevel=2,
    )
    reset_peak_memory_stats(device)


def reset_accumulated_memory_stats(device: DeviceLike = None) -> None:
    """A no-op with a GPU: :func:`memory_stats` reports no accumulated counters that could be reset.

    Raises:
        NoCudaError: JAX has no GPU (also an AttributeError, as torch's CPU build raises).
    """
    _binding("reset_accumulated_memory_stats()", device)


def empty_cache() -> None:
    """A no-op: JAX's allocator offers no call that returns its cached blocks to the GPU (nor is there one to make
    without a GPU, where torch's CPU build also does nothing)."""


def set_per_process_memory_fraction(fraction: float, device: DeviceLike = None) -> None:
    """Checks ``fraction`` as torch does, then warns that it cannot take effect: XLA sizes its allocator once, when
    the GPU backend starts (set ``XLA_PYTHON_CLIENT_MEM_FRACTION`` before the first JAX call instead).

    Raises:
        NoCudaError: JAX has no GPU (an AssertionError, as torch's CPU build raises).
        TypeError: ``fraction`` is not a float.  ValueRangeError: outside [0, 1].
    """
    jax_device(device, "set_per_process_memory_fraction()")
    if not isinstance(fraction, float):
        raise TypeError(f"Invalid type for fraction argument, must be `float`, got {type(fraction).__name__}")
    if not 0 <= fraction <= 1:
        raise ValueRangeError(f"Invalid fraction value: {fraction}. Allowed range: 0~1")
    warnings.warn(
        f"lf.cuda.set_per_process_memory_fraction({fraction}) has no effect: XLA sized its allocator when the GPU "
        "backend started; set XLA_PYTHON_CLIENT_MEM_FRACTION in the environment before importing jax",
        UserWarning,
        stacklevel=2,
    )


def get_per_process_memory_fraction(device: DeviceLike = None) -> float:
    """The share of the GPU JAX's allocator may use: ``XLA_PYTHON_CLIENT_MEM_FRACTION``, else JAX's default 0.75.

    Raises:
        NoCudaError: JAX has no GPU (an AssertionError, as torch's CPU build raises).
    """
    jax_device(device, "get_per_process_memory_fraction()")
    return float(os.environ.get("XLA_PYTHON_CLIENT_MEM_FRACTION", "0.75"))


def host_memory_stats() -> OrderedDict[str, int]:
    """An empty OrderedDict: lazyflow has no pinned host-memory allocator to report on (torch's CPU build answers
    the same)."""
    return OrderedDict()


def host_memory_stats_as_nested_dict() -> dict[str, Any]:
    """``{}``: see :func:`host_memory_stats`."""
    return {}


def reset_peak_host_memory_stats() -> None:
    """A no-op with a GPU (no host allocator statistics, see :func:`host_memory_stats`).

    Raises:
        NoCudaError: JAX has no GPU (also an AttributeError, as torch's CPU build raises).
    """
    _binding("reset_peak_host_memory_stats()", None)


def reset_accumulated_host_memory_stats() -> None:
    """A no-op with a GPU (no host allocator statistics, see :func:`host_memory_stats`).

    Raises:
        NoCudaError: JAX has no GPU (also an AttributeError, as torch's CPU build raises).
    """
    _binding("reset_accumulated_host_memory_stats()", None)
