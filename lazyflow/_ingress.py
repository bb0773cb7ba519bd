"""The one way user data enters lazyflow: Python scalars and nested sequences, numpy arrays, buffer-protocol and
``__array__`` objects, JAX arrays and Tensors become a ``jax.Array`` that lazyflow owns.

Why a copy: on CPU ``jax.device_put`` reuses a 64-byte-aligned numpy buffer (every torch tensor's ``.numpy()`` is
one), so the caller could later change a lazyflow tensor by mutating its own array. Everything that takes user memory
(``lf.tensor``, ``load_state_dict``, ``copy_``, indexing with arrays, the autograd entry points...) comes through
:func:`array`; nothing else hands user memory to ``jax.device_put``.
"""

from __future__ import annotations

import builtins

import jax
import jax.numpy as jnp
import numpy as np

from ._core import dtypes as D
from ._core.device import to_jax_device
from ._core.errors import DTypeError, ShapeError, ValueRangeError
from ._tensor import Tensor, _concrete

__all__ = ["array", "infer_dtype"]


def infer_dtype(data):
    """torch.tensor's dtype inference for Python data (numpy scalars and arrays keep their dtype: None)."""
    if isinstance(data, (np.generic, np.ndarray)):
        return None
    if isinstance(data, builtins.bool):
        return D.bool_
    if isinstance(data, builtins.int):
        return D.default_int()
    if isinstance(data, builtins.float):
        return D.get_default_dtype()
    if isinstance(data, builtins.complex):
        return D.default_complex()
    if isinstance(data, (list, tuple)):
        kinds = set()
        stack = [data]
        while stack:
            x = stack.pop()
            if isinstance(x, (list, tuple)):
                stack.extend(x)
            elif isinstance(x, Tensor):
                kinds.add(x.dtype)
            elif isinstance(x, (np.ndarray, np.generic)):
                kinds.add(D.to_dtype(x.dtype))
            elif isinstance(x, builtins.bool):
                kinds.add(D.bool_)
            elif isinstance(x, builtins.int):
                kinds.add(D.default_int())
            elif isinstance(x, builtins.float):
                kinds.add(D.get_default_dtype())
            elif isinstance(x, builtins.complex):
                kinds.add(D.default_complex())
            else:
                raise DTypeError(f"tensor(): cannot convert an element of type {type(x).__name__} to a number")
        if not kinds:
            return D.get_default_dtype()
        r = None
        for k in kinds:
            r = k if r is None else D.promote_types(r, k)
        return r
    return None


def _has_big_int(data) -> bool:
    if isinstance(data, (list, tuple)):
        return builtins.any(_has_big_int(x) for x in data)
    return isinstance(data, builtins.int) and not -(2**63) <= data < 2**63


def _brief(data) -> str:
    r = repr(data)
    return r if len(r) <= 60 else r[:57] + "..."


def _to_numpy(data):
    if isinstance(data, (list, tuple)):
        parts = [_to_numpy(x) for x in data]
        shapes = {p.shape for p in parts}
        if len(shapes) > 1:
            raise ShapeError(
                f"tensor(): expected a rectangular nested sequence, got elements of shapes "
                f"{sorted(shapes, key=len)} at one level"
            )
        return np.array(parts) if parts else np.zeros((0,), np.float32)
    if isinstance(data, Tensor):
        _concrete(data, "tensor(<Tensor>) inside a list")
        return np.asarray(data._value)
    return np.asarray(data)


def check_fits(values, d: D.DType, what: str) -> None:
    """Refuse Python numbers that a narrow integer dtype ``d`` cannot hold, as torch does for Python data:
    integers must lie in ``[min, max]`` (for unsigned types ``[-max, max]``, torch wraps those), floats in
    ``[min, max]`` and be finite. ``values``: a Python scalar or the numpy array built from Python data."""
    if d.is_floating_point or d.is_complex or d is D.bool_:
        return
    a = np.asarray(values)
    if a.size == 0 or a.dtype.kind not in "iuf":
        return
    info = np.iinfo(d.to_jax())
    lo, hi = (
        (-int(info.max), int(info.max)) if a.dtype.kind in "iu" and info.min == 0 else (int(info.min), int(info.max))
    )
    if a.dtype.kind == "f" and not np.isfinite(a).all():
        bad = a[~np.isfinite(a)].flat[0]
    elif a.min() < lo or a.max() > hi:
        bad = a.min() if a.min() < lo else a.max()
    else:
        return
    raise ValueRangeError(f"{what}: value {bad.item()!r} cannot be converted to type {d.name} without overflow")


def array(data, dtype=None, device=None, *, copy: bool = True) -> jax.Array:
    """``data`` as a ``jax.Array`` that lazyflow owns.

    Args:
        data: a scalar, nested sequence, numpy array, object with ``__array__``/buffer protocol, jax array or Tensor.
        dtype: a lazyflow dtype (or anything ``lf.dtype`` accepts); inferred like ``torch.tensor`` when None.
        device: where to put it: a device (``"cpu"``, ``lf.device(...)``) or a ``jax.sharding.Sharding``; default:
            JAX's default device.
        copy: False lets an existing jax array/Tensor value of the right dtype through unchanged (JAX arrays are
            immutable, so sharing one is safe); user memory (numpy and friends) is copied either way.
    Raises:
        DTypeError: non-numeric data, an unsupported dtype, or a 64-bit dtype while x64 is off.
        ShapeError: a ragged nested sequence.
    """
    if isinstance(data, Tensor):
        data = data._value
    if isinstance(data, jax.Array):
        d = D.to_dtype(dtype) if dtype is not None else D.from_jax_dtype(data.dtype)
        if copy or d.to_jax() != data.dtype:
            data = jnp.array(data, dtype=d.to_jax(), copy=True)
        return data if device is None else jax.device_put(data, _placement(device))
    if dtype is not None:
        d = D.to_dtype(dtype)
    else:
        d = infer_dtype(data)
        if d is None:
            arr = np.asarray(data)
            if arr.dtype == object or arr.dtype.kind in "USV":
                raise DTypeError(f"tensor(): cannot convert {type(data).__name__} to a tensor")
            d = D.to_dtype(arr.dtype)
    arr = _to_numpy(data)
    if (
        d.is_floating_point is False
        and not isinstance(data, (np.ndarray, np.generic))
        and (arr.dtype == np.uint64 or arr.dtype == object and _has_big_int(data))
    ):
        raise ValueRangeError(
            f"tensor(): a Python int in {_brief(data)} does not fit in int64 "
            "(Overflow when unpacking long, as in torch)"
        )
    if arr.dtype == object or arr.dtype.kind in "USV":
        raise DTypeError(f"tensor(): cannot convert {type(data).__name__} (non-numeric) to a tensor")
    if dtype is not None and not isinstance(data, np.ndarray) and not hasattr(data, "__array__"):
        check_fits(arr, d, "tensor()")
    # always a private copy: JAX may alias a suitably aligned numpy buffer, which the caller can still mutate
    owned = np.array(arr, dtype=d.to_jax(), copy=True)
    return jax.device_put(owned, _placement(device) if device is not None else None)


def _placement(device):
    return device if isinstance(device, jax.sharding.Sharding) else to_jax_device(device)
