"""Elementwise op functions with torch's signatures: unary and binary math, comparisons, activations,
where/clamp/lerp, type promotion (``result_type``/``can_cast``) and dtype conversion."""

from __future__ import annotations

import builtins

import numpy as np

from .._core import dtypes as D
from .._core.context import state
from .._core.errors import DTypeError, OpError
from .._core.formats import check_memory_format
from .._tensor import Tensor
from ..ops.table import REGISTRY as R
from ._common import _apply

__all__ = [
    "abs",
    "absolute",
    "acos",
    "add",
    "addcdiv",
    "addcmul",
    "arccos",
    "arcsin",
    "arctan",
    "asin",
    "atan",
    "atan2",
    "bitwise_and",
    "bitwise_left_shift",
    "bitwise_not",
    "bitwise_or",
    "bitwise_right_shift",
    "bitwise_xor",
    "can_cast",
    "ceil",
    "clamp",
    "clip",
    "clone",
    "cos",
    "cosh",
    "div",
    "divide",
    "eq",
    "erf",
    "erfinv",
    "exp",
    "exp2",
    "expm1",
    "fix",
    "floor",
    "floor_divide",
    "fmax",
    "fmin",
    "fmod",
    "ge",
    "gelu",
    "greater",
    "greater_equal",
    "gt",
    "isfinite",
    "isinf",
    "isnan",
    "le",
    "lerp",
    "less",
    "less_equal",
    "log",
    "log10",
    "log1p",
    "log2",
    "logical_and",
    "logical_not",
    "logical_or",
    "logical_xor",
    "lt",
    "maximum",
    "minimum",
    "mul",
    "multiply",
    "nan_to_num",
    "ne",
    "neg",
    "negative",
    "not_equal",
    "pow",
    "reciprocal",
    "relu",
    "remainder",
    "result_type",
    "round",
    "rsqrt",
    "sigmoid",
    "sign",
    "silu",
    "sin",
    "sinh",
    "softplus",
    "sqrt",
    "square",
    "sub",
    "subtract",
    "tan",
    "tanh",
    "true_divide",
    "trunc",
]


# ---------------------------------------------------------------- type promotion
def _promotion_item(x):
    if isinstance(x, Tensor):
        return (x.dtype, x.ndim)
    if isinstance(x, np.generic):
        x = x.item()
    if isinstance(x, (builtins.bool, builtins.int, builtins.float)):
        return (
            builtins.bool
            if isinstance(x, builtins.bool)
            else builtins.int
            if isinstance(x, builtins.int)
            else builtins.float
        )
    raise DTypeError(f"result_type expects Tensors or Python numbers, got {type(x).__name__}")


def result_type(tensor, other) -> D.DType:
    """The dtype torch's promotion gives an arithmetic op on ``tensor`` and ``other`` (``torch.result_type``).

    Dimensioned tensors outrank 0-d tensors, which outrank Python scalars, within the same category
    (bool < integer < floating); a higher category always wins.

    Args:
        tensor: a Tensor or Python number.
        other: a Tensor or Python number.
    Returns:
        A lazyflow dtype.
    Raises:
        DTypeError: an operand that is neither.
    >>> lf.result_type(lf.tensor([1, 2], dtype=lf.int8), 2.5)
    lazyflow.float32
    """
    return D.result_type(_promotion_item(tensor), _promotion_item(other))


def can_cast(from_: D.DType, to: D.DType) -> bool:
    """Whether torch allows an in-place result of dtype ``from_`` to be stored into a ``to`` tensor
    (``torch.can_cast``): never floating into integer/bool, nor integer into bool."""
    from_, to = D.to_dtype(from_), D.to_dtype(to)
    if from_.is_complex:
        return to.is_complex
    if from_.is_floating_point:
        return to.is_inexact
    if from_ is not D.bool_:
        return to is not D.bool_
    return True


# ---------------------------------------------------------------- elementwise
_UNARY_DOC = {
    "exp": "e to the power of each element",
    "log": "natural logarithm",
    "log1p": "``log(1 + x)``",
    "expm1": "``exp(x) - 1``",
    "sqrt": "square root",
    "rsqrt": "``1 / sqrt(x)``",
    "sin": "sine",
    "cos": "cosine",
    "tan": "tangent",
    "tanh": "hyperbolic tangent",
    "sigmoid": "logistic sigmoid",
    "erf": "the error function",
    "erfinv": "inverse error function",
    "log2": "base-2 logarithm",
    "log10": "base-10 logarithm",
    "reciprocal": "``1 / x``",
    "silu": "``x * sigmoid(x)``",
    "asin": "arcsine",
    "acos": "arccosine",
    "atan": "arctangent",
    "sinh": "hyperbolic sine",
    "cosh": "hyperbolic cosine",
    "exp2": "``2 ** x``",
    "neg": "``-x``",
    "abs": "absolute value",
    "sign": "-1, 0 or 1 by sign",
    "square": "``x * x``",
    "relu": "``max(x, 0)``",
    "floor": "round down",
    "ceil": "round up",
    "trunc": "round towards zero",
    "isnan": "whether each element is NaN (bool)",
    "isinf": "whether each element is +-inf (bool)",
    "isfinite": "whether each element is finite (bool)",
    "logical_not": "``not x`` (bool)",
    "bitwise_not": "bitwise ``~x`` of an integer or bool tensor",
    "logsigmoid": "``log(sigmoid(x))``, computed stably",
}


def _unary(name):
    o = R[name]
    floating = o.dtypes == "float"

    def f(input: Tensor) -> Tensor:
        return state.interp.apply(o, (input,), ())

    f.__name__ = f.__qualname__ = name
    f.__doc__ = (
        f"Elementwise {_UNARY_DOC[name]} (``torch.{name}``).\n\n"
        f"Args:\n    input: a tensor{' (integer/bool inputs compute in the default float dtype)' if floating else ''}."
        f"\nReturns:\n    A new tensor of the same shape."
        f"\nRaises:\n    DTypeError: a dtype the function is not defined for.\n"
    )
    return f


exp = _unary("exp")
log = _unary("log")
log1p = _unary("log1p")
expm1 = _unary("expm1")
sqrt = _unary("sqrt")
rsqrt = _unary("rsqrt")
sin = _unary("sin")
cos = _unary("cos")
tan = _unary("tan")
tanh = _unary("tanh")
sigmoid = _unary("sigmoid")
erf = _unary("erf")
erfinv = _unary("erfinv")
log2 = _unary("log2")
log10 = _unary("log10")
reciprocal = _unary("reciprocal")
silu = _unary("silu")
asin = _unary("asin")
acos = _unary("acos")
atan = _unary("atan")
sinh = _unary("sinh")
cosh = _unary("cosh")
exp2 = _unary("exp2")
neg = _unary("neg")
abs = _unary("abs")
sign = _unary("sign")
square = _unary("square")
relu = _unary("relu")
floor = _unary("floor")
ceil = _unary("ceil")
trunc = _unary("trunc")
isnan = _unary("isnan")
isinf = _unary("isinf")
isfinite = _unary("isfinite")
logical_not = _unary("logical_not")
bitwise_not = _unary("bitwise_not")
logsigmoid = _unary("logsigmoid")
_UNARY = list(_UNARY_DOC)
negative = neg
absolute = abs
arcsin, arccos, arctan = asin, acos, atan
fix = trunc


def round(input: Tensor, *, decimals: int = 0) -> Tensor:
    """Round to ``decimals`` decimal places, halves to even (like torch).

    Args:
        input: the tensor.
        decimals: number of decimal places (negative rounds to tens, hundreds...).
    Returns:
        A tensor of input's dtype.
    """
    return _apply(R["round"], (input,), (builtins.int(decimals),))


def gelu(input: Tensor, approximate: str = "none") -> Tensor:
    """GELU ``x * Phi(x)``, exact (``"none"``) or with the tanh approximation (``"tanh"``).

    Raises:
        OpError: ``approximate`` is neither ``"none"`` nor ``"tanh"``.
    """
    if approximate not in ("none", "tanh"):
        raise OpError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    return _apply(R["gelu"], (input,), (approximate,))


def softplus(input: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    """``log(1 + exp(beta * x)) / beta``, and ``x`` itself where ``beta * x > threshold``."""
    return _apply(R["softplus"], (input,), (builtins.float(beta), builtins.float(threshold)))


def leaky_relu(input: Tensor, negative_slope: float = 0.01) -> Tensor:
    """``x`` where ``x >= 0``, else ``negative_slope * x``."""
    return _apply(R["leaky_relu"], (input,), (builtins.float(negative_slope),))


def elu(input: Tensor, alpha: float = 1.0) -> Tensor:
    """``x`` where ``x > 0``, else ``alpha * (exp(x) - 1)``."""
    return _apply(R["elu"], (input,), (builtins.float(alpha),))


def hardtanh(input: Tensor, min_val: float = -1.0, max_val: float = 1.0) -> Tensor:
    """``input`` clamped into ``[min_val, max_val]``."""
    return _apply(R["hardtanh"], (input,), (builtins.float(min_val), builtins.float(max_val)))


def nan_to_num(input: Tensor, nan: float = 0.0, posinf: float | None = None, neginf: float | None = None) -> Tensor:
    """NaN, +inf and -inf replaced by ``nan``, ``posinf`` and ``neginf`` (default: the dtype's extremes)."""
    return _apply(R["nan_to_num"], (input,), (nan, posinf, neginf))


_BINARY_DOC = {
    "mul": "``input * other``",
    "floor_divide": "``input // other`` (rounds towards -inf, like Python)",
    "remainder": "Python-style modulus ``input % other`` (sign of ``other``)",
    "fmod": "C-style remainder (sign of ``input``)",
    "pow": "``input ** other``",
    "atan2": "the angle of the point ``(other, input)``",
    "maximum": "elementwise maximum (NaN propagates)",
    "minimum": "elementwise minimum (NaN propagates)",
    "fmax": "elementwise maximum ignoring NaN",
    "fmin": "elementwise minimum ignoring NaN",
    "eq": "``input == other`` (bool)",
    "ne": "``input != other`` (bool)",
    "lt": "``input < other`` (bool)",
    "le": "``input <= other`` (bool)",
    "gt": "``input > other`` (bool)",
    "ge": "``input >= other`` (bool)",
    "logical_and": "``input and other`` on truth values (bool)",
    "logical_or": "``input or other`` on truth values (bool)",
    "logical_xor": "``input xor other`` on truth values (bool)",
    "bitwise_and": "bitwise ``&`` (integer/bool)",
    "bitwise_or": "bitwise ``|`` (integer/bool)",
    "bitwise_xor": "bitwise ``^`` (integer/bool)",
    "bitwise_left_shift": "``input << other`` (integers)",
    "bitwise_right_shift": "``input >> other`` (integers)",
}


def _binary(name):
    o = R[name]

    def f(input, other) -> Tensor:
        return state.interp.apply(o, (input, other), ())

    f.__name__ = f.__qualname__ = name
    f.__doc__ = (
        f"Elementwise {_BINARY_DOC[name]} (``torch.{name}``), broadcasting, with torch's type promotion.\n\n"
        "Args:\n    input: a tensor or Python scalar.\n    other: a tensor or Python scalar.\n"
        "Returns:\n    A tensor of the broadcast shape.\n"
        "Raises:\n    ShapeError: shapes that do not broadcast.\n    DTypeError: a dtype the op is not defined for.\n"
    )
    return f


mul = _binary("mul")
floor_divide = _binary("floor_divide")
remainder = _binary("remainder")
fmod = _binary("fmod")
atan2 = _binary("atan2")
maximum = _binary("maximum")
minimum = _binary("minimum")
fmax = _binary("fmax")
fmin = _binary("fmin")
eq = _binary("eq")
ne = _binary("ne")
lt = _binary("lt")
le = _binary("le")
gt = _binary("gt")
ge = _binary("ge")
logical_and = _binary("logical_and")
logical_or = _binary("logical_or")
logical_xor = _binary("logical_xor")
bitwise_and = _binary("bitwise_and")
bitwise_or = _binary("bitwise_or")
bitwise_xor = _binary("bitwise_xor")
bitwise_left_shift = _binary("bitwise_left_shift")
bitwise_right_shift = _binary("bitwise_right_shift")
multiply = mul
greater, greater_equal, less, less_equal, not_equal = gt, ge, lt, le, ne

_ADD, _SUB, _MUL, _POW = R["add"], R["sub"], R["mul"], R["pow"]


def _check_int_power(input, exponent) -> None:
    """torch refuses an integer (or bool) tensor to a negative integer scalar power: the result would be 0 or +-1."""
    if (
        isinstance(exponent, (builtins.int, np.integer))
        and exponent < 0
        and isinstance(input, Tensor)
        and not input._meta[1].is_inexact
    ):
        e = builtins.int(exponent)
        raise DTypeError(
            f"Integers to negative integer powers are not allowed (a {input.dtype.name} tensor to the "
            f"power {e}); use a floating base (x.float() ** {e}) or exponent ({builtins.float(e)})"
        )


def pow(input, exponent) -> Tensor:
    """Elementwise ``input ** exponent`` (``torch.pow``), broadcasting, with torch's type promotion.

    Args:
        input: a tensor or Python scalar (the base).
        exponent: a tensor or Python scalar.
    Returns:
        A tensor of the broadcast shape.
    Raises:
        ShapeError: shapes that do not broadcast.
        DTypeError: a dtype the op is not defined for, or an integer tensor to a negative integer scalar power
            (torch: RuntimeError "Integers to negative integer powers are not allowed").
    """
    _check_int_power(input, exponent)
    return state.interp.apply(_POW, (input, exponent), ())


def add(input, other, *, alpha=1) -> Tensor:
    """``input + alpha * other``, broadcasting, with torch's type promotion.

    Args:
        input: a tensor or Python scalar.
        other: a tensor or Python scalar.
        alpha: multiplier of ``other``.
    Returns:
        A tensor of the broadcast shape and promoted dtype.
    Raises:
        ShapeError: shapes that do not broadcast.
    >>> lf.add(lf.tensor([1, 2]), 1.5)
    tensor([2.5000, 3.5000])
    """
    if alpha != 1:
        other = other * alpha
    return state.interp.apply(_ADD, (input, other), ())


def _is_bool(x) -> bool:
    return isinstance(x, builtins.bool) or (isinstance(x, Tensor) and x.dtype is D.bool_)


def sub(input, other, *, alpha=1) -> Tensor:
    """``input - alpha * other`` (same arguments as :func:`add`).

    Raises:
        DTypeError: a bool operand (torch refuses; use ``logical_xor`` or ``~``).
        ShapeError: shapes that do not broadcast.
    """
    if _is_bool(input) or _is_bool(other):
        raise DTypeError(
            "sub: subtraction with a bool operand is not supported; use logical_xor or ~ "
            f"(got {_kind(input)} - {_kind(other)})"
        )
    if alpha != 1:
        other = other * alpha
    return state.interp.apply(_SUB, (input, other), ())


def _kind(x) -> str:
    return f"Tensor({x.dtype.name}, shape={list(x.shape)})" if isinstance(x, Tensor) else repr(x)


subtract = sub


def div(input, other, *, rounding_mode: str | None = None) -> Tensor:
    """``input / other``: true division (always floating), or ``rounding_mode="trunc"`` / ``"floor"``.

    Raises:
        OpError: an unknown ``rounding_mode``.
        ShapeError: shapes that do not broadcast.
    """
    if rounding_mode is None:
        return _apply(R["div"], (input, other))
    if rounding_mode == "trunc":
        return _apply(R["div_trunc"], (input, other))
    if rounding_mode == "floor":
        return _apply(R["floor_divide"], (input, other))
    raise OpError(f"div expected rounding_mode to be one of None, 'trunc', or 'floor' but found {rounding_mode!r}")


divide = div


def true_divide(input, other) -> Tensor:
    """``input / other``, always floating (:func:`div` without a rounding mode)."""
    return _apply(R["div"], (input, other))


def clamp(input: Tensor, min=None, max=None) -> Tensor:
    """Clamp into ``[min, max]``; either bound may be None, a scalar or a tensor (broadcast).

    Raises:
        OpError: both bounds are None.
    """
    if min is None and max is None:
        raise OpError("clamp: at least one of 'min' or 'max' must not be None")
    return _apply(R["clamp"], (input, min, max))


clip = clamp


def lerp(input, end, weight) -> Tensor:
    """``input + weight * (end - input)`` (``weight`` a scalar or tensor)."""
    return _apply(R["lerp"], (input, end, weight))


def addcmul(input, tensor1, tensor2, *, value=1) -> Tensor:
    """``input + value * tensor1 * tensor2``."""
    return _apply(R["addcmul"], (input, tensor1, tensor2), (value,))


def addcdiv(input, tensor1, tensor2, *, value=1) -> Tensor:
    """``input + value * tensor1 / tensor2``."""
    return _apply(R["addcdiv"], (input, tensor1, tensor2), (value,))


def cast(input: Tensor, dtype) -> Tensor:
    """``input`` converted to ``dtype`` (differentiable between floating types); see ``Tensor.to``."""
    d = D.to_dtype(dtype)
    d.to_jax()
    return _apply(R["cast"], (input,), (d,))


def clone(input: Tensor, *, memory_format=None) -> Tensor:
    """A copy with its own buffer; gradients flow back to ``input`` (``memory_format`` is checked as torch checks
    it and changes no value: lazyflow has no strides)."""
    check_memory_format(memory_format, input.ndim, "clone()")
    return _apply(R["copy"], (input,))
