"""The op table's tests, driven by one table: a record per op.

Each record names the op-table primitives it exercises, the lazyflow call, one reference written once against
an array namespace ``xp`` (run with numpy/scipy for forward values and with jax.numpy for gradients), the input
specs (shapes with broadcasting, value domains), the dtypes to check and the tolerances. From the table:

* forward values vs numpy in every listed dtype (eager), and in float32 in graph mode (``lf.compile``);
* gradients (vector-Jacobian products with a random cotangent) vs ``jax.vjp`` of the jax.numpy reference,
  eager and graph;
* double backward (``create_graph=True``) for elementwise and matmul ops vs jax's second derivative, eager and
  graph (the graph run does both backwards inside the compiled program);
* a meta-test: every op in ``lazyflow.ops.REGISTRY`` has a record (except the internal ones listed below), and a
  spy checks that each record really reaches the primitives it names.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable

import jax
import jax.numpy as jnp
import jax.scipy.special as jsps
import numpy as np
import pytest
import scipy.special as sps
from _harness import MODES, run

import lazyflow as lf
import lazyflow.nn.functional as NF
from lazyflow._core.context import state
from lazyflow.ops import REGISTRY


# ---------------------------------------------------------------- the reference namespaces
class _XP:
    """numpy (+scipy) or jax.numpy (+jax.scipy), plus the few helpers the references need."""

    def __init__(self, mod, extra):
        self.mod = mod
        self.extra = extra

    def __getattr__(self, name):
        if name in self.extra:
            return self.extra[name]
        return getattr(self.mod, name)


def _np_set(x, idx, v):
    x = np.array(x, copy=True)
    x[idx] = v
    return x


def _np_add_at(x, idx, v):
    x = np.array(x, copy=True)
    np.add.at(x, idx, v)
    return x


NP = _XP(
    np,
    {
        "erf": sps.erf,
        "erfinv": sps.erfinv,
        "expit": sps.expit,
        "sp": sps,
        "expm": __import__("scipy.linalg").linalg.expm,
        "set_at": _np_set,
        "add_at": _np_add_at,
        "is_jax": False,
    },
)
JNP = _XP(
    jnp,
    {
        "erf": jsps.erf,
        "erfinv": jsps.erfinv,
        "expit": jax.nn.sigmoid,
        "sp": jsps,
        "expm": jax.scipy.linalg.expm,
        "set_at": lambda x, idx, v: x.at[idx].set(v),
        "add_at": lambda x, idx, v: x.at[idx].add(v),
        "is_jax": True,
    },
)


# ---------------------------------------------------------------- input specs
@dataclasses.dataclass(frozen=True)
class In:
    """One input: a shape and a sampler. ``kind`` is ``"f"`` (follows the case dtype), ``"i"`` (int64
    indices/values in [lo, hi)), ``"b"`` (bool) or ``"s"`` (a Python scalar ``lo``, passed as is)."""

    shape: tuple = ()
    kind: str = "f"
    lo: float = -2.0
    hi: float = 2.0
    nonzero: bool = False
    distinct: bool = False
    grad: bool = True


def A(*shape, lo=-2.0, hi=2.0, nonzero=False, distinct=False, grad=True) -> In:
    """A floating (or, for integer case dtypes, integer-valued) tensor."""
    return In(tuple(shape), "f", lo, hi, nonzero, distinct, grad)


def I(*shape, lo=0, hi=3) -> In:  # noqa: E743
    """An int64 tensor with values in ``[lo, hi)``."""
    return In(tuple(shape), "i", lo, hi, grad=False)


def B(*shape) -> In:
    return In(tuple(shape), "b", grad=False)


def S(value) -> In:
    return In((), "s", value, grad=False)


def _sample(spec: In, dtype, rng):
    if spec.kind == "s":
        return spec.lo
    if spec.kind == "b":
        return rng.random(spec.shape) < 0.5
    if spec.kind == "i" or (spec.kind == "f" and not dtype.is_floating_point and dtype is not lf.bool):
        lo, hi = int(math.ceil(spec.lo)), int(math.floor(spec.hi))
        if spec.distinct:
            n = int(np.prod(spec.shape))
            return (rng.permutation(n) - n // 2).reshape(spec.shape).astype(dtype.np)
        a = rng.integers(lo, hi + (0 if spec.kind == "i" else 1), spec.shape)
        if spec.nonzero:
            a = np.where(a == 0, 1, a)
        return a.astype(np.int64 if spec.kind == "i" else dtype.np)
    if spec.kind == "f" and dtype is lf.bool:
        return rng.random(spec.shape) < 0.5
    if spec.distinct:
        n = int(np.prod(spec.shape))
        a = np.linspace(spec.lo, spec.hi, n)[rng.permutation(n)].reshape(spec.shape)
    else:
        a = rng.uniform(spec.lo, spec.hi, spec.shape)
        if spec.nonzero:
            a = np.where(np.abs(a) < 0.25, 0.25 * np.sign(a) + (a == 0), a)
    # round through the test dtype so the reference sees exactly the values lazyflow sees
    return np.asarray(lf.tensor(a, dtype=dtype).float().numpy() if dtype is lf.bfloat16 else a.astype(dtype.np))


# ---------------------------------------------------------------- the record
_TOL = {lf.float32: (1e-5, 1e-6), lf.float64: (1e-10, 1e-12), lf.bfloat16: (2e-2, 2e-2), lf.float16: (4e-3, 2e-3)}


@dataclasses.dataclass
class Case:
    """One table record.

    Args:
        ops: the op-table primitives this record exercises (a spy checks that each is reached).
        fn: the lazyflow call, ``fn(*tensors_or_scalars)``.
        ref: ``ref(xp, *arrays)``: the same computation on numpy/jax arrays (floats arrive as float64).
        inputs: the input specs; ``variants`` lists further input tuples (other shapes, broadcasting).
        dtypes: dtypes of the ``A`` inputs for forward checks; the first floating one is used for gradients and
            graph mode.
        out: expected result dtype: ``"same"`` (the dtype of the ``A`` inputs), ``"float"`` (floats stay,
            integers/bool give float32), ``"bool"``, ``"int64"``, or a DType.
        grad: check first derivatives; ``grad2``: check second derivatives (elementwise and matmul ops).
        rtol, atol: float32 tolerances (other dtypes use their defaults scaled by the same factor).
        check: for random ops, ``check(out, inputs)`` replaces the numpy comparison.
        graph_error: graph mode must refuse this call with GraphError (a data-dependent output shape).
    """

    id: str
    ops: tuple
    fn: Callable
    ref: Callable | None
    inputs: tuple = (A(3, 4),)
    variants: tuple = ()
    dtypes: tuple = (lf.float32,)
    out: object = "same"
    grad: bool = True
    grad2: bool = False
    rtol: float = 1e-5
    atol: float = 1e-6
    grtol: float = 1e-4
    gatol: float = 1e-5
    check: Callable | None = None
    graph_error: bool = False

    def __repr__(self):
        return self.id


def _fdtype(case):
    return next((d for d in case.dtypes if d.is_floating_point), None)


CASES: list[Case] = []


def case(id, ops, fn, ref, **kw):
    ops = (ops,) if isinstance(ops, str) else tuple(ops)
    CASES.append(Case(id, ops, fn, ref, **kw))


F32, F64, BF16, F16 = lf.float32, lf.float64, lf.bfloat16, lf.float16
I32, I64, U8, BOOL = lf.int32, lf.int64, lf.uint8, lf.bool
FLOATS = (F32,)  # other float dtypes share float32's code path: checked on a representative few (F64S)
F64S = (F32, F64, BF16)

# ---------------------------------------------------------------- unary elementwise
_SQRT2 = math.sqrt(2.0)
UNARY = [
    # name, reference, domain (lo, hi), dtypes, out, extra tolerance factor
    ("exp", lambda xp, x: xp.exp(x), (-2, 2), F64S + (I64,), "float", 1),
    ("log", lambda xp, x: xp.log(x), (0.2, 3), F64S, "float", 1),
    ("log1p", lambda xp, x: xp.log1p(x), (-0.5, 2), FLOATS, "float", 1),
    ("expm1", lambda xp, x: xp.expm1(x), (-2, 2), FLOATS, "float", 1),
    ("sqrt", lambda xp, x: xp.sqrt(x), (0.2, 3), F64S + (I64,), "float", 1),
    ("rsqrt", lambda xp, x: 1 / xp.sqrt(x), (0.2, 3), FLOATS, "float", 1),
    ("sin", lambda xp, x: xp.sin(x), (-3, 3), F64S, "float", 1),
    ("cos", lambda xp, x: xp.cos(x), (-3, 3), FLOATS, "float", 1),
    ("tan", lambda xp, x: xp.tan(x), (-1.2, 1.2), FLOATS, "float", 3),
    ("tanh", lambda xp, x: xp.tanh(x), (-3, 3), F64S, "float", 1),
    ("sigmoid", lambda xp, x: 1 / (1 + xp.exp(-x)), (-4, 4), F64S + (I32,), "float", 1),
    ("erf", lambda xp, x: xp.erf(x), (-2, 2), F64S, "float", 1),
    ("erfinv", lambda xp, x: xp.erfinv(x), (-0.9, 0.9), (F32, F64), "float", 10),
    ("log2", lambda xp, x: xp.log2(x), (0.2, 3), FLOATS, "float", 1),
    ("log10", lambda xp, x: xp.log10(x), (0.2, 3), FLOATS, "float", 1),
    ("reciprocal", lambda xp, x: 1 / x, (0.3, 3), FLOATS, "float", 1),
    ("silu", lambda xp, x: x / (1 + xp.exp(-x)), (-4, 4), FLOATS, "float", 1),
    ("asin", lambda xp, x: xp.arcsin(x), (-0.9, 0.9), FLOATS, "float", 1),
    ("acos", lambda xp, x: xp.arccos(x), (-0.9, 0.9), FLOATS, "float", 1),
    ("atan", lambda xp, x: xp.arctan(x), (-3, 3), FLOATS, "float", 1),
    ("sinh", lambda xp, x: xp.sinh(x), (-2, 2), FLOATS, "float", 1),
    ("cosh", lambda xp, x: xp.cosh(x), (-2, 2), FLOATS, "float", 1),
    ("exp2", lambda xp, x: 2.0**x, (-2, 2), FLOATS, "float", 1),
    ("logsigmoid", lambda xp, x: -xp.logaddexp(0.0, -x), (-4, 4), FLOATS, "float", 1),
    ("neg", lambda xp, x: -x, (-2, 2), FLOATS + (I64, I32), "same", 1),
    ("abs", lambda xp, x: xp.abs(x), (-2, 2), FLOATS + (I64, I32), "same", 1),
    ("sign", lambda xp, x: xp.sign(x), (-2, 2), FLOATS + (I64,), "same", 1),
    ("square", lambda xp, x: x * x, (-2, 2), FLOATS + (I64,), "same", 1),
    ("relu", lambda xp, x: xp.maximum(x, 0), (-2, 2), FLOATS + (I64,), "same", 1),
    ("floor", lambda xp, x: xp.floor(x), (-3, 3), FLOATS + (I64,), "same", 1),
    ("ceil", lambda xp, x: xp.ceil(x), (-3, 3), FLOATS + (I64,), "same", 1),
    ("trunc", lambda xp, x: xp.trunc(x), (-3, 3), FLOATS + (I64,), "same", 1),
]
for _name, _ref, (_lo, _hi), _dts, _out, _f in UNARY:
    case(
        _name,
        _name,
        getattr(lf, _name, None) or getattr(NF, _name),
        _ref,
        inputs=(A(3, 4, lo=_lo, hi=_hi),),
        dtypes=_dts,
        out=_out,
        grad2=_name not in ("floor", "ceil", "trunc", "sign"),
        rtol=1e-5 * _f,
        atol=1e-6 * _f,
        grtol=1e-4 * _f,
    )

case("round", "round", lf.round, lambda xp, x: xp.round(x), inputs=(A(3, 4, lo=-4, hi=4),), dtypes=FLOATS + (I64,))
case(
    "round_decimals",
    "round",
    lambda x: lf.round(x, decimals=2),
    lambda xp, x: xp.round(x, 2),
    inputs=(A(3, 4, lo=-4, hi=4),),
    dtypes=(F64,),
    grad=False,
)
case("gelu", "gelu", lf.gelu, lambda xp, x: 0.5 * x * (1 + xp.erf(x / _SQRT2)), dtypes=FLOATS, grad2=True)
case(
    "gelu_tanh",
    "gelu",
    lambda x: lf.gelu(x, approximate="tanh"),
    lambda xp, x: 0.5 * x * (1 + xp.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3))),
    dtypes=FLOATS,
)
case("softplus", "softplus", lf.softplus, lambda xp, x: xp.logaddexp(0.0, x), dtypes=FLOATS, grad2=True)
case(
    "softplus_beta",
    "softplus",
    lambda x: lf.softplus(x, beta=2.0, threshold=3.0),
    lambda xp, x: xp.where(2 * x > 3.0, x, xp.logaddexp(0.0, 2 * x) / 2),
    inputs=(A(4, 5, lo=-3, hi=3),),
)
case(
    "leaky_relu",
    "leaky_relu",
    lambda x: NF.leaky_relu(x, 0.1),
    lambda xp, x: xp.where(x >= 0, x, 0.1 * x),
    dtypes=(F32, F64),
)
case("elu", "elu", lambda x: NF.elu(x, 1.5), lambda xp, x: xp.where(x > 0, x, 1.5 * (xp.exp(x) - 1)), dtypes=(F32, F64))
case(
    "hardtanh", "hardtanh", lambda x: NF.hardtanh(x, -0.5, 1.0), lambda xp, x: xp.clip(x, -0.5, 1.0), dtypes=(F32, F64)
)
_SPECIAL = np.array([np.nan, np.inf, -np.inf, 1.0, -2.0, 0.0], np.float32)
for _name, _ref in [
    ("isnan", lambda xp, x: xp.isnan(x)),
    ("isinf", lambda xp, x: xp.isinf(x)),
    ("isfinite", lambda xp, x: xp.isfinite(x)),
]:
    case(
        _name,
        _name,
        lambda x, _n=_name: getattr(lf, _n)(x / x.abs().clamp(min=0.5) + lf.tensor(_SPECIAL)),
        lambda xp, x, _r=_ref: _r(xp, x / xp.maximum(xp.abs(x), 0.5) + xp.asarray(_SPECIAL, xp.float64)),
        inputs=(A(6),),
        out="bool",
        grad=False,
        dtypes=(F32,),
    )
case(
    "nan_to_num",
    "nan_to_num",
    lambda x: lf.nan_to_num(x / x.abs().clamp(min=0.5) + lf.tensor(_SPECIAL), 9.0, 5.0, -5.0),
    lambda xp, x: xp.nan_to_num(
        x / xp.maximum(xp.abs(x), 0.5) + xp.asarray(_SPECIAL, xp.float64), nan=9.0, posinf=5.0, neginf=-5.0
    ),
    inputs=(A(6),),
)
case(
    "logical_not",
    "logical_not",
    lf.logical_not,
    lambda xp, x: xp.logical_not(x),
    inputs=(A(3, 4, lo=-1, hi=1),),
    dtypes=(F32, I64, BOOL),
    out="bool",
    grad=False,
)
case(
    "bitwise_not",
    "bitwise_not",
    lf.bitwise_not,
    lambda xp, x: xp.invert(x),
    inputs=(A(3, 4, lo=-9, hi=9),),
    dtypes=(I64, I32, U8, BOOL),
    grad=False,
)
case("cast", "cast", lambda x: x.to(lf.float64) * 1.0, lambda xp, x: x, dtypes=(F32,), out=F64)
case("cast_int", "cast", lambda x: x.to(lf.int32), lambda xp, x: xp.trunc(x), dtypes=(F32, F64), out=I32, grad=False)
case("copy", "copy", lf.clone, lambda xp, x: x, dtypes=FLOATS + (I64, BOOL))

# ---------------------------------------------------------------- binary elementwise, broadcasting, scalars
_BCAST = ((A(2, 1, 4), A(3, 1)), (A(3, 4), S(1.5)))
BINARY = [
    # id, op, lazyflow fn, reference, domains, dtypes, out, grad2
    ("add", "add", lambda a, b: a + b, lambda xp, a, b: a + b, {}, F64S + (I64, I32), "same", True),
    (
        "add_alpha",
        ("add", "mul"),
        lambda a, b: lf.add(a, b, alpha=2),
        lambda xp, a, b: a + 2 * b,
        {},
        (F32, I64),
        "same",
        False,
    ),
    ("sub", "sub", lambda a, b: a - b, lambda xp, a, b: a - b, {}, FLOATS + (I64,), "same", True),
    ("mul", "mul", lambda a, b: a * b, lambda xp, a, b: a * b, {}, FLOATS + (I64, BOOL), "same", True),
    ("div", "div", lambda a, b: a / b, lambda xp, a, b: a / b, {"nonzero": True}, F64S + (I64,), "float", True),
    (
        "div_trunc",
        "div_trunc",
        lambda a, b: lf.div(a, b, rounding_mode="trunc"),
        lambda xp, a, b: xp.trunc(a / b) if a.dtype.kind == "f" else xp.sign(a) * xp.sign(b) * (xp.abs(a) // xp.abs(b)),
        {"nonzero": True, "lo": -7, "hi": 7},
        (F32, F64, I64),
        "same",
        False,
    ),
    (
        "floor_divide",
        "floor_divide",
        lambda a, b: a // b,
        lambda xp, a, b: xp.floor_divide(a, b),
        {"nonzero": True, "lo": -7, "hi": 7},
        (F32, F64, I64, I32),
        "same",
        False,
    ),
    (
        "remainder",
        "remainder",
        lambda a, b: a % b,
        lambda xp, a, b: xp.remainder(a, b),
        {"nonzero": True, "lo": -7, "hi": 7},
        (F32, F64, I64),
        "same",
        False,
    ),
    (
        "fmod",
        "fmod",
        lf.fmod,
        lambda xp, a, b: xp.fmod(a, b),
        {"nonzero": True, "lo": -7, "hi": 7},
        (F32, F64, I64),
        "same",
        False,
    ),
    ("pow", "pow", lambda a, b: a**b, lambda xp, a, b: a**b, {"lo": 0.5, "hi": 2}, F64S, "same", True),
    ("atan2", "atan2", lf.atan2, lambda xp, a, b: xp.arctan2(a, b), {"nonzero": True}, (F32, F64), "float", True),
    ("maximum", "maximum", lf.maximum, lambda xp, a, b: xp.maximum(a, b), {}, FLOATS + (I64,), "same", True),
    ("minimum", "minimum", lf.minimum, lambda xp, a, b: xp.minimum(a, b), {}, FLOATS + (I64,), "same", True),
]
for _id, _op, _fn, _ref, _dom, _dts, _out, _g2 in BINARY:
    _ins = (A(3, 4, **_dom), A(3, 4, **_dom))
    _vars = tuple(
        tuple(dataclasses.replace(s, **{k: v for k, v in _dom.items()}) if s.kind == "f" else s for s in v)
        for v in _BCAST
    )
    case(_id, _op, _fn, _ref, inputs=_ins, variants=_vars, dtypes=_dts, out=_out, grad2=_g2)

case(
    "pow_int",
    "pow",
    lambda a, b: a**b,
    lambda xp, a, b: a**b,
    inputs=(A(3, 4, lo=-3, hi=3), A(3, 4, lo=0, hi=3)),
    dtypes=(I64, I32),
    grad=False,
)
case("pow_scalar_base", "pow", lambda a: 2.0**a, lambda xp, a: 2.0**a, dtypes=(F32, F64))
case("rsub_scalar", "sub", lambda a: 1.5 - a, lambda xp, a: 1.5 - a, dtypes=(F32, I64), out="float")
case(
    "rtruediv_scalar",
    "div",
    lambda a: 3 / a,
    lambda xp, a: 3 / a,
    inputs=(A(3, 4, nonzero=True),),
    dtypes=(F32, I64),
    out="float",
)
_NAN_COL = np.array([0.0, np.nan, 0.0, 0.0])
case(
    "fmax",
    "fmax",
    lambda a, b: lf.fmax(a, b + lf.tensor(_NAN_COL, dtype=b.dtype)),
    lambda xp, a, b: xp.fmax(a, b + _NAN_COL),
    inputs=(A(3, 4), A(3, 4)),
    dtypes=(F32, F64),
)
case(
    "fmin",
    "fmin",
    lambda a, b: lf.fmin(a + lf.tensor(_NAN_COL, dtype=a.dtype), b),
    lambda xp, a, b: xp.fmin(a + _NAN_COL, b),
    inputs=(A(3, 4), A(3, 4)),
    dtypes=(F32, F64),
)
for _name in ("eq", "ne", "lt", "le", "gt", "ge"):
    case(
        _name,
        _name,
        getattr(lf, _name),
        lambda xp, a, b, _n=_name: getattr(
            xp,
            {
                "eq": "equal",
                "ne": "not_equal",
                "lt": "less",
                "le": "less_equal",
                "gt": "greater",
                "ge": "greater_equal",
            }[_n],
        )(a, b),
        inputs=(A(3, 4, lo=-2, hi=2), A(3, 4, lo=-2, hi=2)),
        variants=((A(2, 1, 4, lo=-2, hi=2), A(3, 1, lo=-2, hi=2)), (A(3, 4), S(0.5))),
        dtypes=(F32, I64),
        out="bool",
        grad=False,
    )
for _name in ("logical_and", "logical_or", "logical_xor"):
    case(
        _name,
        _name,
        getattr(lf, _name),
        lambda xp, a, b, _n=_name: getattr(xp, _n)(a, b),
        inputs=(A(3, 4, lo=-1, hi=1), A(3, 4, lo=-1, hi=1)),
        variants=((A(2, 1, 4, lo=-1, hi=1), B(3, 1)),),
        dtypes=(BOOL, F32),
        out="bool",
        grad=False,
    )
for _name, _np in (
    ("bitwise_and", "bitwise_and"),
    ("bitwise_or", "bitwise_or"),
    ("bitwise_xor", "bitwise_xor"),
    ("bitwise_left_shift", "left_shift"),
    ("bitwise_right_shift", "right_shift"),
):
    _lo, _hi = (0, 5) if "shift" in _name else (-9, 9)
    case(
        _name,
        _name,
        getattr(lf, _name),
        lambda xp, a, b, _n=_np: getattr(xp, _n)(a, b),
        inputs=(A(3, 4, lo=-20, hi=20), A(3, 4, lo=_lo, hi=_hi)),
        variants=((A(2, 1, 4, lo=-20, hi=20), S(2)),),
        dtypes=(I64, U8) if "shift" in _name else (I64, BOOL),
        grad=False,
    )

case(
    "where",
    "where",
    lambda c, a, b: lf.where(c, a, b),
    lambda xp, c, a, b: xp.where(c, a, b),
    inputs=(B(3, 4), A(3, 4), A(3, 4)),
    variants=((B(2, 1, 4), A(3, 1), A(4)), (B(3, 4), A(3, 4), S(0.5))),
    dtypes=FLOATS + (I64,),
    grad2=True,
)


def _clamp_ref(xp, x, lo, hi):
    if lo is not None:
        x = xp.maximum(x, lo)
    return x if hi is None else xp.minimum(x, hi)


case(
    "clamp",
    "clamp",
    lambda x, lo, hi: lf.clamp(x, lo, hi),
    _clamp_ref,
    inputs=(A(3, 4), A(3, 4, lo=-1, hi=0), A(3, 4, lo=0, hi=1)),
    variants=((A(3, 4), S(-0.5), S(0.5)), (A(3, 4), A(4, lo=-1, hi=0), S(None))),
    dtypes=FLOATS + (I64,),
    grad2=True,
)
case(
    "lerp",
    "lerp",
    lf.lerp,
    lambda xp, a, b, w: a + w * (b - a),
    inputs=(A(3, 4), A(3, 4), A(3, 4, lo=0, hi=1)),
    variants=((A(3, 4), A(4), S(0.3)),),
    dtypes=(F32, F64),
)
case(
    "addcmul",
    "addcmul",
    lambda x, a, b: lf.addcmul(x, a, b, value=0.5),
    lambda xp, x, a, b: x + 0.5 * a * b,
    inputs=(A(3, 4), A(3, 4), A(1, 4)),
    dtypes=(F32, F64),
)
case(
    "addcdiv",
    "addcdiv",
    lambda x, a, b: lf.addcdiv(x, a, b, value=2),
    lambda xp, x, a, b: x + 2 * a / b,
    inputs=(A(3, 4), A(3, 4), A(1, 4, nonzero=True)),
    dtypes=(F32, F64),
)

# ---------------------------------------------------------------- linear algebra
case(
    "matmul",
    "matmul",
    lf.matmul,
    lambda xp, a, b: xp.matmul(a, b),
    inputs=(A(3, 4), A(4, 5)),
    variants=((A(2, 3, 4), A(4, 2)), (A(4), A(4, 2)), (A(3, 4), A(4)), (A(2, 1, 3, 4), A(3, 4, 2)), (A(4), A(4))),
    dtypes=(F32, F64, BF16, I64),
    grad2=True,
    rtol=1e-5,
    atol=1e-5,
)
case("mm", "matmul", lf.mm, lambda xp, a, b: a @ b, inputs=(A(3, 4), A(4, 2)), atol=1e-5)
case("bmm", "matmul", lf.bmm, lambda xp, a, b: a @ b, inputs=(A(2, 3, 4), A(2, 4, 2)), atol=1e-5)
case(
    "rmatmul_t",
    "matmul",
    lambda a, b: a.mT @ b.T,
    lambda xp, a, b: xp.swapaxes(a, -1, -2) @ b.T,
    inputs=(A(4, 3), A(2, 4)),
    atol=1e-5,
)
case(
    "einsum",
    "einsum",
    lambda a, b: lf.einsum("bij,bkj->bik", a, b),
    lambda xp, a, b: xp.einsum("bij,bkj->bik", a, b),
    inputs=(A(2, 3, 4), A(2, 5, 4)),
    variants=(),
    dtypes=(F32, F64),
    atol=1e-5,
)
case(
    "einsum_trace",
    "einsum",
    lambda a: lf.einsum("ii->", a),
    lambda xp, a: xp.einsum("ii->", a),
    inputs=(A(4, 4),),
    atol=1e-5,
)
case(
    "linear",
    "linear",
    lambda x, w, b: NF.linear(x, w, b),
    lambda xp, x, w, b: x @ w.T + b,
    inputs=(A(3, 4), A(5, 4), A(5)),
    variants=((A(2, 3, 4), A(5, 4), A(5)), (A(1, 4), A(5, 4), A(5)), (A(4), A(5, 4), A(5))),
    dtypes=(F32, F64),
    atol=1e-5,
)
case("outer", "outer", lf.outer, lambda xp, a, b: xp.outer(a, b), inputs=(A(3), A(4)), dtypes=(F32, I64))


# ---------------------------------------------------------------- reductions
def _red(id, ops, fn, ref, dtypes=(F32,), **kw):
    case(id, ops, fn, ref, inputs=(A(3, 4, 5),), dtypes=dtypes, **kw)


_red(
    "sum_all",
    "sum",
    lambda x: x.sum(),
    lambda xp, x: x.sum(),
    dtypes=F64S + (I64, I32, BOOL),
    out=lambda d: d if d.is_floating_point else I64,
    atol=1e-5,
)
_red("sum_dim", "sum", lambda x: x.sum(1), lambda xp, x: x.sum(1), dtypes=(F32, I64), out=lambda d: d)
_red("sum_dims_keep", "sum", lambda x: x.sum((0, -1), keepdim=True), lambda xp, x: x.sum((0, 2), keepdims=True))
_red("sum_dtype", "sum", lambda x: x.sum(-1, dtype=lf.float64), lambda xp, x: x.sum(-1), dtypes=(F32, I32), out=F64)
_red("prod", "prod", lambda x: x.prod(2), lambda xp, x: x.prod(2), dtypes=(F32, F64, I64), out=lambda d: d)
_red("prod_all", "prod", lambda x: (x * 0.5 + 1).prod(), lambda xp, x: (x * 0.5 + 1).prod())
_red("mean", "mean", lambda x: x.mean(), lambda xp, x: x.mean(), dtypes=FLOATS)
_red("mean_dims", "mean", lambda x: x.mean((0, 2), keepdim=True), lambda xp, x: x.mean((0, 2), keepdims=True))
_red("amax", "amax", lambda x: x.amax((0, 1)), lambda xp, x: x.max((0, 1)), dtypes=(F32, F64, I64))
_red("amin", "amin", lambda x: x.amin(-1, keepdim=True), lambda xp, x: x.min(-1, keepdims=True), dtypes=(F32, F64, I64))
_red("max_all", "amax", lambda x: x.max(), lambda xp, x: x.max(), dtypes=(F32, BF16, I64))
_red("min_all", "amin", lambda x: lf.min(x), lambda xp, x: x.min(), dtypes=(F32, I64))
_red(
    "max_dim",
    "max_dim",
    lambda x: x.max(1),
    lambda xp, x: (x.max(1), x.argmax(1)),
    dtypes=(F32, F64, I64),
    out=lambda d: (d, I64),
)
_red(
    "min_dim",
    "min_dim",
    lambda x: lf.min(x, -1, keepdim=True),
    lambda xp, x: (x.min(-1, keepdims=True), x.argmin(-1)[..., None]),
    dtypes=(F32, I64),
    out=lambda d: (d, I64),
)
_red("argmax", "argmax", lambda x: x.argmax(), lambda xp, x: x.argmax(), dtypes=(F32, I64), out=I64, grad=False)
_red(
    "argmax_dim", "argmax", lambda x: x.argmax(1, keepdim=True), lambda xp, x: x.argmax(1)[:, None], out=I64, grad=False
)
_red("argmin", "argmin", lambda x: lf.argmin(x, 2), lambda xp, x: x.argmin(2), dtypes=(F32, I64), out=I64, grad=False)
_red("var", "var", lambda x: x.var(), lambda xp, x: x.var(ddof=1), dtypes=F64S)
_red(
    "var_dims",
    "var",
    lambda x: lf.var(x, (0, 2), keepdim=True, correction=0),
    lambda xp, x: x.var((0, 2), keepdims=True),
)
_red("std", "std", lambda x: x.std(1, unbiased=False), lambda xp, x: x.std(1), dtypes=(F32, F64))
_red("std_correction2", "std", lambda x: lf.std(x, -1, correction=2), lambda xp, x: x.std(-1, ddof=2))
_red("logsumexp", "logsumexp", lambda x: x.logsumexp(1), lambda xp, x: xp.log(xp.exp(x).sum(1)), dtypes=FLOATS)
_red(
    "logsumexp_dims",
    "logsumexp",
    lambda x: lf.logsumexp(x, (0, 2), keepdim=True),
    lambda xp, x: xp.log(xp.exp(x).sum((0, 2), keepdims=True)),
)
_red("norm", "norm", lambda x: x.norm(), lambda xp, x: xp.sqrt((x * x).sum()))
_red("norm_p1_dim", "norm", lambda x: x.norm(1, dim=1), lambda xp, x: xp.abs(x).sum(1))
_red(
    "norm_p3",
    "norm",
    lambda x: lf.norm(x, 3, dim=(0, 2), keepdim=True),
    lambda xp, x: (xp.abs(x) ** 3).sum((0, 2), keepdims=True) ** (1 / 3),
)
_red("norm_inf", "norm", lambda x: x.norm(float("inf"), dim=-1), lambda xp, x: xp.abs(x).max(-1))
_red("all", "all", lambda x: (x > -1.5).all(), lambda xp, x: (x > -1.5).all(), out="bool", grad=False)
_red(
    "all_dim", "all", lambda x: lf.all(x, 1), lambda xp, x: (x != 0).all(1), dtypes=(I64, BOOL), out="bool", grad=False
)
_red("any", "any", lambda x: (x > 1.5).any(), lambda xp, x: (x > 1.5).any(), out="bool", grad=False)
_red(
    "any_dims",
    "any",
    lambda x: lf.any(x, (0, 2), keepdim=True),
    lambda xp, x: (x != 0).any((0, 2), keepdims=True),
    dtypes=(I64, BOOL),
    out="bool",
    grad=False,
)
_red(
    "cumsum",
    "cumsum",
    lambda x: x.cumsum(1),
    lambda xp, x: xp.cumsum(x, 1),
    dtypes=(F32, F64, I32),
    out=lambda d: d if d.is_floating_point else I64,
)
_red("cumprod", "cumprod", lambda x: (x * 0.5).cumprod(-1), lambda xp, x: xp.cumprod(x * 0.5, -1))
_red(
    "softmax",
    "softmax",
    lambda x: x.softmax(-1),
    lambda xp, x: xp.exp(x - x.max(-1, keepdims=True)) / xp.exp(x - x.max(-1, keepdims=True)).sum(-1, keepdims=True),
    dtypes=FLOATS,
    grad2=True,
)
_red(
    "softmax_dim0_int_dtype",
    "softmax",
    lambda x: lf.softmax(x, 0, dtype=lf.float32),
    lambda xp, x: xp.exp(x) / xp.exp(x).sum(0),
    dtypes=(I64,),
    out=F32,
    grad=False,
)
_red(
    "log_softmax",
    "log_softmax",
    lambda x: x.log_softmax(1),
    lambda xp, x: x - xp.log(xp.exp(x).sum(1, keepdims=True)),
    dtypes=FLOATS,
)


# ---------------------------------------------------------------- shape ops
def _sh(id, ops, fn, ref, inputs=(A(2, 3, 4),), dtypes=(F32,), **kw):
    case(id, ops, fn, ref, inputs=inputs, dtypes=dtypes, **kw)


_sh("reshape", "reshape", lambda x: x.reshape(4, -1), lambda xp, x: x.reshape(4, -1), dtypes=(F32, I64, BOOL))
_sh("view_flatten", "reshape", lambda x: x.view(-1).flatten(), lambda xp, x: x.reshape(-1))
_sh("flatten_range", "reshape", lambda x: lf.flatten(x, 1), lambda xp, x: x.reshape(2, 12))
_sh("unflatten", "reshape", lambda x: x.unflatten(-1, (2, 2)), lambda xp, x: x.reshape(2, 3, 2, 2))
_sh("squeeze_unsqueeze", "reshape", lambda x: x.unsqueeze(1).unsqueeze(-1).squeeze(-1), lambda xp, x: x[:, None])
_sh("permute", "permute", lambda x: x.permute(2, 0, 1), lambda xp, x: xp.transpose(x, (2, 0, 1)), dtypes=(F32, BOOL))
_sh("transpose", "permute", lambda x: x.transpose(0, 2), lambda xp, x: xp.swapaxes(x, 0, 2))
_sh("t_mT", "permute", lambda x: x[0].t() + x.mT[1], lambda xp, x: x[0].T + xp.swapaxes(x, 1, 2)[1], dtypes=(F32, I64))
_sh("movedim", "permute", lambda x: x.movedim(0, -1), lambda xp, x: xp.moveaxis(x, 0, -1))
_sh(
    "expand",
    "expand",
    lambda x: x.expand(3, 2, 2, 4),
    lambda xp, x: xp.broadcast_to(x, (3, 2, 2, 4)),
    inputs=(A(2, 1, 4),),
)
_sh(
    "expand_as_broadcast_to",
    "expand",
    lambda x, y: x.expand_as(y) + lf.broadcast_to(x, (3, 4)),
    lambda xp, x, y: 2 * xp.broadcast_to(x, (3, 4)),
    inputs=(A(4), A(3, 4, grad=False)),
    dtypes=(F32, I64),
)
_sh("repeat", "tile", lambda x: x.repeat(2, 1, 1, 3), lambda xp, x: xp.tile(x, (2, 1, 1, 3)))
_sh("tile", "tile", lambda x: x.tile(2, 1), lambda xp, x: xp.tile(x, (1, 2, 1)))
_sh(
    "repeat_interleave",
    "repeat_interleave",
    lambda x: x.repeat_interleave(2, dim=1),
    lambda xp, x: xp.repeat(x, 2, axis=1),
)
_sh(
    "repeat_interleave_list",
    "repeat_interleave",
    lambda x: lf.repeat_interleave(x, [1, 0, 3], 1),
    lambda xp, x: xp.repeat(
        x,
        xp.asarray([1, 0, 3]) if not xp.is_jax else np.array([1, 0, 3]),
        axis=1,
        **({"total_repeat_length": 4} if xp.is_jax else {}),
    ),
    dtypes=(F32,),
)
_sh(
    "cat",
    "cat",
    lambda a, b: lf.cat([a, b], 1),
    lambda xp, a, b: xp.concatenate([a, b], 1),
    inputs=(A(2, 3, 4), A(2, 2, 4)),
    dtypes=(F32, I64, BOOL),
)
_sh(
    "cat_promote",
    "cat",
    lambda a, b: lf.cat((a, b.to(lf.int32)), -1),
    lambda xp, a, b: xp.concatenate([a, xp.trunc(b) if b.dtype.kind == "f" else b], -1),
    inputs=(A(2, 3), A(2, 1)),
    dtypes=(F32, F64),
    grad=False,
)
_sh(
    "stack",
    "stack",
    lambda a, b: lf.stack([a, b], -1),
    lambda xp, a, b: xp.stack([a, b], -1),
    inputs=(A(2, 3), A(2, 3)),
)
_sh("split", "split", lambda x: x.split(3, -1), lambda xp, x: (x[..., :3], x[..., 3:]))
_sh("split_sizes", "split", lambda x: lf.split(x, [1, 2], 1), lambda xp, x: (x[:, :1], x[:, 1:]))
_sh("chunk", "split", lambda x: x.chunk(2, 1), lambda xp, x: (x[:, :2], x[:, 2:]))
_sh("unbind", ("split", "reshape"), lambda x: x.unbind(1), lambda xp, x: (x[:, 0], x[:, 1], x[:, 2]))
_sh("flip", "flip", lambda x: x.flip(0, 2), lambda xp, x: xp.flip(x, (0, 2)))
_sh("roll", "roll", lambda x: x.roll((1, -2), (0, 2)), lambda xp, x: xp.roll(x, (1, -2), (0, 2)))
_sh(
    "roll_flat",
    ("roll", "reshape"),
    lambda x: x.roll(5),
    lambda xp, x: xp.roll(x.reshape(-1), 5).reshape(x.shape),
    dtypes=(F32,),
)
_sh(
    "gather",
    "gather",
    lambda x, i: x.gather(2, i),
    lambda xp, x, i: xp.take_along_axis(x, i, 2),
    inputs=(A(2, 3, 4), I(2, 3, 5, hi=4)),
    dtypes=(F32, I64),
)
_sh(
    "gather_smaller",
    "gather",
    lambda x, i: lf.gather(x, 0, i),
    lambda xp, x, i: xp.take_along_axis(x[:, :2, :3], i, 0),
    inputs=(A(2, 3, 4), I(4, 2, 3, hi=2)),
)


def _scatter_ref(xp, x, i, s, dim, add=False):
    idx = list(np.indices(i.shape, sparse=True))
    idx[dim] = i
    s = s[tuple(slice(0, n) for n in i.shape)] if np.ndim(s) else s
    return (xp.add_at if add else xp.set_at)(x, tuple(idx), s)


_PERM_IDX = np.array([[[3, 0, 1], [2, 1, 0], [0, 2, 3]], [[1, 3, 2], [0, 1, 3], [2, 0, 1]]])
_sh(
    "scatter",
    "scatter",
    lambda x, s: x.scatter(2, lf.tensor(_PERM_IDX), s),
    lambda xp, x, s: _scatter_ref(xp, x, _PERM_IDX, s, 2),
    inputs=(A(2, 3, 4), A(2, 3, 3)),
    dtypes=(F32, I64),
)
_sh(
    "scatter_value",
    "scatter",
    lambda x: lf.scatter(x, 2, lf.tensor(_PERM_IDX), value=7.0),
    lambda xp, x: _scatter_ref(xp, x, _PERM_IDX, 7.0, 2),
    dtypes=(F32,),
)
_sh(
    "scatter_add",
    "scatter",
    lambda x, i, s: x.scatter_add(1, i, s),
    lambda xp, x, i, s: _scatter_ref(xp, x, i, s, 1, add=True),
    inputs=(A(2, 3, 4), I(2, 4, 4, hi=3), A(2, 5, 4)),
    dtypes=(F32, I64),
)
_sh(
    "index_select",
    "index_select",
    lambda x, i: x.index_select(2, i),
    lambda xp, x, i: xp.take(x, i, 2),
    inputs=(A(2, 3, 4), I(5, hi=4)),
)
_sh(
    "index_add",
    "index_add",
    lambda x, i, s: lf.index_add(x, 1, i, s, alpha=2),
    lambda xp, x, i, s: xp.add_at(x, (slice(None), i), 2 * s),
    inputs=(A(2, 3, 4), I(5, hi=3), A(2, 5, 4)),
    dtypes=(F32, I64),
)
_sh(
    "masked_fill",
    "masked_fill",
    lambda x, m: x.masked_fill(m, -1.5),
    lambda xp, x, m: xp.where(m, -1.5 if x.dtype.kind == "f" else -1, x),
    inputs=(A(2, 3, 4), B(3, 1)),
    dtypes=(F32, I64),
)
_sh(
    "masked_fill_tensor",
    "masked_fill",
    lambda x, m, v: lf.masked_fill(x, m, v),
    lambda xp, x, m, v: xp.where(m, v, x),
    inputs=(A(2, 3, 4), B(2, 3, 4), A()),
    dtypes=(F32,),
)
_sh(
    "sort",
    "sort",
    lambda x: x.sort(),
    lambda xp, x: (xp.sort(x, -1), xp.argsort(x, -1)),
    inputs=(A(2, 3, 4, distinct=True),),
    dtypes=(F32, F64, I64),
    out=lambda d: (d, I64),
)
_sh(
    "sort_desc",
    "sort",
    lambda x: lf.sort(x, 0, descending=True),
    lambda xp, x: (-xp.sort(-x, 0), xp.argsort(-x, 0)),
    inputs=(A(3, 4, distinct=True),),
    dtypes=(F32,),
    out=lambda d: (d, I64),
)
_sh(
    "argsort",
    "sort",
    lambda x: x.argsort(1),
    lambda xp, x: xp.argsort(x, 1),
    inputs=(A(2, 3, 4, distinct=True),),
    dtypes=(F32, I64),
    out=I64,
    grad=False,
)
_sh(
    "topk",
    "topk",
    lambda x: x.topk(2),
    lambda xp, x: (-xp.sort(-x, -1)[..., :2], xp.argsort(-x, -1)[..., :2]),
    inputs=(A(2, 3, 4, distinct=True),),
    dtypes=(F32, I64),
    out=lambda d: (d, I64),
)
_sh(
    "topk_smallest_dim0",
    "topk",
    lambda x: lf.topk(x, 2, 0, largest=False),
    lambda xp, x: (xp.sort(x, 0)[:2], xp.argsort(x, 0)[:2]),
    inputs=(A(3, 4, distinct=True),),
    dtypes=(F32,),
    out=lambda d: (d, I64),
)


def _running(xp, x, sign):
    """(values, indices) of the running max (sign 1) or min (sign -1) along dim 1 of distinct values."""
    n = x.shape[1]
    seen = xp.tril(xp.ones((n, n))) > 0
    y = xp.where(seen[None], sign * x[:, None, :], -xp.inf)
    return sign * y.max(-1), y.argmax(-1)


_sh(
    "cummax",
    "cummax",
    lambda x: x.cummax(1),
    lambda xp, x: _running(xp, x, 1),
    inputs=(A(3, 5, distinct=True),),
    dtypes=(F32, F64, I64),
    out=lambda d: (d, I64),
)
_sh(
    "cummin",
    "cummin",
    lambda x: lf.cummin(x, -1),
    lambda xp, x: _running(xp, x, -1),
    inputs=(A(3, 5, distinct=True),),
    dtypes=(F32, I64),
    out=lambda d: (d, I64),
)
_sh(
    "logcumsumexp",
    "logcumsumexp",
    lambda x: x.logcumsumexp(1),
    lambda xp, x: xp.log(xp.cumsum(xp.exp(x), 1)),
    dtypes=(F32, F64),
)
_sh(
    "searchsorted",
    ("searchsorted", "sort"),
    lambda s, v: (lf.searchsorted(s.sort().values, v), lf.searchsorted(s.sort().values, v, right=True)),
    lambda xp, s, v: (xp.searchsorted(xp.sort(s), v), xp.searchsorted(xp.sort(s), v, side="right")),
    inputs=(A(6, distinct=True), A(3, 4)),
    dtypes=(F32, I64),
    out=lambda d: (I64, I64),
    grad=False,
)
_sh(
    "histc",
    "histc",
    lambda x: lf.histc(x, bins=5, min=-1.5, max=1.5),
    lambda xp, x: xp.histogram(x, 5, (-1.5, 1.5))[0],
    dtypes=(F32, F64),
    grad=False,
)
_sh("tril", "tril", lambda x: x.tril(), lambda xp, x: xp.tril(x), dtypes=(F32, I64, BOOL))


# ---------------------------------------------------------------- lf.linalg (well-conditioned inputs: x + 4 I)
def _wc(x):
    return x + 4 * lf.eye(x.shape[-1], dtype=x.dtype)


def _wc_ref(xp, x):
    return x + 4 * xp.eye(x.shape[-1])


def _tri_ref(xp, b, a, upper, transpose, unit):
    t = xp.triu(a) if upper else xp.tril(a)
    if unit:
        eye = xp.eye(a.shape[-1])
        t = t * (1 - eye) + eye
    if transpose:
        t = xp.swapaxes(t, -1, -2)
    return xp.linalg.solve(t, b)


def _lu_ref(xp, a):
    """scipy's packed LU factors and permutation matrix P (A = P L U) of each matrix (numpy only: this record's
    gradients are checked against finite differences of it)."""
    import scipy.linalg as sla

    return np.stack([sla.lu_factor(m)[0] for m in a]), np.stack([sla.lu(m)[0] for m in a]).astype(np.int64)


def _spd(x):
    return x @ x.mT + lf.eye(x.shape[-1], dtype=x.dtype)


def _spd_ref(xp, x):
    return x @ xp.swapaxes(x, -1, -2) + xp.eye(x.shape[-1])


_LA = dict(inputs=(A(2, 3, 3),), dtypes=(F32, F64), rtol=1e-4, atol=1e-5, grtol=1e-3, gatol=1e-4)
case("linalg_inv", "linalg_inv", lambda x: lf.linalg.inv(_wc(x)), lambda xp, x: xp.linalg.inv(_wc_ref(xp, x)), **_LA)
case(
    "linalg_solve",
    "linalg_solve",
    lambda x, b: (lf.linalg.solve(_wc(x), b), lf.linalg.solve(_wc(x), b.mT, left=False)),
    lambda xp, x, b: (
        xp.linalg.solve(_wc_ref(xp, x), b),
        xp.swapaxes(xp.linalg.solve(xp.swapaxes(_wc_ref(xp, x), -1, -2), b), -1, -2),
    ),
    **{**_LA, "inputs": (A(2, 3, 3), A(2, 3, 2))},
)
case(
    "linalg_inv_ex",
    "linalg_inv_ex",
    lambda x: tuple(lf.linalg.inv_ex(_wc(x))),
    lambda xp, x: (xp.linalg.inv(_wc_ref(xp, x)), xp.zeros(2, xp.int32)),
    out=lambda d: (d, I32),
    **_LA,
)
case(
    "linalg_cholesky_ex",
    "linalg_cholesky_ex",
    lambda x: tuple(lf.linalg.cholesky_ex(_spd(x), upper=True)),
    lambda xp, x: (xp.swapaxes(xp.linalg.cholesky(_spd_ref(xp, x)), -1, -2), xp.zeros(2, xp.int32)),
    out=lambda d: (d, I32),
    **_LA,
)
case("linalg_det", "linalg_det", lambda x: lf.linalg.det(x), lambda xp, x: xp.linalg.det(x), **_LA)
case(
    "linalg_slogdet",
    "linalg_slogdet",
    lambda x: tuple(lf.linalg.slogdet(x)),
    lambda xp, x: tuple(xp.linalg.slogdet(x)),
    **_LA,
)
case(
    "linalg_cholesky",
    "linalg_cholesky",
    lambda x: (lf.linalg.cholesky(_spd(x)), lf.linalg.cholesky(_spd(x), upper=True)),
    lambda xp, x: (xp.linalg.cholesky(_spd_ref(xp, x)), xp.swapaxes(xp.linalg.cholesky(_spd_ref(xp, x)), -1, -2)),
    **_LA,
)
case(  # Q and R are unique up to column signs: compare the invariants Q R and |R|
    "linalg_qr",
    "linalg_qr",
    lambda x: (lambda q, r: (q @ r, r.abs()))(*lf.linalg.qr(x)),
    lambda xp, x: (x, xp.abs(xp.linalg.qr(x)[1])),
    **{**_LA, "inputs": (A(2, 4, 3),)},
)
case(
    "linalg_eigh",
    "linalg_eigh",
    lambda x: (lambda w, v: (w, (v * w.unsqueeze(-2)) @ v.mT))(*lf.linalg.eigh(x + x.mT)),
    lambda xp, x: (xp.linalg.eigh(x + xp.swapaxes(x, -1, -2))[0], x + xp.swapaxes(x, -1, -2)),
    **_LA,
)
case(
    "linalg_svd",
    "linalg_svd",
    lambda x: (lambda u, s, vh: (s, (u * s.unsqueeze(-2)) @ vh))(*lf.linalg.svd(x, full_matrices=False)),
    lambda xp, x: (xp.linalg.svd(x, compute_uv=False), x),
    **{**_LA, "inputs": (A(2, 4, 3),)},
)
case(
    "linalg_svdvals",
    "linalg_svdvals",
    lambda x: lf.linalg.svdvals(x),
    lambda xp, x: xp.linalg.svd(x, compute_uv=False),
    **{**_LA, "inputs": (A(2, 3, 4),)},
)
_sh("triu", "triu", lambda x: lf.triu(x, 1), lambda xp, x: xp.triu(x, 1), dtypes=(F32, I64))
_sh("triu_neg", "triu", lambda x: x.triu(-1), lambda xp, x: xp.triu(x, -1), inputs=(A(4, 3),), dtypes=(F32,))
_sh("diagonal", "diagonal", lambda x: x.diagonal(1, 1, 2), lambda xp, x: xp.diagonal(x, 1, 1, 2))
_sh(
    "one_hot",
    "one_hot",
    lambda i: lf.one_hot(i, 5),
    lambda xp, i: (i[..., None] == np.arange(5)).astype(np.int64),
    inputs=(I(2, 3, hi=5),),
    dtypes=(F32,),
    out=I64,
    grad=False,
)
_sh(
    "pad_constant",
    "pad",
    lambda x: lf.pad(x, (1, 2, 0, 1), value=0.5),
    lambda xp, x: xp.pad(x, ((0, 0), (0, 1), (1, 2)), constant_values=0.5),
    dtypes=(F32, F64),
)
_sh(
    "pad_negative",
    "pad",
    lambda x: lf.pad(x, (-1, 2)),
    lambda xp, x: xp.pad(x[..., 1:], ((0, 0), (0, 0), (0, 2))),
    dtypes=(F32, I64),
)
_sh(
    "pad_reflect",
    "pad",
    lambda x: lf.pad(x, (2, 1), mode="reflect"),
    lambda xp, x: xp.pad(x, ((0, 0), (0, 0), (2, 1)), mode="reflect"),
    dtypes=(F32,),
)
_sh(
    "pad_replicate",
    "pad",
    lambda x: lf.pad(x, (1, 1, 2, 0), mode="replicate"),
    lambda xp, x: xp.pad(x, ((0, 0), (2, 0), (1, 1)), mode="edge"),
    dtypes=(F32,),
)
_sh(
    "pad_circular",
    "pad",
    lambda x: lf.pad(x, (1, 2), mode="circular"),
    lambda xp, x: xp.pad(x, ((0, 0), (0, 0), (1, 2)), mode="wrap"),
    dtypes=(F32,),
)

# ---------------------------------------------------------------- indexing (getitem / setitem)
_IDX2 = np.array([[0, 2], [1, 1]])
_IDX_SET = np.array([[2], [0]])
_MASK = np.array([True, False, True])
GETITEMS = [
    ("int", 1),
    ("neg_int", -1),
    ("ints", (1, 2)),
    ("slice", slice(1, None)),
    ("slice_step", (slice(None), slice(0, None, 2))),
    ("neg_step", (slice(None, None, -1), 1)),
    ("none_ellipsis", (None, Ellipsis, 1, None)),
    ("ellipsis", (Ellipsis, slice(1, 3))),
    ("list", [1, 0, 1]),
    ("int_tensor", (slice(None), _IDX2)),
    ("two_arrays", ([0, 1], slice(None), [3, 0])),
    ("mask", (_MASK,)),
    ("mask_dim1", (slice(None), _MASK)),
]


def _index_for(idx, lib):
    def conv(i):
        if isinstance(i, np.ndarray):
            return lf.tensor(i) if lib == "lf" else i
        if isinstance(i, list) and lib == "np":
            return np.asarray(i)
        return i

    return tuple(conv(i) for i in idx) if isinstance(idx, tuple) else conv(idx)


for _id, _idx in GETITEMS:
    _shp = (3, 3, 4) if _id == "mask" else (2, 3, 4)
    case(
        f"getitem_{_id}",
        "getitem",
        lambda x, _i=_idx: x[_index_for(_i, "lf")],
        lambda xp, x, _i=_idx: x[_index_for(_i, "np")],
        inputs=(A(*_shp),),
        dtypes=(F32, I64),
        graph_error="mask" in _id,
    )


def _setitem(idx):
    def f(x, v):
        y = x.clone()
        y[_index_for(idx, "lf")] = v
        return y

    return f


for _id, _idx, _vshape in [
    ("int", (1,), (3, 4)),
    ("slice_broadcast", (slice(None), 1), (4,)),
    ("slice_step", (Ellipsis, slice(None, None, 2)), (2, 3, 2)),
    ("int_tensor", (slice(None), _IDX_SET), (2, 2, 1, 4)),
    ("scalar_tensor", (0, 1, 2), ()),
]:
    case(
        f"setitem_{_id}",
        ("setitem", "copy"),
        _setitem(_idx),
        lambda xp, x, v, _i=_idx: xp.set_at(x, _index_for(_i, "np"), v),
        inputs=(A(2, 3, 4), A(*_vshape)),
        dtypes=(F32, I64),
    )
case(
    "setitem_scalar",
    ("setitem", "copy"),
    lambda x: _setitem((slice(None), 0))(x, 2.5),
    lambda xp, x: xp.set_at(x, (slice(None), 0), 2.5),
    inputs=(A(2, 3, 4),),
    dtypes=(F32,),
)
case(
    "copy_into",
    "copy_into",
    lambda x, v: x.clone().copy_(v),
    lambda xp, x, v: xp.broadcast_to(v, x.shape) + 0 * x,
    inputs=(A(2, 3), A(3)),
    dtypes=(F32,),
)


# ---------------------------------------------------------------- creation
def _nullary(id, ops, fn, ref, **kw):
    case(id, ops, fn, ref, inputs=(), dtypes=(F32,), grad=False, **kw)


# eager zeros/ones/full of a value numpy stores exactly are host arrays (no kernel, no compile per shape); a value the
# kernel converts (a float into an integer dtype) and every traced call run the "full" op
_nullary("zeros", (), lambda: lf.zeros(2, 3), lambda xp: np.zeros((2, 3)))
_nullary("ones_int", (), lambda: lf.ones((2, 3), dtype=lf.int32), lambda xp: np.ones((2, 3), np.int32), out=I32)
_nullary("full", (), lambda: lf.full((3,), 7), lambda xp: np.full(3, 7), out=I64)
_nullary(
    "full_converted", "full", lambda: lf.full((3,), 2.75, dtype=lf.int32), lambda xp: np.full(3, 2, np.int32), out=I32
)
_nullary("arange", "arange", lambda: lf.arange(5), lambda xp: np.arange(5), out=I64)
_nullary("arange_float", "arange", lambda: lf.arange(1, 2.5, 0.25), lambda xp: np.arange(1, 2.5, 0.25))
_nullary(
    "arange_neg_step",
    "arange",
    lambda: lf.arange(10, 0, -3, dtype=lf.float64),
    lambda xp: np.arange(10, 0, -3.0),
    out=F64,
)
_nullary("linspace", "linspace", lambda: lf.linspace(-1, 1, 5), lambda xp: np.linspace(-1, 1, 5))
_nullary("eye", "eye", lambda: lf.eye(3, 4), lambda xp: np.eye(3, 4))


# ---------------------------------------------------------------- random ops: properties, reproducibility
def _rand_case(id, ops, fn, check, inputs=(), **kw):
    case(id, ops, fn, None, inputs=inputs, dtypes=(F32,), check=check, **kw)


def _in_unit(out, *_):
    a = out.numpy()
    assert out.dtype is F32 and a.shape == (64,) and a.min() >= 0 and a.max() < 1 and np.unique(a).size > 60


_rand_case("rand", "uniform", lambda: lf.rand(64), _in_unit, grad=False)
_rand_case(
    "randn",
    "normal",
    lambda: lf.randn(8, 8),
    lambda o, *_: o.shape == (8, 8) and np.unique(o.numpy()).size == 64 and abs(o.numpy().mean()) < 1,
    grad=False,
)
_rand_case(
    "randint",
    "randint",
    lambda: lf.randint(2, 6, (50,)),
    lambda o, *_: o.dtype is I64 and set(np.unique(o.numpy())) == {2, 3, 4, 5},
    grad=False,
)
_rand_case(
    "randperm",
    "randperm",
    lambda: lf.randperm(9),
    lambda o, *_: o.dtype is I64 and sorted(o.tolist()) == list(range(9)),
    grad=False,
)
_rand_case(
    "bernoulli",
    "bernoulli",
    lambda p: lf.bernoulli(p),
    lambda o, p: (
        set(np.unique(o.numpy())) <= {0.0, 1.0} and np.all(o.numpy()[p == 0] == 0) and np.all(o.numpy()[p == 1] == 1)
    ),
    inputs=(A(4, 25, lo=0, hi=1),),
    grad=False,
)
_rand_case(
    "multinomial",
    "multinomial",
    lambda p: lf.multinomial(p.abs() + 0.01, 3),
    lambda o, p: o.dtype is I64 and o.shape == (4, 3) and all(len(set(r)) == 3 for r in o.tolist()),
    inputs=(A(4, 6),),
    grad=False,
)
_rand_case(
    "multinomial_replacement",
    "multinomial",
    lambda p: lf.multinomial(p * lf.tensor([0.0, 1, 0, 1]), 20, True),
    lambda o, p: set(np.unique(o.numpy())) <= {1, 3},
    inputs=(A(2, 4, lo=0.5, hi=1),),
    grad=False,
)


def _dropout_check(out, x):
    o = out.numpy()
    kept = o != 0
    assert 0 < kept.mean() < 1
    np.testing.assert_allclose(o[kept], x[kept] / 0.75, rtol=1e-6)


_rand_case(
    "dropout", "dropout", lambda x: NF.dropout(x, 0.25, training=True), _dropout_check, inputs=(A(8, 16, nonzero=True),)
)
_rand_case(
    "uniform_",
    "uniform_chunk",
    # float64: float32 fills on a CPU backend run on the host meanwhile the kernel compiles (test_construction
    # checks they equal this kernel's values bit for bit); other dtypes always take the chunk kernel
    lambda x: x.clone().double().uniform_(-2, -1),
    lambda o, x: o.shape == x.shape and o.numpy().min() >= -2 and o.numpy().max() < -1,
    inputs=(A(4, 16),),
    grad=False,
)
_rand_case(
    "normal_",
    "normal_chunk",
    lambda x: x.clone().normal_(5.0, 0.01),
    lambda o, x: np.all(np.abs(o.numpy() - 5) < 0.1),
    inputs=(A(4, 16),),
    grad=False,
)


# ---------------------------------------------------------------- nn primitives (torch.nn.functional calls)
def _conv_ref(xp, x, w, b, stride=1, padding=0):
    x = xp.pad(x, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    oh, ow = (h - kh) // stride + 1, (wd - kw) // stride + 1
    cols = xp.stack(
        [x[:, :, i : i + stride * oh : stride, j : j + stride * ow : stride] for i in range(kh) for j in range(kw)], 2
    )  # n, c, kh*kw, oh, ow
    return xp.einsum("nckhw,ock->nohw", cols, w.reshape(o, c, kh * kw)) + b[None, :, None, None]


case(
    "conv2d",
    "conv",
    lambda x, w, b: NF.conv2d(x, w, b, stride=2, padding=1),
    lambda xp, x, w, b: _conv_ref(xp, x, w, b, 2, 1),
    inputs=(A(2, 3, 5, 5), A(4, 3, 3, 3), A(4)),
    atol=1e-5,
    rtol=1e-4,
)


def _conv_t_ref(xp, x, w, b):
    # stride 1, no padding: a full correlation with the flipped kernel
    kh, kw = w.shape[2:]
    return _conv_ref(
        xp, xp.pad(x, ((0, 0), (0, 0), (kh - 1, kh - 1), (kw - 1, kw - 1))), xp.flip(xp.swapaxes(w, 0, 1), (2, 3)), b
    )


case(
    "conv_transpose2d",
    "conv_transpose",
    lambda x, w, b: NF.conv_transpose2d(x, w, b),
    _conv_t_ref,
    inputs=(A(2, 3, 4, 4), A(3, 2, 2, 3), A(2)),
    atol=1e-5,
    rtol=1e-4,
)


def _windows(xp, x, k):
    n, c, h, w = x.shape
    return x[:, :, : h // k * k, : w // k * k].reshape(n, c, h // k, k, w // k, k)


case(
    "max_pool2d",
    "max_pool",
    lambda x: NF.max_pool2d(x, 2),
    lambda xp, x: _windows(xp, x, 2).max((3, 5)),
    inputs=(A(2, 3, 4, 5, distinct=True),),
)


def _max_pool_indices(x, k):
    """torch's return_indices: the flat position of each window's maximum within its (H, W) plane."""
    n, c, h, w = x.shape
    out = np.zeros((n, c, h // k, w // k), np.int64)
    for i in range(h // k):
        for j in range(w // k):
            a = x[:, :, i * k : (i + 1) * k, j * k : (j + 1) * k].reshape(n, c, -1).argmax(-1)
            out[:, :, i, j] = (i * k + a // k) * w + j * k + a % k
    return out


case(
    "max_pool2d_indices",
    "max_pool_with_indices",
    lambda x: NF.max_pool2d(x, 2, return_indices=True),
    lambda xp, x: (_windows(xp, x, 2).max((3, 5)), None if xp.is_jax else _max_pool_indices(x, 2)),
    inputs=(A(2, 3, 4, 5, distinct=True),),
    out=lambda d: (d, I64),
)
case(
    "avg_pool2d",
    "avg_pool",
    lambda x: NF.avg_pool2d(x, 2),
    lambda xp, x: _windows(xp, x, 2).mean((3, 5)),
    inputs=(A(2, 3, 4, 5),),
)
case(
    "adaptive_avg_pool2d",
    "adaptive_avg_pool",
    lambda x: NF.adaptive_avg_pool2d(x, (2, 1)),
    lambda xp, x: x.reshape(2, 3, 2, 2, 5).mean((3, 4))[..., None],
    inputs=(A(2, 3, 4, 5),),
)


def _norm_ref(xp, x, axes, eps=1e-5):
    m = x.mean(axes, keepdims=True)
    return (x - m) / xp.sqrt(((x - m) ** 2).mean(axes, keepdims=True) + eps)


case(
    "batch_norm_train",
    "batch_norm",
    lambda x, w, b: NF.batch_norm(x, None, None, w, b, training=True),
    lambda xp, x, w, b: _norm_ref(xp, x, (0, 2)) * w[:, None] + b[:, None],
    inputs=(A(4, 3, 5), A(3), A(3)),
    atol=1e-5,
    rtol=1e-4,
)
case(
    "batch_norm_eval",
    "batch_norm",
    lambda x, m, v: NF.batch_norm(x, m, v.abs() + 0.5, training=False),
    lambda xp, x, m, v: (x - m[:, None]) / xp.sqrt(xp.abs(v[:, None]) + 0.5 + 1e-5),
    inputs=(A(4, 3, 5), A(3, grad=False), A(3, grad=False)),
    atol=1e-5,
    rtol=1e-4,
)
case(
    "layer_norm",
    "layer_norm",
    lambda x, w, b: NF.layer_norm(x, (4,), w, b),
    lambda xp, x, w, b: _norm_ref(xp, x, (-1,)) * w + b,
    inputs=(A(2, 3, 4), A(4), A(4)),
    atol=1e-5,
    rtol=1e-4,
    grad2=True,
)
case(
    "group_norm",
    "group_norm",
    lambda x, w, b: NF.group_norm(x, 2, w, b),
    lambda xp, x, w, b: _norm_ref(xp, x.reshape(2, 2, 2, 5), (2, 3)).reshape(2, 4, 5) * w[:, None] + b[:, None],
    inputs=(A(2, 4, 5), A(4), A(4)),
    atol=1e-5,
    rtol=1e-4,
)
case(
    "rms_norm",
    "rms_norm",
    lambda x, w: NF.rms_norm(x, (4,), w, eps=1e-6),
    lambda xp, x, w: x / xp.sqrt((x * x).mean(-1, keepdims=True) + 1e-6) * w,
    inputs=(A(2, 3, 4), A(4)),
    atol=1e-5,
    rtol=1e-4,
)


def _attn_ref(xp, q, k, v):
    s = q @ xp.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    s = xp.where(np.tril(np.ones((q.shape[-2], k.shape[-2]), bool)), s, -np.inf)
    p = xp.exp(s - s.max(-1, keepdims=True))
    return (p / p.sum(-1, keepdims=True)) @ v


case(
    "sdpa_causal",
    "attention",
    lambda q, k, v: NF.scaled_dot_product_attention(q, k, v, is_causal=True),
    _attn_ref,
    inputs=(A(2, 3, 4), A(2, 3, 4), A(2, 3, 4)),
    atol=1e-5,
    rtol=1e-4,
)
case("embedding", "embedding", lambda w, i: NF.embedding(i, w), lambda xp, w, i: w[i], inputs=(A(5, 3), I(2, 4, hi=5)))
case(
    "nll_loss",
    "nll_loss",
    lambda x, t: NF.nll_loss(x, t),
    lambda xp, x, t: -x[np.arange(4), t].mean(),
    inputs=(A(4, 3), I(4, hi=3)),
)

# ---------------------------------------------------------------- special functions and the rest of the math (issue 12)
for _name, _ref, (_lo, _hi), _dts, _g2 in [
    ("acosh", lambda xp, x: xp.arccosh(x), (1.2, 3), (F32, F64, I64), True),
    ("asinh", lambda xp, x: xp.arcsinh(x), (-3, 3), (F32, F64), True),
    ("atanh", lambda xp, x: xp.arctanh(x), (-0.9, 0.9), (F32, F64), True),
    ("erfc", lambda xp, x: xp.sp.erfc(x), (-2, 2), (F32, F64), True),
    ("lgamma", lambda xp, x: xp.sp.gammaln(x), (0.3, 4), (F32, F64), True),
    ("digamma", lambda xp, x: xp.sp.digamma(x), (0.3, 4), (F32, F64), False),
    ("i0", lambda xp, x: xp.sp.i0(x), (-3, 3), (F32, F64), False),
    ("sinc", lambda xp, x: xp.sinc(x), (-2, 2), (F32, F64), True),
]:
    case(
        _name,
        _name,
        getattr(lf, _name),
        _ref,
        inputs=(A(3, 4, lo=_lo, hi=_hi),),
        dtypes=_dts,
        out="float",
        grad2=_g2,
        rtol=1e-4,
        atol=1e-5,
        grtol=1e-3,
        gatol=1e-4,
    )
case(
    "polygamma",
    "polygamma",
    lambda x: lf.polygamma(2, x),
    lambda xp, x: xp.sp.polygamma(2, x),
    inputs=(A(3, 4, lo=0.5, hi=3),),
    dtypes=(F32, F64),
    out="float",
    rtol=1e-4,
    atol=1e-5,
    grtol=1e-3,
    gatol=1e-3,
)
for _name, _ref, _dom, _g2 in [
    ("xlogy", lambda xp, a, b: xp.sp.xlogy(a, b), {"lo": 0.2, "hi": 3}, True),
    ("hypot", lambda xp, a, b: xp.hypot(a, b), {"nonzero": True}, True),
    ("copysign", lambda xp, a, b: xp.copysign(a, b), {"nonzero": True}, False),
    ("logaddexp", lambda xp, a, b: xp.logaddexp(a, b), {}, True),
    ("logaddexp2", lambda xp, a, b: xp.logaddexp2(a, b), {}, True),
]:
    case(
        _name,
        _name,
        getattr(lf, _name),
        _ref,
        inputs=(A(3, 4, **_dom), A(3, 4, **_dom)),
        variants=((A(2, 1, 4, **_dom), A(3, 1, **_dom)), (A(3, 4, **_dom), S(1.5))),
        dtypes=(F32, F64),
        out="float",
        grad2=_g2,
        rtol=1e-5,
        grtol=1e-3,
        gatol=1e-4,
    )
for _name, _ref in [
    ("igamma", lambda xp, a, x: xp.sp.gammainc(a, x)),
    ("igammac", lambda xp, a, x: xp.sp.gammaincc(a, x)),
]:
    case(
        _name,
        _name,
        lambda a, x, _n=_name: getattr(lf, _n)(a.detach(), x),
        lambda xp, a, x, _r=_ref: _r(xp, a, x),
        inputs=(A(3, 4, lo=0.5, hi=3, grad=False), A(3, 4, lo=0.2, hi=3)),
        dtypes=(F32, F64),
        out="float",
        rtol=1e-4,
        atol=1e-5,
        grtol=1e-3,
        gatol=1e-4,
    )
case(
    "nextafter",
    "nextafter",
    lf.nextafter,
    lambda xp, a, b: xp.nextafter(a.astype(xp.float32), b.astype(xp.float32)),
    inputs=(A(3, 4), A(3, 4)),
    dtypes=(F32,),
    grad=False,
    rtol=0,
    atol=0,
)
case(
    "heaviside",
    "heaviside",
    lambda x, v: lf.heaviside(x.round(), v),
    lambda xp, x, v: xp.heaviside(xp.round(x), v),
    inputs=(A(3, 4), A(4)),
    dtypes=(F32, I64),
    grad=False,
)
for _name in ("gcd", "lcm"):
    case(
        _name,
        _name,
        getattr(lf, _name),
        lambda xp, a, b, _n=_name: getattr(np, _n)(a, b),
        inputs=(I(3, 4, lo=-12, hi=13), I(3, 4, lo=-12, hi=13)),
        dtypes=(I64,),
        grad=False,
    )
case(
    "signbit",
    "signbit",
    lambda x: lf.signbit(x * lf.tensor([1.0, -1.0, 0.0, -0.0], dtype=x.dtype)),
    lambda xp, x: xp.signbit(x * xp.asarray([1.0, -1.0, 0.0, -0.0])),
    inputs=(A(3, 4),),
    dtypes=(F32, F64),
    out="bool",
    grad=False,
)
case(
    "frexp",
    "frexp",
    lambda x: tuple(lf.frexp(x * 100)),
    lambda xp, x: tuple(np.frexp(x * 100)),
    dtypes=(F32, F64),
    out=lambda d: (d, I32),
    grad=False,
)
case(
    "lu_factor",
    ("lu_factor", "lu_permutation"),
    lambda x: (lambda lu, piv: (lu, lf.lu_unpack(lu, piv).P.to(lf.int64)))(*_wc(x).lu()),
    lambda xp, x: _lu_ref(xp, _wc_ref(xp, x)),
    out=lambda d: (d, I64),
    **_LA,
)
case(
    "nonzero_static",
    "nonzero_static",
    lambda x: lf.nonzero_static(x.round(), size=7, fill_value=-2),
    lambda xp, x: np.concatenate([np.argwhere(np.round(x)), np.full((7, 2), -2)])[:7],
    inputs=(A(3, 4, lo=-1, hi=1),),
    dtypes=(F32, I64),
    out="int64",
    grad=False,
)
case(
    "matrix_exp",
    "matrix_exp",
    lf.matrix_exp,
    lambda xp, x: xp.stack([xp.expm(m) for m in x]),
    **{**_LA, "inputs": (A(2, 3, 3, lo=-1, hi=1),)},
)
for _up, _tr, _un in [(True, False, False), (False, True, True)]:
    case(
        f"triangular_solve_{int(_up)}{int(_tr)}{int(_un)}",
        "triangular_solve",
        lambda b, a, _f=(_up, _tr, _un): lf.triangular_solve(b, _wc(a), *_f).solution,
        lambda xp, b, a, _f=(_up, _tr, _un): _tri_ref(xp, b, _wc_ref(xp, a), *_f),
        **{**_LA, "inputs": (A(2, 3, 2), A(2, 3, 3))},
    )


# ---------------------------------------------------------------- complex numbers and FFTs (real in, real out: the
# records see complex values only inside, so numpy/jax.vjp references apply unchanged; torch's complex gradient
# convention itself is tested in tests/test_complex.py and tests/test_fft.py)
def _ri(xp, z):
    return xp.stack([xp.real(z), xp.imag(z)], axis=-1)


def _cz(xp, x):
    return x[..., 0] + 1j * x[..., 1]


case(
    "complex_parts",
    ("complex", "view_as_real", "conj", "mul"),
    lambda a, b: lf.view_as_real(lf.complex(a, b).conj() * lf.complex(b, a)),
    lambda xp, a, b: _ri(xp, xp.conj(a + 1j * b) * (b + 1j * a)),
    inputs=(A(3, 4), A(3, 4)),
)
case(
    "real_imag",
    ("real", "imag", "complex"),
    lambda a, b: lf.real(lf.complex(a, b) ** 2) + 3 * lf.complex(a, b).imag,
    lambda xp, a, b: xp.real((a + 1j * b) ** 2) + 3 * b,
    inputs=(A(3, 4), A(3, 4)),
)
case(
    "polar",
    ("polar", "view_as_real"),
    lambda r, t: lf.view_as_real(lf.polar(r, t)),
    lambda xp, r, t: _ri(xp, r * xp.cos(t) + 1j * r * xp.sin(t)),
    inputs=(A(3, 4, lo=0.2, hi=2), A(3, 4)),
)
case(
    "view_as_complex_abs_angle",
    ("view_as_complex", "abs", "angle"),
    lambda x: lf.view_as_complex(x).abs() + 2 * lf.view_as_complex(x).angle(),
    lambda xp, x: xp.abs(_cz(xp, x)) + 2 * xp.angle(_cz(xp, x)),
    inputs=(A(3, 4, 2, lo=0.2, hi=2),),
)
case(
    "sgn_complex",
    ("sgn", "view_as_complex", "view_as_real"),
    lambda x: lf.view_as_real(lf.view_as_complex(x).sgn()),
    lambda xp, x: _ri(xp, _cz(xp, x) / xp.abs(_cz(xp, x))),
    inputs=(A(3, 4, 2, lo=0.2, hi=2),),
)
case(
    "fft_c2c",
    ("fft_c2c", "view_as_complex", "view_as_real"),
    lambda x: lf.view_as_real(lf.fft.fft2(lf.view_as_complex(x), norm="ortho")),
    lambda xp, x: _ri(xp, xp.fft.fft2(_cz(xp, x), norm="ortho")),
    inputs=(A(3, 4, 2),),
    atol=1e-5,
)
case(
    "fft_r2c",
    ("fft_r2c", "view_as_real"),
    lambda x: lf.view_as_real(lf.fft.rfft(x, n=7)),
    lambda xp, x: _ri(xp, xp.fft.rfft(x, n=7)),
    inputs=(A(3, 6),),
    atol=1e-5,
)
case(
    "fft_c2r",
    ("fft_c2r", "view_as_complex"),
    lambda x: lf.fft.irfft(lf.view_as_complex(x), n=7, norm="forward"),
    lambda xp, x: xp.fft.irfft(_cz(xp, x), n=7, norm="forward"),
    inputs=(A(3, 4, 2),),
    atol=1e-5,
)

INTERNAL = {
    # reached only through other entry points, each tested where it is used
    "embedding_renorm": "max_norm renormalisation inside nn.Embedding (test_nn_basic_layers)",
    "clip_grad_norm": "nn.utils.clip_grad_norm_ over a parameter list (test_init)",
    "clip_grad_value": "nn.utils.clip_grad_value_ over a parameter list (test_init)",
    "orthogonal_into": "nn.init.orthogonal_ (test_init)",
    "uniform_into": "traced uniform_ (graph mode); equal to eager's uniform_chunk fills (test_construction)",
    "normal_into": "traced normal_ (graph mode); equal to eager's normal_chunk fills (test_construction)",
    "rnn": "nn.RNN/LSTM/GRU against torch's layers, forward and gradients (test_nn_rnn)",
    "rnn_cell": "nn.RNNCell/LSTMCell/GRUCell against torch's cells (test_nn_rnn)",
    "rnn_packed": "nn.RNN/LSTM/GRU on a PackedSequence against torch's, forward and gradients (test_nn_packed)",
    "grouped_mm": "F.grouped_mm against torch's in its four groupings, forward and gradients, eager and compiled "
    "(test_torch_functions_s6)",
    "geqrf": "lf.geqrf against torch.geqrf, batched and wide/tall (test_torch_functions_s6)",
    "householder_product": "lf.orgqr against torch.orgqr, values and gradients (test_torch_functions_s6)",
    "ormqr": "lf.ormqr against torch.ormqr, left/right and transposed, values and gradients (test_torch_functions_s6)",
}


# ---------------------------------------------------------------- the drivers
def _make_inputs(c: Case, dtype, seed=0, variant=None):
    rng = np.random.default_rng(seed)
    specs = c.inputs if variant is None else variant
    arrays = [_sample(s, dtype, rng) for s in specs]
    tensors = []
    for s, a in zip(specs, arrays):
        if s.kind == "s":
            tensors.append(a)
        elif s.kind == "f":
            tensors.append(lf.tensor(a, dtype=dtype if dtype is not lf.bool else lf.bool))
        else:
            tensors.append(lf.tensor(a))
    return specs, arrays, tensors


def _ref_args(specs, arrays):
    return [
        a.astype(np.float64) if (s.kind == "f" and np.asarray(a).dtype.kind == "f") else a
        for s, a in zip(specs, arrays)
    ]


def _expected_dtype(c: Case, dtype):
    if callable(c.out):
        return c.out(dtype)
    if isinstance(c.out, lf.DType):
        return c.out
    return {
        "same": dtype,
        "bool": lf.bool,
        "int64": I64,
        "float": dtype if dtype.is_floating_point else lf.get_default_dtype(),
    }[c.out]


def _tols(c: Case, dtype):
    if dtype is F32:
        return c.rtol, c.atol
    if dtype.is_floating_point:
        r, a = _TOL[dtype]
        return r * c.rtol / 1e-5, a * c.atol / 1e-6
    return 0, 0


def _as_tuple(x):
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def _compare(c: Case, out, expected, dtype, where):
    outs, exps = _as_tuple(out), _as_tuple(expected)
    want = _as_tuple(_expected_dtype(c, dtype))
    assert len(outs) == len(exps), f"{where}: {len(outs)} outputs, reference has {len(exps)}"
    for k, (o, e) in enumerate(zip(outs, exps)):
        if e is None:
            continue
        assert isinstance(o, lf.Tensor), f"{where}: output {k} is {type(o).__name__}"
        w = want[k] if k < len(want) else want[-1]
        rtol, atol = _tols(c, w)
        assert o.dtype is w, f"{where}: output {k} has dtype {o.dtype}, expected {w}"
        e = np.asarray(e)
        assert o.shape == e.shape, f"{where}: output {k} has shape {o.shape}, expected {e.shape}"
        a = np.asarray(o.float() if o.dtype is lf.bfloat16 else o)
        if o.dtype.is_floating_point:
            np.testing.assert_allclose(
                a.astype(np.float64), e.astype(np.float64), rtol=rtol, atol=atol, equal_nan=True, err_msg=where
            )
        else:
            np.testing.assert_array_equal(a, e.astype(a.dtype), err_msg=where)


class _Spy:
    """An interpreter that records which primitives run, delegating to the real one."""

    def __init__(self, inner):
        self.inner, self.seen, self.name = inner, set(), inner.name

    def apply(self, op, args, statics=()):
        self.seen.add(op.name)
        return self.inner.apply(op, args, statics)

    def apply_inplace(self, op, target, args, statics=()):
        self.seen.add(op.name)
        return self.inner.apply_inplace(op, target, args, statics)

    def __getattr__(self, name):
        return getattr(self.inner, name)


def _run_ref(c, specs, arrays):
    return c.ref(NP, *_ref_args(specs, arrays))


@pytest.mark.parametrize("c", CASES, ids=repr)
def test_forward_eager(c):
    """Every listed dtype and input variant vs numpy; the spy sees every primitive the record names."""
    for dtype in c.dtypes:
        for vi, variant in enumerate((None, *c.variants)):
            if vi and dtype is not c.dtypes[0]:
                continue
            specs, arrays, tensors = _make_inputs(c, dtype, variant=variant)
            lf.manual_seed(0)
            spy = _Spy(state.interp)
            state.interp = spy
            try:
                out = c.fn(*tensors)
            finally:
                state.interp = spy.inner
            missing = set(c.ops) - spy.seen
            assert variant is not None or not missing, (
                f"{c.id} never reached {sorted(missing)} (saw {sorted(spy.seen)})"
            )
            where = f"{c.id} eager {dtype.name} inputs {[getattr(t, 'shape', t) for t in tensors]}"
            if c.check is not None:
                assert c.check(out, *arrays) is not False, where
            else:
                _compare(c, out, _run_ref(c, specs, arrays), dtype, where)


def _differentiable(c) -> bool:
    return c.grad and c.check is None and _fdtype(c) is not None and any(s.kind == "f" and s.grad for s in c.inputs)


@pytest.mark.parametrize("c", [c for c in CASES if not _differentiable(c) or c.graph_error], ids=repr)
def test_forward_graph_matches_eager_and_numpy(c):
    """Graph mode for the records without gradients (the others check graph forward values in test_backward)."""
    dtype = c.dtypes[0]
    for variant in (None, *c.variants[:1]):
        specs, arrays, tensors = _make_inputs(c, dtype, variant=variant)
        lf.manual_seed(0)
        if c.graph_error:
            with pytest.raises(lf.GraphError, match="graph mode"):
                run("graph", c.fn, *tensors)
            continue
        out = run("graph", c.fn, *tensors)
        where = f"{c.id} graph {dtype.name}"
        if c.check is not None:
            assert c.check(out, *arrays) is not False, where
            lf.manual_seed(0)
            eager = c.fn(*tensors)
            for o, e in zip(_as_tuple(out), _as_tuple(eager)):  # same seed, same numbers in both modes
                np.testing.assert_array_equal(o.numpy(), e.numpy(), err_msg=where)
        else:
            _compare(c, out, _run_ref(c, specs, arrays), dtype, where)


def _grad_setup(c, seed=0):
    dtype = _fdtype(c)
    specs, arrays, tensors = _make_inputs(c, dtype, seed)
    diff = [i for i, s in enumerate(specs) if s.kind == "f" and s.grad]
    for i in diff:
        tensors[i].requires_grad_()
    return dtype, specs, arrays, tensors, diff


def _jax_fn(c, specs, arrays, diff):
    fixed = _ref_args(specs, arrays)

    def f(*dv):
        args = [jnp.asarray(a) if not isinstance(a, (int, float, type(None))) else a for a in fixed]
        for i, v in zip(diff, dv):
            args[i] = v
        return c.ref(JNP, *args)

    return f


def _float_outputs(outs):
    return [k for k, o in enumerate(outs) if isinstance(o, lf.Tensor) and o.dtype.is_floating_point]


GRAD_CASES = [c for c in CASES if _differentiable(c)]


def _with_modes(cases):
    """(case, mode) pairs; graph mode is left out only for records that graph mode must refuse."""
    return [pytest.param(c, m, id=f"{c.id}-{m}") for c in cases for m in MODES if not (m == "graph" and c.graph_error)]


_EXPECTED: dict = {}  # references, computed once per record and shared by both modes


def _fd_vjp(c, specs, arrays, diff, fo, cts, h=1e-6):
    """``ct . J`` of the numpy reference by central differences in float64 (no compilation, independent of
    any autodiff): one pair of reference evaluations per input element."""
    base = _ref_args(specs, arrays)
    out = []
    for i in diff:
        x = np.asarray(base[i], np.float64)
        g = np.zeros(x.shape)
        for j in range(x.size):
            hi_, lo_ = x.copy(), x.copy()
            hi_.flat[j] += h
            lo_.flat[j] -= h
            up = _as_tuple(c.ref(NP, *base[:i], hi_, *base[i + 1 :]))
            dn = _as_tuple(c.ref(NP, *base[:i], lo_, *base[i + 1 :]))
            g.flat[j] = sum(
                np.sum(ct * (np.asarray(up[k], np.float64) - np.asarray(dn[k], np.float64))) for ct, k in zip(cts, fo)
            ) / (2 * h)
        out.append(g)
    return out


def _grad_problem(c):
    """Inputs (seed 0), float-output positions, cotangents (seed 1) and the finite-difference reference."""
    dtype, specs, arrays, tensors, diff = _grad_setup(c)
    ref = _as_tuple(_run_ref(c, specs, arrays))
    want = _as_tuple(_expected_dtype(c, dtype))
    fo = [k for k in range(len(ref)) if want[builtins_min(k, len(want) - 1)].is_floating_point]
    rng = np.random.default_rng(1)
    cts = [rng.standard_normal(np.shape(ref[k])) for k in fo]
    if c.id not in _EXPECTED:
        _EXPECTED[c.id] = _fd_vjp(c, specs, arrays, diff, fo, cts)
    return dtype, specs, arrays, tensors, diff, fo, cts, _EXPECTED[c.id]


builtins_min = min


def _in_trace_grads(c, diff, fo, n_in):
    """For graph mode: forward and backward in one compiled program, through the op table's backward rules
    (the tape inside the trace, as ``lf.nn.Graph`` uses it)."""

    def f(*args):
        tensors, cts = list(args[:n_in]), args[n_in:]
        with lf.enable_grad():
            for i in diff:
                tensors[i] = tensors[i].detach().requires_grad_()
            outs = _as_tuple(c.fn(*tensors))
            gs = lf.autograd.grad([outs[k] for k in fo], [tensors[i] for i in diff], list(cts), allow_unused=True)
        return tuple(outs), tuple(lf.zeros_like(tensors[i]) if g is None else g for i, g in zip(diff, gs))

    return f


_IN_TRACE: dict = {}


def _check_grads(c, where, diff, grads, expected):
    for i, g, e in zip(diff, grads, expected):
        got = np.zeros(e.shape) if g is None else np.asarray(g.float() if g.dtype is lf.bfloat16 else g, np.float64)
        np.testing.assert_allclose(got, e, rtol=c.grtol, atol=c.gatol, err_msg=f"{where}: gradient of input {i}")


@pytest.mark.parametrize(("c", "mode"), _with_modes(GRAD_CASES))
def test_backward(c, mode):
    """Forward values vs numpy and the VJP with a random cotangent vs central differences of the numpy
    reference (float64). Eager: the tape; graph: forward and backward inside one compiled program (the
    compiled forward's VJP through the outer tape is checked for every record at once below)."""
    dtype, specs, arrays, tensors, diff, fo, cts, expected = _grad_problem(c)
    if mode == "eager":
        outs = _as_tuple(c.fn(*tensors))
        grads = lf.autograd.grad(
            [outs[k] for k in fo],
            [tensors[i] for i in diff],
            [lf.tensor(ct, dtype=outs[k].dtype) for ct, k in zip(cts, fo)],
            allow_unused=True,
        )
    else:
        if c.id not in _IN_TRACE:
            _IN_TRACE[c.id] = _in_trace_grads(c, diff, fo, len(tensors))
        plain = [t.detach() if isinstance(t, lf.Tensor) else t for t in tensors]
        want = _as_tuple(_expected_dtype(c, dtype))
        outs, grads = run(
            "graph",
            _IN_TRACE[c.id],
            *plain,
            *[lf.tensor(ct, dtype=want[builtins_min(k, len(want) - 1)]) for ct, k in zip(cts, fo)],
        )
    _compare(c, outs if len(outs) > 1 else outs[0], _run_ref(c, specs, arrays), dtype, f"{c.id} {mode} forward")
    _check_grads(c, f"{c.id} {mode}", diff, grads, expected)


def _tape_sample():
    """Records for the outer-tape check: every multi-output or non-float-input record, and every third other."""
    out = []
    for k, c in enumerate(c for c in GRAD_CASES if not c.graph_error):
        multi = isinstance(_expected_dtype(c, _fdtype(c)), tuple)
        if multi or k % 3 == 0 or any(s.kind != "f" for s in c.inputs):
            out.append(c)
    return out


def test_graph_mode_tape_backward_over_many_records():
    """``lf.compile`` of one program running many differentiable records, then ``autograd.grad`` through the
    compiled VJP from the outer tape (the path of ``loss = compiled(x); loss.backward()``): each record's gradient
    vs its finite-difference reference. (The per-record graph test above differentiates inside the trace.)"""
    cases = _tape_sample()
    assert len(cases) > 60
    problems = [_grad_problem(c) for c in cases]
    flat, spans = [], []
    for p in problems:
        spans.append((len(flat), len(flat) + len(p[3])))
        flat.extend(p[3])

    def program(*args):
        return [tuple(_as_tuple(c.fn(*args[a:b]))) for c, (a, b) in zip(cases, spans)]

    outs = lf.compile(program)(*flat)
    roots, cts, inputs = [], [], []
    for (_, _, _, tensors, diff, fo, ct, _), o in zip(problems, outs):
        roots += [o[k] for k in fo]
        cts += [lf.tensor(x, dtype=o[k].dtype) for x, k in zip(ct, fo)]
        inputs += [tensors[i] for i in diff]
    grads = iter(lf.autograd.grad(roots, inputs, cts, allow_unused=True))
    for c, (dtype, specs, arrays, _, diff, _, _, expected), o in zip(cases, problems, outs):
        _compare(c, o if len(o) > 1 else o[0], _run_ref(c, specs, arrays), dtype, f"{c.id} compiled forward")
        _check_grads(c, f"{c.id} compiled VJP", diff, [next(grads) for _ in diff], expected)


GRAD2_CASES = [c for c in GRAD_CASES if c.grad2]


def _double_backward(fn, diff, n_out):
    def dd(*args):
        tensors, cts, vs = list(args[: -n_out - len(diff)]), args[-n_out - len(diff) : -len(diff)], args[-len(diff) :]
        with lf.enable_grad():
            for i in diff:
                tensors[i] = tensors[i].detach().requires_grad_()
            outs = _as_tuple(fn(*tensors))
            gs = lf.autograd.grad(
                list(outs), [tensors[i] for i in diff], list(cts), create_graph=True, allow_unused=True
            )
            total = sum(((g * v).sum() for g, v in zip(gs, vs) if g is not None), lf.zeros(()))
            hs = lf.autograd.grad(total, [tensors[i] for i in diff], allow_unused=True)
        return tuple(lf.zeros_like(tensors[i]) if h is None else h for i, h in zip(diff, hs))

    return dd


_DD = {}


@pytest.mark.parametrize(("c", "mode"), _with_modes(GRAD2_CASES))
def test_double_backward(c, mode):
    """d/dx <vjp(ct), v> (create_graph=True) vs jax's second-order derivative; graph mode runs both backwards
    inside one compiled program."""
    dtype, specs, arrays, tensors, diff = _grad_setup(c, seed=2)
    for i in diff:
        tensors[i] = tensors[i].detach()
    outs = _as_tuple(c.fn(*tensors))
    rng = np.random.default_rng(3)
    cts = [rng.standard_normal(o.shape) for o in outs]
    vs = [rng.standard_normal(tensors[i].shape) for i in diff]
    key = (c.id, len(outs))
    if key not in _DD:
        _DD[key] = _double_backward(c.fn, diff, len(outs))
    got = run(
        mode, _DD[key], *tensors, *[lf.tensor(ct, dtype=dtype) for ct in cts], *[lf.tensor(v, dtype=dtype) for v in vs]
    )
    if ("dd", c.id) not in _EXPECTED:
        f = _jax_fn(c, specs, arrays, diff)
        primal = [jnp.asarray(_ref_args(specs, arrays)[i]) for i in diff]

        def inner(*dv):
            _, vjp = jax.vjp(lambda *d: _as_tuple(f(*d)), *dv)
            gs = vjp(tuple(jnp.asarray(ct) for ct in cts))
            return sum(jnp.sum(g * v) for g, v in zip(gs, vs))

        _EXPECTED["dd", c.id] = jax.jit(jax.grad(inner, argnums=tuple(range(len(diff)))))(*primal)
    expected = _EXPECTED["dd", c.id]
    for i, g, e in zip(diff, got, expected):
        np.testing.assert_allclose(
            np.asarray(g, np.float64),
            np.asarray(e),
            rtol=c.grtol * 10,
            atol=c.gatol * 10,
            err_msg=f"{c.id} {mode}: second derivative w.r.t. input {i}",
        )


def test_every_primitive_has_a_record():
    covered = {op for c in CASES for op in c.ops}
    missing = sorted(set(REGISTRY) - covered - set(INTERNAL))
    assert not missing, f"op-table primitives without a record in tests/test_ops.py: {missing}"
    stale = sorted(set(INTERNAL) - set(REGISTRY))
    assert not stale, f"INTERNAL lists ops that no longer exist: {stale}"
    ids = [c.id for c in CASES]
    assert len(ids) == len(set(ids)), "duplicate record ids"


@functools.cache
def _elementwise_ops():
    return {name for name, *_ in UNARY} | {b[1] for b in BINARY if isinstance(b[1], str)}


def test_elementwise_and_matmul_have_double_backward_records():
    """The issue asks for create_graph=True on elementwise and matmul ops at least."""
    smooth = _elementwise_ops() - {"floor", "ceil", "trunc", "sign", "div_trunc", "floor_divide", "remainder", "fmod"}
    with_grad2 = {op for c in GRAD2_CASES for op in c.ops}
    missing = sorted((smooth | {"matmul"}) - with_grad2)
    assert not missing, f"no double-backward record for {missing}"
