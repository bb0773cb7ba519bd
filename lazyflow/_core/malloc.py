"""The C allocator's settings lazyflow applies once, at import, on Linux with glibc (documented in the README).

XLA's CPU runtime takes each compiled program's scratch memory as ONE block per call ("preallocated temp": 304 MB for
a ResNet-50 training step at 224x224, batch 2) from ``malloc`` and frees it when the call ends. glibc serves blocks
of 32 MiB and more with a fresh ``mmap`` and returns them with ``munmap``, so every call faulted the whole block in
again, page by page, each page zeroed by the kernel: ~75,000 page faults and ~220 ms of system time per ResNet-50
step, ~22,000 for the small CNN (BENCHMARKS.md, "session 7, cnn helper"). Torch's many small per-op blocks stay
in malloc's heap and fault nothing.

So lazyflow sets ``M_MMAP_MAX`` to 0 (blocks come from the heap and are reused by the next call: no page faults
after the first step) and ``M_TRIM_THRESHOLD`` to a quarter of the machine's memory, at most 2 GiB (``mallopt``
takes an ``int``): free memory at the heap's top goes back to the system only past that, so a freed temp block is
not returned and faulted in again each call (a temp block larger than the threshold still is). glibc still maps
blocks over 64 MiB taken on other threads (a thread arena's limit), whatever ``M_MMAP_MAX`` says.
The cost: memory a program freed stays with the process (reused by later allocations) rather than going back to the
system, as in a caching allocator; ``ctypes.CDLL("libc.so.6").malloc_trim(0)`` hands it back.

``LAZYFLOW_MALLOC_DEFAULTS=0`` changes nothing; so does any malloc setting of your own in the environment
(``MALLOC_MMAP_MAX_``, ``MALLOC_TRIM_THRESHOLD_``, ``MALLOC_MMAP_THRESHOLD_``, ``MALLOC_TOP_PAD_`` or a
``glibc.malloc`` tunable in ``GLIBC_TUNABLES``). Other C libraries (macOS, musl) are left alone.
"""

from __future__ import annotations

import ctypes
import os
import platform
import sys

__all__ = ["MALLOC_DEFAULTS_APPLIED", "apply_malloc_defaults"]

M_TRIM_THRESHOLD = -1  # glibc's malloc.h
M_MMAP_MAX = -4
_USER_KNOBS = ("MALLOC_MMAP_MAX_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TOP_PAD_")


def _trim_threshold() -> int:
    """A quarter of physical memory, capped to what ``mallopt``'s ``int`` argument holds."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):  # pragma: no cover - sysconf names exist on every Linux
        total = 4 << 30
    return min(max(total // 4, 256 << 20), (1 << 31) - 1)


def apply_malloc_defaults() -> dict:
    """Set glibc's ``M_MMAP_MAX`` to 0 and ``M_TRIM_THRESHOLD`` to a quarter of memory (module docstring); returns
    the settings applied (``{}`` when switched off, overridden by the environment, or not glibc)."""
    if os.environ.get("LAZYFLOW_MALLOC_DEFAULTS", "1") == "0":
        return {}
    if any(k in os.environ for k in _USER_KNOBS) or "glibc.malloc" in os.environ.get("GLIBC_TUNABLES", ""):
        return {}
    if not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc":
        return {}
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:  # pragma: no cover - glibc without the usual soname
        return {}
    applied = {"M_TRIM_THRESHOLD": _trim_threshold(), "M_MMAP_MAX": 0}
    if libc.mallopt(M_TRIM_THRESHOLD, applied["M_TRIM_THRESHOLD"]) != 1 or libc.mallopt(M_MMAP_MAX, 0) != 1:
        return {}  # pragma: no cover - mallopt refused a value (glibc validates both)
    return applied


MALLOC_DEFAULTS_APPLIED = apply_malloc_defaults()
