"""Python indexing (``t[idx]`` and ``t[idx] = v``): an index becomes a static spec plus dynamic operands, and one
op-table call (``getitem`` / ``setitem``, see ``lazyflow.ops.indexing``).

Integer indices and slice starts are dynamic operands, so ``for i in range(n): v[i] = x`` reuses one kernel.
"""

from __future__ import annotations

import builtins
import operator

import numpy as np

from ._core import dtypes as D
from ._core.checks import defer_bounds
from ._core.context import state
from ._core.errors import IndexOutOfRangeError
from ._ingress import array as owned_array
from ._tensor import Tensor, _concrete, _make, _Tracer
from .ops.table import REGISTRY as _R

__all__ = ["getitem", "setitem"]


def getitem(self: Tensor, idx) -> Tensor:
    """``self[idx]`` with torch's indexing rules (ints, slices, None, ..., bool masks, integer tensors/lists)."""
    spec, dyn = _parse_index(self, idx, False)
    return state.interp.apply(_GETITEM, (self, *dyn), (spec,))


def setitem(self: Tensor, idx, value) -> None:
    """``self[idx] = value`` in place (O(update) when ``self`` owns its buffer)."""
    spec, dyn = _parse_index(self, idx, True)
    state.interp.apply_inplace(_SETITEM, self, (self, *dyn, value), (spec,))


_GETITEM = _R["getitem"]
_SETITEM = _R["setitem"]

_INT_TYPES = (builtins.int, np.integer)
_tuple_item = tuple.__getitem__


def _parse_index(t, idx, for_set):
    """Turn a Python index into ``(spec, dynamic operands)``; see ``lazyflow.ops.indexing``."""
    shape = t._meta[0]
    if type(idx) is builtins.int:  # fast path: v[i]
        if not shape:
            raise IndexOutOfRangeError("invalid index of a 0-dim tensor")
        n = _tuple_item(shape, 0)  # not Size.__getitem__: a Python call (~0.4 us of a ~12 us update)
        if not -n <= idx < n:
            raise IndexOutOfRangeError(f"index {idx} is out of bounds for dimension 0 with size {n}")
        return (("i",),), (idx + n if idx < 0 else idx,)
    if not isinstance(idx, tuple):
        idx = (idx,)
    items = []
    for it in idx:
        if isinstance(it, (list, np.ndarray)) and np.asarray(it).dtype.kind in "biu":
            # constant indices: kept as numpy, so they are checked (and masks resolved) even in graph mode
            arr = np.asarray(it)
            items.append(("m" if arr.dtype == np.bool_ else "a", arr))
            continue
        if (
            isinstance(it, (list, np.ndarray))
            or (isinstance(it, Tensor) and it.ndim > 0)
            or (isinstance(it, Tensor) and it.dtype is D.bool_)
        ):
            it = _make(owned_array(it, copy=False)) if not isinstance(it, Tensor) else it
            if it.dtype is D.bool_:
                # a boolean mask covers it.ndim dims; becomes integer indices (data-dependent: eager only)
                _concrete(it, "boolean-mask indexing")
                items.append(("m", np.asarray(it._value)))
                continue
            if it.dtype.is_floating_point:
                raise IndexError(f"tensors used as indices must be integer or bool, got {it.dtype}")
            items.append(("t", it))
        elif isinstance(it, Tensor):
            if it.dtype.is_floating_point:
                raise IndexError(f"tensors used as indices must be integer or bool, got {it.dtype}")
            items.append(("t", it) if isinstance(it._value, _Tracer) else ("int", builtins.int(it.item())))
        elif isinstance(it, _INT_TYPES) and not isinstance(it, builtins.bool):
            items.append(("int", operator.index(it)))
        elif it is None or isinstance(it, (slice, type(Ellipsis))):
            items.append(("x", it))
        else:
            raise IndexError(
                f"unsupported index {it!r} of type {type(it).__name__}: use ints, slices, None, "
                "..., bool masks or integer tensors/lists"
            )
    n_consuming = builtins.sum(
        it.ndim if k == "m" else 1 for k, it in items if not (k == "x" and (it is None or it is Ellipsis))
    )
    n_ell = builtins.sum(1 for k, it in items if k == "x" and it is Ellipsis)
    if n_ell > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    if n_consuming > len(shape):
        raise IndexOutOfRangeError(
            f"too many indices for tensor of dimension {len(shape)} (got {n_consuming} indices for shape {shape})"
        )
    dynamic_ok = all(
        k == "int" or (k == "x" and (it is None or it is Ellipsis or it.step in (None, 1))) for k, it in items
    )
    spec, dyn, axis = [], [], 0
    for k, it in items:
        if k == "x" and it is Ellipsis:
            for _ in range(len(shape) - n_consuming):
                spec.append(("s", 0, shape[axis], 1))
                axis += 1
            continue
        if k == "x" and it is None:
            spec.append(("n",))
            continue
        if k == "m":
            if tuple(shape[axis : axis + it.ndim]) != it.shape:
                raise IndexOutOfRangeError(
                    f"the shape of the mask {list(it.shape)} at index {axis} does not match "
                    f"the shape of the indexed tensor {list(shape)} at index {axis}"
                )
            for z in np.nonzero(it):
                spec.append(("t",))
                dyn.append(_make(owned_array(z)))
            axis += it.ndim
            continue
        size = shape[axis]
        if k == "int":
            if not -size <= it < size:
                raise IndexOutOfRangeError(f"index {it} is out of bounds for dimension {axis} with size {size}")
            it = it + size if it < 0 else it
            if dynamic_ok:
                spec.append(("i",))
                dyn.append(it)
            else:
                spec.append(("s", it, it + 1, 1))
                spec.append(("sq", axis))
        elif k in ("t", "a"):
            _check_index_values(it if k == "a" else it._value, size, axis)
            spec.append(("t",))
            dyn.append(_make(owned_array(it)) if k == "a" else it)
        else:
            a, b, st = it.indices(size)
            if st == 1 and dynamic_ok:
                length = max(0, b - a)
                if length == size:
                    spec.append(("s", 0, size, 1))
                else:
                    spec.append(("ds", length))
                    dyn.append(a)
            else:
                spec.append(("s", a, b, st))
        axis += 1
    # ("sq", axis) marks a static int index: slice it then squeeze; rewritten as a static int position
    spec = _fold_squeeze(spec)
    return tuple(spec), tuple(dyn)


def _check_index_values(a, size, axis):
    """Bounds check of integer index arrays: now in eager mode, deferred to after the program in graph mode (XLA
    would clamp out-of-range indices silently)."""
    if not np.size(a):
        return
    message = f"index {{index}} is out of bounds for dimension {axis} with size {size}"
    if isinstance(a, _Tracer):
        defer_bounds(a, size, message, low=-size)
        return
    a = np.asarray(a)
    lo, hi = builtins.int(a.min()), builtins.int(a.max())
    if lo < -size or hi >= size:
        raise IndexOutOfRangeError(message.replace("{index}", str(hi if hi >= size else lo)))


def _fold_squeeze(spec):
    out = []
    for item in spec:
        if item[0] == "sq":
            a = out.pop()
            out.append(("si", a[1]))
        else:
            out.append(item)
    return out
