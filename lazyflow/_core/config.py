"""Process-wide JAX configuration lazyflow applies once, at import (documented in the README).

* ``jax_enable_x64`` is switched on so that torch's int64/float64 exist (torch's default integer dtype is
  int64). lazyflow always passes explicit dtypes, so float32 stays the default float. Set the environment
  variable ``LAZYFLOW_X64=0`` to leave x64 off: then every explicit request for a 64-bit dtype raises
  :class:`DTypeError` and integer defaults become int32 -- never a silent downgrade.
* ``jax_cpu_enable_async_dispatch`` is switched off (``LAZYFLOW_CPU_ASYNC=1`` keeps it on): tiny eager
  kernels dispatch about 40% faster synchronously on CPU.
* The compile cache across runs is switched on (``LAZYFLOW_COMPILE_CACHE=0`` leaves it off): see
  :mod:`lazyflow._core.compile_cache` and :mod:`lazyflow.config`.
* XLA's CPU backend may use oneDNN (``--xla_cpu_use_onednn=true`` is added to ``XLA_FLAGS`` before JAX's backend
  starts): measured A/B on 2 quiet cores, a ResNet-18 (64x64) ``lf.nn.Graph`` step ~1.1x faster, a small CNN's
  eager step ~1.15x, other cases within noise; XNNPACK was slower on ResNet-18 (BENCHMARKS.md). A value you put in
  ``XLA_FLAGS`` yourself wins; ``LAZYFLOW_XLA_DEFAULTS=0`` adds nothing. Nothing changes when JAX's backend was
  started before lazyflow was imported.
* glibc's malloc keeps large blocks in its heap instead of a fresh ``mmap`` per block (``M_MMAP_MAX=0``, a trim
  threshold of a quarter of memory, at most 2 GiB): XLA's CPU runtime takes each program's scratch memory as one
  block per call, and a fresh mapping faulted it in again every call (a ResNet-50 224x224 Graph step: ~75,000 page
  faults, ~220 ms of system time). ``LAZYFLOW_MALLOC_DEFAULTS=0`` or any ``MALLOC_*_`` setting of your own leaves
  glibc's defaults; see :mod:`lazyflow._core.malloc`.
* ``LAZYFLOW_GRAPH_INDEX_CHECKS=0`` starts the process with graph mode's deferred index checks off (see
  :mod:`lazyflow._core.checks`; ``lf.graph.set_index_checks`` switches them at run time). Default: on.
"""

from __future__ import annotations

import os

import jax

from . import malloc as _malloc

try:  # private: whether a backend has started (then XLA_FLAGS has been read already)
    from jax._src import xla_bridge as _xla_bridge
except ImportError:  # pragma: no cover - a JAX without it: assume not started
    _xla_bridge = None

XLA_CPU_DEFAULTS = ("--xla_cpu_use_onednn=true",)


def _apply_xla_defaults() -> tuple[str, ...]:
    """Add lazyflow's XLA CPU defaults to ``XLA_FLAGS`` (those the user has not set); returns what was added."""
    if os.environ.get("LAZYFLOW_XLA_DEFAULTS", "1") == "0":
        return ()
    if getattr(_xla_bridge, "_backends", None):  # a backend already started: XLA_FLAGS was read
        return ()
    current = os.environ.get("XLA_FLAGS", "")
    added = tuple(f for f in XLA_CPU_DEFAULTS if f.split("=")[0] not in current)
    if added:
        os.environ["XLA_FLAGS"] = " ".join([current, *added]).strip()
    return added


XLA_DEFAULTS_ADDED = _apply_xla_defaults()
MALLOC_DEFAULTS_APPLIED = _malloc.MALLOC_DEFAULTS_APPLIED
X64 = os.environ.get("LAZYFLOW_X64", "1") != "0"
GRAPH_INDEX_CHECKS = os.environ.get("LAZYFLOW_GRAPH_INDEX_CHECKS", "1") != "0"
if X64:
    jax.config.update("jax_enable_x64", True)
if os.environ.get("LAZYFLOW_CPU_ASYNC", "0") != "1":
    try:
        jax.config.update("jax_cpu_enable_async_dispatch", False)
    except Exception:  # option absent in this jax version
        pass


from . import compile_cache as _compile_cache  # after the x64 switch: its fingerprint reads it

_compile_cache.install_default()


def x64_enabled() -> bool:
    """Whether 64-bit dtypes are available (JAX's ``jax_enable_x64``)."""
    return bool(jax.config.read("jax_enable_x64"))
