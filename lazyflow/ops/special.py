"""Special functions and the rest of torch's elementwise math: inverse hyperbolics, gamma family, Bessel ``i0``,
``sinc``, ``xlogy``, ``hypot``, ``copysign``, ``logaddexp``, integer ``gcd``/``lcm`` and the bit-level queries
(``signbit``, ``frexp``, ``nextafter``, ``heaviside``). Backward rules pin torch's convention where autodiff of
the implementation picks another one (``sinc`` at 0, ``copysign`` at 0, ``xlogy`` at x == 0)."""

from __future__ import annotations

import jax.numpy as jnp
import jax.scipy.special as jsp

from .table import op

for _name, _fn in {
    "acosh": jnp.arccosh,
    "asinh": jnp.arcsinh,
    "atanh": jnp.arctanh,
    "erfc": jsp.erfc,
    "lgamma": jsp.gammaln,
}.items():
    op(_name, dtypes="float")(_fn)


def _zero(g):
    return jnp.zeros((), g.dtype)


def _digamma_bwd(xs, out, g):
    # torch: grad * polygamma(1, x), which is 0 at +inf (the zeta series gives NaN there)
    x = xs[0]
    return (jnp.where(jnp.isposinf(x), _zero(g), g * jsp.polygamma(1, x)),)


@op("digamma", dtypes="float", bwd=_digamma_bwd)
def _digamma(x):
    return jsp.digamma(x)


def _i0_bwd(xs, out, g):
    # torch: grad * i1(x); autodiff of i0e(x) * exp(|x|) picks a wrong one-sided slope at 0
    return (g * jsp.i1(xs[0]),)


@op("i0", dtypes="float", bwd=_i0_bwd)
def _i0(x):
    return jsp.i0(x)


def _sinc_bwd(xs, out, g):
    # torch: (cos(pi x) - sinc(x)) / x, and 0 at x == 0 (the limit)
    x = xs[0]
    safe = jnp.where(x == 0, jnp.ones((), x.dtype), x)
    d = (jnp.cos(jnp.pi * safe) - out) / safe
    return (jnp.where(x == 0, _zero(g), g * d),)


@op("sinc", dtypes="float", bwd=_sinc_bwd)
def _sinc(x):
    return jnp.sinc(x)


@op("polygamma", static=("n",), dtypes="float")
def _polygamma(x, *, n):
    if n == 0:
        return jsp.digamma(x)
    return jsp.polygamma(n, x)


def _xlogy_bwd(xs, out, g):
    # torch: d/dx = log(y), but 0 where x == 0 and y <= 0 (log would give -inf/NaN); d/dy = x / y
    x, y = xs
    zero = _zero(g)
    gx = jnp.where((x == 0) & (y <= 0), zero, g * jnp.log(y))
    return gx, g * x / y


@op("xlogy", dtypes="float", bwd=_xlogy_bwd)
def _xlogy(x, y):
    return jnp.where((x == 0) & ~jnp.isnan(y), jnp.zeros((), jnp.result_type(x, y)), x * jnp.log(y))


def _hypot_bwd(xs, out, g):
    # torch: grad * x / hypot (NaN at the origin, 0/0, like torch)
    a, b = xs
    return g * a / out, g * b / out


@op("hypot", dtypes="float", bwd=_hypot_bwd)
def _hypot(a, b):
    return jnp.hypot(a, b)


def _copysign_bwd(xs, out, g):
    # torch: grad * result / self, taken as 0 where self == 0; no gradient to `other`
    a, _ = xs
    safe = jnp.where(a == 0, jnp.ones((), a.dtype), a)
    return jnp.where(a == 0, _zero(g), g * out / safe), None


@op("copysign", dtypes="float", bwd=_copysign_bwd)
def _copysign(a, b):
    return jnp.copysign(a, b)


def _logaddexp_bwd(base):
    # torch: grad / (1 + base**(other - self)) and the mirror image: NaN where both are the same infinity
    def bwd(xs, out, g):
        a, b = xs
        return g / (1 + jnp.power(base, b - a)), g / (1 + jnp.power(base, a - b))

    return bwd


@op("logaddexp", dtypes="float", bwd=_logaddexp_bwd(jnp.e))
def _logaddexp(a, b):
    return jnp.logaddexp(a, b)


@op("logaddexp2", dtypes="float", bwd=_logaddexp_bwd(2.0))
def _logaddexp2(a, b):
    return jnp.logaddexp2(a, b)


@op("nextafter", differentiable=False)
def _nextafter(a, b):
    return jnp.nextafter(a, b)


@op("heaviside", differentiable=False)
def _heaviside(x, values):
    one, zero = jnp.ones((), x.dtype), jnp.zeros((), x.dtype)
    return jnp.where(x == 0, values, jnp.where(x > 0, one, zero)).astype(jnp.result_type(x, values))


for _name, _fn in {"gcd": jnp.gcd, "lcm": jnp.lcm}.items():
    op(_name, dtypes="int_or_bool", differentiable=False)(_fn)


@op("signbit", dtypes="none", differentiable=False)
def _signbit(x):
    if x.dtype == jnp.bool_:
        return jnp.zeros(x.shape, bool)
    return jnp.signbit(x)


@op("frexp", dtypes="none", differentiable=False)
def _frexp(x):
    m, e = jnp.frexp(x)
    return m, e.astype(jnp.int32)


def _igamma_bwd(sign):
    # torch differentiates only in `other`: +-exp((a - 1) log(x) - x - lgamma(a)); the gradient in `input` is not
    # implemented there, and none flows here
    def bwd(xs, out, g):
        a, x = xs
        return None, sign * g * jnp.exp((a - 1) * jnp.log(x) - x - jsp.gammaln(a))

    return bwd


@op("igamma", dtypes="float", bwd=_igamma_bwd(1.0))
def _igamma(a, x):
    return jsp.gammainc(a, x)


@op("igammac", dtypes="float", bwd=_igamma_bwd(-1.0))
def _igammac(a, x):
    return jsp.gammaincc(a, x)


@op("nonzero_static", static=("size", "fill_value"), dtypes="none", differentiable=False)
def _nonzero_static(x, *, size, fill_value):
    idx = jnp.nonzero(x, size=size, fill_value=fill_value)
    return jnp.stack(idx, axis=-1).astype(jnp.int64) if idx else jnp.zeros((size, 0), jnp.int64)
