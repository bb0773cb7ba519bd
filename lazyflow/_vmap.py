"""``lf.func.vmap`` (torch.func's semantics: ``in_dims``/``out_dims`` prefixes, ``randomness``, ``chunk_size``) on
``jax.vmap``: the function's tensor arguments become batched tracers, the body runs on graph mode's trace
interpreter (see :mod:`lazyflow._transforms`), and the results come back as Tensors."""

from __future__ import annotations

import functools
from collections.abc import Callable

import jax
import jax.numpy as jnp

from ._core.errors import LazyflowError, OpError
from ._tensor import Tensor
from ._transforms import VmapError, _arrays, _is_tensor, _ordered, _randomness, _Rng, _run, _skeleton, _tensors

__all__ = ["vmap", "VmapError"]


def _draw(gen):
    """The generator's next (seed, offset) pair, as ``Generator._next`` gives it outside any trace."""
    off = gen._offset
    gen._offset = off + 1
    s = gen._seed
    return (s ^ (s >> 32)) & 0xFFFFFFFF, off & 0xFFFFFFFF


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
