"""``lf.compile(..., dynamic=True)``: calls whose tensor arguments differ only in their first dimension (the last
partial batch, a smaller evaluation batch) share compiled programs, with unchanged results.

XLA compiles for static shapes, so a new batch size is a new program. With ``dynamic=True`` a call of batch ``n``
runs the program already compiled for the smallest size ``P >= n`` on arguments padded to ``P`` rows (copies of the
last real row, so every value check sees real data), and the outputs are cut back to ``n`` rows. That is exact only
when each output row depends on its own input row alone (and nothing else depends on the batch: no batch statistics,
no mean over the batch, no state written from the batch, no random numbers drawn per row). lazyflow does not assume
it; it proves it, once per signature family, on the traced program:

1. the program is traced (not compiled) at two batch sizes ``B1 != B2`` chosen to appear nowhere else in the
   signature; the two programs must be identical up to ``B1 <-> B2`` in shapes -- a constant that depends on the
   batch size (``x.sum() / x.shape[0]``, a Python-side ``arange(batch)``) makes them differ;
2. every equation that touches an axis of size ``B1`` must keep rows apart: elementwise maths, matmuls and
   convolutions over the batch axis, reductions/cumulative ops/slices/pads/windows over *other* axes, reshapes that
   keep the row axis whole, embedding-style gathers, ``iota``/broadcasts (row ``i`` is the same for any size);
   anything else (a reduction over rows, sorting rows, random bits per row, a loop) ends the proof.

When the proof fails, lazyflow warns once with the reason and the model's source line, and compiles each batch size
exactly (``dynamic=None``'s behaviour): results never change, only the number of compiles does. Which sizes get
compiled: the first size exactly; a larger size seen later is rounded up to a power of two, so growing sizes cost
``log2`` compiles; a smaller size pads up to the smallest compiled size -- and when that more than doubles its rows
and the size keeps coming back (a stream of small batches, not the last batch of an epoch), it gets a program of
its own, a power of two, after ``RECUR`` padded calls.
"""

from __future__ import annotations

import os

import numpy as np
from jax.extend.core import ClosedJaxpr, Jaxpr, Literal

from .._core.errors import user_frame
from .._functional.shape import cat

__all__ = ["NotRowLocal", "probe_sizes", "row_axes", "bucket", "pad_rows", "cut_rows", "prune"]

_PRIMES = (1009, 1013, 1019, 1021, 1031, 1033, 1039, 1049, 1051, 1061, 1063, 1069, 1087, 1091, 1093, 1097)


class NotRowLocal(Exception):
    """Why padding the batch could change a result (internal: turned into a one-time warning)."""


def probe_sizes(dims_in_use) -> tuple[int, int]:
    """Two batch sizes that differ from every other dimension of the signature (so an axis of that size *is* the
    batch axis)."""
    used = [d for d in set(dims_in_use) if d]
    free = [p for p in _PRIMES if all(d % p for d in used)]
    if len(free) < 2:
        raise NotRowLocal("the signature uses every probe size")
    return free[0], free[1]


RECUR = 4  # a size padded to more than twice its rows this often gets a program of its own (a power of two)


def bucket(sizes, n: int, wasteful: int = 0) -> int:
    """The size to compile/run for batch ``n``: the smallest compiled size that holds it (unless that more than
    doubles the rows and ``n`` has already been padded that wastefully ``RECUR`` times: a size that recurs -- not
    a one-off last batch -- then gets the next power of two); else ``n`` itself for the first size, or the next
    power of two once sizes vary."""
    fits = [s for s in sizes if s >= n]
    pow2 = 1 << (n - 1).bit_length()
    if fits:
        p = min(fits)
        return p if p <= 2 * n or wasteful < RECUR else pow2
    return pow2 if sizes else n


def pad_rows(x, p: int):
    """``x`` with rows appended (copies of its last row) up to ``p`` rows; differentiable (the copies' gradient
    flows to the last row, and is zero because the copies' outputs are cut off)."""
    n = x.shape[0]
    return cat([x, x[n - 1 :].expand(p - n, *x.shape[1:])], 0)


def cut_rows(y, axis: int, n: int):
    return y.narrow(axis, 0, n)


# -- the proof ---------------------------------------------------------------------------------------------------

_ELEMENTWISE = frozenset(
    """abs acos acosh add and asin asinh atan atan2 atanh cbrt ceil clamp complex conj convert_element_type copy
    copy_p cos cosh digamma div eq erf erf_inv erfc exp exp2 expm1 floor ge gt igamma imag integer_pow is_finite le
    lgamma log log1p logistic lt max min mul ne neg nextafter not or polygamma population_count pow real
    reduce_precision rem round rsqrt select_n shift_left shift_right_arithmetic shift_right_logical sign sin sinh
    sqrt square stop_gradient sub tan tanh xor bitcast_convert_type optimization_barrier sharding_constraint""".split()
)
_REDUCE = frozenset(
    "reduce_sum reduce_max reduce_min reduce_prod reduce_and reduce_or reduce_xor argmax argmin".split()
)
_CUMULATIVE = frozenset("cumsum cumprod cummax cummin cumlogsumexp".split())
_DERIVATIVE_PARAMS = frozenset(("fwd_jaxpr_thunk", "bwd", "jvp_jaxpr_fun", "jvp_jaxpr_thunk", "out_trees"))
_CALLS = frozenset("jit pjit closed_call core_call custom_jvp_call custom_vjp_call remat checkpoint custom_lin".split())


def _where(eqn) -> str:
    """The user's ``file:line`` that produced an equation (the first frame outside lazyflow and JAX)."""
    try:
        from jax._src.source_info_util import user_frames

        for fr in user_frames(eqn.source_info.traceback):
            if f"{os.sep}lazyflow{os.sep}" not in fr.file_name:
                return f"{fr.file_name}:{fr.start_line}"
    except Exception:  # a JAX without this internal: where the call came from
        pass
    return user_frame()


def _axis(aval, b: int):
    """The batch axis of a value: the one axis whose size is a multiple ``b * k`` of the probe size (row ``i`` owns
    the block ``[i*k, (i+1)*k)`` along it, as after splitting heads out of a ``(batch, heads, ...)`` tensor);
    ``None`` when there is none."""
    shape = getattr(aval, "shape", ())
    hits = [i for i, d in enumerate(shape) if d and d % b == 0]
    if len(hits) > 1:
        raise NotRowLocal(f"a value of shape {list(shape)} has two axes of the batch's size")
    return hits[0] if hits else None


def _shape(v) -> tuple:
    return getattr(v.aval, "shape", ())


def _same(p1, p2, b1: int, b2: int) -> bool:
    if isinstance(p1, (ClosedJaxpr, Jaxpr)):
        return True  # walked separately
    if callable(p1) and not isinstance(p1, type):
        return True  # thunks of custom derivatives: their jaxprs are what runs
    if isinstance(p1, (bool, np.bool_)) or p1 is None or isinstance(p1, str):
        return p1 == p2
    if isinstance(p1, (int, np.integer)):
        return p1 == p2 or (p1 != 0 and p1 % b1 == 0 and p1 // b1 * b2 == p2)
    if isinstance(p1, (tuple, list)):
        return type(p1) is type(p2) and len(p1) == len(p2) and all(_same(a, c, b1, b2) for a, c in zip(p1, p2))
    if isinstance(p1, dict):
        return p1.keys() == p2.keys() and all(_same(p1[k], p2[k], b1, b2) for k in p1)
    if isinstance(p1, (float, np.floating)) and isinstance(p2, (float, np.floating)):
        return p1 == p2 or (p1 != p1 and p2 != p2)  # NaN (a gather's fill value) equals NaN here
    if isinstance(p1, np.ndarray):
        return isinstance(p2, np.ndarray) and p1.shape == p2.shape and bool(np.array_equal(p1, p2))
    try:
        return bool(p1 == p2)
    except Exception:
        return False


def _shape2(shape, b1, b2):
    return tuple(d // b1 * b2 if d and d % b1 == 0 else d for d in shape)


def _check_eqn(eqn, b: int) -> None:
    prim = eqn.primitive.name
    p = eqn.params
    ins = [_axis(v.aval, b) for v in eqn.invars]
    outs = [_axis(v.aval, b) for v in eqn.outvars]
    if all(a is None for a in ins) and all(a is None for a in outs):
        return
    fail = lambda why: NotRowLocal(
        f"{prim} at {_where(eqn)} {why} (shapes {[list(getattr(v.aval, 'shape', ())) for v in eqn.invars]})"
    )
    if all(a is None for a in ins):  # a batch-sized value made from nothing batch-dependent
        if prim == "iota" or prim == "broadcast_in_dim":
            return
        raise fail("makes a batch-sized value whose rows depend on the batch size")
    if any(a is None for a in outs) and prim not in _CALLS:
        raise fail("reduces over the batch axis")
    a = next(x for x in ins if x is not None)
    o = outs[0]
    if o is None:  # a call: its body is walked instead
        return
    if prim in _ELEMENTWISE:
        for v, x in zip(eqn.invars, ins):
            shape = getattr(v.aval, "shape", ())
            if x is None and len(shape) == len(eqn.outvars[0].aval.shape) and shape[o] == 1:
                continue  # broadcast along the batch axis: the same for every row
            if len(shape) and (x != o or shape[o] != eqn.outvars[0].aval.shape[o]):
                raise fail("mixes the batch axis with another axis")
        return
    if prim in _REDUCE:
        if a in p["axes"]:
            raise fail("reduces over the batch axis")
        return
    if prim in _CUMULATIVE:
        if p["axis"] == a:
            raise fail("accumulates along the batch axis")
        return
    if prim == "stack":
        if any(x != a for x in ins) or o != (a + 1 if p["axis"] <= a else a):
            raise fail("moves data across rows")
        return
    if prim in ("sort", "top_k", "split", "rev", "squeeze", "expand_dims", "transpose", "concatenate", "pad"):
        bad = {
            "sort": lambda: p["dimension"] == a,
            "top_k": lambda: a == len(eqn.invars[0].aval.shape) - 1,
            "split": lambda: p["axis"] == a,
            "rev": lambda: a in p["dimensions"],
            "squeeze": lambda: False,
            "expand_dims": lambda: False,
            "transpose": lambda: p["permutation"][o] != a,
            "concatenate": lambda: p["dimension"] == a or any(x != a for x in ins),
            "pad": lambda: tuple(p["padding_config"][a]) != (0, 0, 0),
        }[prim]
        if bad():
            raise fail("moves data across rows")
        return
    if prim == "broadcast_in_dim":
        if p["broadcast_dimensions"][a] != o:
            raise fail("moves the batch axis")
        return
    if prim == "reshape":
        # row-major: with equal products of the axes before the batch axis on both sides, each row's block of
        # elements lands in one block of the output's batch axis (grouped or not), in order
        s_in, s_out = eqn.invars[0].aval.shape, eqn.outvars[0].aval.shape
        if int(np.prod(s_in[:a])) != int(np.prod(s_out[:o])):
            raise fail("merges the batch axis with an axis before it")
        return
    if prim == "slice":
        full = eqn.invars[0].aval.shape[a]
        if (p["start_indices"][a], p["limit_indices"][a]) != (0, full) or (p["strides"] and p["strides"][a] != 1):
            raise fail("slices along the batch axis")
        return
    if prim in ("dynamic_slice", "dynamic_update_slice"):
        if prim == "dynamic_slice" and p["slice_sizes"][a] != eqn.invars[0].aval.shape[a]:
            raise fail("slices along the batch axis")
        if prim == "dynamic_update_slice" and (
            ins[1] != a or eqn.invars[1].aval.shape[a] != eqn.invars[0].aval.shape[a]
        ):
            raise fail("writes across rows")
        if any(x is not None for x in ins[2:] if x is not None):
            raise fail("uses a batch-dependent start index")
        return
    if prim == "dot_general":
        (lc, rc), (lb, rb) = p["dimension_numbers"]
        la, ra = ins[0], ins[1]
        if (la is not None and la in lc) or (ra is not None and ra in rc):
            raise fail("contracts over the batch axis")
        if la is not None and ra is not None and not (la in lb and ra in rb and lb.index(la) == rb.index(ra)):
            raise fail("pairs rows with other rows")
        return
    if prim == "conv_general_dilated":
        dn = p["dimension_numbers"]
        if ins[1] is not None or a != dn.lhs_spec[0] or p["batch_group_count"] != 1 or o != dn.out_spec[0]:
            raise fail("convolves across the batch axis")
        return
    if prim.startswith("reduce_window"):
        ok = (
            p["window_dimensions"][a] == 1
            and p["window_strides"][a] == 1
            and tuple(p["padding"][a]) == (0, 0)
            and all(d[a] == 1 for d in (p.get("base_dilation"), p.get("window_dilation")) if d)
        )
        if not ok:
            raise fail("has a window over the batch axis")
        return
    if prim == "gather":
        dn = p["dimension_numbers"]
        op_a, ix_a = ins[0], ins[1]
        if ix_a is not None and ix_a == len(eqn.invars[1].aval.shape) - 1:
            raise fail("indexes with the batch axis as the index vector")
        if op_a is not None:
            batched = op_a in dn.operand_batching_dims and ix_a is not None
            if batched:
                if dn.start_indices_batching_dims[dn.operand_batching_dims.index(op_a)] != ix_a:
                    raise fail("gathers across rows")
            elif (
                op_a in dn.start_index_map
                or op_a in dn.collapsed_slice_dims
                or p["slice_sizes"][op_a] != eqn.invars[0].aval.shape[op_a]
            ):
                raise fail("gathers across rows")
            elif ix_a is not None:
                raise fail("gathers across rows")
        return
    raise fail("is not known to keep rows apart")


def _walk(j1: Jaxpr, j2: Jaxpr, b1: int, b2: int) -> None:
    if len(j1.eqns) != len(j2.eqns) or len(j1.invars) != len(j2.invars) or len(j1.outvars) != len(j2.outvars):
        raise NotRowLocal("the program's structure depends on the batch size")
    for e1, e2 in zip(j1.eqns, j2.eqns):
        if e1.primitive is not e2.primitive or e1.params.keys() != e2.params.keys():
            raise NotRowLocal(f"the program's structure depends on the batch size (at {_where(e1)})")
        for v1, v2 in zip(e1.invars, e2.invars):
            if isinstance(v1, Literal) or isinstance(v2, Literal):
                x1, x2 = np.asarray(getattr(v1, "val", None)), np.asarray(getattr(v2, "val", None))
                if x1.dtype != x2.dtype or not np.array_equal(x1, x2):
                    raise NotRowLocal(
                        f"{e1.primitive.name} at {_where(e1)} uses a constant that depends on the batch size"
                    )
        for v1, v2 in zip(e1.outvars, e2.outvars):
            if _shape2(getattr(v1.aval, "shape", ()), b1, b2) != getattr(v2.aval, "shape", ()):
                raise NotRowLocal(f"{e1.primitive.name} at {_where(e1)}: shapes depend on the batch size otherwise")
        for k in e1.params:
            if k in _DERIVATIVE_PARAMS:
                continue  # custom derivative rules: the forward values come from the call's jaxpr, walked below
            if not _same(e1.params[k], e2.params[k], b1, b2):
                raise NotRowLocal(f"{e1.primitive.name} at {_where(e1)}: its {k} depends on the batch size")
        subs = [(k, v) for k, v in e1.params.items() if isinstance(v, (ClosedJaxpr, Jaxpr))]
        if subs and e1.primitive.name not in _CALLS:
            _check_eqn(e1, b1)  # loops and conditionals: only when the batch is nowhere near them
        for k, s1 in subs:
            s2 = e2.params[k]
            if isinstance(s1, ClosedJaxpr):
                _consts(s1.consts, s2.consts, b1)
                s1, s2 = s1.jaxpr, s2.jaxpr
            _walk(s1, s2, b1, b2)
        if not subs:
            _check_eqn(e1, b1)


def _consts(c1, c2, b1) -> None:
    if len(c1) != len(c2):
        raise NotRowLocal("the program's constants depend on the batch size")
    for x1, x2 in zip(c1, c2):
        a1, a2 = np.asarray(x1), np.asarray(x2)
        if b1 in a1.shape or a1.shape != a2.shape or not np.array_equal(a1, a2):
            raise NotRowLocal("a constant captured by the program depends on the batch size")


def row_axes(closed1, closed2, b1: int, b2: int, keep) -> list:
    """Prove the programs (traced at batch sizes ``b1``/``b2``) row-local over their outputs selected by ``keep``
    (a bool per output); return each kept output's ``(batch axis, rows per batch row)`` (``None``: no batch axis).
    Raises
    :class:`NotRowLocal` with the reason."""
    j1, j2 = _dce(closed1.jaxpr, keep), _dce(closed2.jaxpr, keep)
    _consts(closed1.consts, closed2.consts, b1)
    _walk(j1, j2, b1, b2)
    out = []
    for v in j1.outvars:  # (axis, rows per batch row): a grouped axis (batch * heads) is cut to n * heads
        a = _axis(v.aval, b1)
        out.append(None if a is None else (a, _shape(v)[a] // b1))
    return out


def prune(jaxpr, keep, *, all_inputs: bool = True):
    """``jaxpr`` reduced to the outputs ``keep`` selects (JAX's dead-code elimination): ``(jaxpr, used_inputs)``,
    or ``None`` on a JAX without that internal. ``all_inputs=False`` also drops the inputs nothing left reads
    (``used_inputs`` says which stay)."""
    try:
        from jax._src.interpreters.partial_eval import dce_jaxpr
    except ImportError:
        return None
    return dce_jaxpr(jaxpr, list(keep), instantiate=all_inputs)


def _dce(jaxpr, keep):
    pruned = prune(jaxpr, keep)
    if pruned is None:  # every output is proved, the check summary included
        if not all(keep):
            raise NotRowLocal("this JAX cannot separate the program's outputs")
        return jaxpr
    return pruned[0]
