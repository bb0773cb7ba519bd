"""``lf.cuda``: torch.cuda's device, memory, RNG and stream calls over JAX's GPU devices.

With a GPU, each call answers from JAX (``jax.devices("gpu")``, ``device.memory_stats()``). Without one, each answers
exactly as torch's CPU build does: ``is_available()`` is False, ``device_count()`` 0, the memory counters 0,
``manual_seed`` a no-op, and the calls that need a device raise :class:`lazyflow.NoCudaError` -- also the built-in
class torch raises there (mostly AssertionError, "Torch not compiled with CUDA enabled"; see ``_common``).

Submodules as in torch: :mod:`~lazyflow.cuda.memory` (allocator statistics), :mod:`~lazyflow.cuda.random` (the
generator), :mod:`~lazyflow.cuda.streams` (``Stream``/``Event``: XLA has no user streams, see there), and the legacy
typed constructors (``lf.cuda.FloatTensor``...). Not here, on purpose (docs/api-coverage.md lists them with
reasons): torch's storages, CUDA graphs, pluggable allocators and memory pools, cuBLAS/cuSOLVER handles.

>>> device = "cuda" if lf.cuda.is_available() else "cpu"
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import jax

from .._core.device import current_index, set_current_index
from .._core.errors import ValueRangeError
from . import amp, memory, random, streams
from ._common import (
    CudaError,
    DeferredCudaCallError,
    DeviceLike,
    NoCudaBindingError,
    device_count,
    index,
    is_available,
    jax_device,
    no_cuda,
)
from ._legacy import (
    BFloat16Tensor,
    BoolTensor,
    ByteTensor,
    CharTensor,
    DoubleTensor,
    FloatTensor,
    HalfTensor,
    IntTensor,
    LongTensor,
    ShortTensor,
)
from ._nvml import (
    clock_rate,
    device_memory_used,
    list_gpu_processes,
    memory_usage,
    power_draw,
    temperature,
    utilization,
)
from .memory import (
    empty_cache,
    get_per_process_memory_fraction,
    host_memory_stats,
    host_memory_stats_as_nested_dict,
    max_memory_allocated,
    max_memory_cached,
    max_memory_reserved,
    mem_get_info,
    memory_allocated,
    memory_cached,
    memory_reserved,
    memory_stats,
    memory_stats_as_nested_dict,
    memory_summary,
    reset_accumulated_host_memory_stats,
    reset_accumulated_memory_stats,
    reset_max_memory_allocated,
    reset_max_memory_cached,
    reset_peak_host_memory_stats,
    reset_peak_memory_stats,
    set_per_process_memory_fraction,
)
from .random import (
    get_rng_state,
    get_rng_state_all,
    initial_seed,
    manual_seed,
    manual_seed_all,
    seed,
    seed_all,
    set_rng_state,
    set_rng_state_all,
)
from .streams import (
    Event,
    ExternalStream,
    Stream,
    StreamContext,
    current_stream,
    default_stream,
    get_stream_from_external,
    is_current_stream_capturing,
    set_stream,
    stream,
)

__all__ = [
    "amp",
    "memory",
    "random",
    "streams",
    "is_available",
    "device_count",
    "current_device",
    "set_device",
    "device",
    "device_of",
    "synchronize",
    "init",
    "is_initialized",
    "get_device_name",
    "get_device_properties",
    "get_device_capability",
    "DeviceProperties",
    "get_arch_list",
    "get_gencode_flags",
    "can_device_access_peer",
    "is_bf16_supported",
    "is_tf32_supported",
    "get_sync_debug_mode",
    "set_sync_debug_mode",
    "CudaError",
    "DeferredCudaCallError",
    "cudaStatus",
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
    "manual_seed",
    "manual_seed_all",
    "seed",
    "seed_all",
    "initial_seed",
    "get_rng_state",
    "get_rng_state_all",
    "set_rng_state",
    "set_rng_state_all",
    "Stream",
    "ExternalStream",
    "Event",
    "StreamContext",
    "stream",
    "current_stream",
    "default_stream",
    "set_stream",
    "get_stream_from_external",
    "is_current_stream_capturing",
    "utilization",
    "memory_usage",
    "temperature",
    "power_draw",
    "clock_rate",
    "device_memory_used",
    "list_gpu_processes",
    "BFloat16Tensor",
    "BoolTensor",
    "ByteTensor",
    "CharTensor",
    "DoubleTensor",
    "FloatTensor",
    "HalfTensor",
    "IntTensor",
    "LongTensor",
    "ShortTensor",
]


def current_device() -> int:
    """The index of the current GPU (what ``'cuda'`` without an index means).

    Raises:
        NoCudaError: JAX has no GPU (torch's CPU build raises AssertionError).
    """
    if not is_available():
        raise no_cuda("current_device()")
    return current_index("cuda")


def set_device(device: DeviceLike) -> None:
    """Make ``device`` the current GPU of this thread; a negative index does nothing.

    Raises:
        ValueRangeError: a non-cuda device, or none/``'cuda'`` without an index (a ValueError, as in torch).
        NoCudaError: JAX has no GPU (also an AttributeError, as torch's CPU build raises).
    """
    idx = index(device, optional=False)
    if idx < 0:
        return
    if not is_available():
        raise no_cuda("set_device()", NoCudaBindingError)
    jax_device(idx, "set_device()")
    set_current_index("cuda", idx)


class device:
    """Context manager that makes ``device`` the current GPU for its block (torch.cuda.device); ``None`` or a
    negative index: no-op.

    Raises:
        ValueRangeError: a non-cuda device (on construction).
        NoCudaError: on entering, when JAX has no GPU (a RuntimeError, as torch's CPU build raises).
    """

    def __init__(self, device: Any):
        self.idx = -1 if device is None else index(device, optional=True)
        self.prev_idx = -1

    def __enter__(self) -> None:
        if self.idx < 0:
            return
        if not is_available():
            raise no_cuda("device(...)")
        self.prev_idx = current_index("cuda")
        set_device(self.idx)

    def __exit__(self, *exc: object) -> bool:
        if self.prev_idx >= 0:
            set_current_index("cuda", self.prev_idx)
        return False


def synchronize(device: DeviceLike = None) -> None:
    """Wait until the GPU has finished the work queued so far (a tiny program queued behind it is awaited).

    Raises:
        NoCudaError: JAX has no GPU.
    """
    streams._drain(jax_device(device, "synchronize()"))


def get_device_name(device: DeviceLike = None) -> str:
    """The GPU's name as JAX reports it (``device_kind``, e.g. ``'NVIDIA H100 80GB HBM3'``).

    Raises:
        NoCudaError: JAX has no GPU.
    """
    return jax_device(device, "get_device_name()").device_kind


@dataclass(frozen=True)
class DeviceProperties:
    """What :func:`get_device_properties` returns: the subset of torch's ``_CudaDeviceProperties`` JAX knows."""

    name: str
    major: int
    minor: int
    total_memory: int
    multi_processor_count: int


def get_device_properties(device: DeviceLike = None) -> DeviceProperties:
    """Name, compute capability, memory (JAX's ``bytes_limit``) and multiprocessor count of a GPU.

    Raises:
        NoCudaError: JAX has no GPU.
    """
    d = jax_device(device, "get_device_properties()")
    major, _, minor = str(getattr(d, "compute_capability", "0.0")).partition(".")
    stats = d.memory_stats() or {}
    return DeviceProperties(
        d.device_kind,
        int(major or 0),
        int(minor or 0),
        int(stats.get("bytes_limit", 0)),
        int(getattr(d, "core_count", 0)),
    )


def get_device_capability(device: DeviceLike = None) -> tuple[int, int]:
    """The GPU's compute capability ``(major, minor)`` (JAX's ``compute_capability``).

    Raises:
        NoCudaError: JAX has no GPU (an AssertionError, as torch's CPU build raises).
    """
    p = get_device_properties(device)
    return p.major, p.minor


class device_of(device):
    """Context manager that makes the GPU of tensor ``obj`` current for its block; a CPU tensor: a no-op (as in
    torch)."""

    def __init__(self, obj: Any):
        dev = obj.device
        super().__init__(-1 if dev.type != "cuda" else dev.index if dev.index is not None else current_index("cuda"))


def init() -> None:
    """Start JAX's GPU backend (JAX starts it on first use anyway).

    Raises:
        NoCudaError: JAX has no GPU (an AssertionError, as torch's CPU build raises).
    """
    jax_device(None, "init()")


def is_initialized() -> bool:
    """Whether JAX's GPU backend is running: asking JAX for its GPUs starts it, so this is :func:`is_available`
    (False without a GPU, as torch's CPU build)."""
    return is_available()


def get_arch_list() -> list[str]:
    """The ``sm_XY`` architectures XLA compiles for here: those of JAX's GPUs (it compiles for the device at hand,
    not a fixed list); ``[]`` without a GPU, as torch's CPU build."""
    if not is_available():
        return []
    return sorted({"sm_{}{}".format(*get_device_capability(i)) for i in range(device_count())})


def get_gencode_flags() -> str:
    """:func:`get_arch_list` as nvcc ``-gencode`` flags, as torch spells them; ``''`` without a GPU."""
    return " ".join(f"-gencode compute=compute_{a[3:]},code={a}" for a in get_arch_list())


def can_device_access_peer(device: DeviceLike, peer_device: DeviceLike) -> bool:
    """Whether two distinct GPUs can exchange arrays directly: JAX copies between any two of its GPUs (XLA picks a
    peer or a host-staged transfer), so True for two distinct GPUs; a GPU and itself: False, as CUDA answers.

    Raises:
        NoCudaError: JAX has no GPU (an AssertionError, as torch's CPU build raises).
        ValueRangeError: an index past the last GPU.
    """
    a, b = jax_device(device, "can_device_access_peer()"), jax_device(peer_device, "can_device_access_peer()")
    return a.id != b.id


def is_bf16_supported(including_emulation: bool = True) -> bool:
    """Whether the current GPU computes in bfloat16: natively from compute capability 8.0, emulated on any GPU when
    ``including_emulation``; False without a GPU."""
    if not is_available():
        return False
    return including_emulation or get_device_properties().major >= 8


def is_tf32_supported() -> bool:
    """Whether the current GPU has TensorFloat-32 matmuls (compute capability 8.0 on); False without a GPU."""
    return is_available() and get_device_properties().major >= 8


_SYNC_MODES = {"default": 0, "warn": 1, "error": 2}
_GUARD = {0: "allow", 1: "log", 2: "disallow"}  # jax's device-to-host transfer guard for each sync debug mode


def _guard() -> str | None:
    return jax.config.jax_transfer_guard_device_to_host  # pyright: ignore[reportAttributeAccessIssue]


def set_sync_debug_mode(debug_mode: int | str) -> None:
    """Warn about (1, ``'warn'``) or refuse (2, ``'error'``) operations that wait for the GPU; 0/``'default'``:
    allow them. XLA's equivalent is JAX's device-to-host transfer guard (``jax_transfer_guard_device_to_host``:
    ``'allow'``/``'log'``/``'disallow'``), which this sets.

    Raises:
        NoCudaError: JAX has no GPU (an AssertionError, as torch's CPU build raises).
        ValueRangeError: a mode other than 0, 1, 2 or those names.
    """
    jax_device(None, "set_sync_debug_mode()")
    mode = _SYNC_MODES.get(debug_mode, debug_mode) if isinstance(debug_mode, str) else debug_mode
    if mode not in _GUARD:
        raise ValueRangeError(
            f"invalid value of debug_mode {debug_mode!r}, expected one of 0, 1, 2 or 'default', 'warn', 'error'"
        )
    jax.config.update("jax_transfer_guard_device_to_host", _GUARD[mode])


def get_sync_debug_mode() -> int:
    """The mode :func:`set_sync_debug_mode` set, read back from JAX's transfer guard (0 unless it logs/refuses).

    Raises:
        NoCudaError: JAX has no GPU (an AssertionError, as torch's CPU build raises).
    """
    jax_device(None, "get_sync_debug_mode()")
    guard = _guard()
    return {"log": 1, "log_explicit": 1, "disallow": 2, "disallow_explicit": 2}.get(guard or "allow", 0)


class cudaStatus:
    """torch.cuda.cudaStatus: the CUDA runtime's status codes torch names."""

    SUCCESS: int = 0
    ERROR_NOT_READY: int = 34
