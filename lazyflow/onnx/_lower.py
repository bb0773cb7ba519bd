"""One ONNX lowering rule per jaxpr primitive (torch.onnx keeps one symbolic function per aten op).

A rule is ``rule(b, eqn, ins) -> list of output names``: ``b`` the :class:`Builder`, ``eqn`` the jaxpr equation
(its ``params`` and the avals of its variables), ``ins`` the ONNX names of its inputs. :data:`RULES` is the table;
a primitive missing from it cannot be exported (:func:`lower_jaxpr` names it and the model's line). Calls
(``jit``, ``custom_jvp_call``, ``custom_vjp_call``, ``remat2``) are inlined.
"""

from __future__ import annotations

import string
from collections.abc import Callable
from typing import Any

import numpy as np
import onnx
from jax.extend.core import Literal

from ..export._pure import ExportError
from ._graph import Builder, onnx_dtype, where_in_model

__all__ = ["RULES", "lower_jaxpr"]


def _aval(v) -> Any:
    return v.aval


def _simple(op: str, **attrs):
    return lambda b, eqn, ins: [b.node(op, ins, **attrs)]


def _scalar(b, eqn, value) -> str:
    return b.const(np.array(value, dtype=_aval(eqn.invars[0]).dtype))


def _log1p(b, eqn, ins):
    return [b.node("Log", [b.node("Add", [ins[0], _scalar(b, eqn, 1)])])]


def _expm1(b, eqn, ins):
    return [b.node("Sub", [b.node("Exp", ins), _scalar(b, eqn, 1)])]


def _erfc(b, eqn, ins):
    return [b.node("Sub", [_scalar(b, eqn, 1), b.node("Erf", ins)])]


def _rsqrt(b, eqn, ins):
    return [b.node("Reciprocal", [b.node("Sqrt", ins)])]


def _square(b, eqn, ins):
    return [b.node("Mul", [ins[0], ins[0]])]


def _integer_pow(b, eqn, ins):
    y = eqn.params["y"]
    if y == 2:
        return _square(b, eqn, ins)
    return [b.node("Pow", [ins[0], _scalar(b, eqn, y)])]


def _ne(b, eqn, ins):
    return [b.node("Not", [b.node("Equal", ins)])]


def _rem(b, eqn, ins):  # lax.rem is C's remainder: the sign of the dividend, as ONNX Mod(fmod=1)
    return [b.node("Mod", ins, fmod=1)]


def _clamp(b, eqn, ins):
    lo, x, hi = ins
    return [b.node("Min", [b.node("Max", [x, lo]), hi])]


def _convert(b, eqn, ins):
    return [b.node("Cast", ins, to=onnx_dtype(eqn.params["new_dtype"]))]


def _identity(b, eqn, ins):
    return [b.node("Identity", ins[:1])]


def _select_n(b, eqn, ins):
    pred, *cases = ins
    if len(cases) == 1:
        return [cases[0]]
    if _aval(eqn.invars[0]).dtype == np.bool_:
        return [b.node("Where", [pred, cases[1], cases[0]])]
    out = cases[0]
    for i in range(1, len(cases)):
        hit = b.node("Equal", [pred, b.const(np.array(i, _aval(eqn.invars[0]).dtype))])
        out = b.node("Where", [hit, cases[i], out])
    return [out]


def _dot_general(b, eqn, ins):
    (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
    nl, nr = len(_aval(eqn.invars[0]).shape), len(_aval(eqn.invars[1]).shape)
    lf = [i for i in range(nl) if i not in lc and i not in lb]
    rf = [i for i in range(nr) if i not in rc and i not in rb]
    if len(lc) == 1 and len(lf) == 1 and len(rf) == 1:
        # one contraction, one free axis a side (linear layers, attention): MatMul, which runtimes make fast
        # (onnxruntime's Einsum ran a Transformer encoder ~10x slower); dot_general's output order is MatMul's
        lhs, rhs = list(lb) + lf + list(lc), list(rb) + list(rc) + rf
        x = ins[0] if lhs == list(range(nl)) else b.node("Transpose", [ins[0]], perm=lhs)
        w = ins[1] if rhs == list(range(nr)) else b.node("Transpose", [ins[1]], perm=rhs)
        y = b.node("MatMul", [x, w])
    else:
        letters = iter(string.ascii_letters)
        ls = [next(letters) for _ in range(nl)]
        rs = [next(letters) for _ in range(nr)]
        for a, c in zip(lc, rc):
            rs[c] = ls[a]
        for a, c in zip(lb, rb):
            rs[c] = ls[a]
        out = [ls[a] for a in lb] + [ls[i] for i in lf] + [rs[i] for i in rf]
        y = b.node("Einsum", ins, equation=f"{''.join(ls)},{''.join(rs)}->{''.join(out)}")
    want = _aval(eqn.outvars[0]).dtype
    if want != _aval(eqn.invars[0]).dtype:
        y = b.node("Cast", [y], to=onnx_dtype(want))
    return [y]


def _reduce(op: str):
    def rule(b, eqn, ins):
        axes = b.const(np.array(eqn.params["axes"], np.int64))
        return [b.node(op, [ins[0], axes], keepdims=0)]

    return rule


def _argminmax(op: str):
    def rule(b, eqn, ins):
        (axis,) = eqn.params["axes"]
        y = b.node(op, ins, axis=int(axis), keepdims=0)
        return [b.node("Cast", [y], to=onnx_dtype(eqn.params["index_dtype"]))]

    return rule


def _broadcast_in_dim(b, eqn, ins):
    shape, bdims = eqn.params["shape"], eqn.params["broadcast_dimensions"]
    src = _aval(eqn.invars[0]).shape
    mid = [1] * len(shape)
    for i, d in enumerate(bdims):
        mid[d] = src[i]
    x = ins[0]
    if len(src) != len(shape):
        x = b.node("Reshape", [x, b.shape(mid)])
    return [b.node("Expand", [x, b.shape(shape)])]


def _reshape(b, eqn, ins):
    if eqn.params.get("dimensions") is not None:
        raise ExportError("reshape with dimensions (a transposing reshape) has no lowering")
    return [b.node("Reshape", [ins[0], b.shape(eqn.params["new_sizes"])])]


def _transpose(b, eqn, ins):
    return [b.node("Transpose", ins, perm=list(eqn.params["permutation"]))]


def _squeeze(b, eqn, ins):
    return [b.node("Squeeze", [ins[0], b.const(np.array(eqn.params["dimensions"], np.int64))])]


def _concatenate(b, eqn, ins):
    return [b.node("Concat", ins, axis=int(eqn.params["dimension"]))]


def _stack(b, eqn, ins):
    axis = b.const(np.array([eqn.params["axis"]], np.int64))
    return [b.node("Concat", [b.node("Unsqueeze", [x, axis]) for x in ins], axis=int(eqn.params["axis"]))]


def _split(b, eqn, ins):
    sizes = b.const(np.array(eqn.params["sizes"], np.int64))
    return b.multi("Split", [ins[0], sizes], len(eqn.outvars), axis=int(eqn.params["axis"]))


def _slice(b, eqn, ins):
    starts, limits = eqn.params["start_indices"], eqn.params["limit_indices"]
    strides = eqn.params["strides"] or (1,) * len(starts)
    axes = list(range(len(starts)))
    return [
        b.node(
            "Slice",
            [ins[0], b.shape(starts), b.shape(limits), b.const(np.array(axes, np.int64)), b.shape(strides)],
        )
    ]


def _dynamic_slice(b, eqn, ins):
    """lax.dynamic_slice clamps each start into ``[0, dim - size]``; ONNX Slice would clip the end instead."""
    x, *idx = ins
    sizes = eqn.params["slice_sizes"]
    dims = _aval(eqn.invars[0]).shape
    one = b.const(np.array([1], np.int64))
    starts = b.node(
        "Concat", [b.node("Reshape", [b.node("Cast", [i], to=onnx.TensorProto.INT64), one]) for i in idx], axis=0
    )
    hi = b.shape([d - s for d, s in zip(dims, sizes)])
    starts = b.node("Min", [b.node("Max", [starts, b.const(np.zeros(len(idx), np.int64))]), hi])
    ends = b.node("Add", [starts, b.shape(sizes)])
    return [b.node("Slice", [x, starts, ends, b.const(np.arange(len(idx), dtype=np.int64))])]


def _gather(b, eqn, ins):
    """The gathers of indexing (``x[idx]``, ``x[:, 0]``, embeddings): whole slices picked by index along some axes.

    Those axes go first (in ``start_index_map`` order), ``GatherND`` picks, and a transpose puts the index (batch)
    axes and the kept (offset) axes where lax puts them. Indices must be in range (ONNX raises otherwise).
    """
    dn, sizes = eqn.params["dimension_numbers"], eqn.params["slice_sizes"]
    shape = _aval(eqn.invars[0]).shape
    picked = list(dn.start_index_map)
    rest = [d for d in range(len(shape)) if d not in picked]
    if (
        getattr(dn, "operand_batching_dims", ())
        or sorted(dn.collapsed_slice_dims) != sorted(picked)
        or any(sizes[d] != 1 for d in picked)
        or any(sizes[d] != shape[d] for d in rest)
    ):
        raise ExportError(f"gather with slice sizes {sizes} and {dn} (not whole slices along the indexed axes)")
    x = ins[0] if picked + rest == list(range(len(shape))) else b.node("Transpose", [ins[0]], perm=picked + rest)
    y = b.node("GatherND", [x, b.node("Cast", [ins[1]], to=onnx.TensorProto.INT64)])
    n_out = len(_aval(eqn.outvars[0]).shape)
    n_batch = n_out - len(dn.offset_dims)
    batch = iter(range(n_batch))
    offset = {p: n_batch + i for i, p in enumerate(dn.offset_dims)}
    perm = [offset[p] if p in offset else next(batch) for p in range(n_out)]
    return [y if perm == list(range(n_out)) else b.node("Transpose", [y], perm=perm)]


def _pad(b, eqn, ins):
    config = eqn.params["padding_config"]
    if any(i != 0 for _, _, i in config):
        raise ExportError("pad with interior padding has no lowering")
    pads = b.shape([lo for lo, _, _ in config] + [hi for _, hi, _ in config])
    return [b.node("Pad", [ins[0], pads, ins[1]])]


def _iota(b, eqn, ins):
    p = eqn.params
    shape, dim = p["shape"], p["dimension"]
    if any(not isinstance(s, int) for s in shape):
        raise ExportError("iota over a dynamic dimension has no lowering")
    idx = np.arange(shape[dim], dtype=p["dtype"]).reshape([-1 if i == dim else 1 for i in range(len(shape))])
    return [b.const(np.broadcast_to(idx, shape).copy())]


def _dim_as_value(b, eqn, ins):
    """A dynamic dimension used as a number (``x.mean(0)`` over a dynamic axis divides by it)."""
    d = b.node("Reshape", [b.dim(eqn.params["dim"]), b.const(np.zeros(0, np.int64))])
    return [b.node("Cast", [d], to=onnx_dtype(_aval(eqn.outvars[0]).dtype))]


def _nchw(b, x, spec):
    """Transpose ``x`` so that the axes listed in ``spec`` (batch/feature first, then spatial) come in order."""
    spec = list(spec)
    return x if spec == sorted(spec) else b.node("Transpose", [x], perm=spec)


def _conv(b, eqn, ins):
    p = eqn.params
    if any(d != 1 for d in p["lhs_dilation"]) or p["batch_group_count"] != 1:
        raise ExportError("conv_general_dilated with lhs_dilation (a transposed convolution) has no lowering")
    dn = p["dimension_numbers"]
    x = _nchw(b, ins[0], dn.lhs_spec)
    w = _nchw(b, ins[1], dn.rhs_spec)
    pads = [lo for lo, _ in p["padding"]] + [hi for _, hi in p["padding"]]
    y = b.node(
        "Conv",
        [x, w],
        strides=list(p["window_strides"]),
        pads=pads,
        dilations=list(p["rhs_dilation"]),
        group=int(p["feature_group_count"]),
    )
    out = list(dn.out_spec)
    if out != sorted(out):
        y = b.node("Transpose", [y], perm=list(np.argsort(out)))
    return [y]


def _pool(kind: str):
    def rule(b, eqn, ins):
        p = eqn.params
        win, strides, pad = p["window_dimensions"], p["window_strides"], p["padding"]
        if any(d != 1 for d in p["base_dilation"]) or any(d != 1 for d in p["window_dilation"]):
            raise ExportError(f"reduce_window_{kind} with dilation has no lowering")
        if len(win) < 3 or win[0] != 1 or win[1] != 1 or strides[0] != 1 or strides[1] != 1 or pad[0] != (0, 0):
            raise ExportError(f"reduce_window_{kind} over the batch or channel axis has no lowering")
        attrs = dict(kernel_shape=list(win[2:]), strides=list(strides[2:]))
        attrs["pads"] = [lo for lo, _ in pad[2:]] + [hi for _, hi in pad[2:]]
        if kind == "max":
            return [b.node("MaxPool", ins, **attrs)]
        y = b.node("AveragePool", ins, count_include_pad=1, **attrs)  # padding counts as zeros: a sum
        return [b.node("Mul", [y, _scalar(b, eqn, float(np.prod(win)))])]

    return rule


def _inline(key: str):
    def rule(b, eqn, ins):
        sub = eqn.params[key]
        jaxpr, consts = (sub.jaxpr, sub.consts) if hasattr(sub, "consts") else (sub, ())
        b.callers.append(eqn)
        try:
            return lower_jaxpr(b, jaxpr, [b.const(np.asarray(c)) for c in consts], ins)
        finally:
            b.callers.pop()

    return rule


Rule = Callable[[Builder, object, list], list]
RULES: dict[str, Rule] = {
    # elementwise, binary (ONNX broadcasts size-1 axes as lax's implicit broadcasting does)
    "add": _simple("Add"),
    "sub": _simple("Sub"),
    "mul": _simple("Mul"),
    "div": _simple("Div"),
    "max": _simple("Max"),
    "min": _simple("Min"),
    "pow": _simple("Pow"),
    "rem": _rem,
    "and": _simple("And"),
    "or": _simple("Or"),
    "xor": _simple("Xor"),
    "eq": _simple("Equal"),
    "ne": _ne,
    "lt": _simple("Less"),
    "le": _simple("LessOrEqual"),
    "gt": _simple("Greater"),
    "ge": _simple("GreaterOrEqual"),
    "clamp": _clamp,
    "select_n": _select_n,
    # elementwise, unary
    "neg": _simple("Neg"),
    "not": _simple("Not"),
    "abs": _simple("Abs"),
    "sign": _simple("Sign"),
    "floor": _simple("Floor"),
    "ceil": _simple("Ceil"),
    "round": _simple("Round"),
    "exp": _simple("Exp"),
    "log": _simple("Log"),
    "log1p": _log1p,
    "expm1": _expm1,
    "sqrt": _simple("Sqrt"),
    "rsqrt": _rsqrt,
    "square": _square,
    "integer_pow": _integer_pow,
    "tanh": _simple("Tanh"),
    "logistic": _simple("Sigmoid"),
    "erf": _simple("Erf"),
    "erfc": _erfc,
    "sin": _simple("Sin"),
    "cos": _simple("Cos"),
    "tan": _simple("Tan"),
    "asin": _simple("Asin"),
    "acos": _simple("Acos"),
    "atan": _simple("Atan"),
    "sinh": _simple("Sinh"),
    "cosh": _simple("Cosh"),
    "convert_element_type": _convert,
    "copy": _identity,
    "stop_gradient": _identity,
    "optimization_barrier": _identity,
    # contractions, reductions, windows
    "dot_general": _dot_general,
    "reduce_sum": _reduce("ReduceSum"),
    "reduce_max": _reduce("ReduceMax"),
    "reduce_min": _reduce("ReduceMin"),
    "reduce_prod": _reduce("ReduceProd"),
    "argmax": _argminmax("ArgMax"),
    "argmin": _argminmax("ArgMin"),
    "conv_general_dilated": _conv,
    "reduce_window_max": _pool("max"),
    "reduce_window_sum": _pool("sum"),
    # shapes
    "broadcast_in_dim": _broadcast_in_dim,
    "reshape": _reshape,
    "transpose": _transpose,
    "squeeze": _squeeze,
    "concatenate": _concatenate,
    "split": _split,
    "stack": _stack,
    "slice": _slice,
    "dynamic_slice": _dynamic_slice,
    "gather": _gather,
    "pad": _pad,
    "iota": _iota,
    "dim_as_value": _dim_as_value,
    # calls: inlined
    "jit": _inline("jaxpr"),
    "custom_jvp_call": _inline("call_jaxpr"),
    "custom_vjp_call": _inline("call_jaxpr"),
    "remat2": _inline("jaxpr"),  # jax.checkpoint
}


def _is_finite(b, eqn, ins):
    bad = b.node("Or", [b.node("IsInf", ins), b.node("IsNaN", ins)])
    return [b.node("Not", [bad])]


RULES["is_finite"] = _is_finite


def lower_jaxpr(b: Builder, jaxpr, consts: list[str], args: list[str]) -> list[str]:
    """Emit ONNX nodes for ``jaxpr`` with its constvars bound to ``consts`` and invars to ``args``."""
    env = {}
    for v, n in zip(jaxpr.constvars, consts):
        env[v] = n
    for v, n in zip(jaxpr.invars, args):
        env[v] = n

    def read(v):
        if isinstance(v, Literal):
            return b.const(np.array(v.val, dtype=_aval(v).dtype))
        return env[v]

    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        rule = RULES.get(name)
        if rule is None:
            raise ExportError(
                f"lf.onnx.export: the op {name!r} (from {where_in_model(eqn, b.callers)}) has no ONNX lowering; "
                "rewrite that line with supported ops, or use lf.export.export (StableHLO) instead"
            )
        try:
            outs = rule(b, eqn, [read(v) for v in eqn.invars])
        except ExportError as e:
            if str(e).startswith("lf.onnx.export"):
                raise
            raise ExportError(
                f"lf.onnx.export: the op {name!r} (from {where_in_model(eqn, b.callers)}) has no ONNX lowering for "
                f"this form: {e}; rewrite that line, or use lf.export.export (StableHLO) instead"
            ) from e
        for v, n in zip(eqn.outvars, outs):
            env[v] = n
    return [read(v) for v in jaxpr.outvars]
