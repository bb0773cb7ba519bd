"""``lf.utils.jax``: hand tensors to JAX code and JAX functions to lazyflow code.

* :func:`to_jax` / :func:`from_jax` convert tensors (or pytrees of them) without copying where that is safe: a jax
  array is immutable, so a tensor's current value can be handed out and a jax array wrapped as it is. User memory
  (numpy arrays) is copied, as everywhere else data enters lazyflow.
* :func:`wrap` turns a JAX function into a lazyflow op. It is one generated op-table record (:class:`OpDef`), so it
  runs through the same interpreters as every built-in op: eagerly as a kernel jitted once per signature, inline in
  an ``lf.compile``/``lf.nn.Graph`` trace, and on the tape with ``jax.vjp`` of the function as its backward.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import jax
import jax.core
import numpy as np

from .._core.context import state
from .._core.errors import ArgumentError
from .._ingress import array as _owned_array
from .._tensor import Tensor, _make
from ..ops.table import OpDef

__all__ = ["to_jax", "from_jax", "wrap", "JaxFunction"]

_Tracer = jax.core.Tracer
_is_tensor = lambda x: isinstance(x, Tensor)


def to_jax(tree: Any) -> Any:
    """The ``jax.Array`` of every Tensor leaf in ``tree`` (other leaves unchanged); no copy.

    The arrays are the tensors' current values: later in-place updates of a tensor give it a new array and never
    show in the returned one. Do not *donate* a returned array to a jitted function (``donate_argnums``): that
    deletes the buffer the tensor still uses; donate ``jnp.array(a, copy=True)`` instead.

    >>> lf.utils.jax.to_jax({"w": lf.ones(2)})["w"]
    Array([1., 1.], dtype=float32)
    """
    return jax.tree_util.tree_map(lambda x: x._value if isinstance(x, Tensor) else x, tree, is_leaf=_is_tensor)


def _leaf_from_jax(x):
    if isinstance(x, Tensor):
        return x
    if isinstance(x, (jax.Array, _Tracer)):
        if getattr(x, "weak_type", False):
            x = jax.numpy.asarray(x, x.dtype)
        return _make(x)
    if isinstance(x, np.ndarray):  # caller memory: a private copy, so later writes to x never reach the tensor
        return _make(_owned_array(x))
    return x


def from_jax(tree: Any) -> Any:
    """Tensors for the array leaves of ``tree``: jax arrays are wrapped without a copy, numpy arrays copied.

    Other leaves (Python scalars, strings, None) are returned unchanged.

    >>> lf.utils.jax.from_jax(jnp.arange(3))
    tensor([0, 1, 2])
    """
    return jax.tree_util.tree_map(_leaf_from_jax, tree, is_leaf=_is_tensor)


class _Spec:
    """Static part of one call of a wrapped function: the input tree with its non-tensor leaves (hashable), so
    it is part of the op's cache key like any op's static arguments."""

    __slots__ = ("tree", "consts", "kwargs", "_hash")

    def __init__(self, tree, consts, kwargs):
        self.tree, self.consts, self.kwargs = tree, consts, kwargs
        self._hash = hash((tree, consts, kwargs))

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other) -> bool:
        return (
            isinstance(other, _Spec)
            and self.tree == other.tree
            and self.consts == other.consts
            and self.kwargs == other.kwargs
        )


_ids = itertools.count()


class JaxFunction:
    """A JAX function usable on lazyflow tensors (what :func:`wrap` returns); ``.op`` is its op record."""

    def __init__(self, fn: Callable, name: str | None = None):
        if not callable(fn):
            raise TypeError(f"wrap expects a callable JAX function, got {type(fn).__name__}")
        self.fn = fn
        self.__wrapped__ = fn
        self.__name__ = name or getattr(fn, "__name__", type(fn).__name__)
        self._out_trees: dict = {}
        # not entered in the global REGISTRY: the record lives as long as this wrapper (and its cached kernels)
        self.op = OpDef(f"jax_wrap_{next(_ids)}_{self.__name__}", self._impl, static=("spec",), dtypes="none")

    def _impl(self, *leaves, spec: _Spec):
        it = iter(leaves)
        flat = [next(it) if c is _TENSOR else c for c in spec.consts]
        args, kwargs = jax.tree_util.tree_unflatten(spec.tree, flat)
        out = self.fn(*args, **dict(spec.kwargs), **kwargs)
        out_leaves, out_tree = jax.tree_util.tree_flatten(out)
        for o in out_leaves:
            if not isinstance(o, (jax.Array, _Tracer)):
                raise ArgumentError(
                    f"lf.utils.jax.wrap({self.__name__}): the function returned a {type(o).__name__} leaf; a wrapped "
                    "function must return jax arrays (or a pytree of them)"
                )
        self._out_trees[(spec, tuple((x.shape, x.dtype) for x in leaves))] = out_tree
        return out_leaves[0] if out_tree.num_leaves == 1 and out_tree.num_nodes == 1 else tuple(out_leaves)

    def __call__(self, *args, **kwargs):
        static_kw = tuple(sorted((k, v) for k, v in kwargs.items() if not _has_array(v)))
        dyn_kw = {k: v for k, v in kwargs.items() if _has_array(v)}
        leaves, tree = jax.tree_util.tree_flatten((args, dyn_kw), is_leaf=_is_tensor)
        tensors, consts = [], []
        for leaf in leaves:
            if isinstance(leaf, (Tensor, jax.Array, _Tracer, np.ndarray)):
                tensors.append(_leaf_from_jax(leaf))
                consts.append(_TENSOR)
            else:
                try:
                    hash(leaf)
                except TypeError:
                    raise ArgumentError(
                        f"lf.utils.jax.wrap({self.__name__}): argument leaf {leaf!r} is neither a tensor/array nor "
                        "hashable; non-array arguments are static (part of the kernel's cache key)"
                    ) from None
                consts.append(leaf)
        try:
            spec = _Spec(tree, tuple(consts), static_kw)
        except TypeError:
            raise ArgumentError(
                f"lf.utils.jax.wrap({self.__name__}): keyword arguments must be arrays or hashable, got {kwargs!r}"
            ) from None
        res = state.interp.apply(self.op, tuple(tensors), (spec,))
        key = (spec, tuple((tuple(t.shape), t._value.dtype) for t in tensors))
        out_tree = self._out_trees[key]
        outs = list(res) if isinstance(res, tuple) else [res]
        return jax.tree_util.tree_unflatten(out_tree, outs)

    def __repr__(self) -> str:
        return f"lf.utils.jax.wrap({self.__name__})"


class _TensorSlot:
    __slots__ = ()

    def __repr__(self) -> str:
        return "<tensor>"


_TENSOR = _TensorSlot()


def _has_array(v) -> bool:
    return any(
        isinstance(x, (Tensor, jax.Array, _Tracer, np.ndarray))
        for x in jax.tree_util.tree_leaves(v, is_leaf=_is_tensor)
    )


def wrap(fn: Callable, *, name: str | None = None) -> JaxFunction:
    """Turn a JAX function into a lazyflow op.

    The result takes tensors (and jax/numpy arrays, and pytrees of them) where ``fn`` takes jax arrays, and returns
    tensors where ``fn`` returns arrays. Array leaves are the op's operands; every other leaf and keyword (ints,
    strings, flags) is static: part of the cache key. Eagerly each signature is one jitted kernel (cached like any
    op), under ``lf.compile``/``lf.nn.Graph`` ``fn`` is traced into the program, and gradients reach every
    floating operand through ``jax.vjp(fn)``.

    Args:
        fn: a pure function of jax arrays (``jax.numpy``, ``lax``, a Flax/optax call) returning an array or a
            pytree of arrays.
        name: the op's name in error messages and tape nodes (default: ``fn.__name__``).
    Raises:
        TypeError: ``fn`` is not callable.
        ArgumentError: (on call) a non-hashable non-array argument, or ``fn`` returned a non-array.

    >>> softplus = lf.utils.jax.wrap(jax.nn.softplus)
    >>> softplus(lf.zeros(2))
    tensor([0.6931, 0.6931])
    """
    return JaxFunction(fn, name)
