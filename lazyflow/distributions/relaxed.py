"""Continuous relaxations and a few more families: RelaxedBernoulli, RelaxedOneHotCategorical (Gumbel-softmax),
Multinomial, HalfNormal, Pareto."""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from typing import Any

from .. import _functional as F
from .._core.size import Size
from .._creation import full, zeros_like
from .._tensor import Tensor
from ..autograd.grad_mode import no_grad
from . import constraints
from .continuous import Exponential, Normal
from .discrete import Categorical, _ProbsLogits
from .distribution import Distribution
from .transforms import AbsTransform, AffineTransform, ExpTransform, SigmoidTransform, TransformedDistribution
from .utils import broadcast_all, clamp_probs, standard_uniform

__all__ = [
    "LogitRelaxedBernoulli",
    "RelaxedBernoulli",
    "ExpRelaxedCategorical",
    "RelaxedOneHotCategorical",
    "Multinomial",
    "HalfNormal",
    "Pareto",
]


def _log(t) -> Tensor | float:
    return math.log(t) if isinstance(t, numbers.Number) else t.log()  # type: ignore[arg-type]


class LogitRelaxedBernoulli(_ProbsLogits):
    """The logit of a RelaxedBernoulli draw (Maddison et al. 2017), at ``temperature``."""

    support = constraints.real
    has_rsample = True

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        self.temperature = temperature
        super().__init__(probs, logits, validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._expand_into(self._get_checked_instance(LogitRelaxedBernoulli, _instance), batch_shape)
        new.temperature = self.temperature
        return new

    def rsample(self, sample_shape: Sequence[int] = Size()):
        shape = tuple(self._extended_shape(sample_shape))
        u = clamp_probs(standard_uniform(shape, self.probs.dtype))
        return (u.log() - (-u).log1p() + self.logits) / self.temperature

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        diff = logits - value * self.temperature
        return _log(self.temperature) + diff - 2 * diff.exp().log1p()


class _BaseParams:
    """temperature/logits/probs of a relaxed distribution, read from its base distribution."""

    base_dist: Any

    @property
    def temperature(self):
        return self.base_dist.temperature

    @property
    def logits(self):
        return self.base_dist.logits

    @property
    def probs(self):
        return self.base_dist.probs


class RelaxedBernoulli(_BaseParams, TransformedDistribution):
    """A reparameterisable relaxation of Bernoulli on (0, 1): sigmoid of a LogitRelaxedBernoulli draw."""

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.unit_interval  # type: ignore[assignment]
    has_rsample = True  # type: ignore[assignment]

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        base = LogitRelaxedBernoulli(temperature, probs, logits)
        super().__init__(base, SigmoidTransform(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return super().expand(batch_shape, _instance=self._get_checked_instance(RelaxedBernoulli, _instance))


class ExpRelaxedCategorical(Distribution):
    """The log of a RelaxedOneHotCategorical (Gumbel-softmax) draw, at ``temperature``."""

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        self._categorical = Categorical(probs, logits)
        self.temperature = temperature
        shape = tuple(self._categorical.param_shape)
        super().__init__(shape[:-1], shape[-1:], validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(ExpRelaxedCategorical, _instance)
        new.temperature = self.temperature
        new._categorical = self._categorical.expand(batch_shape)
        Distribution.__init__(new, Size(tuple(batch_shape)), self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def logits(self):
        return self._categorical.logits

    @property
    def probs(self):
        return self._categorical.probs

    def rsample(self, sample_shape: Sequence[int] = Size()):
        shape = tuple(self._extended_shape(sample_shape))
        u = clamp_probs(standard_uniform(shape, self.logits.dtype))
        gumbels = -((-(u.log())).log())
        scores = (self.logits + gumbels) / self.temperature
        return scores - scores.logsumexp(dim=-1, keepdim=True)

    def log_prob(self, value):
        k = self._categorical._num_events
        if self._validate_args:
            self._validate_sample(value)
        logits, value = F.broadcast_tensors(self.logits, value)
        log_scale = math.lgamma(k) + (k - 1) * _log(self.temperature)
        score = logits - value * self.temperature
        score = (score - score.logsumexp(dim=-1, keepdim=True)).sum(-1)
        return score + log_scale


class RelaxedOneHotCategorical(_BaseParams, TransformedDistribution):
    """A reparameterisable relaxation of OneHotCategorical on the simplex (Gumbel-softmax, Jang et al. 2017)."""

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    support = constraints.simplex  # type: ignore[assignment]
    has_rsample = True  # type: ignore[assignment]

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        base = ExpRelaxedCategorical(temperature, probs, logits, validate_args=validate_args)
        super().__init__(base, ExpTransform(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return super().expand(batch_shape, _instance=self._get_checked_instance(RelaxedOneHotCategorical, _instance))


class Multinomial(Distribution):
    """Counts of ``total_count`` draws from a Categorical over K (one Python int ``total_count``, as torch).

    Raises:
        NotImplementedError: ``total_count`` is not an int (torch's inhomogeneous-count error).
    """

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}

    def __init__(self, total_count=1, probs=None, logits=None, validate_args=None):
        if not isinstance(total_count, int):
            raise NotImplementedError("inhomogeneous total_count is not supported")
        self.total_count = total_count
        self._categorical = Categorical(probs=probs, logits=logits)
        self._binomial_param = self._categorical._param
        shape = tuple(self._categorical.param_shape)
        super().__init__(shape[:-1], shape[-1:], validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Multinomial, _instance)
        new.total_count = self.total_count
        new._categorical = self._categorical.expand(batch_shape)
        Distribution.__init__(new, Size(tuple(batch_shape)), self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @constraints.dependent_property(is_discrete=True, event_dim=1)
    def support(self):
        return constraints.multinomial(self.total_count)

    @property
    def logits(self):
        return self._categorical.logits

    @property
    def probs(self):
        return self._categorical.probs

    @property
    def param_shape(self):
        return self._categorical.param_shape

    @property
    def mean(self):
        return self.probs * self.total_count

    @property
    def variance(self):
        return self.total_count * self.probs * (1 - self.probs)

    def sample(self, sample_shape: Sequence[int] = Size()):
        with no_grad():
            k = self._categorical._num_events
            if self.total_count == 0:
                return full(tuple(self._extended_shape(sample_shape)), 0.0, dtype=self.probs.dtype)
            draws = self._categorical.sample(Size((self.total_count,) + tuple(sample_shape)))
            return F.one_hot(draws, k).to(self.probs.dtype).sum(0)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = F.broadcast_tensors(self.logits, value)
        log_factorial_n = F.lgamma(value.sum(-1) + 1)
        log_factorial_xs = F.lgamma(value + 1).sum(-1)
        logits = F.where((value == 0) & (logits == -math.inf), zeros_like(logits), logits)
        return log_factorial_n - log_factorial_xs + (logits * value).sum(-1)


class HalfNormal(TransformedDistribution):
    """|X| for X ~ Normal(0, scale)."""

    arg_constraints = {"scale": constraints.positive}
    support = constraints.nonnegative  # type: ignore[assignment]
    has_rsample = True  # type: ignore[assignment]

    def __init__(self, scale, validate_args=None):
        base = Normal(0, scale, validate_args=False)
        super().__init__(base, AbsTransform(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return super().expand(batch_shape, _instance=self._get_checked_instance(HalfNormal, _instance))

    @property
    def scale(self):
        return self.base_dist.scale

    @property
    def mean(self):
        return self.scale * math.sqrt(2 / math.pi)

    @property
    def mode(self):
        return zeros_like(self.scale)

    @property
    def variance(self):
        return self.scale.pow(2) * (1 - 2 / math.pi)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        log_prob = self.base_dist.log_prob(value) + math.log(2)
        return F.where(value >= 0, log_prob, log_prob * 0 - math.inf)

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return 2 * self.base_dist.cdf(value) - 1

    def icdf(self, value):
        return self.base_dist.icdf((value + 1) / 2)

    def entropy(self):
        return self.base_dist.entropy() - math.log(2)


class Pareto(TransformedDistribution):
    """The Pareto (type I) distribution with ``scale`` (the minimum) and tail index ``alpha``."""

    arg_constraints = {"alpha": constraints.positive, "scale": constraints.positive}

    def __init__(self, scale, alpha, validate_args=None):
        self.scale, self.alpha = broadcast_all(scale, alpha)
        base = Exponential(self.alpha, validate_args=validate_args)
        super().__init__(base, [ExpTransform(), AffineTransform(loc=0, scale=self.scale)], validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Pareto, _instance)
        new.scale = self.scale.expand(tuple(batch_shape))
        new.alpha = self.alpha.expand(tuple(batch_shape))
        return super().expand(batch_shape, _instance=new)

    @property
    def mean(self):
        a = self.alpha.clamp(min=1)
        return a * self.scale / (a - 1)

    @property
    def mode(self):
        return self.scale

    @property
    def variance(self):
        a = self.alpha.clamp(min=2)
        return self.scale.pow(2) * a / ((a - 1).pow(2) * (a - 2))

    @constraints.dependent_property(is_discrete=False, event_dim=0)
    def support(self):
        return constraints.greater_than_eq(self.scale)

    def entropy(self):
        return (self.scale / self.alpha).log() + (1 + self.alpha.reciprocal())
