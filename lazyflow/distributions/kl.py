"""kl_divergence(p, q) with torch's registry: ``@register_kl(P, Q)`` adds a closed form; the most specific
registered pair (by class hierarchy) is used; an unregistered pair raises NotImplementedError."""

from __future__ import annotations

import math
from functools import total_ordering

from .. import _functional as F
from .._core.errors import NotSupportedError
from .._linalg_top import triangular_solve
from .._tensor import Tensor
from .continuous import Exponential, Normal, Uniform
from .discrete import Bernoulli, Categorical, OneHotCategorical
from .distribution import Distribution
from .gamma import Beta, Dirichlet, Gamma
from .independent import Independent
from .multivariate import MultivariateNormal, _batch_mahalanobis
from .utils import sum_rightmost

__all__ = ["register_kl", "kl_divergence"]

_KL_REGISTRY: dict = {}
_KL_MEMOIZE: dict = {}


def register_kl(type_p, type_q):
    """A decorator registering ``fn(p, q)`` as KL(p || q) for ``p`` of ``type_p`` and ``q`` of ``type_q``.

    Raises:
        TypeError: either argument is not a Distribution subclass.
    """
    if not isinstance(type_p, type) or not issubclass(type_p, Distribution):
        raise TypeError(f"Expected type_p to be a Distribution subclass but got {type_p}")
    if not isinstance(type_q, type) or not issubclass(type_q, Distribution):
        raise TypeError(f"Expected type_q to be a Distribution subclass but got {type_q}")

    def decorator(fun):
        _KL_REGISTRY[type_p, type_q] = fun
        _KL_MEMOIZE.clear()
        return fun

    return decorator


@total_ordering
class _Match:
    __slots__ = ["types"]

    def __init__(self, *types):
        self.types = types

    def __eq__(self, other):
        return self.types == other.types

    def __le__(self, other):
        for x, y in zip(self.types, other.types):
            if not issubclass(x, y):
                return False
            if x is not y:
                break
        return True


def _dispatch_kl(type_p, type_q):
    matches = [(p, q) for p, q in _KL_REGISTRY if issubclass(type_p, p) and issubclass(type_q, q)]
    if not matches:
        return NotImplemented
    left_p, left_q = min(_Match(*m) for m in matches).types
    return _KL_REGISTRY[left_p, left_q]  # torch also takes the left-most match (it warns when ambiguous)


def kl_divergence(p: Distribution, q: Distribution) -> Tensor:
    """KL(p || q) = E_p[log p(x) - log q(x)], batched over their batch shapes.

    Raises:
        NotImplementedError: no closed form is registered for ``(type(p), type(q))``.
    """
    try:
        fun = _KL_MEMOIZE[type(p), type(q)]
    except KeyError:
        fun = _dispatch_kl(type(p), type(q))
        _KL_MEMOIZE[type(p), type(q)] = fun
    if fun is NotImplemented:
        raise NotSupportedError(
            f"No KL(p || q) is implemented for p type {p.__class__.__name__} and q type {q.__class__.__name__}; "
            "register one with @lf.distributions.register_kl"
        )
    return fun(p, q)


def _infinite_like(t: Tensor) -> Tensor:
    return 0 * t + math.inf


@register_kl(Normal, Normal)
def _kl_normal_normal(p, q):
    var_ratio = (p.scale / q.scale).pow(2)
    t1 = ((p.loc - q.loc) / q.scale).pow(2)
    return 0.5 * (var_ratio + t1 - 1 - var_ratio.log())


@register_kl(Bernoulli, Bernoulli)
def _kl_bernoulli_bernoulli(p, q):
    t1 = p.probs * (F.softplus(-q.logits) - F.softplus(-p.logits))
    t1 = F.where(q.probs == 0, _infinite_like(t1), t1)
    t1 = F.where(p.probs == 0, 0 * t1, t1)
    t2 = (1 - p.probs) * (F.softplus(q.logits) - F.softplus(p.logits))
    t2 = F.where(q.probs == 1, _infinite_like(t2), t2)
    t2 = F.where(p.probs == 1, 0 * t2, t2)
    return t1 + t2


@register_kl(Categorical, Categorical)
def _kl_categorical_categorical(p, q):
    t = p.probs * (p.logits - q.logits)
    t = F.where((q.probs == 0).expand_as(t), _infinite_like(t), t)
    t = F.where((p.probs == 0).expand_as(t), 0 * t, t)
    return t.sum(-1)


@register_kl(OneHotCategorical, OneHotCategorical)
def _kl_onehotcategorical_onehotcategorical(p, q):
    return _kl_categorical_categorical(p._categorical, q._categorical)


@register_kl(Beta, Beta)
def _kl_beta_beta(p, q):
    sum_params_p = p.concentration1 + p.concentration0
    sum_params_q = q.concentration1 + q.concentration0
    t1 = F.lgamma(q.concentration1) + F.lgamma(q.concentration0) + F.lgamma(sum_params_p)
    t2 = F.lgamma(p.concentration1) + F.lgamma(p.concentration0) + F.lgamma(sum_params_q)
    t3 = (p.concentration1 - q.concentration1) * F.digamma(p.concentration1)
    t4 = (p.concentration0 - q.concentration0) * F.digamma(p.concentration0)
    t5 = (sum_params_q - sum_params_p) * F.digamma(sum_params_p)
    return t1 - t2 + t3 + t4 + t5


@register_kl(Dirichlet, Dirichlet)
def _kl_dirichlet_dirichlet(p, q):
    sum_p_concentration = p.concentration.sum(-1)
    sum_q_concentration = q.concentration.sum(-1)
    t1 = F.lgamma(sum_p_concentration) - F.lgamma(sum_q_concentration)
    t2 = (F.lgamma(p.concentration) - F.lgamma(q.concentration)).sum(-1)
    t3 = p.concentration - q.concentration
    t4 = F.digamma(p.concentration) - F.digamma(sum_p_concentration).unsqueeze(-1)
    return t1 - t2 + (t3 * t4).sum(-1)


@register_kl(Exponential, Exponential)
def _kl_exponential_exponential(p, q):
    rate_ratio = q.rate / p.rate
    return rate_ratio - 1 - rate_ratio.log()


@register_kl(Gamma, Gamma)
def _kl_gamma_gamma(p, q):
    t1 = q.concentration * (p.rate / q.rate).log()
    t2 = F.lgamma(q.concentration) - F.lgamma(p.concentration)
    t3 = (p.concentration - q.concentration) * F.digamma(p.concentration)
    t4 = (q.rate - p.rate) * (p.concentration / p.rate)
    return t1 + t2 + t3 + t4


@register_kl(Uniform, Uniform)
def _kl_uniform_uniform(p, q):
    result = ((q.high - q.low) / (p.high - p.low)).log()
    outside = (q.low > p.low) | (q.high < p.high)
    return F.where(outside, _infinite_like(result), result)


@register_kl(Independent, Independent)
def _kl_independent_independent(p, q):
    if p.reinterpreted_batch_ndims != q.reinterpreted_batch_ndims:
        raise NotSupportedError(
            "KL between Independents with different reinterpreted_batch_ndims "
            f"({p.reinterpreted_batch_ndims} vs {q.reinterpreted_batch_ndims}) is not implemented"
        )
    return sum_rightmost(kl_divergence(p.base_dist, q.base_dist), p.reinterpreted_batch_ndims)


@register_kl(MultivariateNormal, MultivariateNormal)
def _kl_multivariatenormal_multivariatenormal(p, q):
    if tuple(p.event_shape) != tuple(q.event_shape):
        raise ValueError(
            "KL-divergence between two Multivariate Normals with different event shapes cannot be computed "
            f"({tuple(p.event_shape)} vs {tuple(q.event_shape)})"
        )
    lp, lq = p._unbroadcasted_scale_tril, q._unbroadcasted_scale_tril
    half_term1 = lq.diagonal(dim1=-2, dim2=-1).log().sum(-1) - lp.diagonal(dim1=-2, dim2=-1).log().sum(-1)
    n = p.event_shape[0]
    batch = tuple(F.broadcast_shapes(tuple(lq.shape[:-2]), tuple(lp.shape[:-2])))
    lq_b = lq.expand(batch + (n, n))
    lp_b = lp.expand(batch + (n, n))
    # tr(Sigma_q^-1 Sigma_p) = ||Lq^-1 Lp||_F^2
    term2 = _frobenius_solve(lq_b, lp_b)
    term3 = _batch_mahalanobis(lq, q.loc - p.loc)
    return half_term1 + 0.5 * (term2 + term3 - n)


def _frobenius_solve(lq: Tensor, lp: Tensor) -> Tensor:
    """||Lq^-1 Lp||_F^2 = tr(Sigma_q^-1 Sigma_p), one triangular solve."""
    x = triangular_solve(lp, lq, upper=False)[0]
    return (x * x).sum((-2, -1))
