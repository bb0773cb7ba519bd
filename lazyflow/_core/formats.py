"""Memory formats and layouts: ``lf.channels_last``, ``lf.contiguous_format``, ``lf.preserve_format``,
``lf.strided``..., and the checks every function taking ``memory_format=``, ``layout=`` or ``pin_memory=`` makes.

A lazyflow tensor is an immutable dense JAX array: it has no strides of its own (XLA chooses each buffer's physical
layout, and on the CPU picks NHWC-style layouts for convolutions by itself). So a memory format is a request about
physical layout that changes no value: functions accept the formats torch accepts where torch accepts them, check
them as torch does (``channels_last`` needs a 4-D tensor, ``channels_last_3d`` a 5-D one), and give back the same
values. ``stride()`` stays row-major, so ``t.to(memory_format=lf.channels_last).is_contiguous(
memory_format=lf.channels_last)`` answers for row-major strides (False where torch's restrided tensor says True).
Only the ``strided`` (dense) layout exists; the host memory a CPU device uses is the one ``pin_memory`` would pin.
"""

from __future__ import annotations

from .device import devices_of
from .errors import ArgumentError, DeviceError, NotSupportedError, ShapeError

__all__ = [
    "memory_format",
    "layout",
    "contiguous_format",
    "channels_last",
    "channels_last_3d",
    "preserve_format",
    "legacy_contiguous_format",
    "strided",
    "check_memory_format",
    "check_layout",
    "check_pin_memory",
    "has_accelerator",
    "is_contiguous_as",
]


class _Named:
    """A named singleton: compares by identity, prints as ``lazyflow.<name>``, pickles as the module-level instance
    of that name."""

    __slots__ = ("_name",)

    def __init__(self, name: str) -> None:
        self._name = name

    def __repr__(self) -> str:
        return f"lazyflow.{self._name}"

    def __reduce__(self) -> str:
        return self._name


class memory_format(_Named):
    """A memory format (``lf.contiguous_format``, ``lf.channels_last``, ``lf.channels_last_3d``,
    ``lf.preserve_format``): the physical order torch would lay a tensor's elements out in."""

    __slots__ = ()


class layout(_Named):
    """A tensor layout. lazyflow's tensors are dense: ``lf.strided`` is the one layout (``t.layout``)."""

    __slots__ = ()


contiguous_format = memory_format("contiguous_format")
channels_last = memory_format("channels_last")
channels_last_3d = memory_format("channels_last_3d")
preserve_format = memory_format("preserve_format")
legacy_contiguous_format = memory_format("legacy_contiguous_format")
strided = layout("strided")

_RANK = {channels_last: (4, "channels_last"), channels_last_3d: (5, "channels_last_3d")}
# the order of the dimensions from fastest to slowest varying in each channels-last format (torch's)
_ORDER = {channels_last: (1, 3, 2, 0), channels_last_3d: (1, 4, 3, 2, 0)}


def check_memory_format(fmt, ndim: int | None, where: str, *, preserve: bool = True) -> None:
    """Refuse what torch refuses: a value that is not a memory format (an ArgumentError, a TypeError),
    ``preserve_format`` where only a concrete format makes sense (``preserve=False``: ``lf.empty``), a channels-last
    format for a tensor of the wrong rank (a ShapeError, a RuntimeError as torch's).

    Raises:
        ArgumentError: ``fmt`` is not None or a ``lf.memory_format``.
        ShapeError: ``channels_last`` for a tensor that is not 4-D, ``channels_last_3d`` for one not 5-D.
        ValueError: ``preserve_format`` where it is not allowed.
    """
    if fmt is None:
        return
    if not isinstance(fmt, memory_format):
        raise ArgumentError(
            f"{where}: memory_format must be a lazyflow memory format (lf.contiguous_format, lf.channels_last, "
            f"lf.channels_last_3d, lf.preserve_format), got {fmt!r} of type {type(fmt).__name__}"
        )
    if fmt is preserve_format and not preserve:
        raise ShapeError(
            f"{where}: unsupported memory format Preserve (pass lf.contiguous_format or a channels-last one)"
        )
    need = _RANK.get(fmt)
    if need is not None and ndim is not None and ndim != need[0]:
        raise ShapeError(f"required rank {need[0]} tensor to use {need[1]} format (got a {ndim}-D tensor in {where})")


def check_layout(value, where: str) -> None:
    """``None`` or ``lf.strided``; anything else is refused, naming what arrived.

    Raises:
        NotSupportedError: a layout other than ``strided`` (torch's sparse and jagged layouts are not provided).
        ArgumentError: a value that is not a layout at all.
    """
    if value is None or value is strided:
        return
    name = getattr(value, "_name", None) or str(value)
    if isinstance(value, layout) or name.startswith(("torch.sparse", "torch.jagged", "sparse", "jagged")):
        raise NotSupportedError(f"{where}: lazyflow's tensors are dense (layout=lf.strided); got layout={name}")
    raise ArgumentError(f"{where}: layout must be lf.strided (or None), got {value!r} of type {type(value).__name__}")


def has_accelerator() -> bool:
    """Whether JAX has a GPU or TPU (torch's ``accelerator.is_available()``)."""
    return bool(devices_of("cuda") or devices_of("tpu"))


def check_pin_memory(pin, where: str) -> None:
    """``pin_memory=True`` needs an accelerator, as in torch (a CPU-only build raises the same way); with one, the
    host buffers a transfer reads are JAX's own staging, so there is nothing more to pin.

    Raises:
        DeviceError: ``pin`` is true and the machine has no accelerator.
    """
    if pin and not has_accelerator():
        raise DeviceError(
            f"{where}: pin_memory=True requires a CUDA or other accelerator backend; no pinned memory allocator is "
            "available on this system (leave pin_memory False on a CPU)"
        )


def is_contiguous_as(shape: tuple[int, ...], fmt) -> bool:
    """Whether row-major strides of ``shape`` (every lazyflow tensor's ``stride()``) are contiguous in ``fmt``:
    always for ``contiguous_format``/``preserve_format``/None; for a channels-last format only where both orders
    coincide (torch's test: size-1 dimensions are skipped). A tensor of another rank is never channels-last
    contiguous (torch answers False too).
    """
    order = _ORDER.get(fmt)
    if order is None:
        return True
    if len(shape) != len(order):
        return False
    strides, acc = [0] * len(shape), 1
    for d in range(len(shape) - 1, -1, -1):
        strides[d] = acc
        acc *= max(shape[d], 1)
    expected = 1
    for d in order:
        if shape[d] != 1:
            if strides[d] != expected:
                return False
            expected *= shape[d]
    return True
