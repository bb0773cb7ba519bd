"""Process-wide settings a user may change: the compile cache across runs (see ``lazyflow._core.compile_cache`` for
its guarantees) and what lazyflow applied to JAX at import (x64)."""

from __future__ import annotations

import os

from ._core import compile_cache as _cc
from ._core.compile_cache import CompileCacheInfo
from ._core.config import x64_enabled

__all__ = ["set_compile_cache", "compile_cache_info", "clear_compile_cache", "CompileCacheInfo", "x64_enabled"]


def set_compile_cache(
    enabled: bool = True, directory: str | os.PathLike | None = None, *, max_bytes: int | None = None
) -> None:
    """Switch the on-disk compile cache on or off, or move it; programs compiled afterwards use the new setting.

    Args:
        enabled: False: compile without reading or writing the disk.
        directory: the cache root (a fingerprinted subdirectory is used inside it); default
            ``$LAZYFLOW_COMPILE_CACHE_DIR``, else ``$XDG_CACHE_HOME/lazyflow`` or ``~/.cache/lazyflow``.
        max_bytes: the most the cache may hold on disk (default: ``LAZYFLOW_COMPILE_CACHE_MAX_BYTES``, else 2 GiB; a
            later call without it goes back to that default); least recently used entries go first.
    Raises:
        ValueError: ``max_bytes`` below 1.
    """
    _cc.configure(enabled, directory, max_bytes)


def compile_cache_info() -> CompileCacheInfo:
    """This process's use of the compile cache: ``enabled``, ``directory``, ``hits`` (programs loaded instead of
    compiled), ``misses``, ``writes``, ``corrupted`` (damaged entries found, removed and recompiled),
    ``write_errors``, ``evictions``, ``max_bytes``."""
    return _cc.info()


def clear_compile_cache() -> None:
    """Delete every entry of the current cache directory (nothing happens when the cache is off)."""
    store = _cc._jax_cache_module()._cache
    if isinstance(store, _cc.Store):
        store.clear()
