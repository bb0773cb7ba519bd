"""Order statistics and the rest of torch's reductions: ``nansum``/``nanmean``, ``median``/``nanmedian``,
``kthvalue``, ``mode``, ``quantile``/``nanquantile``, ``aminmax``, ``msort``, ``bincount``, ``histogram``, ``cov``,
``corrcoef``, ``trace``, ``dist``, ``renorm``, ``trapezoid`` and ``cumulative_trapezoid``, ``isin``.

All are composites over sort/gather/sum primitives, so their gradients come from those primitives' rules.
``bincount`` and ``histogram`` (without ``range``) have a data-dependent size or range: eager only.
"""

from __future__ import annotations

import builtins
import collections
import math

from .._core import dtypes as D
from .._core.errors import DTypeError, IndexOutOfRangeError, OpError, ShapeError, ValueRangeError
from .._creation import arange, full, linspace, zeros
from .._tensor import Tensor, _dim, _Tracer
from ._common import _MinMax, _t
from .elementwise import isnan, lerp
from .indexing import gather, sort, where
from .reduction import amax, amin, cumprod, cumsum, norm, sum
from .special import _composite_ip

__all__ = [
    "aminmax",
    "bincount",
    "corrcoef",
    "cov",
    "cumulative_trapezoid",
    "dist",
    "histogram",
    "isin",
    "kthvalue",
    "median",
    "mode",
    "msort",
    "nanmean",
    "nanmedian",
    "nanquantile",
    "nansum",
    "quantile",
    "renorm",
    "trace",
    "trapezoid",
    "trapz",
]

NOT_METHODS = frozenset({"cumulative_trapezoid", "trapezoid", "trapz", "histogram_", "isin"})


def nansum(input: Tensor, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:
    """Sum over ``dim`` treating NaN as 0 (``torch.nansum``)."""
    x = where(isnan(input), 0, input) if input.dtype.is_floating_point else input
    return sum(x, dim, keepdim, dtype=dtype)


def nanmean(input: Tensor, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:
    """Mean over ``dim`` of the non-NaN elements (NaN where all are NaN).

    Raises:
        DTypeError: a non-floating input (as torch).
    """
    if not input.dtype.is_floating_point:
        raise DTypeError(f"nanmean(): expected input to have floating point dtype but got {input.dtype}")
    keep = ~isnan(input)
    return nansum(input, dim, keepdim, dtype=dtype) / sum(keep, dim, keepdim)


def _last(input: Tensor, dim):
    """``input`` with ``dim`` moved last (the whole tensor flattened when ``dim`` is None), and the normalised dim."""
    if dim is None:
        return input.reshape(-1), None
    d = _dim(dim, builtins.max(input.ndim, 1))
    x = input.reshape(1) if input.ndim == 0 else input
    return x.movedim(d, -1), d


def _finish(t: Tensor, input: Tensor, d, keepdim: bool) -> Tensor:
    """A reduced tensor whose last dim (size 1) stood for ``d``: back in place (keepdim) or dropped."""
    if input.ndim == 0:
        return t.reshape(())
    if keepdim:
        return t.movedim(-1, d)
    return t.squeeze(-1)


def _pick(input: Tensor, dim, keepdim: bool, pos_fn, name: str, *, ignore_nan: bool):
    """Values and indices at sorted position ``pos_fn(n_valid)`` along ``dim`` (NaNs sort last)."""
    x, d = _last(input, dim)
    if x.shape[-1] == 0:
        raise IndexOutOfRangeError(f"{name}(): cannot compute {name} of an empty dimension")
    sv, si = sort(x, -1, stable=True)
    nan = isnan(x) if x.dtype.is_floating_point else None
    n = x.shape[-1]
    if nan is not None:
        n_nan = sum(nan, -1, keepdim=True)
        valid = n - n_nan
        pos = pos_fn(valid) if ignore_nan else where(n_nan > 0, valid, pos_fn(valid * 0 + n))
    else:
        pos = pos_fn(zeros(x.shape[:-1] + (1,), dtype=D.int64) + n)
    v, i = gather(sv, -1, pos), gather(si, -1, pos)
    if dim is None:
        return v.reshape(())
    return _MinMax(_finish(v, input, d, keepdim), _finish(i, input, d, keepdim))


def median(input: Tensor, dim=None, keepdim: bool = False):
    """The lower median (``torch.median``): of all elements (a 0-d tensor) or ``(values, indices)`` along ``dim``.

    NaN propagates: a slice with a NaN has median NaN (its index points at a NaN).

    Raises:
        IndexOutOfRangeError: an empty dimension.
    """
    return _pick(input, dim, keepdim, lambda n: (n - 1) // 2, "median", ignore_nan=False)


def nanmedian(input: Tensor, dim=None, keepdim: bool = False):
    """:func:`median` ignoring NaN (NaN only where a slice is all NaN; its index is then the middle one, as torch)."""
    n = input.shape[dim] if dim is not None and input.ndim else input.numel()
    return _pick(input, dim, keepdim, lambda v: where(v == 0, (n - 1) // 2, (v - 1) // 2), "nanmedian", ignore_nan=True)


def kthvalue(input: Tensor, k: int, dim: int = -1, keepdim: bool = False):
    """The ``k``-th smallest element along ``dim`` (1-based) and its index, as ``(values, indices)``.

    Raises:
        OpError: ``k`` outside ``[1, size]``.
    """
    n = input.shape[_dim(dim, builtins.max(input.ndim, 1))] if input.ndim else 1
    if not 1 <= k <= n:
        raise OpError(f"kthvalue(): selected number k={k} out of range for dimension of size {n}")
    return _pick(input, dim, keepdim, lambda m: m * 0 + (k - 1), "kthvalue", ignore_nan=True)


def mode(input: Tensor, dim: int = -1, keepdim: bool = False):
    """The most frequent value along ``dim`` (the smallest among equally frequent ones) and the index of its last
    occurrence, as ``(values, indices)``."""
    x, d = _last(input, dim)
    n = x.shape[-1]
    if n == 0:
        raise IndexOutOfRangeError("mode(): cannot compute the mode of an empty dimension")
    eq = x.unsqueeze(-1) == x.unsqueeze(-2)  # [..., i, j]: x_i == x_j
    counts = sum(eq, -1)
    best = amax(counts, -1, keepdim=True)
    big = x.abs().amax() + 1 if x.dtype.is_floating_point else None
    cand = where(counts == best, x, big if big is not None else amax(x, -1, keepdim=True))
    value = amin(cand, -1, keepdim=True)
    pos = arange(n, dtype=D.int64)
    index = amax(where(x == value, pos, -1), -1, keepdim=True)
    return _MinMax(_finish(value, input, d, keepdim), _finish(index, input, d, keepdim))


_INTERP = ("linear", "lower", "higher", "midpoint", "nearest")


def _quantile(input, q, dim, keepdim, interpolation, name, ignore_nan):
    if not input.dtype.is_floating_point:
        raise DTypeError(f"{name}() input tensor must be either float or double dtype, got {input.dtype}")
    if interpolation not in _INTERP:
        raise OpError(f"{name}() interpolation must be one of {', '.join(_INTERP)}. Got {interpolation!r}")
    scalar_q = not isinstance(q, Tensor)
    qt = full((), builtins.float(q), dtype=input.dtype) if scalar_q else q
    if not scalar_q:
        if qt.ndim > 1:
            raise ShapeError(f"{name}() q must be a scalar or 1D tensor, got shape {list(qt.shape)}")
        if qt.dtype is not input.dtype:
            raise DTypeError(f"{name}() q tensor must be same dtype as the input tensor ({input.dtype}, {qt.dtype})")
    qv = None if isinstance(qt._value, _Tracer) else [builtins.float(v) for v in qt.reshape(-1).tolist()]
    if qv is not None and any(not 0.0 <= v <= 1.0 for v in qv):
        raise ValueRangeError(f"{name}() q values must be in the range [0, 1], got {qv}")
    x, d = _last(input, dim)
    if x.shape[-1] == 0:
        raise IndexOutOfRangeError(f"{name}() input tensor must be non-empty")
    sv = sort(x, -1).values
    nan = isnan(x)
    n_valid = sum(~nan, -1, keepdim=True)
    any_nan = n_valid < x.shape[-1]
    qf = qt.reshape(-1)  # [Q]
    rank = qf * (n_valid.to(input.dtype) - 1).clamp(min=0)  # [..., Q]
    if interpolation == "lower":
        rank = rank.floor()
    elif interpolation == "higher":
        rank = rank.ceil()
    elif interpolation == "nearest":
        rank = rank.round()
    lo = rank.floor().to(D.int64)
    hi = rank.ceil().to(D.int64)
    vlo, vhi = gather(sv, -1, lo), gather(sv, -1, hi)
    if interpolation == "midpoint":
        out = lerp(vlo, vhi, where(hi > lo, 0.5, 0.0).to(input.dtype))
    else:
        out = lerp(vlo, vhi, rank - lo.to(input.dtype))
    bad = (n_valid == 0) if ignore_nan else any_nan
    out = where(bad, math.nan, out)  # [..., Q]
    if dim is None:
        out = out.reshape(1, -1).reshape((1,) * input.ndim + (-1,)) if keepdim else out.reshape(-1)
    else:
        out = out.unsqueeze(-2)
        out = out.movedim(-2, d) if keepdim else out.squeeze(-2)
    out = out.movedim(-1, 0)
    return out.squeeze(0) if scalar_q else out


def quantile(input: Tensor, q, dim=None, keepdim: bool = False, *, interpolation: str = "linear") -> Tensor:
    """The ``q``-th quantiles along ``dim`` (all elements when None); a 1-D ``q`` adds a leading dimension.

    NaN propagates (a slice with a NaN gives NaN). ``interpolation``: ``linear``, ``lower``, ``higher``,
    ``midpoint`` or ``nearest`` (round half to even), as torch.

    Raises:
        DTypeError: a non-floating input, or a ``q`` tensor of another dtype.
        ValueRangeError: ``q`` outside ``[0, 1]``.
        OpError: an unknown ``interpolation``.
    """
    return _quantile(input, q, dim, keepdim, interpolation, "quantile", False)


def nanquantile(input: Tensor, q, dim=None, keepdim: bool = False, *, interpolation: str = "linear") -> Tensor:
    """:func:`quantile` ignoring NaN (NaN only where a slice is all NaN)."""
    return _quantile(input, q, dim, keepdim, interpolation, "nanquantile", True)


_AminMax = collections.namedtuple("aminmax", ["min", "max"])


def aminmax(input: Tensor, *, dim=None, keepdim: bool = False):
    """``(min, max)`` of all elements or along ``dim`` (a named tuple with fields ``min`` and ``max``)."""
    if dim is None:
        lo, hi = amin(input), amax(input)
        if keepdim:
            lo, hi = lo.reshape((1,) * input.ndim), hi.reshape((1,) * input.ndim)
        return _AminMax(lo, hi)
    return _AminMax(amin(input, dim, keepdim), amax(input, dim, keepdim))


def msort(input: Tensor) -> Tensor:
    """``input`` sorted along its first dimension (``sort(input, dim=0).values``)."""
    return sort(input, 0).values


def bincount(input: Tensor, weights=None, minlength: int = 0) -> Tensor:
    """Count of each value in a 1-D non-negative integer tensor (or the sum of ``weights`` at each value).

    The output length is ``max(input) + 1`` (at least ``minlength``): data-dependent, so eager only.

    Raises:
        ShapeError: ``input`` not 1-D, or ``weights`` of another shape.
        DTypeError: a floating ``input``.
        ValueRangeError: a negative value or ``minlength``.
    """
    if input.ndim != 1:
        raise ShapeError(f"bincount only supports 1-d non-negative integral inputs, got shape {list(input.shape)}")
    if input.dtype.is_floating_point or input.dtype is D.bool_:
        raise DTypeError(f"bincount only supports 1-d non-negative integral inputs, got dtype {input.dtype}")
    if minlength < 0:
        raise ValueRangeError(f"bincount: minlength should be >= 0, got {minlength}")
    if weights is not None and tuple(weights.shape) != tuple(input.shape):
        raise ShapeError(
            f"bincount: weights should have the same length as input, got {list(weights.shape)} and {list(input.shape)}"
        )
    if input.numel() and builtins.int(input.min()) < 0:
        raise ValueRangeError("bincount only supports 1-d non-negative integral inputs (got a negative value)")
    n = builtins.max(builtins.int(input.max()) + 1 if input.numel() else 0, minlength)
    if weights is None:
        return zeros(n, dtype=D.int64).index_add(0, input, zeros(input.shape, dtype=D.int64) + 1)
    w = weights if weights.dtype.is_floating_point else weights.to(D.float64)
    if w.dtype is not D.float32:
        w = w.to(D.float64)
    return zeros(n, dtype=w.dtype).index_add(0, input, w)


_Histogram = collections.namedtuple("histogram", ["hist", "bin_edges"])


def histogram(input: Tensor, bins=100, *, range=None, weight=None, density: bool = False):
    """Histogram of ``input`` as ``(hist, bin_edges)``: ``bins`` equal bins over ``range`` (default: the data's min
    and max), or the edges given by a 1-D tensor ``bins``. Bins are half-open except the last, as torch.

    Raises:
        DTypeError: a non-floating input.
        ValueRangeError: ``bins < 1`` or ``range`` with min > max.
    """
    if not input.dtype.is_floating_point:
        raise DTypeError(f"torch.histogram: input tensor must be floating point, got {input.dtype}")
    x = input.reshape(-1)
    if isinstance(bins, Tensor):
        edges = bins.to(input.dtype)
    else:
        if builtins.int(bins) < 1:
            raise ValueRangeError(f"torch.histogram(): bins must be > 0, but got {bins}")
        if range is not None:
            lo, hi = builtins.float(range[0]), builtins.float(range[1])
            if lo > hi:
                raise ValueRangeError(f"torch.histogram(): min should not exceed max, but got min {lo} max {hi}")
        elif x.numel():
            lo, hi = builtins.float(x.min()), builtins.float(x.max())
        else:
            lo, hi = 0.0, 0.0
        if lo == hi:
            lo, hi = lo - 0.5, hi + 0.5
        edges = linspace(lo, hi, builtins.int(bins) + 1, dtype=input.dtype)
    nb = edges.shape[0] - 1
    w = weight.reshape(-1).to(input.dtype) if weight is not None else zeros(x.shape, dtype=input.dtype) + 1
    idx = (x.unsqueeze(-1) >= edges[1:-1]).sum(-1) if nb > 1 else zeros(x.shape, dtype=D.int64)
    inside = (x >= edges[0]) & (x <= edges[-1])
    hist = zeros(nb, dtype=input.dtype).index_add(0, idx, where(inside, w, 0.0))
    if density:
        hist = hist / (hist.sum() * (edges[1:] - edges[:-1]))
    return _Histogram(hist, edges)


def cov(input: Tensor, *, correction: int = 1, fweights=None, aweights=None) -> Tensor:
    """Covariance of the variables in the rows of ``input`` (observations in columns), as ``torch.cov``.

    Raises:
        ShapeError: ``input`` with more than 2 dims, or weights that are not 1-D of the observation count.
    """
    if input.ndim > 2:
        raise ShapeError(f"cov(): expected input to have two or fewer dimensions but got {input.ndim}")
    x = input.reshape(1, -1) if input.ndim < 2 else input
    if not x.dtype.is_floating_point:
        x = x.to(D.get_default_dtype())
    n_obs = x.shape[1]
    w = None
    for name, wt in (("fweights", fweights), ("aweights", aweights)):
        if wt is not None:
            if wt.ndim > 1 or (wt.ndim == 1 and wt.shape[0] != n_obs):
                raise ShapeError(f"cov(): expected {name} to have one dimension of size {n_obs}, got {list(wt.shape)}")
            w = wt if w is None else w * wt
    if w is None:
        avg = x.mean(1)
        norm_ = n_obs - correction
        xm = x - avg.unsqueeze(1)
        c = xm @ xm.T
    else:
        w = w.to(x.dtype)
        w_sum = w.sum()
        avg = (x * w).sum(1) / w_sum
        norm_ = w_sum - correction if aweights is None else w_sum - correction * (w * aweights).sum() / w_sum
        xm = x - avg.unsqueeze(1)
        c = (xm * w) @ xm.T
    if not isinstance(norm_, Tensor):
        norm_ = builtins.max(norm_, 0)
    else:
        norm_ = norm_.clamp(min=0)
    c = c / norm_
    return c.squeeze() if input.ndim < 2 else c


def corrcoef(input: Tensor) -> Tensor:
    """Pearson correlation coefficients of the rows of ``input`` (clipped into ``[-1, 1]``), as ``torch.corrcoef``."""
    c = cov(input)
    if c.ndim == 0:
        return c / c
    s = c.diagonal().sqrt()
    c = c / s.unsqueeze(1) / s.unsqueeze(0)
    return c.clamp(-1, 1)


def trace(input: Tensor) -> Tensor:
    """Sum of the main diagonal of a 2-D tensor (integers sum to int64).

    Raises:
        ShapeError: a tensor that is not 2-D.
    """
    if input.ndim != 2:
        raise ShapeError(f"trace: expected a matrix, but got tensor with dim {input.ndim}")
    return input.diagonal().sum()


def dist(input: Tensor, other, p: float = 2) -> Tensor:
    """The ``p``-norm of ``input - other`` (broadcast), over all elements."""
    return norm(input - other, p)


def renorm(input: Tensor, p: float, dim: int, maxnorm: float) -> Tensor:
    """Each sub-tensor along ``dim`` whose ``p``-norm exceeds ``maxnorm`` is scaled to norm ``maxnorm``.

    Raises:
        ValueRangeError: ``p <= 0`` or ``maxnorm < 0``.
        ShapeError: a 0-d input.
    """
    if p <= 0:
        raise ValueRangeError(f"renorm: non-positive-norm not supported (got p={p})")
    if maxnorm < 0:
        raise ValueRangeError(f"renorm: expected maxnorm to be >= 0 but got {maxnorm}")
    if input.ndim <= 1:
        raise ShapeError(f"renorm: input needs at least 2 dimensions, got {input.ndim}")
    d = _dim(dim, input.ndim)
    others = tuple(i for i in builtins.range(input.ndim) if i != d)
    nrm = norm(input, p, others, keepdim=True)
    factor = where(nrm > maxnorm, maxnorm / (nrm + 1e-7), 1.0)
    return input * factor.to(input.dtype)


def _trap_dx(y: Tensor, x, dx, dim: int, name: str):
    d = _dim(dim, y.ndim)
    if x is not None:
        if not isinstance(x, Tensor):
            raise OpError(f"{name}: x must be a Tensor (use dx= for a constant spacing)")
        if x.ndim == 1:
            if x.shape[0] != y.shape[d]:
                raise ShapeError(
                    f"{name}: there must be one x value for each sample point ({x.shape[0]} vs {y.shape[d]})"
                )
            shape = [1] * y.ndim
            shape[d] = -1
            x = x.reshape(shape)
        return d, x.diff(dim=d if x.ndim == y.ndim else -1)
    return d, (1.0 if dx is None else dx)


def trapezoid(y: Tensor, x=None, *, dx=None, dim: int = -1) -> Tensor:
    """Trapezoidal rule along ``dim``: sample points ``x`` (a tensor) or a constant spacing ``dx`` (default 1)."""
    d, h = _trap_dx(y, x, dx, dim, "trapezoid")
    n = y.shape[d]
    if n == 0:
        return sum(y, d)
    mid = (y.narrow(d, 1, n - 1) + y.narrow(d, 0, n - 1)) * h
    return sum(mid, d) / 2


trapz = trapezoid


def cumulative_trapezoid(y: Tensor, x=None, *, dx=None, dim: int = -1) -> Tensor:
    """Cumulative trapezoidal rule along ``dim`` (one fewer element along ``dim`` than ``y``)."""
    d, h = _trap_dx(y, x, dx, dim, "cumulative_trapezoid")
    n = y.shape[d]
    mid = (y.narrow(d, 1, builtins.max(n - 1, 0)) + y.narrow(d, 0, builtins.max(n - 1, 0))) * h / 2
    return cumsum(mid, d)


def isin(elements, test_elements, *, assume_unique: bool = False, invert: bool = False) -> Tensor:
    """Whether each element of ``elements`` is in ``test_elements`` (either may be a scalar); bool."""
    if not isinstance(elements, Tensor) and not isinstance(test_elements, Tensor):
        raise OpError("isin: at least one of elements and test_elements must be a Tensor")
    e, t = _t(elements), _t(test_elements).reshape(-1)
    out = (e.unsqueeze(-1) == t).any(-1) if t.numel() else zeros(e.shape, dtype=D.bool_)
    return ~out if invert else out


METHOD_ONLY = {
    "cumsum_": _composite_ip(cumsum, "cumsum"),
    "cumprod_": _composite_ip(cumprod, "cumprod"),
    "renorm_": _composite_ip(renorm, "renorm"),
}
