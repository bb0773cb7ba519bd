"""``lf.func`` transforms (torch.func's names and semantics) on JAX's: vmap, grad, grad_and_value, jacrev, jacfwd,
hessian, vjp, jvp, linearize.

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
from ._tensor import Tensor, _make
from .autograd._custom import traced_apply_count
from .graph.trace import Tracing

__all__ = [
    "functionalize",
    "vmap",
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


def _draw(gen):
    """The generator's next (seed, offset) pair, as ``Generator._next`` gives it outside any trace."""
    off = gen._offset
    gen._offset = off + 1
    s = gen._seed
    return (s ^ (s >> 32)) & 0xFFFFFFFF, off & 0xFFFFFFFF


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
    return jax.tree_util.tree_map(lambda a, b: jnp.asarray(a, jnp.result_type(b)), _values(t), _values(p))


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


# ---------------------------------------------------------------------------------------------------------- vmap


def _randomness(randomness: str) -> None:
    if randomness not in ("error", "different", "same"):
        raise OpError(f"Only allowed values for randomness are 'error', 'different', or 'same'. Got {randomness}")


class _VmapRng:
    """Random ops under vmap: refused (``'error'``), one draw shared by the batch (``'same'``), or one per element
    (``'different'``: the draw's seed mixed with the element's index)."""

    def __init__(self, randomness: str, base):
        self.randomness, self.base, self.index = randomness, base, None

    def __call__(self, gen):
        if self.randomness == "error":
            raise OpError(
                "vmap: called random operation while in randomness error mode. Please either use the 'same' or "
                "'different' randomness flags on vmap or perform the randomness operation out of vmap"
            )
        seed, offset = _draw(gen) if self.base is None else self.base(gen)
        if self.randomness == "same" or self.index is None:
            return seed, offset
        mix = (self.index.astype(jnp.uint32) + jnp.uint32(1)) * jnp.uint32(0x9E3779B1)
        return jnp.asarray(seed, jnp.uint32) ^ mix, offset


def _leaf_dims(in_dims, args, where: str) -> list:
    """One in_dim per leaf of ``args`` (tensors and other leaves), broadcasting the ``in_dims`` prefix."""
    if isinstance(in_dims, int) or in_dims is None:
        in_dims = (in_dims,) * len(args)
    if not isinstance(in_dims, (tuple, list)) or len(in_dims) != len(args):
        raise VmapError(
            f"{where}: expected in_dims to be an int or a tuple matching the number of inputs ({len(args)}), got "
            f"{in_dims!r}"
        )
    out = []
    for i, (d, a) in enumerate(zip(in_dims, args)):
        try:
            per = jax.tree_util.tree_map(
                lambda dd, sub: [dd] * len(jax.tree_util.tree_leaves(sub, is_leaf=_is_tensor)),
                d,
                a,
                is_leaf=lambda x: x is None or isinstance(x, int) or _is_tensor(x),
            )
        except (ValueError, TypeError):
            raise VmapError(
                f"{where}: in_dims is not compatible with the structure of `inputs`: in_dims {d!r} for input {i}"
            ) from None
        flat = []
        for x in jax.tree_util.tree_leaves(per, is_leaf=lambda x: isinstance(x, list)):
            flat.extend(x)
        out.extend(flat)
    return out


def vmap(
    func: Callable,
    in_dims: int | tuple | None = 0,
    out_dims: int | tuple = 0,
    randomness: str = "error",
    *,
    chunk_size: int | None = None,
) -> Callable:
    """Vectorize ``func`` over a dimension of its inputs (torch.func.vmap): ``in_dims`` gives the mapped dimension
    per input (None: not mapped; a nested structure for pytree inputs), ``out_dims`` where it goes in each output;
    ``randomness`` is ``'error'`` (random ops raise), ``'same'`` or ``'different'``; ``chunk_size`` maps that many
    elements at a time.

    >>> lf.func.vmap(lf.dot)(lf.ones(4, 3), lf.ones(4, 3))
    tensor([3., 3., 3., 3.])

    Raises:
        VmapError: in_dims not matching the inputs, a dimension out of range, no mapped input, a mapped
            non-Tensor, or batch sizes that differ (a ValueError, as torch).
        OpError: a random op with ``randomness='error'``, or an unknown ``randomness``.
    """
    _randomness(randomness)
    if chunk_size is not None and (not isinstance(chunk_size, int) or chunk_size < 1):
        raise VmapError(f"vmap: chunk_size should be None or greater than 0. (got {chunk_size})")

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        where = f"vmap({getattr(func, '__name__', 'f')}, in_dims={in_dims}, ...)(<inputs>)"
        leaves, tree = jax.tree_util.tree_flatten(args, is_leaf=_is_tensor)
        dims = _leaf_dims(in_dims, args, where)
        axes, sizes = [], []
        for leaf, d in zip(leaves, dims):
            if d is None:
                axes.append(None)
                continue
            if not isinstance(d, int):
                raise VmapError(f"{where}: in_dims must be ints or None, got {d!r}")
            if not isinstance(leaf, Tensor):
                raise VmapError(
                    f"{where}: Got in_dim={d} for an input but the input is of type {type(leaf).__name__}. We cannot "
                    "vmap over non-Tensor arguments, please use None as the respective in_dim"
                )
            nd = leaf.dim()
            if not -nd <= d < nd:
                raise VmapError(
                    f"{where}: Got in_dim={d} for some input, but that input is a Tensor of dimensionality {nd} so "
                    f"expected in_dim to satisfy -{nd} <= in_dim < {nd}."
                )
            axes.append(d % nd)
            sizes.append(leaf.shape[d % nd])
        if not sizes:
            raise VmapError(f"{where}: at least one input must be batched (have a non-None in_dim)")
        if len(set(sizes)) != 1:
            raise VmapError(
                f"{where}: Expected all tensors to have the same size in the mapped dimension, got sizes {sizes} for "
                "the mapped dimension"
            )
        n = sizes[0]
        tpos = [i for i, leaf in enumerate(leaves) if isinstance(leaf, Tensor)]
        rng = _Rng()
        vrng = _VmapRng(randomness, rng.hook)
        out_tree_box: list = []

        def jf(idx, *tvals):
            full = list(leaves)
            for i, v in zip(tpos, tvals):
                full[i] = _tensors(v)
            vrng.index = idx
            out = _run(func, _ordered(args, jax.tree_util.tree_unflatten(tree, full)), kwargs, vrng)
            vals = _arrays(out, where)
            out_tree_box[:] = [_skeleton(out)]  # the structure, with the user's dict key order
            return vals

        t_axes = [axes[i] for i in tpos]
        tvals = [leaves[i]._value for i in tpos]

        def run_chunk(lo, hi):
            sl = [v if a is None else jax.lax.slice_in_dim(v, lo, hi, axis=a) for v, a in zip(tvals, t_axes)]
            return jax.vmap(jf, in_axes=(0, *t_axes), out_axes=_out_axes(out_dims))(jnp.arange(lo, hi), *sl)

        try:
            if chunk_size is None or chunk_size >= n:
                res = run_chunk(0, n)
            else:
                parts = [run_chunk(lo, min(lo + chunk_size, n)) for lo in range(0, n, chunk_size)]
                flat_dims = _flat_out_dims(out_dims, parts[0])
                cols = zip(*[jax.tree_util.tree_leaves(p) for p in parts])
                res = jax.tree_util.tree_unflatten(
                    jax.tree_util.tree_structure(parts[0]),
                    [jnp.concatenate(c, axis=d % c[0].ndim) for c, d in zip(cols, flat_dims)],
                )
        except ValueError as e:
            if isinstance(e, LazyflowError):
                raise
            raise VmapError(f"{where}: out_dims={out_dims!r} do not fit the outputs: {str(e).splitlines()[0]}") from e
        return _ordered(out_tree_box[0], _tensors(res))

    return wrapper


def _out_axes(out_dims):
    if isinstance(out_dims, list):
        return tuple(out_dims)
    return out_dims


def _flat_out_dims(out_dims, res) -> list[int]:
    if isinstance(out_dims, int):
        return [out_dims] * len(jax.tree_util.tree_leaves(res))
    per = jax.tree_util.tree_map(
        lambda d, sub: [d] * len(jax.tree_util.tree_leaves(sub)),
        tuple(out_dims),
        res,
        is_leaf=lambda x: isinstance(x, int),
    )
    flat: list[int] = []
    for x in jax.tree_util.tree_leaves(per, is_leaf=lambda x: isinstance(x, list)):
        flat.extend(x)
    return flat
