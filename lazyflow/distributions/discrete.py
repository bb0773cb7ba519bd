"""Discrete distributions: Bernoulli, Categorical, OneHotCategorical(StraightThrough), Geometric, Poisson, Binomial.

Poisson and Binomial draws are composed from uniform draws (lazyflow has no sampling primitive for them) with static
shapes, so they also run inside ``lf.compile``: Poisson counts unit-rate exponential arrivals (64 of them) below
small rates and uses Hoermann's transformed rejection (PTRS, 16 proposals at once) from rate 10 up; Binomial sums
``max(total_count)`` Bernoulli draws, which needs ``total_count`` known when the distribution is built.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from typing import cast

from .. import _functional as F
from .._core import dtypes as D
from .._core.context import state
from .._core.errors import NotSupportedError, ValueRangeError
from .._core.finfo import finfo
from .._core.size import Size
from .._creation import arange, bernoulli, eye, full, multinomial, zeros_like
from .._tensor import Tensor
from ..autograd.grad_mode import no_grad
from . import constraints
from .continuous import ExponentialFamily
from .distribution import Distribution, _all_true
from .utils import broadcast_all, lazy_property, logits_to_probs, probs_to_logits, standard_uniform, uniform_open

__all__ = ["Bernoulli", "Categorical", "OneHotCategorical", "OneHotCategoricalStraightThrough", "Geometric"]
__all__ += ["Poisson", "Binomial"]


def _bce_with_logits(logits: Tensor, target: Tensor) -> Tensor:
    """-(target * log sigmoid(logits) + (1 - target) * log sigmoid(-logits)), stable for large |logits|."""
    return logits.clamp(min=0) - logits * target + (-logits.abs()).exp().log1p()


def _one_of(probs, logits) -> None:
    if (probs is None) == (logits is None):
        raise ValueError("Either `probs` or `logits` must be specified, but not both.")


class _ProbsLogits(Distribution):
    """Shared plumbing of a distribution over independent binary-type probabilities (probs xor logits)."""

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}

    def __init__(self, probs=None, logits=None, validate_args=None):
        _one_of(probs, logits)
        param = probs if probs is not None else logits
        (value,) = broadcast_all(param)
        if probs is not None:
            self.probs = value
        else:
            self.logits = value
        self._param = value
        super().__init__(Size() if isinstance(param, numbers.Number) else value.shape, validate_args=validate_args)

    def _expand_into(self, new, batch_shape):
        batch_shape = Size(tuple(batch_shape))
        if "probs" in self.__dict__:
            new.probs = self.probs.expand(batch_shape)
            new._param = new.probs
        if "logits" in self.__dict__:
            new.logits = self.logits.expand(batch_shape)
            new._param = new.logits
        Distribution.__init__(new, batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @lazy_property
    def logits(self) -> Tensor:
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self) -> Tensor:
        return logits_to_probs(self.logits, is_binary=True)

    @property
    def param_shape(self) -> Size:
        return Size(tuple(self._param.shape))


class Bernoulli(_ProbsLogits, ExponentialFamily):
    """The Bernoulli distribution: 1 with probability ``probs`` (or ``sigmoid(logits)``), else 0."""

    support = constraints.boolean
    has_enumerate_support = True

    def expand(self, batch_shape, _instance=None):
        return self._expand_into(self._get_checked_instance(Bernoulli, _instance), batch_shape)

    @property
    def mean(self):
        return self.probs

    @property
    def mode(self):
        mode = (self.probs >= 0.5).to(self.probs.dtype)
        return F.where(self.probs == 0.5, math.nan * mode, mode)

    @property
    def variance(self):
        return self.probs * (1 - self.probs)

    def sample(self, sample_shape: Sequence[int] = Size()):
        shape = tuple(self._extended_shape(sample_shape))
        with no_grad():
            return bernoulli(self.probs.expand(shape))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        return -_bce_with_logits(logits, value.to(logits.dtype))

    def entropy(self):
        return _bce_with_logits(self.logits, self.probs)

    def enumerate_support(self, expand=True):
        values = arange(2, dtype=self._param.dtype).reshape((-1,) + (1,) * len(self._batch_shape))
        return values.expand((2,) + tuple(self._batch_shape)) if expand else values


class Geometric(_ProbsLogits):
    """The number of failures before the first success in Bernoulli(``probs``) trials."""

    support = constraints.nonnegative_integer

    def __init__(self, probs=None, logits=None, validate_args=None):
        super().__init__(probs, logits, validate_args)
        if self._validate_args and probs is not None and not _all_true(self.probs > 0):
            value = self.probs
            raise ValueRangeError(
                f"Expected parameter probs ({type(value).__name__} of shape {tuple(value.shape)}) of distribution "
                f"{self!r} to be positive but found invalid values:\n{value}"
            )

    def expand(self, batch_shape, _instance=None):
        return self._expand_into(self._get_checked_instance(Geometric, _instance), batch_shape)

    @property
    def mean(self):
        return 1.0 / self.probs - 1.0

    @property
    def mode(self):
        return zeros_like(self.probs)

    @property
    def variance(self):
        return (1.0 / self.probs - 1.0) / self.probs

    def sample(self, sample_shape: Sequence[int] = Size()):
        shape = tuple(self._extended_shape(sample_shape))
        with no_grad():
            u = standard_uniform(shape, self.probs.dtype).clamp(min=finfo(self.probs.dtype).tiny)
            return (u.log() / (-self.probs).log1p()).floor()

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        value, probs = broadcast_all(value, self.probs)
        probs = F.where((probs == 1) & (value == 0), 0 * probs, probs)
        return value * (-probs).log1p() + self.probs.log()

    def entropy(self):
        return _bce_with_logits(self.logits, self.probs) / self.probs


class Categorical(Distribution):
    """A categorical distribution over ``{0, ..., K - 1}`` with ``probs`` or ``logits`` of shape ``(..., K)``."""

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.independent(constraints.real, 1)}
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args=None):
        _one_of(probs, logits)
        if probs is not None:
            if probs.ndim < 1:
                raise ValueError("`probs` parameter must be at least one-dimensional.")
            self.probs = probs / probs.sum(-1, keepdim=True)
        else:
            logits = cast(Tensor, logits)
            if logits.ndim < 1:
                raise ValueError("`logits` parameter must be at least one-dimensional.")
            self.logits = logits - logits.logsumexp(dim=-1, keepdim=True)
        self._param = self.probs if probs is not None else self.logits
        self._num_events = self._param.shape[-1]
        batch_shape = self._param.shape[:-1] if self._param.ndim > 1 else Size()
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Categorical, _instance)
        batch_shape = Size(tuple(batch_shape))
        param_shape = tuple(batch_shape) + (self._num_events,)
        if "probs" in self.__dict__:
            new.probs = self.probs.expand(param_shape)
            new._param = new.probs
        if "logits" in self.__dict__:
            new.logits = self.logits.expand(param_shape)
            new._param = new.logits
        new._num_events = self._num_events
        Distribution.__init__(new, batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @constraints.dependent_property(is_discrete=True, event_dim=0)
    def support(self):
        return constraints.integer_interval(0, self._num_events - 1)

    @lazy_property
    def logits(self) -> Tensor:
        return probs_to_logits(self.probs)

    @lazy_property
    def probs(self) -> Tensor:
        return logits_to_probs(self.logits)

    @property
    def param_shape(self) -> Size:
        return Size(tuple(self._param.shape))

    @property
    def mean(self):
        return full(tuple(self._extended_shape()), math.nan, dtype=self.probs.dtype)

    @property
    def mode(self):
        return self.probs.argmax(-1)

    @property
    def variance(self):
        return full(tuple(self._extended_shape()), math.nan, dtype=self.probs.dtype)

    def sample(self, sample_shape: Sequence[int] = Size()):
        sample_shape = Size(tuple(sample_shape))
        with no_grad():
            probs_2d = self.probs.reshape(-1, self._num_events)
            samples_2d = multinomial(probs_2d, max(sample_shape.numel(), 1), True).T
            if sample_shape.numel() == 0:
                samples_2d = samples_2d[:0]
            return samples_2d.reshape(tuple(self._extended_shape(sample_shape)))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        value = value.to(D.int64).unsqueeze(-1)
        value, log_pmf = F.broadcast_tensors(value, self.logits)
        return log_pmf.gather(-1, value[..., :1]).squeeze(-1)

    def entropy(self):
        logits = self.logits.clamp(min=finfo(self.logits.dtype).min)
        return -(logits * self.probs).sum(-1)

    def enumerate_support(self, expand=True):
        values = arange(self._num_events, dtype=D.int64).reshape((-1,) + (1,) * len(self._batch_shape))
        return values.expand((self._num_events,) + tuple(self._batch_shape)) if expand else values


class OneHotCategorical(Distribution):
    """A categorical distribution whose draws are one-hot vectors of length K."""

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    support = constraints.one_hot
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args=None):
        self._categorical = Categorical(probs, logits)
        super().__init__(self._categorical.batch_shape, self._categorical.param_shape[-1:], validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(type(self), _instance)
        new._categorical = self._categorical.expand(batch_shape)
        Distribution.__init__(new, Size(tuple(batch_shape)), self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def _param(self):
        return self._categorical._param

    @property
    def probs(self) -> Tensor:
        return self._categorical.probs

    @property
    def logits(self) -> Tensor:
        return self._categorical.logits

    @property
    def param_shape(self) -> Size:
        return self._categorical.param_shape

    @property
    def mean(self):
        return self._categorical.probs

    @property
    def mode(self):
        probs = self._categorical.probs
        return F.one_hot(probs.argmax(-1), probs.shape[-1]).to(probs.dtype)

    @property
    def variance(self):
        return self._categorical.probs * (1 - self._categorical.probs)

    def sample(self, sample_shape: Sequence[int] = Size()):
        probs = self._categorical.probs
        indices = self._categorical.sample(sample_shape)
        return F.one_hot(indices, probs.shape[-1]).to(probs.dtype)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return self._categorical.log_prob(value.argmax(-1))

    def entropy(self):
        return self._categorical.entropy()

    def enumerate_support(self, expand=True):
        n = self.event_shape[0]
        values = eye(n, dtype=self._param.dtype).reshape((n,) + (1,) * len(self.batch_shape) + (n,))
        return values.expand((n,) + tuple(self.batch_shape) + (n,)) if expand else values


class OneHotCategoricalStraightThrough(OneHotCategorical):
    """OneHotCategorical whose ``rsample`` passes gradients straight through to ``probs`` (Bengio et al. 2013)."""

    has_rsample = True

    def rsample(self, sample_shape: Sequence[int] = Size()):
        samples = self.sample(sample_shape)
        probs = self._categorical.probs
        return samples + (probs - probs.detach())


class Poisson(ExponentialFamily):
    """The Poisson distribution with ``rate`` (counts as floats, as torch)."""

    arg_constraints = {"rate": constraints.nonnegative}
    support = constraints.nonnegative_integer

    def __init__(self, rate, validate_args=None):
        (self.rate,) = broadcast_all(rate)
        super().__init__(Size() if isinstance(rate, numbers.Number) else self.rate.shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Poisson, _instance)
        batch_shape = Size(tuple(batch_shape))
        new.rate = self.rate.expand(batch_shape)
        Distribution.__init__(new, batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self):
        return self.rate

    @property
    def mode(self):
        return self.rate.floor()

    @property
    def variance(self):
        return self.rate

    def sample(self, sample_shape: Sequence[int] = Size()):
        shape = tuple(self._extended_shape(sample_shape))
        with no_grad():
            return _poisson(self.rate.detach().expand(shape))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        rate, value = broadcast_all(self.rate, value)
        return F.xlogy(value, rate) - rate - F.lgamma(value + 1)


def _poisson(lam: Tensor) -> Tensor:
    shape, dt = tuple(lam.shape), lam.dtype
    small = lam < 10
    # small rates: the number of unit-rate exponential arrivals before time lam (64 cover lam < 10)
    arrivals = (-uniform_open((64,) + shape, dt).log()).cumsum(0)
    count_small = (arrivals <= F.where(small, lam, 0 * lam)).to(dt).sum(0)
    # rates >= 10: PTRS (Hoermann 1993), 16 proposals, the first accepted kept
    lam_big = F.where(small, 10 + 0 * lam, lam)
    slam, loglam = lam_big.sqrt(), lam_big.log()
    b = 0.931 + 2.53 * slam
    a = -0.059 + 0.02483 * b
    inv_alpha = 1.1239 + 1.1328 / (b - 3.4)
    vr = 0.9277 - 3.6224 / (b - 2)
    u = standard_uniform((16,) + shape, dt) - 0.5
    v = uniform_open((16,) + shape, dt)
    us = 0.5 - u.abs()
    k = ((2 * a / us + b) * u + lam_big + 0.43).floor()
    quick = (us >= 0.07) & (v <= vr)
    reject = (k < 0) | ((us < 0.013) & (v > us))
    k_safe = k.clamp(min=0)
    ratio = v.log() + math.log(1.0) + inv_alpha.log() - (a / (us * us) + b).log()
    slow = ratio <= -lam_big + k_safe * loglam - F.lgamma(k_safe + 1)
    accept = quick | (~reject & slow)
    first = accept.to(D.int32).argmax(0, keepdim=True)
    count_big = F.where(accept.any(0), k_safe.gather(0, first).squeeze(0), lam_big.floor())
    return F.where(small, count_small, count_big)


class Binomial(Distribution):
    """The number of successes in ``total_count`` Bernoulli(``probs``) trials."""

    arg_constraints = {
        "total_count": constraints.nonnegative_integer,
        "probs": constraints.unit_interval,
        "logits": constraints.real,
    }
    has_enumerate_support = True

    def __init__(self, total_count=1, probs=None, logits=None, validate_args=None):
        _one_of(probs, logits)
        if probs is not None:
            self.total_count, self.probs = broadcast_all(total_count, probs)
            self.total_count = self.total_count.to(self.probs.dtype)
            self._param = self.probs
        else:
            self.total_count, self.logits = broadcast_all(total_count, logits)
            self.total_count = self.total_count.to(self.logits.dtype)
            self._param = self.logits
        self._max_count = _static_max(total_count)
        super().__init__(self._param.shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Binomial, _instance)
        batch_shape = Size(tuple(batch_shape))
        new.total_count = self.total_count.expand(batch_shape)
        if "probs" in self.__dict__:
            new.probs = self.probs.expand(batch_shape)
            new._param = new.probs
        if "logits" in self.__dict__:
            new.logits = self.logits.expand(batch_shape)
            new._param = new.logits
        new._max_count = self._max_count
        Distribution.__init__(new, batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @constraints.dependent_property(is_discrete=True, event_dim=0)
    def support(self):
        return constraints.integer_interval(0, self.total_count)

    @lazy_property
    def logits(self) -> Tensor:
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self) -> Tensor:
        return logits_to_probs(self.logits, is_binary=True)

    @property
    def param_shape(self) -> Size:
        return Size(tuple(self._param.shape))

    @property
    def mean(self):
        return self.total_count * self.probs

    @property
    def mode(self):
        return ((self.total_count + 1) * self.probs).floor().clamp(max=self.total_count)

    @property
    def variance(self):
        return self.total_count * self.probs * (1 - self.probs)

    def sample(self, sample_shape: Sequence[int] = Size()):
        if self._max_count is None:
            raise NotSupportedError(
                "Binomial.sample needs total_count known when the distribution is built (it sums max(total_count) "
                "Bernoulli draws); inside lf.compile pass total_count as a Python number or a tensor built outside"
            )
        shape = tuple(self._extended_shape(sample_shape))
        with no_grad():
            n = self._max_count
            trials = arange(n, dtype=self.probs.dtype).reshape((n,) + (1,) * len(shape))
            u = standard_uniform((n,) + shape, self.probs.dtype)
            hit = (u < self.probs.expand(shape)) & (trials < self.total_count.expand(shape))
            return hit.to(self.probs.dtype).sum(0)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        n, logits = self.total_count, self.logits
        log_factorial_n = F.lgamma(n + 1)
        log_factorial_k = F.lgamma(value + 1)
        log_factorial_nmk = F.lgamma(n - value + 1)
        clamp_by_zero = (logits.clamp(min=0) + logits - logits.clamp(max=0)) / 2
        normalize_term = n * clamp_by_zero + n * (-logits.abs()).exp().log1p() - log_factorial_n
        return value * logits - log_factorial_k - log_factorial_nmk - normalize_term

    def _homogeneous_count(self, what: str) -> int:
        total = int(self.total_count.max())
        if not bool((self.total_count == total).all()):
            raise NotImplementedError(f"Inhomogeneous total count not supported by `{what}`.")
        return total

    def entropy(self):
        self._homogeneous_count("entropy")
        log_prob = self.log_prob(self.enumerate_support(False))
        return -(log_prob.exp() * log_prob).sum(0)

    def enumerate_support(self, expand=True):
        total = self._homogeneous_count("enumerate_support")
        values = arange(1 + total, dtype=self._param.dtype).reshape((-1,) + (1,) * len(self._batch_shape))
        return values.expand((-1,) + tuple(self._batch_shape)) if expand else values


def _static_max(total_count) -> int | None:
    """max(total_count) as a Python int when known now (a number, or a tensor outside a trace), else None."""
    if isinstance(total_count, numbers.Number):
        return max(int(cast(float, total_count)), 0)
    if state.tracing:
        return None
    return max(int(total_count.max()), 0) if total_count.numel() else 0
