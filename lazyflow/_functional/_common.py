"""Helpers shared by the op-function families (operand conversion, dim normalisation, named tuples)."""

from __future__ import annotations

import builtins
import collections

import numpy as np

from .._core.context import state
from .._core.errors import OpError
from .._creation import as_tensor
from .._tensor import Tensor, _dim

_SCALARS = (builtins.int, builtins.float, builtins.bool)


def _apply(op, args, statics=()):
    return state.interp.apply(op, args, statics)


def _inplace(op, target, args, statics=()):
    return state.interp.apply_inplace(op, target, args, statics)


def _dims(dim, ndim):
    """Normalise ``dim`` (None, int or sequence) to None or a sorted tuple of non-negative ints.

    A 0-d tensor accepts dim 0 / -1 like torch; reducing it over that dim is reducing it over nothing,
    which for a single element is the same as reducing over everything (None).
    """
    if dim is None:
        return None
    if isinstance(dim, (builtins.int, np.integer)):
        d = _dim(builtins.int(dim), ndim)
        return None if ndim == 0 else (d,)
    dim = tuple(dim)
    out = tuple(sorted({_dim(builtins.int(d), ndim) for d in dim}))
    if len(out) != len(dim):
        raise OpError(f"dim {dim} appears multiple times in the list of dims")
    return out if out and ndim else None


def _t(x):
    return x if isinstance(x, Tensor) else as_tensor(x)


_MinMax = collections.namedtuple("return_types", ["values", "indices"])
