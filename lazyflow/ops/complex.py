"""Complex-number primitives: parts, conjugate, construction from parts or polar form, angle and sgn.

Gradient rules here are written in JAX's convention (the cotangent of ``z`` is conjugate to torch's ``z.grad``);
the autograd engine converts at every backward call, so ``.grad`` follows torch. ``REAL_ONLY`` marks the ops torch
refuses for complex operands (orderings, rounding, activations defined on the real line)."""

from __future__ import annotations

import builtins

import jax.numpy as jnp
from jax import lax

from .._core import dtypes as D
from .._core.errors import DTypeError
from . import math, search, shape, special
from .table import REGISTRY, is_tensor_desc, op

_MARKED = (math, search, shape, special)  # the modules whose records REAL_ONLY marks: registered before the loop below


@op("real", dtypes="none", linear=True)
def _real(x):
    return jnp.real(x)


@op("imag", dtypes="none", linear=True)
def _imag(x):
    return jnp.imag(x)


@op("conj", dtypes="none", linear=True)
def _conj(x):
    return jnp.conj(x)


@op("view_as_real", dtypes="none", linear=True)
def _view_as_real(x):
    return jnp.stack([jnp.real(x), jnp.imag(x)], axis=-1)


@op("view_as_complex", dtypes="none", linear=True)
def _view_as_complex(x):
    return lax.complex(x[..., 0], x[..., 1])


def _parts_dtypes(name: str):
    """torch.complex/polar: both parts one floating dtype (float32 or float64), no promotion."""

    def rule(descs, statics):
        dts = [d[1] for d in descs if is_tensor_desc(d)]
        if builtins.any(d is not dts[0] for d in dts) or dts[0] not in (D.float32, D.float64):
            raise DTypeError(
                f"{name}: expected both parts to be float32 or float64 tensors of one dtype, got "
                f"{', '.join(d.name for d in dts)}; convert with .float() or .double()"
            )
        return [None] * len(descs)

    return rule


@op("complex", dtypes=_parts_dtypes("complex"), linear=True)
def _complex(re, im):
    re, im = jnp.broadcast_arrays(re, im)
    return lax.complex(re, im)


def _polar_bwd(xs, out, g):
    # torch's polar_backward (g here is the conjugate of torch's grad): d abs = Re(conj(grad) * sgn(out)), which is
    # 0 where abs == 0 (the direction is lost there); d angle = Re(conj(grad) * out * 1j)
    a = jnp.abs(out)
    zero = a == 0
    sgn = jnp.where(zero, jnp.zeros((), out.dtype), out / jnp.where(zero, jnp.ones((), a.dtype), a))
    return jnp.real(g * sgn), jnp.real(g * out * 1j)


@op("polar", dtypes=_parts_dtypes("polar"), bwd=_polar_bwd)
def _polar(r, theta):
    r, theta = jnp.broadcast_arrays(r, theta)
    return lax.complex(r * jnp.cos(theta), r * jnp.sin(theta))


def _angle_bwd(xs, out, g):
    x = xs[0]
    if not jnp.iscomplexobj(x):  # torch: the angle of a real number (0 or pi) has gradient 0
        return (jnp.zeros_like(g),)
    a2 = jnp.real(x * jnp.conj(x))
    safe = jnp.where(a2 == 0, jnp.ones((), a2.dtype), a2)
    # torch: where(z == 0, 0, g * z / |z|^2 * 1j); this is its conjugate (JAX's convention)
    return (jnp.where(a2 == 0, jnp.zeros((), x.dtype), g * jnp.conj(x) / safe * (-1j)),)


@op("angle", dtypes="float", bwd=_angle_bwd)
def _angle(x):
    return jnp.angle(x)


@op("sgn")
def _sgn_op(x):
    """``z / |z|``, 0 at 0 (torch's sgn; for real tensors the sign); autodiff of the safe quotient is torch's
    gradient, 0 at 0."""
    if not jnp.iscomplexobj(x):
        return jnp.where(jnp.isnan(x), jnp.zeros((), x.dtype), jnp.sign(x))
    a = jnp.abs(x)
    zero = a == 0
    return jnp.where(zero, jnp.zeros((), x.dtype), x / jnp.where(zero, jnp.ones((), a.dtype), a))


REAL_ONLY = (
    "lt le gt ge maximum minimum fmax fmin amax amin max_dim min_dim argmax argmin sort topk cummax cummin clamp "
    "relu leaky_relu elu gelu hardtanh softplus logsigmoid floor ceil trunc round sign remainder fmod floor_divide "
    "div_trunc atan2 erf erfc erfinv heaviside copysign hypot nextafter lgamma digamma polygamma i0 histc "
    "searchsorted signbit frexp logaddexp logaddexp2 xlogy"
).split()
for _name in REAL_ONLY:
    REGISTRY[_name].real_only = True
