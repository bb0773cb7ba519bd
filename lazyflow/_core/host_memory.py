"""glibc malloc settings lazyflow applies once, at import (documented in the README).

XLA:CPU allocates each compiled call's temporary and output buffers with ``malloc`` and frees them when the call
ends. glibc serves requests above its mmap threshold (128 KiB, adapting up to 32 MiB) with a fresh ``mmap`` and
returns them with ``munmap``, so every call of a compiled training step page-faults its whole working set in again:
a 4-layer Transformer encoder's ``lf.nn.Graph`` step took ~30,000 minor faults and 55-75 ms of system time per
step (BENCHMARKS.md, "session 7, transformer helper"); torch's step, whose buffers are smaller, took ~0-5,000.

With ``mmap`` off for ``malloc`` (``M_MMAP_MAX = 0``) and the heap's top kept up to 2 GiB (``M_TRIM_THRESHOLD``),
freed buffers stay mapped and the next call reuses them: 0 faults and ~0 ms of system time per step. The cost: the
process keeps up to 2 GiB of freed heap mapped instead of returning it to the OS at once. Set
``LAZYFLOW_MALLOC_DEFAULTS=0`` to leave malloc as it is. Nothing is done where the C library is not glibc.
"""

from __future__ import annotations

import ctypes
import os
import platform

__all__ = ["MALLOC_DEFAULTS_APPLIED", "apply_malloc_defaults"]

_M_TRIM_THRESHOLD = -1
_M_MMAP_MAX = -4
_KEEP_TOP_BYTES = 2**31 - 1  # mallopt takes an int


def apply_malloc_defaults() -> bool:
    """Switch glibc's ``malloc`` to reuse freed big buffers (see the module docstring); True when applied."""
    if os.environ.get("LAZYFLOW_MALLOC_DEFAULTS", "1") == "0" or platform.libc_ver()[0] != "glibc":
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:  # pragma: no cover - glibc under another name
        return False
    return bool(libc.mallopt(_M_MMAP_MAX, 0)) and bool(libc.mallopt(_M_TRIM_THRESHOLD, _KEEP_TOP_BYTES))


MALLOC_DEFAULTS_APPLIED = apply_malloc_defaults()
