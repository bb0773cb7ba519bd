"""What every ``lf.cuda`` module shares: JAX's GPUs, device-index parsing, and the errors raised without a GPU.

Without a GPU torch's CPU build raises different built-in classes from different calls (an AssertionError "Torch not
compiled with CUDA enabled" from most, an AttributeError where a CUDA binding is missing, a TypeError from the legacy
``torch.cuda.FloatTensor`` constructors, a ModuleNotFoundError from the NVML queries...). lazyflow raises
:class:`~lazyflow.NoCudaError` there, made to be also the built-in torch raises, so ``except`` clauses written for
torch keep working; the message says why and what to do.
"""

from __future__ import annotations

from typing import Any

import jax

from .._core.device import Device, current_index, devices_of
from .._core.errors import LazyflowError, NoCudaError, ValueRangeError

DeviceLike = Device | str | int | None


class NoCudaBindingError(NoCudaError, AttributeError):
    """Where torch's CPU build raises AttributeError (``set_device(0)``, ``reset_peak_memory_stats()``: its missing
    CUDA bindings), this is also one."""


class NoCudaTypeError(NoCudaError, TypeError):
    """Where torch's CPU build raises TypeError (``torch.cuda.FloatTensor([1])``, ``ExternalStream(ptr)``)."""


class NoCudaKeyError(NoCudaError, KeyError):
    """Where torch's CPU build raises KeyError (``memory_summary()``: no allocator statistics to format)."""

    def __str__(self) -> str:  # KeyError would print the message quoted, as a key
        return str(self.args[0]) if self.args else ""


class NoNvmlError(LazyflowError, ModuleNotFoundError):
    """The NVML queries (``utilization()``, ``temperature()``...) need the ``pynvml`` module (pip install
    nvidia-ml-py), as in torch; JAX itself reports none of these."""


class CudaError(LazyflowError, RuntimeError):
    """torch.cuda.CudaError: an error code of the CUDA runtime (lazyflow raises none itself: XLA reports its own)."""

    def __init__(self, code: int) -> None:
        self.code = int(code)
        super().__init__(f"CUDA error {self.code} (see the CUDA runtime's cudaError_t for its meaning)")


class DeferredCudaCallError(LazyflowError):
    """torch.cuda.DeferredCudaCallError: a call queued before CUDA was initialized failed on initialization."""


def no_cuda(what: str, cls: type[NoCudaError] = NoCudaError) -> NoCudaError:
    platforms = sorted({d.platform for d in jax.devices()})
    return cls(
        f"lf.cuda.{what} needs a CUDA device, but JAX has none here (its devices: {platforms}); install a CUDA build "
        "of jax (pip install 'jax[cuda12]'), or test lf.cuda.is_available() first"
    )


def gpus() -> list:
    """JAX's GPUs (the one place lf.cuda asks JAX for them)."""
    return devices_of("cuda")


def is_available() -> bool:
    """Whether JAX has a GPU."""
    return device_count() > 0


def device_count() -> int:
    """How many GPUs JAX has (0 without one)."""
    return len(gpus())


def index(dev: Any, *, optional: bool) -> int:
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


def jax_device(dev: DeviceLike, what: str, cls: type[NoCudaError] = NoCudaError):
    """The JAX GPU ``dev`` names (the current one for None/``'cuda'``).

    Raises:
        NoCudaError (as ``cls``): JAX has no GPU.
        ValueRangeError: a non-cuda device, or an index past the last GPU.
    """
    devs = gpus()
    if not devs:
        raise no_cuda(what, cls)
    idx = index(dev, optional=True)
    if not 0 <= idx < len(devs):
        raise ValueRangeError(f"lf.cuda.{what}: there is no cuda:{idx}; JAX has {len(devs)} GPU(s)")
    return devs[idx]
