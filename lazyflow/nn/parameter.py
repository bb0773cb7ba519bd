"""``Parameter`` and ``Buffer``: Tensors that a Module registers as its state when assigned as attributes."""

from __future__ import annotations

from typing import TypeVar, cast

import jax.numpy as jnp
import numpy as np

from .._core import dtypes as D
from .._tensor import Tensor, _concrete, _join, _make

__all__ = ["Parameter", "Buffer"]

_T = TypeVar("_T", bound=Tensor)


def _adopt(cls: type[_T], data: Tensor | None, requires_grad: bool) -> _T:
    """A new ``cls`` instance sharing ``data``'s storage and version counter, as torch: an in-place update of either
    is seen through the other (``Parameter(t)``, ``Embedding.from_pretrained(t)``)."""
    if data is None:
        t = _make(jnp.zeros((0,), D.get_default_dtype().to_jax()), None, cls)
    elif not isinstance(data, Tensor):
        raise TypeError(
            f"{cls.__name__} expects a lazyflow Tensor as data, got {type(data).__name__}; "
            "wrap arrays with lf.tensor(...) first"
        )
    else:
        t = _make(data._value, data._meta, cls)
        _join(t, data, share_version=True)
    if requires_grad:
        t.requires_grad_(True)
    return cast(_T, t)  # _make(..., cls) built a cls


class Parameter(Tensor):
    """A Tensor that is a module parameter: assigning one to a Module attribute registers it.

    Args:
        data: the initial value; its storage is shared, not copied (writes to either show in both, as torch).
            Default: an empty tensor.
        requires_grad: whether the parameter records gradients (default True).
    Raises:
        DTypeError: ``requires_grad=True`` with a non-floating dtype.
    >>> w = lf.nn.Parameter(lf.zeros(3, 2))
    """

    __slots__ = ()

    def __new__(cls, data: Tensor | None = None, requires_grad: bool = True):
        return _adopt(cls, data, requires_grad)

    def __repr__(self) -> str:
        return "Parameter containing:\n" + super().__repr__()

    __str__ = __repr__

    def __reduce__(self):
        _concrete(self, "pickle")
        return (_rebuild_parameter, (np.asarray(self._value), self.dtype.name, self._rg))

    def __deepcopy__(self, memo):
        if id(self) in memo:
            return memo[id(self)]
        return Tensor.__deepcopy__(self, memo)


class Buffer(Tensor):
    """A Tensor marked as a module buffer (``torch.nn.Buffer``): assigning one to a Module attribute
    registers it with ``register_buffer(name, buffer, persistent=buffer.persistent)``.

    Args:
        data: the value (shared, not copied).
        persistent: whether the buffer is part of the module's ``state_dict``.
    >>> m.steps = lf.nn.Buffer(lf.zeros(()), persistent=False)
    """

    __slots__ = ("persistent",)
    persistent: bool

    def __new__(cls, data: Tensor | None = None, *, persistent: bool = True):
        t = _adopt(cls, data, False)
        t.persistent = bool(persistent)
        return t

    def __reduce__(self):
        _concrete(self, "pickle")
        return (_rebuild_buffer, (np.asarray(self._value), self.dtype.name, self.persistent))

    def __deepcopy__(self, memo):
        t = cast(Buffer, Tensor.__deepcopy__(self, memo))  # Tensor.__deepcopy__ builds a type(self)
        t.persistent = self.persistent
        return t


def _rebuild_parameter(array, dtype_name, requires_grad):
    return Parameter(_make(jnp.asarray(array, D.to_dtype(dtype_name).to_jax())), requires_grad)


def _rebuild_buffer(array, dtype_name, persistent):
    return Buffer(_make(jnp.asarray(array, D.to_dtype(dtype_name).to_jax())), persistent=persistent)
