"""In-place op functions (``add_``, ``copy_``, ``uniform_``...): each rebinds its target through the
active interpreter's in-place protocol (donating the buffer when the tensor owns it alone)."""

from __future__ import annotations

import builtins
import math

import numpy as np

from .. import _sample
from .._core import dtypes as D
from .._core.context import state
from .._core.errors import DTypeError, OpError, ShapeError
from .._creation import _gen, bernoulli, full, rand
from .._ingress import check_fits
from .._tensor import Tensor
from ..ops.random import full_range
from ..ops.table import REGISTRY as R
from ._common import _inplace, _t
from .elementwise import _ADD, _MUL, _POW, _SUB, _check_int_power, _is_bool, _kind, log1p
from .indexing import _check_mask, _index_add_checks, _scatter
from .shape import broadcast_shapes, expand

__all__ = [
    "clamp_",
    "clip_",
    "fill_",
    "zero_",
]


# ---------------------------------------------------------------- in-place
def _ip(name):
    o = R[name]

    def f(self: Tensor, *args) -> Tensor:
        return state.interp.apply_inplace(o, self, (self, *args), ())

    f.__name__ = f.__qualname__ = name + "_"
    f.__doc__ = (
        f"In-place :func:`{name}`: stores the result in ``self`` and returns it.\n\n"
        "Raises:\n    ShapeError: the result would not have self's shape (no broadcasting of self).\n"
        "    DTypeError: the result's dtype cannot be cast to self's (e.g. float into int).\n"
        "    AutogradError: self is a leaf that requires grad (outside ``lf.no_grad()``).\n"
    )
    return f


def add_(self: Tensor, other, *, alpha=1) -> Tensor:
    """In-place :func:`add` (``self += alpha * other``); returns ``self``.

    Raises:
        ShapeError: ``other`` does not broadcast to self's shape.
        DTypeError: a floating result for an integer ``self``.
        AutogradError: self is a leaf that requires grad.
    """
    if alpha != 1:
        other = other * alpha
    return state.interp.apply_inplace(_ADD, self, (self, other), ())


def sub_(self: Tensor, other, *, alpha=1) -> Tensor:
    """In-place :func:`sub` (``self -= alpha * other``); errors as :func:`add_` and :func:`sub`."""
    if _is_bool(self) or _is_bool(other):
        raise DTypeError(f"sub_: subtraction with a bool operand is not supported (got {_kind(self)} - {_kind(other)})")
    if alpha != 1:
        other = other * alpha
    return state.interp.apply_inplace(_SUB, self, (self, other), ())


def mul_(self: Tensor, other) -> Tensor:
    """In-place :func:`mul`; errors as :func:`add_`."""
    return state.interp.apply_inplace(_MUL, self, (self, other), ())


def pow_(self: Tensor, exponent) -> Tensor:
    """In-place :func:`pow`; errors as :func:`add_` and :func:`pow`."""
    _check_int_power(self, exponent)
    return state.interp.apply_inplace(_POW, self, (self, exponent), ())


_DIV_OPS = {None: R["div"], "trunc": R["div_trunc"], "floor": R["floor_divide"]}


def div_(self: Tensor, other, *, rounding_mode: str | None = None) -> Tensor:
    """In-place :func:`div`; true division into an integer tensor raises DTypeError, like torch."""
    o = _DIV_OPS.get(rounding_mode)
    if o is None:
        raise OpError(f"div_ expected rounding_mode to be one of None, 'trunc', or 'floor' but found {rounding_mode!r}")
    return _inplace(o, self, (self, other))


def zero_(input: Tensor) -> Tensor:
    """Fill ``input`` with zeros in place; returns ``input``."""
    return fill_(input, 0)


def fill_(input: Tensor, value) -> Tensor:
    """Fill ``input`` with ``value`` (a scalar or 0-d tensor) in place; returns ``input``.

    Raises:
        ShapeError: a value tensor with dimensions.
    """
    if isinstance(value, Tensor):
        if value.ndim != 0:
            raise ShapeError(f"fill_ only supports a 0-dimension value tensor, got shape {list(value.shape)}")
        return copy_(input, value)
    if value.__class__ in (builtins.int, builtins.float) and not input._meta[1].is_inexact:
        check_fits(value, input._meta[1], "fill_()")
    return _inplace(_COPY_INTO, input, (input, value))


def copy_(self: Tensor, src, non_blocking: bool = False) -> Tensor:
    """Copy ``src`` (broadcast to self's shape, cast to self's dtype) into ``self``; returns ``self``.

    Raises:
        ShapeError: ``src`` does not broadcast to self's shape.
    """
    src = _t(src)
    if not _broadcasts(src.shape, self.shape) or broadcast_shapes(src.shape, self.shape) != self.shape:
        raise ShapeError(f"copy_: the source of shape {list(src.shape)} cannot be broadcast to {list(self.shape)}")
    return _inplace(_COPY_INTO, self, (self, src))


def _broadcasts(a, b) -> bool:
    try:
        np.broadcast_shapes(a, b)
    except ValueError:
        return False
    return True


_COPY_INTO = R["copy_into"]


def clamp_(input: Tensor, min=None, max=None) -> Tensor:
    """In-place :func:`clamp`; returns ``input``.

    Raises:
        OpError: both bounds are None.
    """
    if min is None and max is None:
        raise OpError("clamp_: at least one of 'min' or 'max' must not be None")
    return _inplace(R["clamp"], input, (input, min, max))


clip_ = clamp_


def masked_fill_(self: Tensor, mask, value) -> Tensor:
    """In-place :func:`masked_fill`; returns ``self``."""
    mask = _check_mask(mask, "masked_fill_")
    if isinstance(value, Tensor) and value.ndim != 0:
        raise ShapeError(f"masked_fill_ only supports a 0-dimensional value tensor, got shape {list(value.shape)}")
    return _inplace(R["masked_fill"], self, (self, mask, value))


def index_add_(self: Tensor, dim: int, index, source, *, alpha=1) -> Tensor:
    """In-place :func:`index_add`: ``self[..., index[k], ...] += alpha * source[..., k, ...]``; returns ``self``."""
    d, index, source = _index_add_checks("index_add_", self, dim, index, source)
    return _inplace(R["index_add"], self, (self, index, source), (d, alpha))


def scatter_(self: Tensor, dim: int, index, src=None, *, value=None, reduce=None) -> Tensor:
    """In-place :func:`scatter`; returns ``self``."""
    if src is None:
        src = value
    d, index = _scatter("scatter_", self, dim, index, src, reduce)
    return _inplace(R["scatter"], self, (self, index, src), (d, reduce))


def scatter_add_(self: Tensor, dim: int, index, src) -> Tensor:
    """In-place :func:`scatter_add`; returns ``self``."""
    return scatter_(self, dim, index, src, reduce="add")


def uniform_(self: Tensor, a: float = 0.0, b: float = 1.0, *, generator=None) -> Tensor:
    """Fill ``self`` with samples uniform on ``[a, b)`` in place (from ``generator`` or the default one)."""
    draw = _gen(generator)._next()
    if _sample.eager(self, self.numel()):  # no kernel per shape (see lazyflow/_sample.py)
        return _sample.write(self, _sample.uniform(draw, self.shape, self.dtype, a, b), _UNIFORM_INTO)
    return _inplace(_UNIFORM_INTO, self, (self, *draw, builtins.float(a), builtins.float(b)))


def normal_(self: Tensor, mean: float = 0.0, std: float = 1.0, *, generator=None) -> Tensor:
    """Fill ``self`` with normal samples of ``mean`` and ``std`` in place.

    Raises:
        OpError: a negative ``std``.
    """
    if std < 0:
        raise OpError(f"normal_ expects std >= 0.0, got std={std}")
    return _normal_within(self, mean, std, None, generator=generator)


def _normal_within(self: Tensor, mean: float, std: float, bounds, *, generator=None) -> Tensor:
    """Fill ``self`` with N(mean, std**2) samples in place, truncated to ``bounds = (a, b)`` unless None (inverse-CDF
    sampling of the uniforms between the bounds' CDF values, one pass; clamped to the bounds against rounding)."""
    d = self.dtype
    ft = d.to_jax() if d.is_floating_point else D.get_default_dtype().to_jax()
    if bounds is None:
        ulo, uhi = full_range(ft)
        a, b = -math.inf, math.inf
    else:
        a, b = bounds
        cdf = lambda x: (1.0 + math.erf(x / math.sqrt(2.0))) / 2.0
        ulo, uhi = 2 * cdf((a - mean) / std) - 1, 2 * cdf((b - mean) / std) - 1
    params = tuple(builtins.float(v) for v in (mean, std, ulo, uhi, a, b))
    draw = _gen(generator)._next()
    if d.is_floating_point and _sample.eager(self, self.numel()):
        return _sample.write(self, _sample.normal(draw, self.shape, d, *params), _NORMAL_INTO)
    return _inplace(_NORMAL_INTO, self, (self, *draw, *params))


def bernoulli_(self: Tensor, p=0.5, *, generator=None) -> Tensor:
    """Fill ``self`` with 0/1 samples, 1 with probability ``p`` (a scalar or a tensor broadcast to self).

    Raises:
        OpError: a scalar ``p`` outside ``[0, 1]``.
    """
    if not isinstance(p, Tensor):
        if not 0.0 <= p <= 1.0:
            raise OpError(f"bernoulli_ expects p to be in [0, 1], got p={p}")
        probs = full(self.shape, builtins.float(p), dtype=self.dtype if self.dtype.is_floating_point else None)
    else:
        probs = expand(p if p.dtype.is_floating_point else p.to(D.get_default_dtype()), *self.shape)
    return copy_(self, bernoulli(probs, generator=generator))


_UNIFORM_INTO = R["uniform_into"]
_NORMAL_INTO = R["normal_into"]


def exponential_(self: Tensor, lambd: float = 1.0, *, generator=None) -> Tensor:
    """Fill ``self`` with exponential samples of rate ``lambd`` in place."""
    u = rand(self.shape, generator=generator, dtype=self.dtype)
    with _NoGrad():
        return copy_(self, -log1p(-u) / lambd)


class _NoGrad:
    def __enter__(self):
        self.p = state.grad_enabled
        state.grad_enabled = False

    def __exit__(self, *e):
        state.grad_enabled = self.p


def zero_grads(tensors, set_to_none: bool = True) -> None:
    """Reset the ``.grad`` of each tensor, as ``torch.optim.Optimizer.zero_grad`` and ``Module.zero_grad`` do: to None
    (default), or to zeros in place (a gradient that has a ``grad_fn`` is detached first, the others stop requiring
    grad)."""
    for p in tensors:
        g = p.grad
        if g is None:
            continue
        if set_to_none:
            p.grad = None
            continue
        if g.grad_fn is not None:
            g.detach_()
        else:
            g.requires_grad_(False)
        zero_(g)
