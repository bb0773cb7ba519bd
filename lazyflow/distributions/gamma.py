"""The Gamma family and what is sampled through it: Gamma, Chi2, Beta, Dirichlet, StudentT.

lazyflow has no gamma-sampling primitive, so ``standard_gamma`` composes one from the normal and uniform draws:
Marsaglia-Tsang rejection run on 16 proposals at once (the first accepted one is kept; all 16 fail with
probability below 0.05**16), boosted by ``U**(1/a)`` for ``a < 1``. Its gradient is the implicit
reparameterisation torch uses, ``dx/da = -(dF/da)(a, x) / f(a, x)`` with F the regularised incomplete gamma:
dF/da is a central difference of ``igamma`` in float64 (lazyflow's igamma has no derivative in ``a``).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence

from .. import _functional as F
from .._core import dtypes as D
from .._core.finfo import finfo
from .._core.size import Size
from .._tensor import Tensor
from . import constraints
from .continuous import ExponentialFamily
from .distribution import Distribution
from .utils import broadcast_all, standard_normal, uniform_open

__all__ = ["Gamma", "Chi2", "Beta", "Dirichlet", "StudentT", "standard_gamma"]

_PROPOSALS = 16


def _gamma_draw(a: Tensor) -> Tensor:
    """Gamma(a, 1) draws of ``a``'s shape (``a`` detached), no gradient."""
    shape, dt = tuple(a.shape), a.dtype
    boost = a < 1
    a1 = F.where(boost, a + 1, a)
    d = a1 - 1.0 / 3.0
    c = (9 * d).rsqrt()
    z = standard_normal((_PROPOSALS,) + shape, dt)
    u = uniform_open((_PROPOSALS,) + shape, dt)
    v = (1 + c * z) ** 3
    tiny = finfo(dt).tiny
    accept = (v > 0) & (u.log() < 0.5 * z * z + d - d * v + d * v.clamp(min=tiny).log())
    first = accept.to(D.int32).argmax(0, keepdim=True)
    x = (d * v).gather(0, first).squeeze(0)
    x = F.where(accept.any(0), x, d)
    log_boost = uniform_open(shape, dt).log() / a
    x = F.where(boost, (x.log() + log_boost).exp(), x)
    return x.clamp(min=tiny)


def standard_gamma(concentration: Tensor) -> Tensor:
    """Gamma(concentration, 1) draws with the implicit reparameterisation gradient w.r.t. ``concentration``."""
    a = concentration.detach()
    x = _gamma_draw(a)
    if not concentration.requires_grad:
        return x
    a64, x64 = a.to(D.float64), x.to(D.float64)
    h = a64 * 1e-5
    dfda = (F.igamma(a64 + h, x64) - F.igamma(a64 - h, x64)) / (2 * h)
    log_pdf = (a64 - 1) * x64.log() - x64 - F.lgamma(a64)
    dxda = F.where(dfda == 0, 0.0 * dfda, -dfda / log_pdf.exp()).to(a.dtype)
    return x + dxda * (concentration - a)


class Gamma(ExponentialFamily):
    """The Gamma distribution with shape ``concentration`` and ``rate`` (mean ``concentration / rate``)."""

    arg_constraints = {"concentration": constraints.positive, "rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True

    def __init__(self, concentration, rate, validate_args=None):
        self.concentration, self.rate = broadcast_all(concentration, rate)
        scalar = isinstance(concentration, numbers.Number) and isinstance(rate, numbers.Number)
        super().__init__(Size() if scalar else self.concentration.shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Gamma, _instance)
        batch_shape = Size(tuple(batch_shape))
        new.concentration = self.concentration.expand(batch_shape)
        new.rate = self.rate.expand(batch_shape)
        Distribution.__init__(new, batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self):
        return self.concentration / self.rate

    @property
    def mode(self):
        return ((self.concentration - 1) / self.rate).clamp(min=0)

    @property
    def variance(self):
        return self.concentration / self.rate.pow(2)

    def rsample(self, sample_shape: Sequence[int] = Size()):
        shape = tuple(self._extended_shape(sample_shape))
        value = standard_gamma(self.concentration.expand(shape)) / self.rate.expand(shape)
        return value.clamp(min=finfo(value.dtype).tiny)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        c, r = self.concentration, self.rate
        return F.xlogy(c, r) + F.xlogy(c - 1, value) - r * value - F.lgamma(c)

    def entropy(self):
        c = self.concentration
        return c - self.rate.log() + F.lgamma(c) + (1.0 - c) * F.digamma(c)

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return F.igamma(self.concentration, self.rate * value)


class Chi2(Gamma):
    """The chi-squared distribution with ``df`` degrees of freedom (Gamma(df / 2, 1 / 2))."""

    arg_constraints = {"df": constraints.positive}

    def __init__(self, df, validate_args=None):
        super().__init__(0.5 * df, 0.5, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return super().expand(batch_shape, self._get_checked_instance(Chi2, _instance))

    @property
    def df(self):
        return self.concentration * 2


class Dirichlet(ExponentialFamily):
    """The Dirichlet distribution over the simplex, with ``concentration`` of shape ``batch_shape + (K,)``."""

    arg_constraints = {"concentration": constraints.independent(constraints.positive, 1)}
    support = constraints.simplex
    has_rsample = True

    def __init__(self, concentration, validate_args=None):
        if not isinstance(concentration, Tensor) or concentration.ndim < 1:
            raise ValueError("`concentration` parameter must be at least one-dimensional.")
        self.concentration = concentration
        shape = tuple(concentration.shape)
        super().__init__(shape[:-1], shape[-1:], validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Dirichlet, _instance)
        batch_shape = Size(tuple(batch_shape))
        new.concentration = self.concentration.expand(tuple(batch_shape) + tuple(self.event_shape))
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def rsample(self, sample_shape: Sequence[int] = Size()):
        shape = tuple(self._extended_shape(sample_shape))
        g = standard_gamma(self.concentration.expand(shape))
        x = g / g.sum(-1, keepdim=True)
        return x.clamp(min=finfo(x.dtype).tiny)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        c = self.concentration
        return F.xlogy(c - 1.0, value).sum(-1) + F.lgamma(c.sum(-1)) - F.lgamma(c).sum(-1)

    @property
    def mean(self):
        return self.concentration / self.concentration.sum(-1, keepdim=True)

    @property
    def mode(self):
        c = self.concentration
        concm1 = (c - 1).clamp(min=0.0)
        mode = concm1 / concm1.sum(-1, keepdim=True)
        # all concentrations < 1: a vertex, picked as torch picks it (argmax over that row of the 0/0 = NaN ratios)
        vertex = F.one_hot(mode.argmax(-1), c.shape[-1]).to(c.dtype)
        return F.where((c < 1).all(-1, keepdim=True), vertex, mode)

    @property
    def variance(self):
        c = self.concentration
        con0 = c.sum(-1, keepdim=True)
        return c * (con0 - c) / (con0.pow(2) * (con0 + 1))

    def entropy(self):
        c = self.concentration
        k = c.shape[-1]
        a0 = c.sum(-1)
        return F.lgamma(c).sum(-1) - F.lgamma(a0) - (k - a0) * F.digamma(a0) - ((c - 1.0) * F.digamma(c)).sum(-1)


class Beta(ExponentialFamily):
    """The Beta distribution on [0, 1] with ``concentration1`` (alpha) and ``concentration0`` (beta)."""

    arg_constraints = {"concentration1": constraints.positive, "concentration0": constraints.positive}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, concentration1, concentration0, validate_args=None):
        c1, c0 = broadcast_all(concentration1, concentration0)
        self._dirichlet = Dirichlet(F.stack([c1, c0], -1), validate_args=validate_args)
        super().__init__(self._dirichlet._batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Beta, _instance)
        batch_shape = Size(tuple(batch_shape))
        new._dirichlet = self._dirichlet.expand(batch_shape)
        Distribution.__init__(new, batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def concentration1(self) -> Tensor:
        return self._dirichlet.concentration[..., 0]

    @property
    def concentration0(self) -> Tensor:
        return self._dirichlet.concentration[..., 1]

    @property
    def mean(self):
        return self.concentration1 / (self.concentration1 + self.concentration0)

    @property
    def mode(self):
        return self._dirichlet.mode[..., 0]

    @property
    def variance(self):
        total = self.concentration1 + self.concentration0
        return self.concentration1 * self.concentration0 / (total.pow(2) * (total + 1))

    def rsample(self, sample_shape: Sequence[int] = Size()):
        return self._dirichlet.rsample(sample_shape)[..., 0]

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return self._dirichlet.log_prob(F.stack([value, 1.0 - value], -1))

    def entropy(self):
        return self._dirichlet.entropy()

    def __repr__(self) -> str:
        c1, c0 = self.concentration1, self.concentration0
        show = lambda t: t if t.numel() == 1 else t.size()
        return f"Beta(concentration1: {show(c1)}, concentration0: {show(c0)})"


class StudentT(Distribution):
    """Student's t distribution with ``df`` degrees of freedom, location ``loc`` and scale ``scale``."""

    arg_constraints = {"df": constraints.positive, "loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, df, loc=0.0, scale=1.0, validate_args=None):
        self.df, self.loc, self.scale = broadcast_all(df, loc, scale)
        self._chi2 = Chi2(self.df)
        super().__init__(self.df.shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(StudentT, _instance)
        batch_shape = Size(tuple(batch_shape))
        new.df = self.df.expand(batch_shape)
        new.loc = self.loc.expand(batch_shape)
        new.scale = self.scale.expand(batch_shape)
        new._chi2 = self._chi2.expand(batch_shape)
        Distribution.__init__(new, batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self):
        return F.where(self.df > 1, self.loc, math.nan * self.loc)

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        df = self.df
        finite = self.scale.pow(2) * df / (df - 2)
        return F.where(df > 2, finite, F.where(df > 1, math.inf + 0 * df, math.nan + 0 * df))

    def rsample(self, sample_shape: Sequence[int] = Size()):
        shape = tuple(self._extended_shape(sample_shape))
        x = standard_normal(shape, self.df.dtype)
        z = self._chi2.rsample(sample_shape)
        return self.loc + self.scale * x * (z / self.df).rsqrt()

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        df = self.df
        y = (value - self.loc) / self.scale
        z = (
            self.scale.log()
            + 0.5 * df.log()
            + 0.5 * math.log(math.pi)
            + F.lgamma(0.5 * df)
            - F.lgamma(0.5 * (df + 1.0))
        )
        return -0.5 * (df + 1.0) * (y**2 / df).log1p() - z

    def entropy(self):
        df = self.df
        lbeta = F.lgamma(0.5 * df) + math.lgamma(0.5) - F.lgamma(0.5 * (df + 1))
        return (
            self.scale.log()
            + 0.5 * (df + 1) * (F.digamma(0.5 * (df + 1)) - F.digamma(0.5 * df))
            + 0.5 * df.log()
            + lbeta
        )
