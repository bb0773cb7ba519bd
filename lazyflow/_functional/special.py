"""The rest of torch's elementwise math: inverse hyperbolics, the gamma family, ``sinc``, ``xlogy``, ``hypot``,
``copysign``, ``logaddexp``, ``gcd``/``lcm``, bit-level queries, and their in-place ``_`` forms.

Primitives live in ``lazyflow/ops/special.py``; ``deg2rad``, ``frac``, ``logit``, ``mvlgamma``, ``ldexp``,
``float_power``, ``isposinf``... are composites written once on the functions below.
"""

from __future__ import annotations

import builtins
import collections
import math
from collections.abc import Callable

from .._core import dtypes as D
from .._core.context import state
from .._core.errors import DTypeError, ShapeError, ValueRangeError
from .._creation import full
from .._dispatch import snapshot
from .._tensor import Tensor
from ..ops.table import REGISTRY as R
from ._common import _apply, _inplace, _t
from .elementwise import atan2, can_cast, clamp, isinf, log, mul, pow, sub, trunc
from .inplace import _ip, copy_

__all__ = [
    "acosh",
    "arccosh",
    "arcsinh",
    "arctan2",
    "arctanh",
    "asinh",
    "atanh",
    "copysign",
    "deg2rad",
    "digamma",
    "erfc",
    "float_power",
    "frac",
    "frexp",
    "gcd",
    "heaviside",
    "hypot",
    "i0",
    "igamma",
    "igammac",
    "isneginf",
    "isposinf",
    "isreal",
    "lcm",
    "ldexp",
    "lgamma",
    "logaddexp",
    "logaddexp2",
    "logit",
    "mvlgamma",
    "nextafter",
    "polygamma",
    "positive",
    "rad2deg",
    "sgn",
    "signbit",
    "sinc",
    "xlogy",
]


def _unary(name: str, what: str) -> Callable:
    o = R[name]

    def f(input: Tensor) -> Tensor:
        return state.interp.apply(o, (input,), ())

    f.__name__ = f.__qualname__ = name
    f.__doc__ = (
        f"Elementwise {what} (``torch.{name}``).\n\nArgs:\n    input: a tensor (integer/bool inputs compute in the "
        "default float dtype).\nReturns:\n    A new tensor of the same shape.\n"
    )
    return f


def _binary(name: str, what: str) -> Callable:
    o = R[name]

    def f(input, other) -> Tensor:
        return state.interp.apply(o, (input, other), ())

    f.__name__ = f.__qualname__ = name
    f.__doc__ = (
        f"Elementwise {what} (``torch.{name}``), broadcasting, with torch's type promotion.\n\n"
        "Args:\n    input: a tensor or Python scalar.\n    other: a tensor or Python scalar.\n"
        "Returns:\n    A tensor of the broadcast shape.\n"
        "Raises:\n    ShapeError: shapes that do not broadcast.\n    DTypeError: a dtype the op is not defined for.\n"
    )
    return f


acosh = _unary("acosh", "inverse hyperbolic cosine")
asinh = _unary("asinh", "inverse hyperbolic sine")
atanh = _unary("atanh", "inverse hyperbolic tangent")
erfc = _unary("erfc", "complementary error function ``1 - erf(x)``")
lgamma = _unary("lgamma", "``log|Gamma(x)|``")
digamma = _unary("digamma", "digamma function ``d/dx log Gamma(x)``")
i0 = _unary("i0", "modified Bessel function of the first kind, order 0")
sinc = _unary("sinc", "normalized sinc ``sin(pi x) / (pi x)`` (1 at 0)")
arccosh, arcsinh, arctanh, arctan2 = acosh, asinh, atanh, atan2

xlogy = _binary("xlogy", "``input * log(other)``, 0 where ``input == 0`` (unless ``other`` is NaN)")
hypot = _binary("hypot", "``sqrt(input**2 + other**2)``")
copysign = _binary("copysign", "magnitude of ``input`` with the sign of ``other`` (floating result)")
logaddexp = _binary("logaddexp", "``log(exp(input) + exp(other))``, computed stably")
logaddexp2 = _binary("logaddexp2", "``log2(2**input + 2**other)``, computed stably")
nextafter = _binary("nextafter", "next floating-point value after ``input`` towards ``other``")
gcd = _binary("gcd", "greatest common divisor (integers)")
lcm = _binary("lcm", "least common multiple (integers)")
igamma = _binary("igamma", "regularized lower incomplete gamma function ``P(input, other)``")
igammac = _binary("igammac", "regularized upper incomplete gamma function ``Q(input, other)``")


def heaviside(input: Tensor, values) -> Tensor:
    """Heaviside step: 0 where ``input < 0``, ``values`` where ``input == 0``, 1 where ``input > 0``.

    Raises:
        DTypeError: ``input`` and ``values`` of different dtypes (as torch).
    """
    values = _t(values)
    if input.dtype is not values.dtype:
        raise DTypeError(
            f"heaviside is not implemented for tensors with different dtypes ({input.dtype} and {values.dtype}); "
            "convert values with .to(input.dtype)"
        )
    return _apply(R["heaviside"], (input, values))


def polygamma(n: int, input: Tensor) -> Tensor:
    """The ``n``-th derivative of the digamma function (``torch.polygamma(n, input)``; ``Tensor.polygamma(n)``).

    Raises:
        ValueRangeError: a negative ``n``.
    """
    if not isinstance(n, builtins.int) or n < 0:
        raise ValueRangeError(f"polygamma(n, x) does not support negative n (got n={n!r}); n must be an int >= 0")
    return _apply(R["polygamma"], (input,), (n,))


def signbit(input: Tensor) -> Tensor:
    """Whether each element's sign bit is set (``-0.0`` and negative NaN included); bool."""
    return _apply(R["signbit"], (input,))


_Frexp = collections.namedtuple("frexp", ["mantissa", "exponent"])


def frexp(input: Tensor):
    """Decompose into ``mantissa * 2**exponent`` with ``|mantissa|`` in ``[0.5, 1)``; exponent is int32.

    Raises:
        DTypeError: a non-floating input (as torch).
    """
    if not input.dtype.is_floating_point:
        raise DTypeError(f"torch.frexp() only supports floating-point dtypes, got {input.dtype}; convert with .float()")
    m, e = _apply(R["frexp"], (input,))
    return _Frexp(m, e)


def _need_float(name: str, input: Tensor) -> None:
    if not input.dtype.is_floating_point:
        raise DTypeError(f"{name} is only defined for floating tensors, got {input.dtype}; convert with .float()")


def deg2rad(input: Tensor) -> Tensor:
    """Degrees to radians (integers compute in the default float dtype).

    Raises:
        DTypeError: a bool input.
    """
    if input.dtype is D.bool_:
        raise DTypeError("deg2rad is not supported for bool tensors; convert with .float()")
    return mul(input, math.pi / 180.0)


def rad2deg(input: Tensor) -> Tensor:
    """Radians to degrees (integers compute in the default float dtype).

    Raises:
        DTypeError: a bool input.
    """
    if input.dtype is D.bool_:
        raise DTypeError("rad2deg is not supported for bool tensors; convert with .float()")
    return mul(input, 180.0 / math.pi)


def frac(input: Tensor) -> Tensor:
    """Fractional part ``input - trunc(input)`` (sign of ``input``).

    Raises:
        DTypeError: a non-floating input (as torch).
    """
    _need_float("frac", input)
    return sub(input, trunc(input))


def logit(input: Tensor, eps: float | None = None) -> Tensor:
    """``log(p / (1 - p))``, with ``p`` clamped into ``[eps, 1 - eps]`` when ``eps`` is given (gradient 0 outside)."""
    x = input if input.dtype.is_floating_point else input.to(D.get_default_dtype())
    if eps is not None:
        x = clamp(x, eps, 1.0 - eps)
    return log(x / (1.0 - x))


def mvlgamma(input: Tensor, p: int) -> Tensor:
    """Multivariate log-gamma of dimension ``p``: ``sum_j lgamma(x - j/2) + p(p-1)/4 log(pi)``.

    Raises:
        ValueRangeError: ``p < 1``.
    """
    if not isinstance(p, builtins.int) or p < 1:
        raise ValueRangeError(f"mvlgamma: p has to be an int greater than or equal to 1, got {p!r}")
    x = input if input.dtype.is_floating_point else input.to(D.get_default_dtype())
    out = lgamma(x)
    for j in range(1, p):
        out = out + lgamma(x - j / 2.0)
    return out + p * (p - 1) / 4.0 * math.log(math.pi)


def ldexp(input, other) -> Tensor:
    """``input * 2**other`` (a floating result)."""
    return mul(input, pow(2.0, other))


def float_power(input, exponent) -> Tensor:
    """``input ** exponent`` computed in float64 (both operands are converted first), like torch."""
    a = input.to(D.float64) if isinstance(input, Tensor) else builtins.float(input)
    b = exponent.to(D.float64) if isinstance(exponent, Tensor) else builtins.float(exponent)
    if not isinstance(a, Tensor) and not isinstance(b, Tensor):
        raise DTypeError("float_power expects at least one Tensor operand, got two Python scalars")
    return pow(a, b)


def sgn(input: Tensor) -> Tensor:
    """``z / |z|`` for complex tensors (0 at 0; the gradient there is 0, as torch); for real tensors the same as
    :func:`sign`."""
    if not isinstance(input, Tensor):
        raise DTypeError(f"sgn(): argument 'input' must be a Tensor, got {type(input).__name__}")
    return _apply(R["sgn"], (input,))


def isposinf(input: Tensor) -> Tensor:
    """Whether each element is +inf (bool)."""
    return isinf(input) & (input > 0)


def isneginf(input: Tensor) -> Tensor:
    """Whether each element is -inf (bool)."""
    return isinf(input) & (input < 0)


def isreal(input: Tensor) -> Tensor:
    """Whether each element has a zero imaginary part: all True for lazyflow's real dtypes (bool)."""
    return full(tuple(input.shape), True, dtype=D.bool_)


def positive(input: Tensor) -> Tensor:
    """``input`` itself (``+x``).

    Raises:
        DTypeError: a bool tensor (as torch).
    """
    if input.dtype is D.bool_:
        raise DTypeError("The `+` operator, on a bool tensor is not supported.")
    return input


# ---------------------------------------------------------------- in-place forms
def _composite_ip(fn: Callable, name: str) -> Callable:
    """In-place form of a composite: compute out of place, check torch's in-place rules, copy into ``self``."""

    def f(self: Tensor, *args, **kw) -> Tensor:
        # computed from a snapshot: the tape must see self's old graph position once self is rebound
        out = fn(snapshot(self), *args, **kw)
        if tuple(out.shape) != tuple(self.shape):
            raise ShapeError(
                f"{name}_: the result of shape {list(out.shape)} does not fit self of shape {list(self.shape)}"
            )
        if not can_cast(out.dtype, self.dtype):
            raise DTypeError(
                f"{name}_: result type {out.dtype} can't be cast to the desired output type {self.dtype}; "
                f"use the out-of-place {name}() instead"
            )
        return copy_(self, out)

    f.__name__ = f.__qualname__ = name + "_"
    f.__doc__ = f"In-place :func:`{name}`: stores the result in ``self`` and returns it."
    return f


def _polygamma_method(self: Tensor, n: int) -> Tensor:
    """:func:`polygamma` as a method: ``self.polygamma(n)`` is ``polygamma(n, self)``."""
    return polygamma(n, self)


def _nan_to_num_(self: Tensor, nan: float = 0.0, posinf: float | None = None, neginf: float | None = None) -> Tensor:
    """In-place :func:`nan_to_num`."""
    return _inplace(R["nan_to_num"], self, (self,), (nan, posinf, neginf))


def _polygamma_(self: Tensor, n: int) -> Tensor:
    """In-place :func:`polygamma` (``self.polygamma_(n)``)."""
    if not isinstance(n, builtins.int) or n < 0:
        raise ValueRangeError(f"polygamma_(n) does not support negative n (got n={n!r})")
    return _inplace(R["polygamma"], self, (self,), (n,))


def _float_power_(self: Tensor, exponent) -> Tensor:
    """In-place :func:`float_power`: ``self`` must be float64 (as torch)."""
    if self.dtype is not D.float64:
        raise DTypeError(
            f"the base given to float_power_ has dtype {self.dtype} but the operation's result requires dtype "
            "float64; convert with .double() first"
        )
    return _composite_ip(float_power, "float_power")(self, exponent)


def _heaviside_(self: Tensor, values) -> Tensor:
    """In-place :func:`heaviside`."""
    return _composite_ip(heaviside, "heaviside")(self, values)


METHOD_ONLY = {
    **{
        n + "_": _ip(n)
        for n in (
            "acosh",
            "asinh",
            "atanh",
            "erfc",
            "lgamma",
            "digamma",
            "i0",
            "sinc",
            "xlogy",
            "hypot",
            "copysign",
            "nextafter",
            "gcd",
            "lcm",
            "igamma",
            "igammac",
        )
    },
    **{
        n + "_": _composite_ip(globals()[n], n)
        for n in ("deg2rad", "rad2deg", "frac", "logit", "mvlgamma", "ldexp", "sgn")
    },
    "polygamma": _polygamma_method,
    "polygamma_": _polygamma_,
    "float_power_": _float_power_,
    "heaviside_": _heaviside_,
    "nan_to_num_": _nan_to_num_,
}
METHOD_ONLY.update(
    arccosh_=METHOD_ONLY["acosh_"],
    arcsinh_=METHOD_ONLY["asinh_"],
    arctanh_=METHOD_ONLY["atanh_"],
    arctan2_=_ip("atan2"),
    greater_=_ip("gt"),
    greater_equal_=_ip("ge"),
    less_=_ip("lt"),
    less_equal_=_ip("le"),
    not_equal_=_ip("ne"),
)
NOT_METHODS = frozenset({"polygamma"})
"""Tensor methods that differ from (or lack) the lf.<name> function: merged in lazyflow/_functional/__init__.py."""
