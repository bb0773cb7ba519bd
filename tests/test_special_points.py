"""Gradients at the points where functions are not smooth, against torch (issue 11, section 2).

Random inputs never land on a kink, a tie, a clamp boundary, a zero vector or a constant row, so the op table's
gradient tests (tests/test_ops.py) cannot see the convention an op uses there. Here one record per op (or per
configuration of an op) lists such points; each record is run

* eagerly, through the tape;
* in graph mode, forward and backward inside one ``lf.compile``d program (the tape inside the trace);
* through the compiled VJP: ``lf.compile(fn)`` called on tensors that require grad, then ``lf.autograd.grad``
  from the outer tape (``jax.vjp`` of the whole program, as ``loss = compiled(x); loss.backward()`` runs it);

and the forward values and the vector-Jacobian product (a fixed, non-uniform cotangent) are compared with torch's
in float64: equal up to a few ulps, with infinities and NaNs in the same places. The meta-test derives the list of
differentiable primitives from ``lazyflow.ops.REGISTRY`` and a spy checks that each record reaches the primitives
it names, so a new op fails here until it has special points or a justified entry in ``EXEMPT``. Where lazyflow
keeps a convention of its own on purpose, the difference is written down in tests/test_torch_differences.py.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import numpy as np
import pytest
import torch
import torch.nn.functional as TF
from _harness import compiled

import lazyflow as lf
import lazyflow.nn.functional as F
from lazyflow._core.context import state
from lazyflow.ops import REGISTRY

INF, NAN = math.inf, math.nan


# ---------------------------------------------------------------- the record
@dataclasses.dataclass
class SP:
    """One special-point record.

    Args:
        id: unique name.
        ops: the op-table primitives the lazyflow call reaches (a spy checks each one).
        lf: the lazyflow call ``lf(*tensors)``.
        th: the same call in torch ``th(*tensors)``.
        points: input tuples. A floating numpy array becomes a float64 tensor that requires grad; an integer or
            bool array becomes a tensor without grad. Every tuple of a record has the same shapes, so graph
            mode compiles each record once.
        rtol, atol: tolerance of the comparison (float64; infinities and NaNs must match exactly).
    """

    id: str
    ops: tuple
    lf: Callable
    th: Callable
    points: tuple
    rtol: float = 1e-12
    atol: float = 1e-14

    def __repr__(self):
        return self.id


RECORDS: list[SP] = []


def sp(id, ops, lf_fn, th_fn, *points, **kw):
    ops = (ops,) if isinstance(ops, str) else tuple(ops)
    pts = tuple(p if isinstance(p, tuple) else (p,) for p in points)
    RECORDS.append(SP(id, ops, lf_fn, th_fn, pts, **kw))


def a(*v):
    """A float64 array (a differentiable input)."""
    return np.array(v, np.float64)


def idx(*v):
    return np.array(v, np.int64)


# ---------------------------------------------------------------- unary elementwise
# Subnormal numbers stay out: XLA on CPU flushes them to zero (tests/test_torch_differences.py).
_GENERIC = a(-3, -2, -1, -0.5, -0.0, 0.0, 0.5, 1, 2, 3, INF, -INF, NAN)
_UNARY = [
    # op, lazyflow, torch, extra points (domain edges)
    ("exp", lf.exp, torch.exp, ()),
    ("expm1", lf.expm1, torch.expm1, ()),
    ("sin", lf.sin, torch.sin, ()),
    ("cos", lf.cos, torch.cos, ()),
    ("tan", lf.tan, torch.tan, ()),
    ("tanh", lf.tanh, torch.tanh, ()),
    ("sigmoid", lf.sigmoid, torch.sigmoid, ()),
    ("erf", lf.erf, torch.erf, ()),
    ("atan", lf.atan, torch.atan, ()),
    ("sinh", lf.sinh, torch.sinh, ()),
    ("cosh", lf.cosh, torch.cosh, ()),
    ("exp2", lf.exp2, torch.exp2, ()),
    ("silu", F.silu, TF.silu, ()),
    ("logsigmoid", F.logsigmoid, TF.logsigmoid, ()),
    ("neg", lf.neg, torch.neg, ()),
    ("square", lf.square, torch.square, ()),
    ("abs", lf.abs, torch.abs, ()),
    ("sign", lf.sign, torch.sign, ()),
    ("relu", lf.relu, torch.relu, ()),
    ("floor", lf.floor, torch.floor, (0.5, 1.5, 2.5, -0.5, -1.5)),
    ("ceil", lf.ceil, torch.ceil, (0.5, 1.5, 2.5, -0.5, -1.5)),
    ("trunc", lf.trunc, torch.trunc, (0.5, 1.5, 2.5, -0.5, -1.5)),
    ("round", lf.round, torch.round, (0.5, 1.5, 2.5, -0.5, -1.5)),
    ("log", lf.log, torch.log, ()),
    ("log2", lf.log2, torch.log2, ()),
    ("log10", lf.log10, torch.log10, ()),
    ("log1p", lf.log1p, torch.log1p, (-1.0, -1.5)),
    ("sqrt", lf.sqrt, torch.sqrt, (4.0,)),
    ("rsqrt", lf.rsqrt, torch.rsqrt, (4.0,)),
    ("reciprocal", lf.reciprocal, torch.reciprocal, ()),
    ("asin", lf.asin, torch.asin, (1.5, -1.5)),
    ("acos", lf.acos, torch.acos, (1.5, -1.5)),
    ("erfinv", lf.erfinv, torch.erfinv, (0.999, -0.999, 1.5)),
]
for _op, _lf, _th, _extra in _UNARY:
    sp(_op, _op, _lf, _th, np.concatenate([_GENERIC, a(*_extra)]))

sp(
    "round_decimals",
    "round",
    lambda x: lf.round(x, decimals=1),
    lambda x: torch.round(x, decimals=1),
    a(0.05, 0.15, 0.25, -0.05, 0.0, 1.0),
)
sp("gelu", "gelu", F.gelu, TF.gelu, _GENERIC)
sp("gelu_tanh", "gelu", lambda x: F.gelu(x, approximate="tanh"), lambda x: TF.gelu(x, approximate="tanh"), _GENERIC)
sp("softplus_threshold", "softplus", F.softplus, TF.softplus, a(20, 19.5, 20.5, 0, -0.0, -20, 1))
sp(
    "softplus_beta_threshold",
    "softplus",
    lambda x: F.softplus(x, beta=2.0, threshold=3.0),
    lambda x: TF.softplus(x, beta=2.0, threshold=3.0),
    a(1.5, 1.25, 1.75, 0, -0.0, -1),
)
sp("leaky_relu", "leaky_relu", lambda x: F.leaky_relu(x, 0.1), lambda x: TF.leaky_relu(x, 0.1), _GENERIC)
sp("leaky_relu_default", "leaky_relu", F.leaky_relu, TF.leaky_relu, _GENERIC)
sp("elu", "elu", lambda x: F.elu(x, 1.5), lambda x: TF.elu(x, 1.5), _GENERIC)
sp("celu", "elu", lambda x: F.celu(x, 2.0), lambda x: TF.celu(x, 2.0), _GENERIC)
sp("selu", "elu", F.selu, TF.selu, _GENERIC)
sp(
    "hardtanh",
    "hardtanh",
    lambda x: F.hardtanh(x, -0.5, 1.0),
    lambda x: TF.hardtanh(x, -0.5, 1.0),
    a(-1, -0.5, 0, -0.0, 0.5, 1, 2),
)
sp("hardtanh_default", "hardtanh", F.hardtanh, TF.hardtanh, _GENERIC)
sp("relu6", "hardtanh", F.relu6, TF.relu6, a(-1, 0, -0.0, 3, 6, 7))
# torch's hardsigmoid backward multiplies by 1/6 rounded to float32 even in float64: a 3e-8 relative difference
sp("hardsigmoid", "hardtanh", F.hardsigmoid, TF.hardsigmoid, a(-4, -3, -0.0, 0, 3, 4), rtol=1e-7)
sp("hardswish", "hardtanh", F.hardswish, TF.hardswish, a(-4, -3, -0.0, 0, 3, 4))
sp(
    "threshold",
    "where",
    lambda x: F.threshold(x, 0.5, -1.0),
    lambda x: TF.threshold(x, 0.5, -1.0),
    a(0, 0.4, 0.5, 0.6, 1),
)
sp("softsign", "abs", F.softsign, TF.softsign, _GENERIC)
sp("mish", "softplus", F.mish, TF.mish, _GENERIC)
sp("tanhshrink", "tanh", F.tanhshrink, TF.tanhshrink, _GENERIC)
sp(
    "nan_to_num",
    "nan_to_num",
    lambda x: lf.nan_to_num(x, 1.0, 2.0, -2.0),
    lambda x: torch.nan_to_num(x, 1.0, 2.0, -2.0),
    a(NAN, INF, -INF, 0, 1, -1),
)
# the same primitive through each public spelling: the method, the module, in place
sp("relu_method", "relu", lambda x: x.relu(), lambda x: x.relu(), _GENERIC)
sp("relu_module", "relu", lambda x: lf.nn.ReLU()(x), lambda x: torch.nn.ReLU()(x), _GENERIC)
sp("relu_inplace", "relu", lambda x: F.relu(x * 1.0, inplace=True), lambda x: TF.relu(x * 1.0, inplace=True), _GENERIC)
sp("relu6_module", "hardtanh", lambda x: lf.nn.ReLU6()(x), lambda x: torch.nn.ReLU6()(x), a(-1, 0, 3, 6, 7))
sp("abs_method", "abs", lambda x: x.abs(), lambda x: x.abs(), _GENERIC)

# ---------------------------------------------------------------- special functions (issue 12): domain edges, poles
sp("acosh", "acosh", lf.acosh, torch.acosh, a(1, 1.5, INF, 0.5, NAN))
sp("asinh", "asinh", lf.asinh, torch.asinh, a(0, -0.0, INF, -INF, 1e-300, 2))
sp("atanh", "atanh", lf.atanh, torch.atanh, a(1, -1, 0, -0.0, 0.5, 2))
sp("erfc", "erfc", lf.erfc, torch.erfc, a(0, INF, -INF, 10, -10, 30))
sp("lgamma", "lgamma", lf.lgamma, torch.lgamma, a(1, 2, 0.5, 3.5, 100, INF), rtol=1e-11)
# torch's trigamma (digamma's gradient, polygamma(1, .)) is within 5e-10 of the exact value (pi**2/6 at 1, which
# jax's zeta series gives to the last ulp): rtol 1e-9 where it enters
sp("digamma", "digamma", lf.digamma, torch.digamma, a(1, 2, 0.5, 3.5, 100, INF), rtol=1e-9)
sp("i0", "i0", lf.i0, torch.i0, a(0, -0.0, 1, -1, 20, -20), rtol=1e-11)
sp("sinc", "sinc", lf.sinc, torch.sinc, a(0, -0.0, 1, -1, 0.5, 1e-20))
sp(
    "polygamma",
    "polygamma",
    lambda x: lf.polygamma(1, x),
    lambda x: torch.polygamma(1, x),
    a(1, 2, 0.5, 3.5, 100),
    rtol=1e-9,
)
sp(
    "xlogy",
    "xlogy",
    lf.xlogy,
    torch.xlogy,
    (a(0, 0, 0, 1, -0.0, 2), a(0, NAN, 1, 0, 5, INF)),
)
sp("hypot", "hypot", lf.hypot, torch.hypot, (a(0, 3, -0.0, INF, 1), a(0, 4, 2, 1, -INF)))
sp("copysign", "copysign", lf.copysign, torch.copysign, (a(0, -0.0, 2, -2, 3, 1), a(-1, 1, -0.0, 0, INF, NAN)))
sp(
    "logaddexp",
    "logaddexp",
    lf.logaddexp,
    torch.logaddexp,
    (a(0, -INF, INF, 1, 2, -INF), a(0, -INF, INF, -INF, 2, 3)),
)
sp(
    "logaddexp2",
    "logaddexp2",
    lf.logaddexp2,
    torch.logaddexp2,
    (a(0, -INF, 5, 1, 2, -INF), a(0, 1, 5, -INF, 2, 3)),
)
sp(
    "igamma",
    "igamma",
    lambda a_, x: lf.igamma(a_.detach(), x),
    lambda a_, x: torch.igamma(a_.detach(), x),
    (a(1, 2, 0.5, 3), a(0.5, 1e-3, 3, 10)),
    rtol=1e-10,
)
sp(
    "igammac",
    "igammac",
    lambda a_, x: lf.igammac(a_.detach(), x),
    lambda a_, x: torch.igammac(a_.detach(), x),
    (a(1, 2, 0.5, 3), a(0.5, 1e-3, 3, 10)),
    rtol=1e-10,
)

# ---------------------------------------------------------------- binary elementwise
_TIES_A = a(0, 1, -1, 2, -0.0, 0, 3)
_TIES_B = a(0, 1, -1, 3, 0.0, -0.0, 2)
for _op, _lf, _th in (
    ("maximum", lf.maximum, torch.maximum),
    ("minimum", lf.minimum, torch.minimum),
    ("fmax", lf.fmax, torch.fmax),
    ("fmin", lf.fmin, torch.fmin),
):
    sp(_op, _op, _lf, _th, (_TIES_A, _TIES_B))
sp("maximum_nan", "maximum", lf.maximum, torch.maximum, (a(NAN, 1, NAN), a(1, NAN, NAN)))
sp("minimum_nan", "minimum", lf.minimum, torch.minimum, (a(NAN, 1, NAN), a(1, NAN, NAN)))
sp("fmax_nan", "fmax", lf.fmax, torch.fmax, (a(NAN, 1, NAN), a(1, NAN, NAN)))
sp("fmin_nan", "fmin", lf.fmin, torch.fmin, (a(NAN, 1, NAN), a(1, NAN, NAN)))
sp("max_binary", "maximum", lambda x, y: lf.max(x, y), lambda x, y: torch.max(x, y), (_TIES_A, _TIES_B))

# pow: 0**0, 0**positive, 0**negative, negative base with integer and fractional exponents
_POW_A = a(0, 0, 0, 0, 0, -0.0, -2, -2, -2, 2, 2, 1, 0, 3)
_POW_B = a(0, 2, 0.5, -1, -2, 2, 3, 2, 0.5, 0, -1, 0, 1, 1)
sp("pow", "pow", lambda x, y: x**y, lambda x, y: x**y, (_POW_A, _POW_B))
for _e in (0, 0.0, 1, 2, 3, 0.5, -1, -2, -0.5, 2.5):
    # -0.0 ** +-0.5: torch computes sqrt/rsqrt, lazyflow IEEE pow (tests/test_torch_differences.py)
    sp(
        f"pow_scalar_exp_{_e}",
        "pow",
        lambda x, _e=_e: x**_e,
        lambda x, _e=_e: x**_e,
        a(0, -2, 2, 1, -1) if abs(_e) == 0.5 else a(0, -0.0, -2, 2, 1, -1),
    )
for _b in (0.0, 2.0, -2.0, 1.0):
    sp(f"pow_scalar_base_{_b}", "pow", lambda x, _b=_b: _b**x, lambda x, _b=_b: _b**x, a(0, 1, -1, 2, 0.5, 3))
sp("pow_method_square", "pow", lambda x: x.pow(2), lambda x: x.pow(2), a(0, -0.0, -1, 1))
sp("div", "div", lambda x, y: x / y, lambda x, y: x / y, (a(0, 1, 0, -1, 1, 0), a(0, 0, 1, 0, -0.0, -0.0)))
sp("div_scalar", "div", lambda x: 1.0 / x, lambda x: 1.0 / x, a(0, -0.0, 1, -2))
sp("atan2", "atan2", lf.atan2, torch.atan2, (a(0, 0, -0.0, 1, 0, 0, 1), a(0, -0.0, 0, 0, 1, -1, 1)))
_MOD_A = a(3, -3, 0, 2.5, 5, -5, 6, 1, 0)
_MOD_B = a(3, 3, 2, 0.5, -3, -3, -3, 0, 0)
sp("remainder", "remainder", lf.remainder, torch.remainder, (_MOD_A, _MOD_B))
sp("fmod", "fmod", lf.fmod, torch.fmod, (_MOD_A, _MOD_B))
sp("remainder_scalar", "remainder", lambda x: x % 1.5, lambda x: x % 1.5, a(0, 1.5, -1.5, 3, 0.75))
# torch has no derivative for floor_divide (it raises); lazyflow gives the zeros of torch's div(rounding_mode=
# "floor"), the same function (tests/test_torch_differences.py)
sp(
    "floor_divide",
    "floor_divide",
    lambda x, y: x // y,
    lambda x, y: torch.div(x, y, rounding_mode="floor"),
    (_MOD_A, _MOD_B),
)
sp(
    "div_trunc",
    "div_trunc",
    lambda x, y: lf.div(x, y, rounding_mode="trunc"),
    lambda x, y: torch.div(x, y, rounding_mode="trunc"),
    (_MOD_A, _MOD_B),
)
sp(
    "div_floor",
    "floor_divide",
    lambda x, y: lf.div(x, y, rounding_mode="floor"),
    lambda x, y: torch.div(x, y, rounding_mode="floor"),
    (_MOD_A, _MOD_B),
)

# where: ties between the branches, and the NaN an unselected branch sends back (the same in both)
_COND = np.array([True, False, True, False, True])
sp(
    "where",
    "where",
    lambda c, x, y: lf.where(c, x, y),
    lambda c, x, y: torch.where(c, x, y),
    (_COND, a(1, 1, 0, 0, -1), a(1, 1, 0, 0, 2)),
)
sp(
    "where_unselected_log",
    ("where", "log"),
    lambda x: lf.where(x > 0, x, x.log()),
    lambda x: torch.where(x > 0, x, x.log()),
    a(0, 1, -1, 2, -0.0),
)
sp("where_scalar", "where", lambda x: lf.where(x > 0, x, 0.0), lambda x: torch.where(x > 0, x, 0.0), a(0, 1, -1, -0.0))

# clamp: both bounds, one bound, tensor bounds (ties with each bound, lower bound above the upper one)
_CLAMP_X = a(-1, 0, -0.0, 0.5, 1, 2)
sp("clamp_0_1", "clamp", lambda x: lf.clamp(x, 0, 1), lambda x: torch.clamp(x, 0, 1), _CLAMP_X)
sp("clamp_min", "clamp", lambda x: x.clamp(min=0), lambda x: x.clamp(min=0), _CLAMP_X)
sp("clamp_max", "clamp", lambda x: x.clamp(max=1), lambda x: x.clamp(max=1), _CLAMP_X)
sp("clamp_inverted", "clamp", lambda x: lf.clamp(x, 1, 0), lambda x: torch.clamp(x, 1, 0), _CLAMP_X)
sp("clip_inplace", "clamp", lambda x: (x * 1.0).clamp_(0, 1), lambda x: (x * 1.0).clamp_(0, 1), _CLAMP_X)
_CX, _CLO, _CHI = a(0, 1, 0.5, 2, -1, 1, 0.5, 0.5), a(0, 0, 0, 0, 0, 2, 0.5, 1), a(1, 1, 1, 1, 1, 1, 0.5, 0)
sp("clamp_tensor", "clamp", lf.clamp, torch.clamp, (_CX, _CLO, _CHI))
sp("clamp_tensor_min", "clamp", lambda x, lo: lf.clamp(x, lo), lambda x, lo: torch.clamp(x, lo), (_CX, _CLO))
sp("clamp_tensor_max", "clamp", lambda x, hi: lf.clamp(x, max=hi), lambda x, hi: torch.clamp(x, max=hi), (_CX, _CHI))
sp(
    "clamp_tensor_broadcast",
    "clamp",
    lf.clamp,
    torch.clamp,
    (np.array([[0.0, 1, 0.5], [2, -1, 0.5]]), a(0, 0, 0.5), a(1, 1, 0.5)),
)
sp("lerp", "lerp", lf.lerp, torch.lerp, (a(0, 1, 1, 2, -1), a(0, 1, 3, 2, 1), a(0, 1, 0.5, 0, 1.5)))
sp(
    "addcmul",
    "addcmul",
    lambda x, y, z: lf.addcmul(x, y, z, value=0.5),
    lambda x, y, z: torch.addcmul(x, y, z, value=0.5),
    (a(0, 1, 0), a(0, 0, 2), a(0, 3, 0)),
)
sp(
    "addcdiv",
    "addcdiv",
    lambda x, y, z: lf.addcdiv(x, y, z, value=2),
    lambda x, y, z: torch.addcdiv(x, y, z, value=2),
    (a(0, 1, 0, 1), a(0, 0, 2, 1), a(0, 0, 0, -0.0)),
)

# ---------------------------------------------------------------- reductions
_ROWS_ZEROS = np.array([[0.0, 2, 3], [2, 0, 3], [2, 3, 0], [0, 0, 3], [0, 0, 0], [1, 2, 3], [-0.0, 2, -1]])
sp("prod_dim", "prod", lambda x: x.prod(1), lambda x: x.prod(1), _ROWS_ZEROS)
sp("prod_all_one_zero", "prod", lambda x: x.prod(), lambda x: x.prod(), a(2, 0, 3, -1), a(0, 0, 3, 1), a(1, 2, 3, 4))
sp("cumprod", "cumprod", lambda x: x.cumprod(1), lambda x: x.cumprod(1), _ROWS_ZEROS)

_TIES = np.array(
    [
        [1.0, 1, 0],
        [2, 2, 2],
        [0, -1, 0],
        [3, 1, 2],
        [-0.0, 0, -1],
        [NAN, 1, NAN],
        [1, NAN, 2],
        [INF, INF, 1],
        [-INF, 0, -INF],
    ]
)
# amax/amin over NaN: torch's rule gives the whole slice NaN, lazyflow keeps max()'s (tests/test_torch_differences.py)
_TIES_NO_NAN = _TIES[~np.isnan(_TIES).any(1)]
sp("amax_ties", "amax", lambda x: x.amax(1), lambda x: x.amax(1), _TIES_NO_NAN)
sp("amin_ties", "amin", lambda x: x.amin(1), lambda x: x.amin(1), _TIES_NO_NAN)
sp("amax_all_ties", "amax", lambda x: x.amax((0, 1)), lambda x: x.amax((0, 1)), _TIES_NO_NAN)
sp("max_all_ties", "amax", lambda x: x.max(), lambda x: x.max(), _TIES, a(1, 1, 1), a(0, -1, 0))
sp("min_all_ties", "amin", lambda x: x.min(), lambda x: x.min(), _TIES, a(1, 1, 1), a(0, -1, 0))
sp("max_dim_ties", "max_dim", lambda x: x.max(1), lambda x: x.max(1), _TIES)
sp("min_dim_ties", "min_dim", lambda x: x.min(1, keepdim=True), lambda x: x.min(1, keepdim=True), _TIES)
sp("max_dim0_ties", "max_dim", lambda x: x.max(0), lambda x: x.max(0), _TIES)
sp("sort_ties", "sort", lambda x: x.sort(1), lambda x: x.sort(1), _TIES)
sp(
    "sort_ties_stable_desc",
    "sort",
    lambda x: x.sort(1, descending=True, stable=True),
    lambda x: x.sort(dim=1, descending=True, stable=True),
    _TIES,
)
sp("sort_ties_desc", "sort", lambda x: x.sort(1, descending=True), lambda x: x.sort(1, descending=True), _TIES)
sp("topk_ties", "topk", lambda x: x.topk(2, 1), lambda x: x.topk(2, 1), _TIES)
sp("topk_ties_smallest", "topk", lambda x: x.topk(2, 1, largest=False), lambda x: x.topk(2, 1, largest=False), _TIES)
sp("cummax_ties", "cummax", lambda x: x.cummax(1), lambda x: x.cummax(1), _TIES)
sp("cummin_ties", "cummin", lambda x: lf.cummin(x, 0), lambda x: torch.cummin(x, 0), _TIES)
_LCSE = np.array([[-np.inf, 0.0, -np.inf], [-np.inf, -np.inf, 1.0], [1e3, 1e3, -1e3], [0.0, 0.0, 0.0]])
sp("logcumsumexp_inf", "logcumsumexp", lambda x: x.logcumsumexp(1), lambda x: x.logcumsumexp(1), _LCSE)

_CONST = np.array([[1.0, 1, 1], [0.1, 0.1, 0.1], [0, 0, 0], [-3, -3, -3], [1, 2, 4]])
sp("std_constant", "std", lambda x: x.std(1), lambda x: x.std(1), _CONST)
sp("std_constant_biased", "std", lambda x: x.std(1, unbiased=False), lambda x: x.std(1, unbiased=False), _CONST)
sp(
    "std_all_constant",
    "std",
    lambda x: x.std(),
    lambda x: x.std(),
    a(1, 1, 1),
    a(0.1, 0.1, 0.1, 0.1),
    a(0.3, 0.3, 0.3, 0.3),
    a(1, 2, 3, 4),
)
sp(
    "std_single",
    "std",
    lambda x: x.std(1, unbiased=False),
    lambda x: x.std(1, unbiased=False),
    np.array([[0.0], [2.0]]),
)
sp("std_single_unbiased", "std", lambda x: x.std(1), lambda x: x.std(1), np.array([[0.0], [2.0]]))
sp("var_constant", "var", lambda x: x.var(1), lambda x: x.var(1), _CONST)
sp("var_single_unbiased", "var", lambda x: x.var(1), lambda x: x.var(1), np.array([[0.0], [2.0]]))
sp("std_mean_constant", "std", lambda x: lf.std_mean(x, 1), lambda x: torch.std_mean(x, 1), _CONST)

_VEC = np.array([[0.0, 0, 0], [0, 3, 4], [1, -1, 0], [-0.0, 0, 0], [2, -2, 2]])
for _p in ("fro", 2, 1, 3, 0.5, INF, -INF, 0):
    sp(f"norm_{_p}", "norm", lambda x, _p=_p: x.norm(_p, dim=1), lambda x, _p=_p: x.norm(_p, dim=1), _VEC)
sp("norm_all_zero", "norm", lambda x: x.norm(), lambda x: x.norm(), a(0, 0, 0), a(0, 3, 4))
sp(
    "norm_keepdim_zero",
    "norm",
    lambda x: lf.norm(x, 2, (0, 1), keepdim=True),
    lambda x: torch.norm(x, 2, (0, 1), keepdim=True),
    np.zeros((2, 3)),
)
sp("normalize_zero_row", "norm", lambda x: F.normalize(x), lambda x: TF.normalize(x), _VEC)
sp(
    "normalize_zero_row_matmul",
    "norm",
    lambda x, w: F.normalize(x) @ w,
    lambda x, w: TF.normalize(x) @ w,
    (_VEC, np.arange(6.0).reshape(3, 2) - 2),
)
sp("normalize_p1_dim0", "norm", lambda x: F.normalize(x, 1, 0), lambda x: TF.normalize(x, 1, 0), _VEC.T.copy())

_NEG_INF_ROWS = np.array([[-INF, -INF, -INF], [-INF, 0, 1], [1, 1, 1], [0, -INF, 0]])
sp("logsumexp", "logsumexp", lambda x: x.logsumexp(1), lambda x: x.logsumexp(1), _NEG_INF_ROWS)
sp("softmax", "softmax", lambda x: x.softmax(1), lambda x: x.softmax(1), _NEG_INF_ROWS[1:])
sp("log_softmax", "log_softmax", lambda x: x.log_softmax(1), lambda x: x.log_softmax(1), _NEG_INF_ROWS[1:])

# empty tensors: reductions over nothing, elementwise ops over nothing
_E = np.zeros((2, 0))
sp("norm_empty", "norm", lambda x: x.norm(), lambda x: x.norm(), np.zeros(0))
sp("norm_dim_empty", "norm", lambda x: x.norm(dim=1), lambda x: x.norm(dim=1), _E)
sp("std_dim_empty", "std", lambda x: x.std(1), lambda x: x.std(1), _E)
sp("var_dim_empty", "var", lambda x: x.var(1, unbiased=False), lambda x: x.var(1, unbiased=False), _E)
sp("prod_dim_empty", "prod", lambda x: x.prod(1), lambda x: x.prod(1), _E)
sp("logsumexp_empty", "logsumexp", lambda x: x.logsumexp(1), lambda x: x.logsumexp(1), _E)
sp("softmax_empty", "softmax", lambda x: x.softmax(1), lambda x: x.softmax(1), _E)
sp("relu_empty", "relu", lf.relu, torch.relu, np.zeros(0))
sp("clamp_empty", "clamp", lambda x: x.clamp(0, 1), lambda x: x.clamp(0, 1), _E)
sp("maximum_empty", "maximum", lf.maximum, torch.maximum, (_E, np.zeros((1, 0))))
sp("pow_empty", "pow", lambda x, y: x**y, lambda x, y: x**y, (_E, np.zeros(0)))

# ---------------------------------------------------------------- indexing with repeated positions
_X34 = np.arange(12.0).reshape(3, 4) - 5
sp(
    "gather_repeated",
    "gather",
    lambda x, i: x.gather(1, i),
    lambda x, i: x.gather(1, i),
    (_X34, np.array([[0, 0, 1], [3, 3, 3], [2, 1, 2]])),
)
sp(
    "index_select_repeated",
    "index_select",
    lambda x, i: x.index_select(0, i),
    lambda x, i: x.index_select(0, i),
    (_X34, idx(0, 2, 0, 0)),
)
sp("getitem_repeated", "getitem", lambda x, i: x[i], lambda x, i: x[i], (_X34, idx(1, 1, 0, 1)))
sp(
    "index_add_repeated",
    "index_add",
    lambda x, i, s: x.index_add(0, i, s),
    lambda x, i, s: x.index_add(0, i, s),
    (_X34, idx(1, 1, 0), np.ones((3, 4)) * a(1, 2, 3, 4)),
)
sp(
    "scatter_repeated",
    "scatter",
    lambda x, i, s: x.scatter(1, i, s),
    lambda x, i, s: x.scatter(1, i, s),
    (_X34, np.array([[0, 0], [1, 2], [3, 3]]), np.array([[1.0, 1], [2, 3], [4, 4]])),
)
sp(
    "scatter_add_repeated",
    "scatter",
    lambda x, i, s: x.scatter_add(1, i, s),
    lambda x, i, s: x.scatter_add(1, i, s),
    (_X34, np.array([[0, 0], [1, 2], [3, 3]]), np.array([[1.0, 1], [2, 3], [4, 4]])),
)
for _r, _s in (
    ("amax", np.array([[-5.0, 9], [-1, 3], [6, 6]])),
    ("amin", np.array([[-5.0, -9], [-1, 3], [6, 6]])),
    ("prod", np.array([[0.0, 2], [0, 3], [0, 0]])),
):
    sp(
        f"scatter_reduce_{_r}",
        "scatter",
        lambda x, i, s, _r=_r: x.scatter_reduce(1, i, s, _r),
        lambda x, i, s, _r=_r: x.scatter_reduce(1, i, s, _r),
        (_X34, np.array([[0, 0], [1, 2], [3, 3]]), _s),
    )
# torch's scatter(reduce="multiply") has no derivative (it raises); lazyflow differentiates it as the same product
# scatter_reduce(..., "prod") computes (tests/test_torch_differences.py)
sp(
    "scatter_multiply",
    "scatter",
    lambda x, i, s: x.scatter(1, i, s, reduce="multiply"),
    lambda x, i, s: x.scatter_reduce(1, i, s, "prod"),
    (_X34, np.array([[0, 0], [1, 2], [3, 3]]), np.array([[0.0, 2], [0, 3], [0, 0]])),
)
sp(
    "setitem_repeated",
    "setitem",
    lambda x, i, v: _setitem(x, i, v),
    lambda x, i, v: _setitem(x, i, v),
    (_X34, idx(1, 1, 0), np.array([[1.0] * 4, [2] * 4, [3] * 4])),
)
sp(
    "masked_fill_tensor",
    "masked_fill",
    lambda x, m, v: x.masked_fill(m, v),
    lambda x, m, v: x.masked_fill(m, v),
    (_X34, _X34 > 0, np.array(INF)),
)


def _setitem(x, i, v):
    y = x.clone()
    y[i] = v
    return y


# ---------------------------------------------------------------- nn primitives at their special points
_POOL_X = np.array([[[[1.0, 1, 2, 2], [1, 1, 2, 2], [0, 3, -1, -1], [3, 0, -1, -1]]]])
# one NaN per window: with several, torch's kernel picks the last (tests/test_torch_differences.py)
_POOL_NAN = np.array([[[[1.0, NAN, 2, 2], [1, 1, 2, INF], [0, 3, -INF, -INF], [3, 0, -INF, -INF]]]])
sp("max_pool2d_ties", "max_pool", lambda x: F.max_pool2d(x, 2), lambda x: TF.max_pool2d(x, 2), _POOL_X, _POOL_NAN)
sp(
    "max_pool2d_overlap_ties",
    "max_pool",
    lambda x: F.max_pool2d(x, 2, 1),
    lambda x: TF.max_pool2d(x, 2, 1),
    _POOL_X,
    _POOL_NAN,
)
sp(
    "max_pool2d_indices_ties",
    "max_pool_with_indices",
    lambda x: F.max_pool2d(x, 2, 1, return_indices=True),
    lambda x: TF.max_pool2d(x, 2, 1, return_indices=True),
    _POOL_X,
    _POOL_NAN,
)
sp(
    "max_pool2d_dilated_ties",
    "max_pool",
    lambda x: F.max_pool2d(x, 2, 1, dilation=2),
    lambda x: TF.max_pool2d(x, 2, 1, dilation=2),
    _POOL_X,
    _POOL_NAN,
)
_CONST_BATCH = np.stack([np.full((3, 4), 2.0), np.full((3, 4), -1.0)])
sp(
    "layer_norm_constant",
    "layer_norm",
    lambda x, w, b: F.layer_norm(x, (4,), w, b),
    lambda x, w, b: TF.layer_norm(x, (4,), w, b),
    (_CONST_BATCH, a(1, 2, 3, 4), a(0, 1, 0, 1)),
)
sp(
    "group_norm_constant",
    "group_norm",
    lambda x, w, b: F.group_norm(x, 1, w, b),
    lambda x, w, b: TF.group_norm(x, 1, w, b),
    (_CONST_BATCH, a(1, 2, 3), a(0, 1, 0)),
)
sp(
    "batch_norm_constant",
    "batch_norm",
    lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True),
    lambda x, w, b: TF.batch_norm(x, None, None, w, b, training=True),
    (_CONST_BATCH, a(1, 2, 3), a(0, 1, 0)),
)
sp(
    "rms_norm_zero",
    "rms_norm",
    lambda x, w: F.rms_norm(x, (4,), w),
    lambda x, w: TF.rms_norm(x, (4,), w),
    (np.zeros((2, 3, 4)), a(1, 2, 3, 4)),
)
_MASK = np.array([[True, True, False], [False, False, False]])
sp(
    "sdpa_fully_masked_row",
    "attention",
    lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m),
    lambda q, k, v, m: TF.scaled_dot_product_attention(q, k, v, attn_mask=m),
    (
        np.linspace(-1, 1, 8).reshape(2, 4),
        np.linspace(1, -1, 12).reshape(3, 4),
        np.linspace(0, 2, 12).reshape(3, 4),
        _MASK,
    ),
    rtol=1e-10,
    atol=1e-12,
)
sp(
    "embedding_repeated_padding",
    "embedding",
    lambda w, i: F.embedding(i, w, padding_idx=1),
    lambda w, i: TF.embedding(i, w, padding_idx=1),
    (_X34, idx(0, 1, 1, 2, 0)),
)
sp(
    "embedding_scale_grad_by_freq",
    "embedding",
    lambda w, i: F.embedding(i, w, scale_grad_by_freq=True),
    lambda w, i: TF.embedding(i, w, scale_grad_by_freq=True),
    (_X34, idx(0, 1, 1, 2, 0)),
)
sp(
    "nll_loss_all_ignored",
    "nll_loss",
    lambda x, t: F.nll_loss(x, t, ignore_index=1),
    lambda x, t: TF.nll_loss(x, t, ignore_index=1),
    (_X34, idx(1, 1, 1)),
    (_X34, idx(1, 0, 1)),
)
sp(
    "cross_entropy_all_ignored",
    ("log_softmax", "nll_loss"),
    lambda x, t: F.cross_entropy(x, t, ignore_index=1),
    lambda x, t: TF.cross_entropy(x, t, ignore_index=1),
    (_X34, idx(1, 1, 1)),
    (_X34, idx(1, 0, 1)),
)

# ---------------------------------------------------------------- complex numbers at 0 (torch: gradient 0 there)
# Real in, real out through view_as_complex/view_as_real, so the comparison itself needs no complex support; the
# gradients cross the complex tape in torch's convention.
_CZ = np.array([[0.0, 0.0], [-0.0, 0.0], [1.0, 0.0], [0.0, -2.0], [-3.0, 4.0]])
_CZ2 = np.array([[0.0, -0.0], [0.0, 0.0], [-1.0, 0.0], [0.0, 2.0], [3.0, -4.0]])


sp(
    "complex_abs_at_0",
    ("view_as_complex", "abs"),
    lambda x: lf.view_as_complex(x).abs(),
    lambda x: torch.view_as_complex(x).abs(),
    _CZ,
    _CZ2,
)
sp(
    "complex_angle_at_0",
    ("view_as_complex", "angle"),
    lambda x: lf.view_as_complex(x).angle(),
    lambda x: torch.view_as_complex(x).angle(),
    _CZ,
    _CZ2,
)
sp(
    "complex_sgn_at_0",
    ("view_as_complex", "sgn", "view_as_real"),
    lambda x: lf.view_as_real(lf.view_as_complex(x).sgn()),
    lambda x: torch.view_as_real(torch.view_as_complex(x).sgn()),
    _CZ,
    _CZ2,
)
sp(
    "polar_at_zero_abs",
    ("polar", "view_as_real"),
    lambda r, t: lf.view_as_real(lf.polar(r, t)),
    lambda r, t: torch.view_as_real(torch.polar(r, t)),
    (a(0, 0, 1, 2), a(0, 1, -1, 3.0)),
    (a(0, 2, 0, 1), a(-3, 0, 0, 0)),
)


# ---------------------------------------------------------------- which primitives need no points
# A primitive without a record here must say why. Linear and multilinear maps have a gradient that is the same
# linear map at every point (it cannot have a kink); the rest are reached through the records above or are
# random.
_LINEAR = "linear in each differentiable operand: the gradient is the same linear map at every point"
EXEMPT = {
    **{
        name: _LINEAR
        for name in (
            "add",
            "sub",
            "mul",
            "matmul",
            "einsum",
            "linear",
            "grouped_mm",
            "outer",
            "sum",
            "mean",
            "cumsum",
            "reshape",
            "permute",
            "expand",
            "tile",
            "repeat_interleave",
            "cat",
            "stack",
            "split",
            "flip",
            "roll",
            "pad",
            "tril",
            "triu",
            "diagonal",
            "copy",
            "copy_into",
            "cast",
            "conv",
            "conv_transpose",
            "avg_pool",
            "adaptive_avg_pool",
            "real",
            "imag",
            "conj",
            "complex",
            "fft_c2c",
            "fft_r2c",
            "fft_c2r",
        )
    },
    "householder_product": "a polynomial in its operands (products of reflectors I - tau v v^T): no kink; "
    "gradients against torch in tests/test_torch_functions_s6.py",
    "ormqr": "as householder_product, times another matrix",
    "dropout": "random: the gradient is the drawn mask scaled by 1/(1-p), the same linear map at every point",
    "rnn": "tanh/sigmoid cells are smooth; the relu cell's kink at 0 is "
    "tests/test_nn_rnn.py::test_relu_rnn_gradient_at_zero_like_torch",
    "rnn_cell": "as rnn (one step of the same gate function)",
    "rnn_packed": "as rnn, with a length mask (a where on integer step indices: no kink in the values)",
    **{
        name: "smooth wherever it is defined; its special points (singular or repeated-eigenvalue matrices) are "
        "where torch's gradient is undefined too. Values and gradients against torch: tests/test_linalg.py"
        for name in (
            "linalg_inv",
            "linalg_inv_ex",
            "linalg_cholesky_ex",
            "linalg_solve",
            "linalg_det",
            "linalg_slogdet",
            "linalg_cholesky",
            "linalg_qr",
            "linalg_eigh",
            "linalg_svd",
            "linalg_svdvals",
            "matrix_exp",
            "triangular_solve",
            "lu_factor",
        )
    },
}


# ---------------------------------------------------------------- the drivers
def _cotangent(shape):
    n = int(np.prod(shape))
    return (1.0 + 0.5 * np.arange(n)).reshape(shape)


def _is_diff(v) -> bool:
    return isinstance(v, np.ndarray) and v.dtype.kind == "f"


def _as_tuple(x):
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def _torch_expected(rec: SP, point):
    ts = [torch.tensor(v, dtype=torch.float64, requires_grad=True) if _is_diff(v) else torch.tensor(v) for v in point]
    outs = _as_tuple(rec.th(*ts))
    fo = [k for k, o in enumerate(outs) if o.is_floating_point()]
    roots = [(outs[k], torch.tensor(_cotangent(tuple(outs[k].shape)))) for k in fo if outs[k].requires_grad]
    diff = [i for i, v in enumerate(point) if _is_diff(v)]
    if roots:
        gs = torch.autograd.grad([r for r, _ in roots], [ts[i] for i in diff], [c for _, c in roots], allow_unused=True)
    else:  # torch: no gradient flows at all (e.g. floor_divide's output is not differentiable)
        gs = [None] * len(diff)
    grads = [np.zeros(point[i].shape) if g is None else g.numpy() for i, g in zip(diff, gs)]
    return [o.detach().numpy() for o in outs], fo, diff, grads


def _lf_inputs(point):
    return [lf.tensor(v, dtype=lf.float64) if _is_diff(v) else lf.tensor(v) for v in point]


def _lf_grads(outs, tensors, fo, diff):
    cts = [lf.tensor(_cotangent(tuple(outs[k].shape)), dtype=outs[k].dtype) for k in fo]
    return lf.autograd.grad([outs[k] for k in fo], [tensors[i] for i in diff], cts, allow_unused=True)


def _in_trace(rec: SP, fo, diff):
    """Graph mode: forward and backward through the tape inside one compiled program."""

    def f(*tensors):
        tensors = list(tensors)
        with lf.enable_grad():
            for i in diff:
                tensors[i] = tensors[i].detach().requires_grad_()
            outs = _as_tuple(rec.lf(*tensors))
            gs = _lf_grads(outs, tensors, fo, diff)
        return tuple(outs), tuple(lf.zeros_like(tensors[i]) if g is None else g for i, g in zip(diff, gs))

    return f


_GRAPH_FNS: dict = {}
_VJP_FNS: dict = {}


def _run(rec: SP, mode: str, point, fo, diff):
    tensors = _lf_inputs(point)
    if mode == "graph":
        key = (rec.id, tuple(fo), tuple(diff))
        if key not in _GRAPH_FNS:
            _GRAPH_FNS[key] = _in_trace(rec, fo, diff)
        outs, grads = compiled(_GRAPH_FNS[key])(*tensors)
        return _as_tuple(outs), grads
    for i in diff:
        tensors[i].requires_grad_()
    if mode == "eager":
        outs = _as_tuple(rec.lf(*tensors))
    else:  # "compiled_vjp": the outer tape differentiates the compiled program as a whole
        if rec.id not in _VJP_FNS:
            _VJP_FNS[rec.id] = lambda *ts, _f=rec.lf: _f(*ts)
        outs = _as_tuple(compiled(_VJP_FNS[rec.id])(*tensors))
    return outs, _lf_grads(outs, tensors, fo, diff)


def _check(rec: SP, mode: str, k: int, point, expected):
    want_outs, fo, diff, want_grads = expected
    outs, grads = _run(rec, mode, point, fo, diff)
    where = f"{rec.id} [{mode}] point {k}: inputs {[np.asarray(v).tolist() for v in point]}"
    assert len(outs) == len(want_outs), f"{where}: {len(outs)} outputs, torch gives {len(want_outs)}"
    for o, w in zip(outs, want_outs):
        got = np.asarray(o)
        if w.dtype.kind == "f":
            np.testing.assert_allclose(
                got, w, rtol=rec.rtol, atol=rec.atol, equal_nan=True, err_msg=f"{where}: forward value"
            )
        else:
            np.testing.assert_array_equal(got, w, err_msg=f"{where}: forward value")
    for i, g, w in zip(diff, grads, want_grads):
        got = np.zeros(w.shape) if g is None else np.asarray(g)
        np.testing.assert_allclose(
            got,
            w,
            rtol=rec.rtol,
            atol=rec.atol,
            equal_nan=True,
            err_msg=f"{where}: gradient of input {i} (torch's is the desired value)",
        )


_EXPECTED: dict = {}


@pytest.mark.parametrize("mode", ["eager", "graph", "compiled_vjp"])
@pytest.mark.parametrize("rec", RECORDS, ids=repr)
def test_gradient_at_special_points_matches_torch(rec, mode):
    for k, point in enumerate(rec.points):
        if (rec.id, k) not in _EXPECTED:
            _EXPECTED[rec.id, k] = _torch_expected(rec, point)
        _check(rec, mode, k, point, _EXPECTED[rec.id, k])


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


def _reached(rec: SP) -> set:
    spy = _Spy(state.interp)
    state.interp = spy
    try:
        rec.lf(*_lf_inputs(rec.points[0]))
    finally:
        state.interp = spy.inner
    return spy.seen


def test_every_differentiable_primitive_has_special_points_or_a_reason():
    """Derived from the op table: a new differentiable primitive fails here until it has a record (or an entry in
    EXEMPT saying why it has no special point); each record reaches the primitives it names."""
    for rec in RECORDS:
        missing = set(rec.ops) - _reached(rec)
        assert not missing, f"{rec.id} never reaches {sorted(missing)}"
    differentiable = {name for name, o in REGISTRY.items() if o.differentiable}
    covered = {op for rec in RECORDS for op in rec.ops}
    lacking = sorted(differentiable - covered - set(EXEMPT))
    assert not lacking, f"differentiable primitives without special points or an exemption: {lacking}"
    stale = sorted(set(EXEMPT) - differentiable)
    assert not stale, f"EXEMPT lists primitives that are gone or not differentiable: {stale}"
    both = sorted(set(EXEMPT) & covered)
    assert not both, f"EXEMPT lists primitives that do have records: {both}"
    ids = [rec.id for rec in RECORDS]
    assert len(ids) == len(set(ids)), "duplicate record ids"


class _KinkStep(lf.nn.Graph):
    def __init__(self, model, opt):
        super().__init__()
        self.model = model
        self.add_optimizer(opt)

    def build(self, x):
        loss = _kink_loss(self.model, x)
        loss.backward()
        return loss


def _kink_loss(model, x):
    h = model[0](x)  # every pre-activation is exactly 0 or at a clamp bound
    out = model[1](h.relu())
    return out.abs().sum() + h.clamp(0, 1).sum() + h.max() + (h * 0 + 1).std()


def _kink_model(lib):
    nn = lf.nn if lib is lf else torch.nn
    model = nn.Sequential(nn.Linear(2, 3), nn.Linear(3, 2))
    values = [[[1.0, -1], [0, 0], [2, -1]], [0.0, 0, -1], [[1.0, 1, 1], [0, 0, 0]], [0.0, 0]]
    with lf.no_grad() if lib is lf else torch.no_grad():
        for p, v in zip(model.parameters(), values):
            p.copy_(lib.tensor(v))
    return model


def test_training_step_in_nn_graph_matches_torch_at_kinks():
    """One SGD step through ``lf.nn.Graph`` (forward, ``loss.backward()`` and the update in one program) on a
    model whose activations sit exactly on relu's kink, clamp's bounds, a tie of max() and abs at 0, and whose
    std is of a constant: the updated parameters equal torch's."""
    x = np.array([[1.0, 1.0]])
    ref = _kink_model(torch)
    opt = torch.optim.SGD(ref.parameters(), lr=1.0)
    _kink_loss(ref, torch.tensor(x, dtype=torch.float32)).backward()
    opt.step()
    model = _kink_model(lf)
    step = _KinkStep(model, lf.optim.SGD(model.parameters(), lr=1.0))
    step(lf.tensor(x, dtype=lf.float32))
    for (name, p), q in zip(model.named_parameters(), ref.parameters()):
        np.testing.assert_array_equal(p.detach().numpy(), q.detach().numpy(), err_msg=name)
