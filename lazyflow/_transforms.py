"""``lf.func`` transforms (torch.func's names and semantics) on JAX's: grad, grad_and_value, jacrev, jacfwd, hessian,
vjp, jvp, linearize, functionalize (vmap, built on the same helpers, is in :mod:`lazyflow._vmap`).

Each transform turns the user's function of Tensors into a pure JAX function: the argument tensors it transforms
become JAX tracers wrapped as Tensors, the body runs on graph mode's trace interpreter (the op table's
implementations on tracers, as in ``lf.compile``), and the result tensors' values are returned to JAX, which
batches or differentiates them (an ``lf.autograd.Function`` inside is a ``jax.custom_vjp``, so its own backward is
used). Results come back as lazyflow Tensors. Transforms nest (``vmap(grad(f))``, ``grad(grad(f))``,
``jacfwd(jacrev(f))``) and run inside ``lf.compile``. Results are plain values: they are not on the lazyflow tape
(``.backward()`` through a transform's result is not supported; nest ``lf.func.grad`` instead).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax
import jax.core
import jax.numpy as jnp
import numpy as np

from ._core.context import state
from ._core.errors import ArgumentError, LazyflowError, OpError
from ._ingress import array as owned_array
from ._tensor import Tensor, _make
from .autograd._custom import traced_apply_count
from .graph.trace import Tracing

__all__ = [
    "functionalize",
    "grad",
    "grad_and_value",
    "jacrev",
    "jacfwd",
    "hessian",
    "vjp",
    "jvp",
    "linearize",
    "VmapError",
]

_is_tensor = lambda x: isinstance(x, Tensor)


class VmapError(LazyflowError, ValueError):
    """``in_dims``/``out_dims`` that do not fit the arguments or results, or batch sizes that differ (torch raises
    a ValueError)."""


def _arrays(tree, where: str):
    """The values of a result pytree's Tensor leaves; any other leaf is refused."""

    def leaf(x):
        if isinstance(x, Tensor):
            return x._value
        raise ArgumentError(
            f"{where}: the function must return Tensors (or tuples/lists/dicts of them), got a {type(x).__name__}"
        )

    return jax.tree_util.tree_map(leaf, tree, is_leaf=_is_tensor)


def _tensors(tree):
    def leaf(x):
        if isinstance(x, (jax.Array, jax.core.Tracer)):
            if getattr(x, "weak_type", False):
                x = jnp.asarray(x, x.dtype)
            return _make(x)
        return x

    return jax.tree_util.tree_map(leaf, tree)


def _ordered(template, tree):
    """``tree`` (built by JAX, whose dicts come back with sorted keys) with the dict key order of ``template``."""
    if isinstance(template, dict) and isinstance(tree, dict) and set(template) == set(tree):
        return {k: _ordered(template[k], tree[k]) for k in template}
    if isinstance(template, (tuple, list)) and isinstance(tree, (tuple, list)) and len(template) == len(tree):
        return type(tree)(_ordered(a, b) for a, b in zip(template, tree))
    return tree


def _skeleton(x):
    if isinstance(x, dict):
        return {k: _skeleton(v) for k, v in x.items()}
    if isinstance(x, (tuple, list)):
        return type(x)(_skeleton(v) for v in x)
    return 0


def _values(tree):
    return jax.tree_util.tree_map(lambda x: x._value if isinstance(x, Tensor) else x, tree, is_leaf=_is_tensor)


class _Rng:
    """The random-number hook for one transform call: the enclosing trace's when there is one; otherwise None, so
    random ops draw from their generator's own counter as eager code does (concrete numbers, advancing it)."""

    def __init__(self):
        self.hook = state.rng_hook if state.tracing else None


def _run(func, args, kwargs, hook, forward_mode: bool = False):
    prev = state.grad_enabled
    with Tracing(rng_hook=hook, vjp_rules=False if forward_mode else None):
        state.grad_enabled = False
        try:
            return func(*args, **kwargs)
        finally:
            state.grad_enabled = prev


def _argnums(argnums, n: int, where: str) -> tuple[int, ...]:
    nums = (argnums,) if isinstance(argnums, int) else argnums
    if not isinstance(nums, tuple) or not nums or not all(isinstance(i, int) for i in nums):
        raise ArgumentError(f"{where}: argnums must be an int or a non-empty tuple of ints, got {argnums!r}")
    out = []
    for i in nums:
        if not -n <= i < n:
            raise OpError(f"{where}: Got argnums={argnums!r}, but only {n} positional inputs")
        out.append(i % n)
    return tuple(out)


def _check_float(tree, where: str) -> None:
    for x in jax.tree_util.tree_leaves(tree, is_leaf=_is_tensor):
        if not isinstance(x, Tensor):
            raise ArgumentError(f"{where}: the differentiated arguments must be Tensors, got a {type(x).__name__}")
        if not x.dtype.is_floating_point:
            raise OpError(
                f"{where}: only Tensors of floating point dtype can be differentiated, got {x.dtype.name}; convert "
                "with .float()"
            )


def _pure(func, args, kwargs, nums, has_aux: bool, where: str, hook, scalar: bool = False, forward_mode: bool = False):
    """``jf(*diff_values) -> out`` (or ``(out, aux)``) over the arrays of ``args[nums]``."""

    def jf(*dvals):
        full = list(args)
        for i, d in zip(nums, dvals):
            full[i] = _tensors(d)
        out = _run(func, full, kwargs, hook, forward_mode)
        if has_aux:
            if not isinstance(out, tuple) or len(out) != 2:
                raise ArgumentError(
                    f"{where}: output of function f should be a tuple: (output, aux) if has_aux is True"
                )
            out, aux = out
        if scalar:
            if not isinstance(out, Tensor):
                raise ArgumentError(f"{where}: expected f(*args) to return a Tensor, got {type(out).__name__}")
            if out.dim() != 0:
                raise OpError(
                    f"{where}: Expected f(*args) to return a scalar Tensor, got tensor with {out.dim()} dims. Maybe "
                    "you wanted to use the vjp or jacrev APIs instead?"
                )
        res = _arrays(out, where)
        return (res, _arrays(aux, where)) if has_aux else res

    return jf


def grad_and_value(func: Callable, argnums: int | tuple[int, ...] = 0, has_aux: bool = False) -> Callable:
    """``grad_and_value(f)(*args)`` -> ``(gradient, value)`` (with ``has_aux``: ``(gradient, (value, aux))``).

    The gradient has the structure of ``args[argnums]`` (a tuple of them when ``argnums`` is a tuple).

    Raises:
        OpError: ``f`` does not return a scalar Tensor (a RuntimeError, as torch).
        ArgumentError: bad ``argnums``, non-floating or non-Tensor differentiated arguments, malformed aux output.
    """

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        where = "grad_and_value(f)(*args)"
        nums = _argnums(argnums, len(args), where)
        for i in nums:
            _check_float(args[i], where)
        rng = _Rng()
        jf = _pure(func, args, kwargs, nums, has_aux, where, rng.hook, scalar=True)
        jnums = 0 if isinstance(argnums, int) else tuple(range(len(nums)))
        v, g = jax.value_and_grad(jf, argnums=jnums, has_aux=has_aux)(*[_values(args[i]) for i in nums])
        g = _ordered(args[nums[0]] if isinstance(argnums, int) else tuple(args[i] for i in nums), _tensors(g))
        return g, _tensors(v)

    return wrapper


def grad(func: Callable, argnums: int | tuple[int, ...] = 0, has_aux: bool = False) -> Callable:
    """``grad(f)(*args)``: the gradient of scalar ``f`` w.r.t. ``args[argnums]`` (with ``has_aux``:
    ``(gradient, aux)``), torch.func's semantics; nests with every transform here.

    >>> lf.func.grad(lambda x: (x ** 3).sum())(lf.tensor([1.0, 2.0]))
    tensor([ 3., 12.])
    """
    gv = grad_and_value(func, argnums, has_aux)

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        g, v = gv(*args, **kwargs)
        return (g, v[1]) if has_aux else g

    return wrapper


def jacrev(
    func: Callable,
    argnums: int | tuple[int, ...] = 0,
    *,
    has_aux: bool = False,
    chunk_size: int | None = None,
    _preallocate_and_copy: bool = False,
) -> Callable:
    """The Jacobian by reverse mode: for each output leaf, ``output.shape + input.shape`` per argument (torch.func's
    structure: outputs outside, ``argnums`` inside). ``chunk_size`` is accepted (JAX batches all rows at once)."""
    return _jac(func, argnums, has_aux, jax.jacrev, "jacrev(f)(*args)")


def jacfwd(
    func: Callable, argnums: int | tuple[int, ...] = 0, has_aux: bool = False, *, randomness: str = "error"
) -> Callable:
    """The Jacobian by forward mode; same structure as :func:`jacrev`."""
    _randomness(randomness)
    return _jac(func, argnums, has_aux, jax.jacfwd, "jacfwd(f)(*args)")


def _forward_mode(run, where: str):
    """``run()``; JAX refuses forward mode through a ``jax.custom_vjp``: say that it was an lf.autograd.Function."""
    before = traced_apply_count()
    try:
        return run()
    except TypeError as e:
        if traced_apply_count() == before or isinstance(e, LazyflowError):
            raise
        raise OpError(
            f"{where}: forward-mode differentiation through an lf.autograd.Function is not supported (a Function "
            "defines its backward only, as a jax.custom_vjp); use jacrev, vjp or grad instead"
        ) from e


def _jac(func, argnums, has_aux, transform, where):
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        nums = _argnums(argnums, len(args), where)
        for i in nums:
            _check_float(args[i], where)
        rng = _Rng()
        jf = _pure(func, args, kwargs, nums, has_aux, where, rng.hook, forward_mode=transform is jax.jacfwd)
        jnums = 0 if isinstance(argnums, int) else tuple(range(len(nums)))
        vals = [_values(args[i]) for i in nums]
        out = _forward_mode(lambda: transform(jf, argnums=jnums, has_aux=has_aux)(*vals), where)
        jac, aux = out if has_aux else (out, None)
        return (_tensors(jac), _tensors(aux)) if has_aux else _tensors(jac)

    return wrapper


def hessian(func: Callable, argnums: int | tuple[int, ...] = 0) -> Callable:
    """``jacfwd(jacrev(func, argnums), argnums)``, torch.func's definition."""
    return jacfwd(jacrev(func, argnums), argnums)


def vjp(func: Callable, *primals: Any, has_aux: bool = False):
    """``(output, vjp_fn)`` (with ``has_aux``: ``(output, vjp_fn, aux)``); ``vjp_fn(cotangents)`` returns a tuple
    with one gradient per primal."""
    where = "vjp(f, *primals)"
    for p in primals:
        _check_float(p, where)
    rng = _Rng()
    nums = tuple(range(len(primals)))
    jf = _pure(func, primals, {}, nums, has_aux, where, rng.hook)
    res: tuple = jax.vjp(jf, *[_values(p) for p in primals], has_aux=has_aux)
    out, pull = res[0], res[1]
    out_tree = jax.tree_util.tree_structure(out)

    def vjp_fn(*cotangents):
        ct = cotangents[0] if len(cotangents) == 1 else cotangents
        vals = _values(ct)
        if jax.tree_util.tree_structure(vals) != out_tree:
            raise ArgumentError(
                f"vjp_fn: expected cotangents with the structure of the output ({out_tree}), got "
                f"{jax.tree_util.tree_structure(vals)}"
            )
        return _tensors(tuple(pull(vals)))

    return (_tensors(out), vjp_fn, _tensors(res[2])) if has_aux else (_tensors(out), vjp_fn)


def jvp(func: Callable, primals: Any, tangents: Any, *, strict: bool = False, has_aux: bool = False):
    """``(output, jvp_out)`` (with ``has_aux``: ``(output, jvp_out, aux)``): forward-mode derivative along
    ``tangents`` (one per primal, same shapes).

    Raises:
        OpError: primals/tangents not tuples, or of different structure or shapes (RuntimeError, as torch).
    """
    where = "jvp(f, primals, tangents)"
    if not isinstance(primals, tuple) or not isinstance(tangents, tuple):
        raise OpError(f"{where}: Expected primals and tangents to be tuples")
    if len(primals) != len(tangents):
        raise OpError(f"{where}: Expected primals and tangents to have the same length")
    for p, t in zip(primals, tangents):
        _check_float(p, where)
        pv, tv = _values(p), _values(t)
        if jax.tree_util.tree_structure(pv) != jax.tree_util.tree_structure(tv) or any(
            np.shape(a) != np.shape(b) for a, b in zip(jax.tree_util.tree_leaves(pv), jax.tree_util.tree_leaves(tv))
        ):
            raise OpError(f"{where}: Expected tangents to have the same structure and shapes as primals")
    rng = _Rng()
    nums = tuple(range(len(primals)))
    jf = _pure(func, primals, {}, nums, has_aux, where, rng.hook, forward_mode=True)
    ps, ts = tuple(_values(p) for p in primals), tuple(_cast(t, p) for t, p in zip(tangents, primals))
    res = _forward_mode(lambda: jax.jvp(jf, ps, ts, has_aux=has_aux), where)
    return tuple(_tensors(r) for r in res)


def _cast(t, p):
    def leaf(a, b):
        if not isinstance(a, (jax.Array, jax.core.Tracer)):
            a = owned_array(a, copy=False)  # user memory (numpy...) is copied: a result never aliases it
        return jnp.asarray(a, jnp.result_type(b))

    return jax.tree_util.tree_map(leaf, _values(t), _values(p))


def linearize(func: Callable, *primals: Any):
    """``(output, jvp_fn)``: ``jvp_fn(*tangents)`` is the forward-mode derivative at ``primals``."""
    where = "linearize(f, *primals)"
    for p in primals:
        _check_float(p, where)
    rng = _Rng()
    nums = tuple(range(len(primals)))
    jf = _pure(func, primals, {}, nums, False, where, rng.hook, forward_mode=True)
    out, lin = _forward_mode(lambda: jax.linearize(jf, *[_values(p) for p in primals]), where)

    def jvp_fn(*tangents):
        if len(tangents) != len(primals):
            raise ArgumentError(f"jvp_fn: expected {len(primals)} tangents, got {len(tangents)}")
        return _tensors(lin(*[_cast(t, p) for t, p in zip(tangents, primals)]))

    return _tensors(out), jvp_fn


def functionalize(func: Callable, *, remove: str = "mutations") -> Callable:
    """torch.func.functionalize: a function computing the same without in-place mutation of intermediates. Graph
    mode already turns in-place ops into new values (JAX arrays are immutable) while keeping the writes to the
    inputs that torch's functionalize also keeps, so ``func`` is returned as it is.

    Raises:
        OpError: ``remove`` is not ``"mutations"`` or ``"mutations_and_views"`` (a RuntimeError, as torch).
    """
    if remove not in ("mutations", "mutations_and_views"):
        raise OpError(
            f"functionalize(f, remove='mutations'): received invalid argument for remove={remove!r}; expected "
            "'mutations' or 'mutations_and_views'"
        )
    return func


def _randomness(randomness: str) -> None:
    if randomness not in ("error", "different", "same"):
        raise OpError(f"Only allowed values for randomness are 'error', 'different', or 'same'. Got {randomness}")
