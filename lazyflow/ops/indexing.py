"""Indexing primitives ``t[idx]`` and ``t[idx] = v``.

The Tensor layer parses a Python index into a static *spec* (part of the cache key) and dynamic operands
(integer positions and slice starts, which are not in the key, so ``v[i] = x`` in a loop over ``i`` reuses
one compiled kernel). Spec items:

* ``("i",)``        an integer position (dynamic operand, already non-negative and bounds-checked);
* ``("ds", size)``  a step-1 slice whose start is a dynamic operand;
* ``("s", a, b, k)`` a static slice (normalised start/stop/step);
* ``("n",)``        ``None`` (a new axis);
* ``("t",)``        an integer index array (dynamic operand);
* ``("si", k)``     a static integer position (used when advanced indexing forces static slices).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

from .table import op, sum_to_shape


def _index_tuple(x, spec, dyn):
    """Apply dynamic-start slices, then build a jnp index tuple for the rest."""
    axis, idx, k = 0, [], 0
    for item in spec:
        tag = item[0]
        if tag == "n":
            idx.append(None)
            continue
        if tag == "ds":
            x = lax.dynamic_slice_in_dim(x, dyn[k], item[1], axis)
            idx.append(slice(None))
            k += 1
        elif tag == "si":
            idx.append(item[1])
        elif tag == "i" or tag == "t":
            idx.append(dyn[k])
            k += 1
        else:
            _, a, b, st = item
            if st < 0 and b < 0:
                b = None
            idx.append(slice(a, b, st))
        axis += 1
    return x, tuple(idx)


@op("getitem", static=("spec",), dtypes="none", linear=True)
def _getitem(x, *dyn, spec):
    x, idx = _index_tuple(x, spec, dyn)
    return x[idx]


def _setitem_dtypes(descs, statics):
    return [None] * (len(descs) - 1) + [descs[0][1]]


def _simple(spec) -> bool:
    return all(it[0] in ("i", "ds", "n") or (it[0] == "s" and it[3] == 1) for it in spec)


def _general_index(x, spec, dyn):
    _, idx = _index_tuple(x, tuple(("s", 0, x.shape[i], 1) if it[0] == "ds" else it for i, it in enumerate(spec)), dyn)
    # dynamic-start slices only occur in _simple specs, so the array _index_tuple returns is x itself
    return idx


def _setitem_bwd(xs, out, g, *, spec):
    x, *dyn, v = xs
    if _simple(spec):  # slices only: no position is written twice, autodiff's rule is torch's
        _, pull = jax.vjp(lambda x_, v_: _setitem_value(x_, *dyn, v_, spec=spec), x, v)
        gx, gv = pull(g)
    else:
        # torch's index_put backward: every listed position sends its gradient to the value written there,
        # a repeated index included (autodiff of a scatter gives it to the one write that lands only)
        idx = _general_index(x, spec, dyn)
        gx = g.at[idx].set(jnp.zeros((), g.dtype))
        gv = sum_to_shape(g[idx], jnp.shape(v))
    return (gx, *([None] * len(dyn)), gv)


def _setitem_value(x, *operands, spec):
    *dyn, v = operands
    if _simple(spec):
        # one dynamic_update_slice: O(update) work, in place when the buffer is donated
        starts, upd_shape, res_shape, axis, k = [], [], [], 0, 0
        for item in spec:
            tag = item[0]
            if tag == "n":
                res_shape.append(1)
                continue
            if tag == "i":
                starts.append(dyn[k])
                upd_shape.append(1)
                k += 1
            elif tag == "ds":
                starts.append(dyn[k])
                upd_shape.append(item[1])
                res_shape.append(item[1])
                k += 1
            else:
                n = max(0, item[2] - item[1])
                starts.append(item[1])
                upd_shape.append(n)
                res_shape.append(n)
            axis += 1
        rest = x.shape[axis:]
        starts += [0] * len(rest)
        upd_shape += list(rest)
        res_shape += list(rest)
        v = jnp.broadcast_to(v, tuple(res_shape)).reshape(tuple(upd_shape))
        starts = [jnp.asarray(s, jnp.int32) for s in starts]
        return lax.dynamic_update_slice(x, v, starts)
    return x.at[_general_index(x, spec, dyn)].set(v)


op("setitem", static=("spec",), dtypes=_setitem_dtypes, bwd=_setitem_bwd)(_setitem_value)
