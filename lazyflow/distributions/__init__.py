"""lf.distributions: torch.distributions in lazyflow ops (eager, autograd, lf.compile and nn.Graph alike).

Samples come from lazyflow's generator (``lf.manual_seed`` makes them repeatable; inside compiled code every call
draws fresh noise). See the README section "Distributions" for what is there and what is not.
"""

from . import constraints, transforms
from .continuous import Cauchy, Exponential, ExponentialFamily, Gumbel, Laplace, Normal, Uniform
from .discrete import (
    Bernoulli,
    Binomial,
    Categorical,
    Geometric,
    OneHotCategorical,
    OneHotCategoricalStraightThrough,
    Poisson,
)
from .distribution import Distribution
from .extra import HalfCauchy, NegativeBinomial, Weibull
from .gamma import Beta, Chi2, Dirichlet, Gamma, StudentT
from .independent import Independent
from .kl import kl_divergence, register_kl
from .multivariate import LowRankMultivariateNormal, MixtureSameFamily, MultivariateNormal
from .relaxed import (
    HalfNormal,
    Multinomial,
    Pareto,
    RelaxedBernoulli,
    RelaxedOneHotCategorical,
)
from .transforms import (
    AbsTransform,
    AffineTransform,
    ComposeTransform,
    ExpTransform,
    LogNormal,
    PowerTransform,
    SigmoidTransform,
    SoftplusTransform,
    TanhTransform,
    Transform,
    TransformedDistribution,
    identity_transform,
)

__all__ = [
    "LowRankMultivariateNormal",
    "Weibull",
    "NegativeBinomial",
    "HalfCauchy",
    "SoftplusTransform",
    "RelaxedOneHotCategorical",
    "RelaxedBernoulli",
    "PowerTransform",
    "Pareto",
    "Multinomial",
    "HalfNormal",
    "AbsTransform",
    "AffineTransform",
    "Bernoulli",
    "Beta",
    "Binomial",
    "Categorical",
    "Cauchy",
    "Chi2",
    "ComposeTransform",
    "Dirichlet",
    "Distribution",
    "ExpTransform",
    "Exponential",
    "ExponentialFamily",
    "Gamma",
    "Geometric",
    "Gumbel",
    "Independent",
    "Laplace",
    "LogNormal",
    "MixtureSameFamily",
    "MultivariateNormal",
    "Normal",
    "OneHotCategorical",
    "OneHotCategoricalStraightThrough",
    "Poisson",
    "SigmoidTransform",
    "StudentT",
    "TanhTransform",
    "Transform",
    "TransformedDistribution",
    "Uniform",
    "constraints",
    "identity_transform",
    "kl_divergence",
    "register_kl",
    "transforms",
]
