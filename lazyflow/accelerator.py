"""``lf.accelerator``: torch.accelerator's device-agnostic queries over JAX's accelerators (GPU, else TPU).

Without an accelerator each call answers as torch's CPU build does: ``is_available()`` False,
``current_accelerator()`` None, ``device_count()`` 0, and the calls that need one raise :class:`lazyflow.DeviceError`
(a RuntimeError, as in torch).
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np

from ._core.device import Device, current_index, devices_of, set_current_index
from ._core.errors import DeviceError

__all__ = [
    "is_available",
    "current_accelerator",
    "device_count",
    "current_device_index",
    "set_device_index",
    "synchronize",
    "device_index",
]

_TYPES = ("cuda", "tpu")  # JAX's accelerator platforms, in the order torch would pick them


def _type() -> str | None:
    return next((t for t in _TYPES if devices_of(t)), None)


def _none() -> DeviceError:
    return DeviceError(
        "Cannot access accelerator device when none is available (JAX has only "
        f"{sorted({d.platform for d in jax.devices()})}); test lf.accelerator.is_available() first"
    )


def is_available() -> bool:
    """Whether JAX has an accelerator (a GPU or a TPU)."""
    return _type() is not None


def current_accelerator(check_available: bool = False) -> Device | None:
    """The accelerator's device type (``lf.device('cuda')``), or None without one."""
    t = _type()
    return None if t is None else Device(t)


def device_count() -> int:
    """How many devices the accelerator has (0 without one)."""
    t = _type()
    return 0 if t is None else len(devices_of(t))


def _index(device: Any, t: str) -> int:
    if isinstance(device, int) and not isinstance(device, bool):
        return device
    d = Device(device) if isinstance(device, str) else device
    if not isinstance(d, Device) or d.type != t:
        raise DeviceError(f"Accelerator expected: a {t} device or an index, got {device!r}")
    return current_index(t) if d.index is None else d.index


def current_device_index() -> int:
    """The index of the current accelerator device.

    Raises:
        DeviceError: no accelerator.
    """
    t = _type()
    if t is None:
        raise _none()
    return current_index(t)


def set_device_index(device: Device | str | int | None, /) -> None:
    """Make ``device`` the current accelerator device; a negative index does nothing.

    Raises:
        DeviceError: no accelerator, or no such device.
    """
    if isinstance(device, int) and device < 0:
        return
    t = _type()
    if t is None:
        raise _none()
    idx = _index(device, t)
    if not 0 <= idx < len(devices_of(t)):
        raise DeviceError(f"there is no {t}:{idx}; JAX has {len(devices_of(t))} {t} device(s)")
    set_current_index(t, idx)


def synchronize(device: Device | str | int | None = None, /) -> None:
    """Wait until the accelerator has finished the work queued so far.

    Raises:
        DeviceError: no accelerator.
    """
    t = _type()
    if t is None:
        raise _none()
    idx = current_index(t) if device is None else _index(device, t)
    (jax.device_put(np.zeros((), np.float32), devices_of(t)[idx]) + 1).block_until_ready()


class device_index:
    """Context manager that makes device ``device`` the current accelerator device for its block; ``None``: no-op.

    Raises:
        DeviceError: on entering, when there is no accelerator.
    """

    def __init__(self, device: int | None, /):
        self.idx = device
        self.prev_idx: int | None = None

    def __enter__(self) -> None:
        if self.idx is None:
            return
        self.prev_idx = current_device_index()
        set_device_index(self.idx)

    def __exit__(self, *exc: object) -> bool:
        if self.prev_idx is not None:
            set_device_index(self.prev_idx)
        return False
