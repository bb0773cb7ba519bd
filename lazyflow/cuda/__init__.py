"""``lf.cuda``: torch.cuda's device and memory queries over JAX's GPU devices.

With a GPU, each call answers from JAX (``jax.devices("gpu")``, ``device.memory_stats()``). Without one, each answers
exactly as torch's CPU build does: ``is_available()`` is False, ``device_count()`` 0, the memory counters 0,
``manual_seed`` a no-op, and the calls that need a device raise :class:`lazyflow.NoCudaError` (an AssertionError and
a RuntimeError, like torch's "Torch not compiled with CUDA enabled").

>>> device = "cuda" if lf.cuda.is_available() else "cpu"
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import jax
import numpy as np

from .._core.device import Device, current_index, devices_of, set_current_index
from .._core.errors import NoCudaError, ValueRangeError
from .._creation import manual_seed as _seed_all_devices
from . import amp

__all__ = [
    "amp",
    "is_available",
    "device_count",
    "current_device",
    "set_device",
    "device",
    "synchronize",
    "manual_seed",
    "manual_seed_all",
    "get_device_name",
    "get_device_properties",
    "DeviceProperties",
    "memory_allocated",
    "max_memory_allocated",
    "memory_reserved",
    "reset_peak_memory_stats",
    "empty_cache",
    "is_bf16_supported",
]

DeviceLike = Device | str | int | None


class _NoCudaBindingError(NoCudaError, AttributeError):
    """Where torch's CPU build raises AttributeError (``set_device(0)``, ``reset_peak_memory_stats()``: its missing
    CUDA bindings), this is also one."""


def _no_cuda(what: str, cls: type[NoCudaError] = NoCudaError) -> NoCudaError:
    platforms = sorted({d.platform for d in jax.devices()})
    return cls(
        f"lf.cuda.{what} needs a CUDA device, but JAX has none here (its devices: {platforms}); install a CUDA build "
        "of jax (pip install 'jax[cuda12]'), or test lf.cuda.is_available() first"
    )


def is_available() -> bool:
    """Whether JAX has a GPU."""
    return device_count() > 0


def device_count() -> int:
    """How many GPUs JAX has (0 without one)."""
    return len(devices_of("cuda"))


def _index(dev: Any, *, optional: bool) -> int:
    """torch's ``_get_device_index``: an int as is, a cuda device's index, the current index for ``'cuda'`` when
    ``optional``; a non-cuda device, or a missing index when not ``optional``, raise ValueError as torch does."""
    if isinstance(dev, int) and not isinstance(dev, bool):
        return dev
    if isinstance(dev, str):
        dev = Device(dev)
    if isinstance(dev, Device):
        if dev.type != "cuda":
            raise ValueRangeError(f"Expected a cuda device, but got: {dev}")
        if dev.index is not None:
            return dev.index
    if dev is None or isinstance(dev, Device):
        if optional:
            return current_index("cuda")
        raise ValueRangeError(f"Expected a device with a specified index or an integer, but got: {dev}")
    raise ValueRangeError(f"Expected a cuda device, an index or None, but got: {dev!r}")


def _jax_device(dev: DeviceLike, what: str):
    devs = devices_of("cuda")
    if not devs:
        raise _no_cuda(what)
    idx = _index(dev, optional=True)
    if not 0 <= idx < len(devs):
        raise ValueRangeError(f"lf.cuda.{what}: there is no cuda:{idx}; JAX has {len(devs)} GPU(s)")
    return devs[idx]


def current_device() -> int:
    """The index of the current GPU (what ``'cuda'`` without an index means).

    Raises:
        NoCudaError: JAX has no GPU (torch's CPU build raises AssertionError).
    """
    if not is_available():
        raise _no_cuda("current_device()")
    return current_index("cuda")


def set_device(device: DeviceLike) -> None:
    """Make ``device`` the current GPU of this thread; a negative index does nothing.

    Raises:
        ValueRangeError: a non-cuda device, or none/``'cuda'`` without an index (a ValueError, as in torch).
        NoCudaError: JAX has no GPU (also an AttributeError, as torch's CPU build raises).
    """
    idx = _index(device, optional=False)
    if idx < 0:
        return
    if not is_available():
        raise _no_cuda("set_device()", _NoCudaBindingError)
    _jax_device(idx, "set_device()")
    set_current_index("cuda", idx)


class device:
    """Context manager that makes ``device`` the current GPU for its block (torch.cuda.device); ``None`` or a
    negative index: no-op.

    Raises:
        ValueRangeError: a non-cuda device (on construction).
        NoCudaError: on entering, when JAX has no GPU (a RuntimeError, as torch's CPU build raises).
    """

    def __init__(self, device: Any):
        self.idx = -1 if device is None else _index(device, optional=True)
        self.prev_idx = -1

    def __enter__(self) -> None:
        if self.idx < 0:
            return
        if not is_available():
            raise _no_cuda("device(...)")
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
    d = _jax_device(device, "synchronize()")
    (jax.device_put(np.zeros((), np.float32), d) + 1).block_until_ready()


def manual_seed(seed: int) -> None:
    """torch.cuda.manual_seed. lazyflow has one generator for every device, so with a GPU this seeds it (as
    ``lf.manual_seed`` does, CPU draws included); without one it does nothing, as torch's CPU build."""
    seed = int(seed)
    if is_available():
        _seed_all_devices(seed)


def manual_seed_all(seed: int) -> None:
    """torch.cuda.manual_seed_all: the same as :func:`manual_seed` (one generator serves every GPU)."""
    manual_seed(seed)


def get_device_name(device: DeviceLike = None) -> str:
    """The GPU's name as JAX reports it (``device_kind``, e.g. ``'NVIDIA H100 80GB HBM3'``).

    Raises:
        NoCudaError: JAX has no GPU.
    """
    return _jax_device(device, "get_device_name()").device_kind


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
    d = _jax_device(device, "get_device_properties()")
    major, _, minor = str(getattr(d, "compute_capability", "0.0")).partition(".")
    stats = d.memory_stats() or {}
    return DeviceProperties(
        d.device_kind,
        int(major or 0),
        int(minor or 0),
        int(stats.get("bytes_limit", 0)),
        int(getattr(d, "core_count", 0)),
    )


# ---------------------------------------------------------------- memory: JAX's allocator statistics
_peak_floor: dict[int, int] = {}  # device id -> JAX's peak when reset_peak_memory_stats was called


def _stats(device: DeviceLike, what: str) -> dict | None:
    if not is_available():
        return None  # torch's CPU build answers 0 whatever the argument
    return _jax_device(device, what).memory_stats() or {}


def memory_allocated(device: DeviceLike = None) -> int:
    """Bytes held by arrays on the GPU (JAX's ``bytes_in_use``); 0 without a GPU, as torch's CPU build."""
    s = _stats(device, "memory_allocated()")
    return 0 if s is None else int(s.get("bytes_in_use", 0))


def max_memory_allocated(device: DeviceLike = None) -> int:
    """The peak of :func:`memory_allocated` (JAX's ``peak_bytes_in_use``); 0 without a GPU.

    JAX cannot reset its peak: after :func:`reset_peak_memory_stats` this is JAX's peak once that has risen past the
    value at the reset, and until then the current usage (a lower bound of the true peak since the reset).
    """
    s = _stats(device, "max_memory_allocated()")
    if s is None:
        return 0
    peak, now = int(s.get("peak_bytes_in_use", 0)), int(s.get("bytes_in_use", 0))
    floor = _peak_floor.get(_jax_device(device, "max_memory_allocated()").id)
    return peak if floor is None or peak > floor else now


def memory_reserved(device: DeviceLike = None) -> int:
    """Bytes JAX's allocator holds from the GPU (``pool_bytes``, else ``bytes_reserved``); 0 without a GPU."""
    s = _stats(device, "memory_reserved()")
    if s is None:
        return 0
    return int(s.get("pool_bytes", s.get("bytes_reserved", s.get("bytes_in_use", 0))))


def reset_peak_memory_stats(device: DeviceLike = None) -> None:
    """Start :func:`max_memory_allocated` afresh (see there for what JAX allows).

    Raises:
        NoCudaError: JAX has no GPU (also an AttributeError, as torch's CPU build raises).
    """
    if not is_available():
        raise _no_cuda("reset_peak_memory_stats()", _NoCudaBindingError)
    d = _jax_device(device, "reset_peak_memory_stats()")
    _peak_floor[d.id] = int((d.memory_stats() or {}).get("peak_bytes_in_use", 0))


def empty_cache() -> None:
    """A no-op: JAX's allocator offers no call that returns its cached blocks to the GPU (nor is there one to make
    without a GPU, where torch's CPU build also does nothing)."""


def is_bf16_supported(including_emulation: bool = True) -> bool:
    """Whether the current GPU computes in bfloat16: natively from compute capability 8.0, emulated on any GPU when
    ``including_emulation``; False without a GPU."""
    if not is_available():
        return False
    return including_emulation or get_device_properties().major >= 8
