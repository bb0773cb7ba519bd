"""Creation functions over a range: ``range``, ``logspace``, ``vander``, the window functions (``hann``, ``hamming``,
``blackman``, ``bartlett``, ``kaiser``), ``gradient``; and the in-place random fills ``random_``, ``cauchy_``,
``geometric_``, ``log_normal_`` (Tensor methods, drawn like ``exponential_`` from the generator's stream)."""

from __future__ import annotations

import builtins
import math

import numpy as np

from .._core import dtypes as D
from .._core.errors import DTypeError, NotSupportedError, OpError, ShapeError, ValueRangeError
from .._core.formats import check_layout, check_pin_memory
from .._creation import rand, randint, tensor
from .._tensor import Tensor, _dim
from .elementwise import log1p
from .inplace import _NoGrad, copy_
from .shape import cat, stack

__all__ = [
    "bartlett_window",
    "blackman_window",
    "gradient",
    "hamming_window",
    "hann_window",
    "kaiser_window",
    "logspace",
    "range",
    "vander",
]
NOT_METHODS = frozenset(__all__)


def _float_dtype(dtype, name: str):
    d = D.get_default_dtype() if dtype is None else D.to_dtype(dtype)
    if not d.is_floating_point:
        raise DTypeError(f"{name} expects a floating point dtype, got {d}")
    return d


def range(start=0, end=None, step=1, *, dtype=None, device=None, requires_grad: bool = False, layout=None) -> Tensor:
    """``[start, start + step, ..., end]`` with ``end`` included (deprecated in torch in favour of ``arange``);
    the default float dtype unless ``dtype`` is given.

    Raises:
        ValueRangeError: ``step == 0`` or a step of the wrong sign.
    """
    check_layout(layout, "range()")
    if end is None:
        start, end = 0, start
    if step == 0:
        raise ValueRangeError("range: step must be nonzero")
    if (end - start) * step < 0:
        raise ValueRangeError(
            f"range: upper bound and larger bound inconsistent with step sign (start={start}, end={end}, step={step})"
        )
    n = builtins.int(math.floor((end - start) / step)) + 1
    d = D.get_default_dtype() if dtype is None else D.to_dtype(dtype)
    vals = np.arange(n, dtype=np.float64) * step + start
    return tensor(vals, dtype=d, device=device, requires_grad=requires_grad)


def logspace(
    start, end, steps: int, base: float = 10.0, *, dtype=None, device=None, requires_grad: bool = False, layout=None
) -> Tensor:
    """``base ** linspace(start, end, steps)``.

    Raises:
        ValueRangeError: negative ``steps``.
    """
    check_layout(layout, "logspace()")
    if steps < 0:
        raise ValueRangeError(f"number of steps must be non-negative, got {steps}")
    d = D.get_default_dtype() if dtype is None else D.to_dtype(dtype)
    exps = np.linspace(builtins.float(start), builtins.float(end), steps, dtype=np.float64)
    vals = np.power(builtins.float(base), exps)
    if not d.is_floating_point:
        vals = np.trunc(vals)
    return tensor(vals, dtype=d, device=device, requires_grad=requires_grad)


def vander(x: Tensor, N: int | None = None, increasing: bool = False) -> Tensor:
    """The Vandermonde matrix of a 1-D ``x``: columns ``x**(N-1), ..., x**0`` (``increasing`` reverses them).

    Raises:
        ShapeError: ``x`` not 1-D. ValueRangeError: negative ``N``.
    """
    if x.ndim != 1:
        raise ShapeError(f"x must be a one-dimensional tensor, got shape {list(x.shape)}")
    n = x.shape[0] if N is None else N
    if n < 0:
        raise ValueRangeError(f"N must be non-negative, got {n}")
    xx = x if x.dtype.is_floating_point else x.to(D.int64)
    if n == 0:
        return xx.new_zeros((x.shape[0], 0))
    cols = [xx.new_ones(x.shape)]
    for _ in builtins.range(n - 1):
        cols.append(cols[-1] * xx)
    out = stack(cols, 1)
    return out if increasing else out.flip(1)


def _window(
    name: str, window_length: int, periodic: bool, dtype, fn, device, requires_grad: bool, layout=None
) -> Tensor:
    """A window computed in float64 on the host (``fn(n, M)`` over ``n = 0..M-1``), then converted to ``dtype``."""
    check_layout(layout, f"{name}()")
    if window_length < 0:
        raise ValueRangeError(f"{name} requires non-negative window_length, got window_length={window_length}")
    d = _float_dtype(dtype, name)
    if window_length <= 1:
        out = np.ones(window_length)
    else:
        m = window_length + 1 if periodic else window_length
        out = fn(np.arange(m, dtype=np.float64), m)[:window_length]
    return tensor(out, dtype=d, device=device, requires_grad=requires_grad)


def hann_window(
    window_length: int, periodic: bool = True, *, dtype=None, device=None, requires_grad: bool = False, layout=None
) -> Tensor:
    """The Hann window ``0.5 - 0.5 cos(2 pi n / (N - 1))`` (``periodic``: of length N + 1, last dropped)."""

    def f(n, m):
        return 0.5 - 0.5 * np.cos(2 * np.pi * n / (m - 1))

    return _window("hann_window", window_length, periodic, dtype, f, device, requires_grad, layout)


def hamming_window(
    window_length: int,
    periodic: bool = True,
    alpha: float = 0.54,
    beta: float = 0.46,
    *,
    dtype=None,
    device=None,
    requires_grad: bool = False,
    layout=None,
    pin_memory: bool = False,
) -> Tensor:
    """The Hamming window ``alpha - beta cos(2 pi n / (N - 1))``."""

    def f(n, m):
        return alpha - beta * np.cos(2 * np.pi * n / (m - 1))

    check_pin_memory(pin_memory, "hamming_window()")
    return _window("hamming_window", window_length, periodic, dtype, f, device, requires_grad, layout)


def blackman_window(
    window_length: int, periodic: bool = True, *, dtype=None, device=None, requires_grad: bool = False, layout=None
) -> Tensor:
    """The Blackman window ``0.42 - 0.5 cos(2 pi n / (N-1)) + 0.08 cos(4 pi n / (N-1))``."""

    def f(n, m):
        return 0.42 - 0.5 * np.cos(2 * np.pi * n / (m - 1)) + 0.08 * np.cos(4 * np.pi * n / (m - 1))

    return _window("blackman_window", window_length, periodic, dtype, f, device, requires_grad, layout)


def bartlett_window(
    window_length: int, periodic: bool = True, *, dtype=None, device=None, requires_grad: bool = False, layout=None
) -> Tensor:
    """The Bartlett (triangular) window ``1 - |2n / (N - 1) - 1|``."""

    def f(n, m):
        return 1 - np.abs(2 * n / (m - 1) - 1)

    return _window("bartlett_window", window_length, periodic, dtype, f, device, requires_grad, layout)


def kaiser_window(
    window_length: int,
    periodic: bool = True,
    beta: float = 12.0,
    *,
    dtype=None,
    device=None,
    requires_grad: bool = False,
    layout=None,
) -> Tensor:
    """The Kaiser window ``I0(beta sqrt(1 - (2n / (N - 1) - 1)**2)) / I0(beta)``."""

    def f(n, m):
        r = np.sqrt(np.clip(1 - (2 * n / (m - 1) - 1) ** 2, 0, None))
        return np.i0(beta * r) / np.i0(builtins.float(beta))

    return _window("kaiser_window", window_length, periodic, dtype, f, device, requires_grad, layout)


def gradient(input: Tensor, *, spacing=1, dim=None, edge_order: int = 1) -> tuple:
    """Estimated partial derivatives of ``input`` along ``dim`` (all dims when None): central differences inside,
    one-sided differences of ``edge_order`` (1 or 2) at the edges. ``spacing``: a scalar, or one scalar per dim.

    Raises:
        OpError: ``edge_order`` not 1 or 2, or too few points. NotSupportedError: coordinate-tensor spacing.
    """
    if edge_order not in (1, 2):
        raise OpError(f"torch.gradient only supports edge_order=1 and edge_order=2, got {edge_order}")
    dims = list(builtins.range(input.ndim)) if dim is None else ([dim] if isinstance(dim, builtins.int) else list(dim))
    dims = [_dim(d, input.ndim) for d in dims]
    sp = spacing if isinstance(spacing, (list, tuple)) else [spacing] * len(dims)
    if len(sp) != len(dims):
        raise OpError(f"torch.gradient expected spacing to be unspecified, a scalar or a list of length {len(dims)}")
    if builtins.any(isinstance(h, Tensor) and h.ndim > 0 for h in sp):
        raise NotSupportedError("lazyflow.gradient: coordinate tensors as spacing are not supported yet; pass scalars")
    x = input if input.dtype.is_floating_point else input.to(D.get_default_dtype())
    outs = []
    for d, h in zip(dims, sp):
        h = builtins.float(h)
        n = x.shape[d]
        if n < edge_order + 1:
            raise OpError(
                f"torch.gradient expected each dimension size to be at least edge_order+1, got {n} along dim {d}"
            )
        sl = lambda a, b, d=d: x.narrow(d, a, b - a)
        interior = (sl(2, n) - sl(0, n - 2)) / (2 * h)
        if edge_order == 1:
            first = (sl(1, 2) - sl(0, 1)) / h
            last = (sl(n - 1, n) - sl(n - 2, n - 1)) / h
        else:
            first = (-1.5 * sl(0, 1) + 2 * sl(1, 2) - 0.5 * sl(2, 3)) / h
            last = (0.5 * sl(n - 3, n - 2) - 2 * sl(n - 2, n - 1) + 1.5 * sl(n - 1, n)) / h
        outs.append(cat([first, interior, last], d))
    return tuple(outs)


# ---------------------------------------------------------------- in-place random fills (Tensor methods)
def _random_(self: Tensor, from_=0, to=None, *, generator=None) -> Tensor:
    """Fill with integers uniform on ``[from, to)``; ``random_(to)`` is ``[0, to)``; no bound: ``[0, 2**mantissa]``
    for floats, ``[0, max]`` for integers.

    Raises:
        ValueRangeError: ``from >= to``.
    """
    if to is None and from_ != 0:
        from_, to = 0, from_
    if to is None:
        d = self.dtype
        to = (2 ** np.finfo(d.np).nmant + 1) if d.is_floating_point else (2 if d is D.bool_ else np.iinfo(d.np).max)
    if from_ >= to:
        raise ValueRangeError(f"random_ expects 'from' to be less than 'to', but got from={from_} >= to={to}")
    draw = randint(builtins.int(from_), builtins.int(to), tuple(self.shape), generator=generator)
    with _NoGrad():
        return copy_(self, draw)


def _need_float_self(name: str, self: Tensor) -> None:
    if not self.dtype.is_floating_point:
        raise DTypeError(f"{name} expects a floating point tensor, got {self.dtype}")


def _cauchy_(self: Tensor, median: float = 0.0, sigma: float = 1.0, *, generator=None) -> Tensor:
    """Fill with Cauchy samples ``median + sigma * tan(pi (u - 1/2))``."""
    _need_float_self("cauchy_", self)
    if sigma <= 0:
        raise ValueRangeError(f"cauchy_ expects sigma > 0.0, but found sigma={sigma}")
    u = rand(tuple(self.shape), generator=generator, dtype=self.dtype)
    with _NoGrad():
        return copy_(self, median + sigma * (math.pi * (u - 0.5)).tan())


def _log_normal_(self: Tensor, mean: float = 1.0, std: float = 2.0, *, generator=None) -> Tensor:
    """Fill with ``exp(N(mean, std**2))`` samples."""
    _need_float_self("log_normal_", self)
    if std <= 0:
        raise ValueRangeError(f"log_normal_ expects std > 0.0, but found std={std}")
    z = self.new_empty(self.shape).normal_(mean, std, generator=generator)
    with _NoGrad():
        return copy_(self, z.exp())


def _geometric_(self: Tensor, p: float, *, generator=None) -> Tensor:
    """Fill with the number of Bernoulli(``p``) trials up to the first success (values >= 1)."""
    if not 0 < p < 1:
        raise ValueRangeError(f"geometric_ expects p to be in (0, 1), but got p={p}")
    u = rand(tuple(self.shape), generator=generator, dtype=D.float64)
    with _NoGrad():
        return copy_(self, (log1p(-u) / math.log1p(-p)).ceil().clamp(min=1))


METHOD_ONLY = {
    "random_": _random_,
    "cauchy_": _cauchy_,
    "log_normal_": _log_normal_,
    "geometric_": _geometric_,
}
