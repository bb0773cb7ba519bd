"""torch's process-level switches and small Tensor queries that have a meaning here.

* ``use_deterministic_algorithms`` and friends keep their value (torch's defaults) and change nothing: XLA's CPU
  kernels are deterministic, and GPU determinism is the ``XLA_FLAGS`` option ``--xla_gpu_deterministic_ops``, read
  when JAX starts (lf.backends.cudnn documents the same).
* ``set_default_device`` maps onto JAX's ``jax_default_device``: new tensors are placed there.
* ``get_num_threads``/``set_num_threads``: XLA owns its thread pool; the getter reports the CPU count (or the value
  last set), the setter records it.
* Tensor queries: ``ndimension``, ``is_signed``, ``get_device``, ``stride`` (lazyflow tensors are dense and
  row-major), ``is_conj``/``is_neg`` (always False: ``conj`` conjugates at once, see ``_functional.complex``),
  ``resolve_neg`` (the tensor itself), ``apply_``/``map_`` (a Python callable
  per element, on the host, as torch's CPU-only methods).
"""

from __future__ import annotations

import builtins
import os

import jax
import numpy as np

from ._core import dtypes as D
from ._core.device import Device, default_device, device, from_jax_device, to_jax_device
from ._core.errors import ArgumentError, IndexOutOfRangeError, ValueRangeError
from ._creation import tensor
from ._functional import clone
from ._functional.inplace import copy_
from ._tensor import Tensor

__all__ = [
    "are_deterministic_algorithms_enabled",
    "asarray",
    "fork",
    "sym_float",
    "sym_int",
    "sym_ite",
    "sym_max",
    "sym_min",
    "sym_not",
    "sym_sum",
    "wait",
    "get_default_device",
    "get_deterministic_debug_mode",
    "get_num_threads",
    "init_num_threads",
    "is_conj",
    "is_deterministic_algorithms_warn_only_enabled",
    "is_inference",
    "is_warn_always_enabled",
    "resolve_neg",
    "set_default_device",
    "set_deterministic_debug_mode",
    "set_num_threads",
    "set_warn_always",
    "use_deterministic_algorithms",
]

_flags = {"deterministic": False, "warn_only": False, "warn_always": False, "threads": None}


def use_deterministic_algorithms(mode: bool, *, warn_only: bool = False) -> None:
    """Record torch's determinism switch (it changes nothing: XLA's CPU kernels are deterministic; on GPUs set
    ``XLA_FLAGS=--xla_gpu_deterministic_ops=true`` before JAX starts)."""
    if not isinstance(mode, builtins.bool):
        raise ArgumentError(f"use_deterministic_algorithms expects a bool, got {type(mode).__name__}")
    _flags["deterministic"], _flags["warn_only"] = mode, builtins.bool(warn_only)


def are_deterministic_algorithms_enabled() -> bool:
    """The value :func:`use_deterministic_algorithms` last set (False by default)."""
    return _flags["deterministic"]


def is_deterministic_algorithms_warn_only_enabled() -> bool:
    """The ``warn_only`` value :func:`use_deterministic_algorithms` last set."""
    return _flags["warn_only"]


_DEBUG_MODES = {"default": 0, "warn": 1, "error": 2}


def set_deterministic_debug_mode(debug_mode) -> None:
    """torch's string/int spelling of :func:`use_deterministic_algorithms`: 0/"default" off, 1/"warn" warn-only,
    2/"error" on.

    Raises:
        ValueRangeError: another value.
    """
    mode = _DEBUG_MODES.get(debug_mode, debug_mode) if isinstance(debug_mode, str) else debug_mode
    if mode not in (0, 1, 2):
        raise ValueRangeError(
            f"invalid value of debug_mode, expected 0, 1, 2 or default/warn/error, got {debug_mode!r}"
        )
    use_deterministic_algorithms(mode != 0, warn_only=mode == 1)


def get_deterministic_debug_mode() -> int:
    """0, 1 or 2, as :func:`set_deterministic_debug_mode` takes them."""
    if not _flags["deterministic"]:
        return 0
    return 1 if _flags["warn_only"] else 2


def set_warn_always(b: bool) -> None:
    """Record torch's "warn every time, not once" switch (lazyflow's warnings follow Python's filters)."""
    _flags["warn_always"] = builtins.bool(b)


def is_warn_always_enabled() -> bool:
    """The value :func:`set_warn_always` last set."""
    return _flags["warn_always"]


def get_num_threads() -> int:
    """The intra-op thread count: the value :func:`set_num_threads` last set, else the CPU count (XLA's pool)."""
    return _flags["threads"] or (os.cpu_count() or 1)


def set_num_threads(int: int) -> None:
    """Record a thread count (XLA sizes its own pool when it starts).

    Raises:
        ValueRangeError: a count below 1.
    """
    if int < 1:
        raise ValueRangeError(f"set_num_threads expects a positive integer, got {int}")
    _flags["threads"] = builtins.int(int)


def init_num_threads() -> None:
    """torch initialises its OpenMP threads here; XLA's pool needs nothing."""


def get_default_device() -> Device:
    """The device new tensors are created on (``set_default_device``'s value, else JAX's first device)."""
    jd = jax.config.jax_default_device  # type: ignore[attr-defined]
    if jd is None:
        return default_device()
    return device(jd) if isinstance(jd, str) else from_jax_device(jd)


def set_default_device(device) -> None:
    """Create new tensors on ``device`` (None: back to JAX's default), through JAX's ``jax_default_device``.

    Raises:
        DeviceError: a device JAX does not have (``'cuda'`` without a GPU).
    """
    jax.config.update("jax_default_device", None if device is None else to_jax_device(device))


def is_conj(input: Tensor) -> bool:
    """False: ``conj`` conjugates at once (JAX arrays carry no conjugate bit), so no tensor is lazily conjugated."""
    return False


def is_inference(input: Tensor) -> bool:
    """False: ``lf.inference_mode`` is ``no_grad`` here and makes no inference tensors."""
    return False


def resolve_neg(input: Tensor) -> Tensor:
    """``input``: there is no negative bit to resolve."""
    return input


def asarray(obj, *, dtype=None, device=None, copy: bool | None = None, requires_grad: bool = False) -> Tensor:
    """``obj`` (a Tensor, array, scalar or nested sequence) as a tensor (``torch.asarray``): a Tensor of the requested
    dtype and device is returned as it is unless ``copy=True``; anything else enters through lf.tensor's copy.

    Raises:
        ArgumentError: ``copy=False`` where a conversion or copy is needed.
    """
    if isinstance(obj, Tensor):
        d = obj.dtype if dtype is None else D.to_dtype(dtype)
        same = d is obj.dtype and (device is None or device_of(device) == obj.device)
        if same and not copy:
            out = obj
        elif copy is False:
            raise ArgumentError("asarray(copy=False): the tensor would need a dtype or device conversion (a copy)")
        else:
            out = obj.to(d) if d is not obj.dtype else clone(obj)
            if device is not None:
                out = out.to(device)
    else:
        if copy is False:
            raise ArgumentError(
                "asarray(copy=False) cannot share memory with a non-Tensor object: lazyflow copies user memory "
                "at its one ingress point; pass copy=None or True"
            )
        out = tensor(obj, dtype=dtype, device=device)
    return out.requires_grad_() if requires_grad else out


def device_of(d) -> Device:
    return d if isinstance(d, Device) else device(d)


# ---------------------------------------------------------------- torch's symbolic-shape helpers, on plain values
# lazyflow traces with concrete shapes (a new shape retraces), so every size is a Python int and these are the plain
# Python operations that torch's helpers fall back to for non-symbolic values.
def sym_float(a):
    """``float(a)``."""
    return builtins.float(a)


def sym_int(a):
    """``int(a)`` rounding towards zero."""
    return builtins.int(a)


def sym_max(a, b):
    """``max(a, b)``."""
    return builtins.max(a, b)


def sym_min(a, b):
    """``min(a, b)``."""
    return builtins.min(a, b)


def sym_not(a):
    """``not a``."""
    return not a


def sym_ite(b, t, f):
    """``t if b else f``."""
    return t if b else f


def sym_sum(args):
    """``sum(args)``."""
    return builtins.sum(args)


class _Future:
    """The completed future :func:`fork` returns (torch.jit.Future's ``wait``/``value``/``done``)."""

    def __init__(self, value):
        self._v = value

    def wait(self):
        return self._v

    def value(self):
        return self._v

    def done(self) -> bool:
        return True


def fork(*args, **kwargs) -> _Future:
    """``fork(func, *args, **kwargs)``: run ``func(*args, **kwargs)`` and return a completed future, as torch.jit.fork
    runs outside TorchScript (synchronously); XLA parallelises inside compiled programs instead.

    Raises:
        ArgumentError: no callable first argument.
    """
    if not args or not callable(args[0]):
        raise ArgumentError("fork(func, *args, **kwargs) expects a callable first argument")
    return _Future(args[0](*args[1:], **kwargs))


def wait(arg0):
    """The value of a :func:`fork` future (``arg0``: torch's name for it)."""
    return arg0.wait()


# ---------------------------------------------------------------- Tensor-only queries
def _ndimension(self: Tensor) -> int:
    """The number of dimensions (``dim()``)."""
    return self.ndim


def _is_signed(self: Tensor) -> bool:
    """Whether the dtype is signed (floats and signed integers; not uint8 or bool)."""
    return self.dtype not in (D.uint8, D.bool_)


def _get_device(self: Tensor) -> int:
    """The device index: -1 for the CPU, as torch."""
    d = self.device
    return -1 if d.type == "cpu" else (d.index or 0)


def _stride(self: Tensor, dim=None):
    """Row-major strides in elements (lazyflow tensors are dense); one dim's stride when ``dim`` is given."""
    shape = tuple(self.shape)
    st = [1] * len(shape)
    for i in builtins.range(len(shape) - 2, -1, -1):
        st[i] = st[i + 1] * builtins.max(shape[i + 1], 1)
    if dim is None:
        return tuple(st)
    n = builtins.max(len(shape), 1)
    if not -n <= dim < n:
        raise IndexOutOfRangeError(
            f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {dim})"
        )
    return st[dim] if shape else 1


def _dim_order(self: Tensor, *, ambiguity_check=False) -> tuple:
    """The dims from outermost to innermost in memory: ``(0, 1, ..., ndim - 1)`` for a dense row-major tensor."""
    return tuple(builtins.range(self.ndim))


def _apply_(self: Tensor, callable) -> Tensor:
    """Replace each element by ``callable(element)`` in place (a Python function, on the host; slow)."""
    a = np.asarray(self.detach().numpy())
    out = np.vectorize(callable, otypes=[a.dtype])(a) if a.size else a
    return copy_(self, tensor(out, dtype=self.dtype))


def _map_(self: Tensor, tensor_: Tensor, callable) -> Tensor:
    """Replace each element by ``callable(self_element, other_element)`` in place (``other`` broadcast)."""
    a = np.asarray(self.detach().numpy())
    b = np.broadcast_to(np.asarray(tensor_.detach().numpy()), a.shape)
    out = np.vectorize(callable, otypes=[a.dtype])(a, b) if a.size else a
    return copy_(self, tensor(out, dtype=self.dtype))


METHODS = {
    "ndimension": _ndimension,
    "is_signed": _is_signed,
    "get_device": _get_device,
    "stride": _stride,
    "dim_order": _dim_order,
    "apply_": _apply_,
    "map_": _map_,
    "is_conj": is_conj,
    "is_neg": is_conj,
    "is_inference": is_inference,
    "resolve_neg": resolve_neg,
}
