"""Elementwise, comparison, linear-algebra and reduction primitives."""

from __future__ import annotations

import builtins

import jax
import jax.numpy as jnp
from jax import lax

from .._core import dtypes as D
from .._core.errors import DivisionByZeroError, DTypeError
from .table import REGISTRY, ValueCheck, astype, compute_dtypes, is_tensor_desc, op

# ---------------------------------------------------------------- unary, floating results
for _name, _fn in {
    "exp": jnp.exp,
    "log": jnp.log,
    "log1p": jnp.log1p,
    "expm1": jnp.expm1,
    "sqrt": jnp.sqrt,
    "sin": jnp.sin,
    "cos": jnp.cos,
    "tan": jnp.tan,
    "tanh": jnp.tanh,
    "sigmoid": jax.nn.sigmoid,
    "erf": jax.scipy.special.erf,
    "log2": jnp.log2,
    "log10": jnp.log10,
    "reciprocal": jnp.reciprocal,
    "silu": jax.nn.silu,
    "asin": jnp.arcsin,
    "acos": jnp.arccos,
    "atan": jnp.arctan,
    "sinh": jnp.sinh,
    "cosh": jnp.cosh,
    "exp2": jnp.exp2,
    "logsigmoid": jax.nn.log_sigmoid,
    "erfinv": jax.scipy.special.erfinv,
}.items():
    op(_name, dtypes="float")(_fn)


def _zero(g):
    return jnp.zeros((), g.dtype)


def _sgn(x):
    """torch's ``sgn`` in backward rules: -1, 0 or 1, and 0 at NaN (``jnp.sign`` gives NaN there)."""
    one = jnp.ones((), x.dtype)
    return jnp.where(x > 0, one, jnp.where(x < 0, -one, jnp.zeros((), x.dtype)))


def _rsqrt_bwd(xs, out, g):
    # torch: -0.5 * grad * result**3 (so rsqrt(-0.0) = -inf has gradient +inf, not autodiff's -inf)
    return (g * (-0.5) * (out * out * out),)


op("rsqrt", dtypes="float", bwd=_rsqrt_bwd)(lax.rsqrt)


# ---------------------------------------------------------------- unary, dtype kept
def _sign(x):
    if x.dtype == jnp.bool_:
        return x
    if jnp.issubdtype(x.dtype, jnp.floating):  # torch: sign(NaN) is 0
        return jnp.where(jnp.isnan(x), jnp.zeros((), x.dtype), jnp.sign(x))
    return jnp.sign(x)


def _square(x):
    if x.dtype == jnp.bool_:  # torch: bool ** 2 is int64
        x = x.astype(D.default_int().to_jax())
    return x * x


for _name, _fn in {"neg": jnp.negative, "sign": _sign, "square": _square}.items():
    op(_name, linear=_name == "neg")(_fn)


def _abs_bwd(xs, out, g):
    x = xs[0]
    if jnp.iscomplexobj(x):  # torch: grad * z/|z|, 0 at 0; conjugated here (JAX's convention, see ops.complex)
        zero = out == 0
        return (
            jnp.where(zero, jnp.zeros((), x.dtype), g * jnp.conj(x) / jnp.where(zero, jnp.ones((), out.dtype), out)),
        )
    return (g * _sgn(x),)  # torch: grad * sgn(x), 0 at 0 (and at NaN)


@op("abs", bwd=_abs_bwd)
def _abs(x):
    return jnp.abs(x)


def _relu_bwd(xs, out, g):
    return (jnp.where(out <= 0, _zero(g), g),)  # torch's threshold_backward on the result: 0 at 0, g at NaN


@op("relu", bwd=_relu_bwd)
def _relu(x):
    return jnp.maximum(x, jnp.zeros((), x.dtype))


for _name, _fn in {"floor": jnp.floor, "ceil": jnp.ceil, "trunc": jnp.trunc}.items():
    op(_name)(_fn)


@op("round", static=("decimals",))
def _round(x, *, decimals):
    return jnp.round(x, decimals)


@op("gelu", static=("approximate",), dtypes="float")
def _gelu(x, *, approximate):
    return jax.nn.gelu(x, approximate=approximate == "tanh")


@op("softplus", static=("beta", "threshold"), dtypes="float")
def _softplus(x, *, beta, threshold):
    bx = x * beta
    return jnp.where(bx > threshold, x, jnp.logaddexp(bx, 0.0).astype(x.dtype) / beta)


def _leaky_relu_bwd(xs, out, g, *, negative_slope):
    return (jnp.where(xs[0] > 0, g, g * jnp.asarray(negative_slope, g.dtype)),)  # torch: the slope at 0


@op("leaky_relu", static=("negative_slope",), bwd=_leaky_relu_bwd)
def _leaky_relu(x, *, negative_slope):
    return jnp.where(x >= 0, x, x * jnp.asarray(negative_slope, x.dtype))


def _elu_bwd(xs, out, g, *, alpha):
    x = xs[0]
    # torch's elu_backward; autodiff of jax.nn.elu agrees except at NaN (torch: g, autodiff: NaN)
    return (jnp.where(x <= 0, g * (alpha * jnp.exp(x)), g),)


@op("elu", static=("alpha",), dtypes="float", bwd=_elu_bwd)
def _elu(x, *, alpha):
    return jax.nn.elu(x, alpha)


def _hardtanh_bwd(xs, out, g, *, min_val, max_val):
    x = xs[0]
    return (jnp.where((x <= min_val) | (x >= max_val), _zero(g), g),)  # torch: 0 at both edges, g at NaN


@op("hardtanh", static=("min_val", "max_val"), bwd=_hardtanh_bwd)
def _hardtanh(x, *, min_val, max_val):
    return jnp.clip(x, min_val, max_val)


for _name, _fn in {
    "isnan": jnp.isnan,
    "isinf": jnp.isinf,
    "isfinite": jnp.isfinite,
    "logical_not": jnp.logical_not,
}.items():
    op(_name, dtypes="none", differentiable=False)(_fn)


@op("bitwise_not", dtypes="int_or_bool", differentiable=False)
def _bitwise_not(x):
    return jnp.invert(x)


@op("nan_to_num", static=("nan", "posinf", "neginf"))
def _nan_to_num(x, *, nan, posinf, neginf):
    return jnp.nan_to_num(x, nan=nan, posinf=posinf, neginf=neginf)


# ---------------------------------------------------------------- binary
@op("add", linear=True)
def _add(a, b):
    return a + b


@op("sub", linear=True)
def _sub(a, b):
    return a - b


@op("mul", linear="multi")
def _mul(a, b):
    return a * b


@op("div", dtypes="float")
def _div(a, b):
    return a / b


def _divisor_is_zero(a, b):
    return b == 0 if isinstance(b, (int, bool)) else (b == 0).any()


def _integer_divisor_check(name: str):
    """torch's CPU kernels refuse an integer division or remainder by zero (floats give inf/nan)."""
    check = ValueCheck(_divisor_is_zero, DivisionByZeroError, f"{name}: integer division by zero", reads=(1,))

    def rule(descs, statics):
        dts = [d for d in compute_dtypes(REGISTRY[name], descs, statics) if d is not None]
        return check if dts and not dts[0].is_floating_point and not dts[0].is_complex else None

    return rule


@op("div_trunc", check=_integer_divisor_check("div_trunc"))
def _div_trunc(a, b):
    if jnp.issubdtype(a.dtype, jnp.integer):
        return lax.div(*jnp.broadcast_arrays(a, b))
    return jnp.trunc(a / b)


@op("floor_divide", check=_integer_divisor_check("floor_divide"))
def _floor_divide(a, b):
    return jnp.floor_divide(a, b)


@op("remainder", check=_integer_divisor_check("remainder"))
def _remainder(a, b):
    return jnp.remainder(a, b)


@op("fmod", check=_integer_divisor_check("fmod"))
def _fmod(a, b):
    return jnp.fmod(a, b)


def _pow_bwd(xs, out, g):
    # torch: no gradient to the base where the exponent is 0 (0**0 included), none to the exponent where
    # base == 0 and exponent >= 0; elsewhere b * a**(b-1) and a**b * log(a) (0**-1: -inf, (-2)**3: nan)
    a, b = xs
    zero = _zero(g)
    ga = jnp.where(b == 0, zero, g * (b * jnp.power(a, b - 1)))
    gb = g * jnp.where((a == 0) & (b >= 0), zero, out * jnp.log(a))
    return ga, gb


@op("pow", bwd=_pow_bwd)
def _pow(a, b):
    if jnp.issubdtype(jnp.result_type(a), jnp.integer):
        # integer powers: XLA leaves negative exponents undefined; torch gives 1/a**|b| truncated
        a, b = jnp.broadcast_arrays(a, b)
        neg = b < 0
        r = jnp.power(a, jnp.where(neg, 0, b))
        trunc = jnp.where(a == 1, 1, jnp.where(a == -1, jnp.where(b % 2 == 0, 1, -1), 0)).astype(r.dtype)
        return jnp.where(neg, trunc, r)
    return jnp.power(a, b)


def _atan2_bwd(xs, out, g):
    a, b = xs
    d = a * a + b * b
    # torch: 1 / (a**2 + b**2) taken as 0 where the denominator is 0, so atan2(0, 0) has gradient 0
    r = jnp.where(d == 0, _zero(g), 1 / jnp.where(d == 0, jnp.ones((), d.dtype), d))
    return g * b * r, -g * a * r


@op("atan2", dtypes="float", bwd=_atan2_bwd)
def _atan2(a, b):
    return jnp.arctan2(a, b)


def _extremum_bwd(largest):
    # torch: half to each side of a tie; a NaN (neither side larger) sends the whole gradient to both
    def bwd(xs, out, g):
        a, b = xs
        zero = _zero(g)
        half = jnp.where(a == b, g / 2, g)
        a_loses, b_loses = (a < b, a > b) if largest else (a > b, a < b)
        return jnp.where(a_loses, zero, half), jnp.where(b_loses, zero, half)

    return bwd


@op("maximum", bwd=_extremum_bwd(True))
def _maximum(a, b):
    return jnp.maximum(a, b)


@op("minimum", bwd=_extremum_bwd(False))
def _minimum(a, b):
    return jnp.minimum(a, b)


def _nan_extremum_bwd(largest):
    # torch: ties go wholly to the first operand, as does a NaN second operand
    def bwd(xs, out, g):
        a, b = xs
        zero = _zero(g)
        take_a = ((a >= b) if largest else (a <= b)) | jnp.isnan(b)
        return jnp.where(take_a, g, zero), jnp.where(take_a, zero, g)

    return bwd


@op("fmax", bwd=_nan_extremum_bwd(True))
def _fmax(a, b):
    return jnp.fmax(a, b)


@op("fmin", bwd=_nan_extremum_bwd(False))
def _fmin(a, b):
    return jnp.fmin(a, b)


for _name, _fn in {
    "eq": jnp.equal,
    "ne": jnp.not_equal,
    "lt": jnp.less,
    "le": jnp.less_equal,
    "gt": jnp.greater,
    "ge": jnp.greater_equal,
}.items():
    op(_name, differentiable=False)(_fn)

for _name, _fn in {
    "logical_and": jnp.logical_and,
    "logical_or": jnp.logical_or,
    "logical_xor": jnp.logical_xor,
}.items():
    op(_name, dtypes="none", differentiable=False)(_fn)

for _name, _fn in {
    "bitwise_and": jnp.bitwise_and,
    "bitwise_or": jnp.bitwise_or,
    "bitwise_xor": jnp.bitwise_xor,
    "bitwise_left_shift": jnp.left_shift,
    "bitwise_right_shift": jnp.right_shift,
}.items():
    op(_name, dtypes="int_or_bool", differentiable=False)(_fn)


def _where_dtypes(descs, statics):
    return [None] + compute_dtypes(_add, descs[1:], ())


@op("where", dtypes=_where_dtypes)
def _where(cond, a, b):
    return jnp.where(cond, a, b)


def _clamp_bwd(xs, out, g):
    # torch's clamp_backward and clamp_backward_min_max: x keeps the gradient on the closed interval (both
    # edges included); a bound gets it only where it is the value chosen (lo > hi: hi wins)
    x, lo, hi = xs
    zero = _zero(g)
    inside = jnp.ones((), bool)
    if lo is not None:
        inside = inside & (x >= lo)
    if hi is not None:
        inside = inside & (x <= hi)
    glo = ghi = None
    if lo is not None and hi is not None:
        glo = jnp.where((x < lo) & (lo < hi), g, zero)
        ghi = jnp.where((x > hi) | (hi < lo), g, zero)
    elif lo is not None:
        glo = jnp.where(x < lo, g, zero)
    elif hi is not None:
        ghi = jnp.where(x > hi, g, zero)
    return jnp.where(inside, g, zero), glo, ghi


@op("clamp", bwd=_clamp_bwd)
def _clamp(x, lo, hi):
    if lo is not None:
        x = jnp.maximum(x, lo)
    if hi is not None:
        x = jnp.minimum(x, hi)
    return x


@op("lerp", dtypes="float")
def _lerp(a, b, w):
    # torch's two-sided formula: exact at w == 1 (returns end), and the rounding torch's kernels have
    return jnp.where(jnp.abs(w) < 0.5, a + w * (b - a), b - (b - a) * (1 - w))


@op("addcmul", static=("value",))
def _addcmul(x, a, b, *, value):
    return x + value * a * b


@op("addcdiv", static=("value",), dtypes="float")
def _addcdiv(x, a, b, *, value):
    return x + value * a / b


# ---------------------------------------------------------------- linear algebra
def _same_dtype(name):
    """Dtype rule of torch's matrix products: no promotion -- every tensor operand has one dtype, and not bool (torch:
    RuntimeError "expected m1 and m2 to have the same dtype", NotImplementedError for bool)."""

    def rule(descs, statics):
        dts = [d[1] for d in descs if is_tensor_desc(d)]
        if builtins.any(d is not dts[0] for d in dts):
            raise DTypeError(
                f"{name}: expected all operands to have the same dtype (matrix products do not promote, "
                f"as in torch), but got {', '.join(d.name for d in dts)}; convert with .to(dtype)"
            )
        if dts and dts[0] is D.bool_:
            raise DTypeError(f"{name} is not implemented for bool tensors (as in torch); convert with .to(dtype)")
        return [None] * len(descs)

    return rule


@op("matmul", linear="multi", dtypes=_same_dtype("matmul"))
def _matmul(a, b):
    return jnp.matmul(a, b)


@op("einsum", static=("equation",), linear="multi", dtypes=_same_dtype("einsum"))
def _einsum(*xs, equation):
    return jnp.einsum(equation, *xs)


@op("linear", linear="multi", dtypes=_same_dtype("linear"))
def _linear(x, w, b):
    # contract x's last dim with w's dim 1 directly: ``matmul(x, w.T)`` lowers to a copy of the transposed weight
    # before the dot when x is one row (XLA CPU; 784x256 at batch 1: 181 us, where this takes 33 us)
    y = lax.dot_general(x, w, (((x.ndim - 1,), (1,)), ((), ())))
    return y if b is None else y + b


@op("outer", linear="multi")
def _outer(a, b):
    return jnp.outer(a, b)


# ---------------------------------------------------------------- reductions
def _int_widen(x, dtype):
    if dtype is not None:
        return x.astype(dtype.to_jax())
    if not jnp.issubdtype(x.dtype, jnp.inexact):
        return x.astype(D.default_int().to_jax())
    return x


@op("sum", static=("dim", "keepdim", "dtype"), dtypes="none", linear=True)
def _sum(x, *, dim, keepdim, dtype):
    return jnp.sum(_int_widen(x, dtype), axis=dim, keepdims=keepdim)


@op("prod", static=("dim", "keepdim", "dtype"), dtypes="none")
def _prod(x, *, dim, keepdim, dtype):
    return jnp.prod(_int_widen(x, dtype), axis=dim, keepdims=keepdim)


@op("mean", static=("dim", "keepdim"), dtypes="none", linear=True)
def _mean(x, *, dim, keepdim):
    return jnp.mean(x, axis=dim, keepdims=keepdim)


def _keepdims(x, y, dim, keepdim):
    """``y`` (reduced from ``x`` over ``dim``) with the reduced dims restored as size 1."""
    if keepdim:
        return y
    return jnp.expand_dims(y, tuple(range(x.ndim)) if dim is None else dim)


def _amax_bwd(xs, out, g, *, dim, keepdim):
    # torch's evenly_distribute_backward (max()/min()): the gradient is split evenly between the elements equal
    # to the result, and a NaN result shares it between the NaNs (autodiff gave NaN slices no gradient at all)
    x = xs[0]
    out, g = _keepdims(x, out, dim, keepdim), _keepdims(x, g, dim, keepdim)
    mask = ((x == out) | (jnp.isnan(x) & jnp.isnan(out))).astype(g.dtype)
    return (mask * (g / jnp.sum(mask, axis=dim, keepdims=True)),)


@op("amax", static=("dim", "keepdim"), dtypes="none", bwd=_amax_bwd)
def _amax(x, *, dim, keepdim):
    return jnp.max(x, axis=dim, keepdims=keepdim)


@op("amin", static=("dim", "keepdim"), dtypes="none", bwd=_amax_bwd)
def _amin(x, *, dim, keepdim):
    return jnp.min(x, axis=dim, keepdims=keepdim)


def _minmax_dim(x, dim, keepdim, largest):
    idx = jnp.argmax(x, axis=dim, keepdims=True) if largest else jnp.argmin(x, axis=dim, keepdims=True)
    vals = jnp.take_along_axis(x, idx, axis=dim)
    if not keepdim:
        vals, idx = jnp.squeeze(vals, dim), jnp.squeeze(idx, dim)
    return vals, idx.astype(D.default_int().to_jax())


@op("max_dim", static=("dim", "keepdim"), dtypes="none")
def _max_dim(x, *, dim, keepdim):
    return _minmax_dim(x, dim, keepdim, True)


@op("min_dim", static=("dim", "keepdim"), dtypes="none")
def _min_dim(x, *, dim, keepdim):
    return _minmax_dim(x, dim, keepdim, False)


@op("argmax", static=("dim", "keepdim"), dtypes="none", differentiable=False)
def _argmax(x, *, dim, keepdim):
    if dim is None:
        r = jnp.argmax(x.reshape(-1))
        return (r.reshape((1,) * x.ndim) if keepdim else r).astype(D.default_int().to_jax())
    return jnp.argmax(x, axis=dim, keepdims=keepdim).astype(D.default_int().to_jax())


@op("argmin", static=("dim", "keepdim"), dtypes="none", differentiable=False)
def _argmin(x, *, dim, keepdim):
    if dim is None:
        r = jnp.argmin(x.reshape(-1))
        return (r.reshape((1,) * x.ndim) if keepdim else r).astype(D.default_int().to_jax())
    return jnp.argmin(x, axis=dim, keepdims=keepdim).astype(D.default_int().to_jax())


def _shifted(x, dim):
    """``x`` minus its first element along the reduced dims (without gradient): the variance is the same, but a
    constant input centres to exact zeros (so its std is exactly 0, as torch's Welford pass finds) and large
    offsets lose no precision."""
    axes = range(x.ndim) if dim is None else dim
    if x.size == 0:
        return x
    first = x[tuple(slice(0, 1) if i in axes else slice(None) for i in range(x.ndim))]
    return x - lax.stop_gradient(first)


@op("var", static=("dim", "correction", "keepdim"), dtypes="none")
def _var(x, *, dim, correction, keepdim):
    return jnp.var(_shifted(x, dim), axis=dim, ddof=correction, keepdims=keepdim)


@op("std", static=("dim", "correction", "keepdim"), dtypes="none")
def _std(x, *, dim, correction, keepdim):
    v = jnp.var(_shifted(x, dim), axis=dim, ddof=correction, keepdims=keepdim)
    # torch masks the gradient where std == 0 (a constant input) to 0; sqrt's would be 0 * inf = NaN there
    zero = v == 0
    return jnp.where(zero, jnp.zeros((), v.dtype), jnp.sqrt(jnp.where(zero, jnp.ones((), v.dtype), v)))


@op("logsumexp", static=("dim", "keepdim"), dtypes="float")
def _logsumexp(x, *, dim, keepdim):
    return jax.nn.logsumexp(x, axis=dim, keepdims=keepdim)


def _norm_bwd(xs, out, g, *, p, dim, keepdim):
    """torch's linalg_vector_norm_backward: a zero norm sends no gradient, ``|x|`` contributes ``sgn(x)``
    (0 at 0), and the inf-norms split the gradient evenly between the tied largest (smallest) magnitudes."""
    x = xs[0]
    out, g = _keepdims(x, out, dim, keepdim), _keepdims(x, g, dim, keepdim)
    zero = _zero(g)
    if p == 0:
        return (jnp.zeros_like(x),)
    if p == 1:
        return (_sgn(x) * g,)
    a = jnp.abs(x)
    if p == builtins.float("inf") or p == -builtins.float("inf"):
        mask = ((a == out) | jnp.isnan(a)).astype(x.dtype)
        return (_sgn(x) * mask * (g / jnp.sum(mask, axis=dim, keepdims=True)),)
    p = 2 if p == "fro" else p
    nz = out != 0
    safe = jnp.where(nz, out, jnp.ones((), out.dtype))
    if p < 1:
        scaled = jnp.where(x == 0, zero, jnp.power(jnp.where(x == 0, jnp.ones((), a.dtype), a), p - 1))
        return (_sgn(x) * scaled * g * jnp.power(out, 1 - p),)
    scale = jnp.where(nz, g / (safe if p == 2 else jnp.power(safe, p - 1)), zero)
    if p == 2:
        return (x * scale,)
    if p < 2:
        return (_sgn(x) * jnp.power(a, p - 1) * scale,)
    return (x * jnp.power(a, p - 2) * scale,)


@op("norm", static=("p", "dim", "keepdim"), dtypes="float", bwd=_norm_bwd)
def _norm(x, *, p, dim, keepdim):
    if p == "fro" or p == 2:
        return jnp.sqrt(jnp.sum(x * x, axis=dim, keepdims=keepdim))
    if p == builtins.float("inf"):
        return jnp.max(jnp.abs(x), axis=dim, keepdims=keepdim)
    if p == -builtins.float("inf"):
        return jnp.min(jnp.abs(x), axis=dim, keepdims=keepdim)
    if p == 1:
        return jnp.sum(jnp.abs(x), axis=dim, keepdims=keepdim)
    if p == 0:
        return jnp.sum((x != 0).astype(x.dtype), axis=dim, keepdims=keepdim)
    return jnp.sum(jnp.abs(x) ** p, axis=dim, keepdims=keepdim) ** (1.0 / p)


@op("all", static=("dim", "keepdim"), dtypes="none", differentiable=False)
def _all(x, *, dim, keepdim):
    return jnp.all(x, axis=dim, keepdims=keepdim)


@op("any", static=("dim", "keepdim"), dtypes="none", differentiable=False)
def _any(x, *, dim, keepdim):
    return jnp.any(x, axis=dim, keepdims=keepdim)


@op("cumsum", static=("dim", "dtype"), dtypes="none", linear=True)
def _cumsum(x, *, dim, dtype):
    return jnp.cumsum(_int_widen(x, dtype), axis=dim)


@op("cumprod", static=("dim", "dtype"), dtypes="none")
def _cumprod(x, *, dim, dtype):
    return jnp.cumprod(_int_widen(x, dtype), axis=dim)


def _floating_only(name):
    """Dtype rule of an op torch implements for floating tensors only (torch: NotImplementedError "..._kernel_impl"
    not implemented for 'Long'); torch's ``dtype=`` argument converts first."""

    def rule(descs, statics):
        for d in descs:
            if is_tensor_desc(d) and not d[1].is_floating_point:
                raise DTypeError(
                    f"{name} is not implemented for {d[1].name} tensors (as in torch); pass dtype= or "
                    "convert the input with .float()"
                )
        return [None] * len(descs)

    return rule


@op("softmax", static=("dim",), dtypes=_floating_only("softmax"))
def _softmax(x, *, dim):
    return jax.nn.softmax(x, axis=dim)


@op("log_softmax", static=("dim",), dtypes=_floating_only("log_softmax"))
def _log_softmax(x, *, dim):
    return jax.nn.log_softmax(x, axis=dim)


@op("cast", static=("dtype",), dtypes="none", linear=True)
def _cast(x, *, dtype):
    return astype(x, dtype.to_jax())


@op("copy", dtypes="none", linear=True)
def _copy(x):
    return jnp.array(x, copy=True)
