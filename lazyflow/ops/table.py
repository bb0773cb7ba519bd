"""The op table: every primitive is one :class:`OpDef` record, defined once.

An OpDef holds the pure ``jax.numpy``/``lax`` implementation, the names of its static arguments, the
dtype rule that decides how operands are cast before the implementation runs, and optionally a
backward rule. Eager dispatch jits :func:`specialize`'s function per signature, graph mode calls the same
function inside its trace, and the tape differentiates it with :func:`backward_fn` (``jax.vjp`` of the
same function unless the record carries a rule). No op is written twice.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .._core import config
from .._core import dtypes as D
from .._core.errors import DTypeError

__all__ = [
    "OpDef",
    "ValueCheck",
    "REGISTRY",
    "op",
    "specialize",
    "backward_fn",
    "compute_dtypes",
    "is_tensor_desc",
    "sum_to_shape",
    "astype",
]

REGISTRY: dict[str, OpDef] = {}


class OpDef:
    """One primitive.

    Args:
        name: unique op name.
        impl: pure function ``impl(*operands, **statics)`` over jax arrays (and Python scalars).
        static: names of keyword arguments that select the computation (part of the cache key).
        dtypes: how operands are cast before ``impl``: ``"none"`` (as they are), ``"promote"`` (torch's
            result_type over all operands), ``"float"`` (promote, then integers/bool -> default float),
            or a callable ``(descs, statics) -> list[DType | None]``.
        bwd: optional backward rule ``bwd(operands, out, cotangent, **statics) -> grads`` (one per operand,
            None for no gradient; a gradient of the broadcast shape is summed back to its operand's shape),
            attached with ``jax.custom_vjp``; without it, ``jax.vjp`` of the implementation is the backward.
            Rules pin torch's convention where autodiff of the implementation picks another one (the
            gradient at a kink, a tie or a zero norm); tests/test_special_points.py checks them.
        differentiable: False for ops whose outputs never carry gradients (comparisons, argmax...).
        check: optional ``check(descs, statics) -> ValueCheck | None``: a condition on the operands' values that
            torch refuses (integer division by zero); eager tests it on the host before the kernel runs, so a
            refused call changes nothing (not even a donated in-place target).
        linear: True when the gradient does not depend on the differentiable operands' values (add, reshape,
            sum, clone...): the tape then does not version-check them, as torch saves nothing for such ops;
            ``"multi"`` when the op is linear in each operand separately (mul, matmul): an operand is checked
            only if another operand requires grad.
    """

    __slots__ = (
        "name",
        "impl",
        "static",
        "dtypes",
        "bwd",
        "differentiable",
        "linear",
        "check",
        "real_only",
        "__weakref__",
    )

    def __init__(
        self,
        name: str,
        impl: Callable,
        *,
        static: tuple[str, ...] = (),
        dtypes="promote",
        bwd: Callable | None = None,
        differentiable: bool = True,
        linear: bool = False,
        check: Callable | None = None,
    ):
        self.name = name
        self.impl = impl
        self.static = tuple(static)
        self.dtypes = dtypes
        self.bwd = bwd
        self.differentiable = differentiable
        self.linear = linear
        self.check = check
        self.real_only = False  # set by ops.complex.REAL_ONLY: torch refuses complex operands (ordering, relu...)

    def __repr__(self) -> str:
        return f"<op {self.name}>"

    def __reduce__(self):
        return (REGISTRY.__getitem__, (self.name,))


class ValueCheck(NamedTuple):
    """A value condition an op refuses: ``bad(*operands)`` is a boolean scalar (numpy on the host, or traced), true
    when the call must fail with ``error(message)``. ``reads``: the operands ``bad`` looks at (eager copies only
    those to the host; the others reach ``bad`` as they are)."""

    bad: Callable
    error: type
    message: str
    reads: tuple[int, ...]


def op(name: str, **kw) -> Callable[[Callable], OpDef]:
    """Decorator: register ``impl`` under ``name`` in the op table."""

    def deco(fn):
        if name in REGISTRY:
            raise ValueError(f"op {name!r} is defined twice")
        d = OpDef(name, fn, **kw)
        REGISTRY[name] = d
        return d

    return deco


def is_tensor_desc(d) -> bool:
    """Tensor operands are described by a meta tuple ``(shape, DType, placement)``; scalars by their type."""
    return type(d) is tuple


def _items(descs: Sequence[Any]) -> list:
    items: list = []
    for d in descs:
        if type(d) is tuple:
            items.append((d[1], len(d[0])))
        elif d in (builtins.int, builtins.float, builtins.bool):
            items.append(d)
    return items


_COMPLEX = (D.complex64, D.complex128)


def compute_dtypes(op_def: OpDef, descs, statics) -> list:
    if op_def.real_only and builtins.any(type(d) is tuple and d[1] in _COMPLEX for d in descs):
        got = ", ".join(d[1].name for d in descs if type(d) is tuple)
        raise DTypeError(
            f"{op_def.name} is not supported for complex tensors (as in torch: complex numbers have no order); got "
            f"{got}; use .abs() or .real first"
        )
    rule = op_def.dtypes
    if rule == "none":
        return [None] * len(descs)
    if callable(rule):
        return rule(descs, statics)
    items = _items(descs)
    if not items:
        return [None] * len(descs)
    r = D.result_type(*items)
    if rule == "float" and not r.is_inexact:
        r = D.get_default_dtype()
    elif rule == "int_or_bool" and r.is_inexact:
        raise DTypeError(f"{op_def.name} is only defined for integer and bool tensors, got {r}")
    numeric = (builtins.int, builtins.float, builtins.bool)
    return [r if (type(d) is tuple or d in numeric) else None for d in descs]


def astype(x, jd):
    """``x`` converted to the jax dtype ``jd`` with torch's CPU results for floats out of a narrow integer's range.

    torch converts a float to uint8 through int64, and to int8/int16 through int32 (C++ casts), so out-of-range
    values wrap: 300.0 -> 44 and -1.0 -> 255 as uint8. XLA converts directly and saturates (255 and 0), so lazyflow
    goes through the same wide type. Values outside that wide type's range, NaN and +-inf are undefined behaviour in
    torch; here the wide conversion saturates (NaN -> 0) before wrapping, e.g. +inf -> 255, -inf -> 0 as uint8.
    """
    src = jnp.dtype(x.dtype)
    dst = np.dtype(jd)
    if jnp.issubdtype(src, jnp.floating) and dst.kind in "iu" and dst.itemsize < 4:
        wide = jnp.int64 if dst == np.uint8 and config.x64_enabled() else jnp.int32
        x = x.astype(wide)
    return x.astype(jd)


def _cast(x, dt):
    if dt is None or x is None:
        return x
    jd = dt.to_jax()
    if isinstance(x, (builtins.int, builtins.float, builtins.bool)):
        return jnp.asarray(x, jd)
    return x if x.dtype == jd else astype(x, jd)


def specialize(op_def: OpDef, statics: tuple, descs: tuple, rules: bool = True) -> Callable:
    """The pure function eager jits and graph mode calls: casts operands per the dtype rule, then impl.

    An op's backward rule is attached here with ``jax.custom_vjp``, so every differentiation of the function --
    the eager tape, the graph tape, and ``jax.vjp`` of a whole compiled program -- uses the same rule. With
    ``rules=False`` it is left off: JAX cannot run a ``custom_vjp`` in forward mode (``lf.func.jacfwd``/``jvp``),
    which then differentiates the implementation itself.
    """
    kw = dict(zip(op_def.static, statics))
    cdts = compute_dtypes(op_def, descs, statics)
    impl = partial(op_def.impl, **kw) if kw else op_def.impl
    if op_def.bwd is not None and rules:
        impl = _with_rule(op_def.bwd, impl, kw)
    if all(c is None for c in cdts):
        return impl

    def fn(*xs):
        return impl(*[_cast(x, c) for x, c in zip(xs, cdts)])

    return fn


def _with_rule(rule: Callable, impl: Callable, kw: dict) -> Callable:

    @jax.custom_vjp
    def f(*xs):
        return impl(*xs)

    def fwd(*xs):
        out = impl(*xs)
        return out, (xs, out)

    def bwd(res, ct):
        xs, out = res
        grads = rule(list(xs), out, ct, **kw)
        return tuple(None if g is None or not _is_float(x) else _match(g, x) for g, x in zip(grads, xs))

    f.defvjp(fwd, bwd)
    return f


def _is_float(x) -> bool:
    return x is not None and jnp.issubdtype(jnp.result_type(x), jnp.inexact)


def diff_positions(descs) -> tuple[int, ...]:
    """Operand positions that can carry gradients: floating tensors."""
    return tuple(i for i, d in enumerate(descs) if type(d) is tuple and d[1].is_inexact)


def backward_fn(op_def: OpDef, statics: tuple, descs: tuple, diff: tuple[int, ...]) -> Callable:
    """Pure ``bwd(*operands, *cotangents) -> grads of operands at positions diff``.

    A cotangent may be None for an output that carries no gradient (integer outputs, unused outputs).
    """
    fn = specialize(op_def, statics, descs)
    n = len(descs)

    def bwd(*args):
        vals, cts = list(args[:n]), args[n:]

        def f(*dv):
            full = list(vals)
            for i, v in zip(diff, dv):
                full[i] = v
            return fn(*full)

        out, pull = jax.vjp(f, *[vals[i] for i in diff])
        if isinstance(out, (tuple, list)):
            ct = type(out)(_ct(o, c) for o, c in zip(out, cts))
        else:
            ct = _ct(out, cts[0])
        return tuple(pull(ct))

    return bwd


def _match(g, v):
    if g is None:
        return jnp.zeros(jnp.shape(v), jnp.result_type(v))
    if g.shape != jnp.shape(v):  # a rule may return the broadcast shape: sum back to the operand's
        g = sum_to_shape(g, jnp.shape(v))
    return g.astype(v.dtype) if g.dtype != v.dtype else g


def sum_to_shape(g, shape: tuple):
    """``g`` summed over the dimensions that broadcasting added to an operand of ``shape``."""
    lead = g.ndim - len(shape)
    if lead:
        g = jnp.sum(g, axis=tuple(range(lead)))
    axes = tuple(i for i, n in enumerate(shape) if n == 1 and g.shape[i] != 1)
    return jnp.sum(g, axis=axes, keepdims=True) if axes else g


def _ct(o, c):
    if jnp.issubdtype(o.dtype, jnp.inexact):
        return jnp.zeros(o.shape, o.dtype) if c is None else c.astype(o.dtype)
    return np.zeros(o.shape, jax.dtypes.float0)
