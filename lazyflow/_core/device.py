"""Devices with torch's names over JAX devices: ``cpu``, ``cuda``/``cuda:N`` (JAX GPU devices)."""

from __future__ import annotations

import threading
from typing import Any, TypeAlias

import jax

from .errors import DeviceError

__all__ = [
    "Device",
    "device",
    "to_jax_device",
    "from_jax_device",
    "default_device",
    "devices_of",
    "current_index",
    "set_current_index",
]

# ``jax.Device`` in annotations: jaxlib ships no stub for its C++ Device class, so a type checker sees
# ``jax.Device`` as a plain variable (isinstance checks against ``jax.Device`` itself are fine).
JaxDevice: TypeAlias = Any

_PLATFORM = {"cpu": "cpu", "cuda": "gpu", "gpu": "gpu", "tpu": "tpu"}
_TYPE_OF_PLATFORM = {"cpu": "cpu", "gpu": "cuda", "cuda": "cuda", "rocm": "cuda", "tpu": "tpu"}


class Device:
    """A device, as in ``torch.device``: ``Device("cpu")``, ``Device("cuda:0")``, ``Device("cuda", 1)``."""

    __slots__ = ("type", "index")

    def __init__(self, type: str | Device, index: int | None = None):
        if isinstance(type, Device):
            type, index = type.type, type.index if index is None else index
        if not isinstance(type, str):
            raise DeviceError(f"device expects a string like 'cpu' or 'cuda:0', got {type!r}")
        if ":" in type:
            type, _, idx = type.partition(":")
            if not idx.isdigit():
                raise DeviceError(f"bad device index in {type}:{idx!r}; expected e.g. 'cuda:0'")
            index = int(idx)
        if type not in _PLATFORM:
            raise DeviceError(f"unknown device type {type!r}; expected 'cpu', 'cuda' or 'tpu'")
        self.type = "cuda" if type == "gpu" else type
        self.index = index

    def __repr__(self) -> str:
        return f"device(type='{self.type}'" + (f", index={self.index})" if self.index is not None else ")")

    def __str__(self) -> str:
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __eq__(self, other) -> bool:
        if isinstance(other, str):
            other = Device(other)
        return isinstance(other, Device) and (self.type, self.index or 0) == (other.type, other.index or 0)

    def __hash__(self) -> int:
        return hash((self.type, self.index or 0))

    def __reduce__(self):
        return (Device, (self.type, self.index))

    def __enter__(self) -> Device:
        """``with lf.device("cuda"):`` -- tensors created in the block go to this device unless told otherwise
        (torch's device context manager), through JAX's ``jax_default_device`` (as ``lf.set_default_device``); the
        previous default comes back on exit, nested blocks included.

        Raises:
            DeviceError: a device JAX does not have.
        """
        target = to_jax_device(self)
        _entered.append(jax.config.jax_default_device)  # type: ignore[attr-defined]
        jax.config.update("jax_default_device", target)
        return self

    def __exit__(self, *exc) -> None:
        jax.config.update("jax_default_device", _entered.pop())


device = Device
_entered: list = []  # the default devices ``with lf.device(...)`` blocks replaced, innermost last


def to_jax_device(d) -> JaxDevice:
    """The JAX device for a lazyflow device, device string or JAX device."""
    if isinstance(d, jax.Device):
        return d
    d = Device(d) if not isinstance(d, Device) else d
    platform = _PLATFORM[d.type]
    devs = devices_of(d.type)
    if not devs:
        raise DeviceError(
            f"device {d} requested but JAX has no {platform} devices here (available: "
            f"{sorted({x.platform for x in jax.devices()})}); install a jax build for that platform"
        )
    idx = current_index(d.type) if d.index is None else d.index
    if idx >= len(devs):
        raise DeviceError(f"device {d} requested but only {len(devs)} {d.type} device(s) exist")
    return devs[idx]


def from_jax_device(jd: JaxDevice) -> Device:
    platform: str = jd.platform
    return (
        Device(_TYPE_OF_PLATFORM.get(platform, platform), jd.id if platform != "cpu" else None)
        if platform != "cpu"
        else Device("cpu")
    )


def default_device() -> Device:
    return from_jax_device(jax.devices()[0])


def devices_of(type: str) -> list[JaxDevice]:
    """JAX's devices for a lazyflow device type (``'cuda'``: JAX's GPUs); empty when JAX has none."""
    try:
        return jax.devices(_PLATFORM[type])
    except RuntimeError:
        return []


# torch's "current device" of each type, which a device without an index ('cuda') means. torch keeps one per thread.
_current = threading.local()


def current_index(type: str) -> int:
    """The index ``'cuda'`` (no index) means: 0 unless ``lf.cuda.set_device`` chose another."""
    return getattr(_current, type, 0)


def set_current_index(type: str, index: int) -> None:
    """Make ``index`` the current device of ``type`` in this thread (the caller checks that it exists)."""
    setattr(_current, type, index)
