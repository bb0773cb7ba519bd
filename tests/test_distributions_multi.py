"""lf.distributions against torch.distributions: multivariate ones (MultivariateNormal in its three
parameterisations, Dirichlet, Independent, MixtureSameFamily), transforms and TransformedDistribution,
kl_divergence for the registered pairs, constraints, and validation errors (torch's classes and messages)."""

import numpy as np
import pytest
import torch
import torch.distributions as TD
from torch.distributions import transforms as TT

import lazyflow as lf
import lazyflow.distributions as D
from lazyflow.distributions import constraints as C

pytestmark = pytest.mark.usefixtures("torch_validates_distributions")  # tests/conftest.py


RNG = np.random.default_rng(7)


def _pd(n, batch=()):
    a = RNG.normal(size=batch + (n, n))
    return a @ np.swapaxes(a, -1, -2) + n * np.eye(n)


def _both(fn_lf, fn_t, *arrays, grad=False):
    la = [lf.tensor(a, requires_grad=grad) for a in arrays]
    ta = [torch.tensor(a, requires_grad=grad) for a in arrays]
    return fn_lf(*la), fn_t(*ta), la, ta


def _close(a, b, rtol=1e-9, atol=1e-10, msg=""):
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=rtol, atol=atol, err_msg=msg)


@pytest.mark.parametrize("param", ["covariance_matrix", "precision_matrix", "scale_tril"])
def test_multivariate_normal_matches_torch(param):
    cov = _pd(3, (2,))
    mat = {"covariance_matrix": cov, "precision_matrix": np.linalg.inv(cov), "scale_tril": np.linalg.cholesky(cov)}[
        param
    ]
    loc = RNG.normal(size=(2, 3))
    d, t, la, ta = _both(
        lambda lo, m: D.MultivariateNormal(lo, **{param: m}),
        lambda lo, m: TD.MultivariateNormal(lo, **{param: m}),
        loc,
        mat,
        grad=True,
    )
    v = RNG.normal(size=(4, 2, 3))
    lp, tp = d.log_prob(lf.tensor(v)), t.log_prob(torch.tensor(v))
    _close(lp, tp)
    _close(d.entropy(), t.entropy())
    for m in ("mean", "mode", "variance", "covariance_matrix", "precision_matrix", "scale_tril"):
        _close(getattr(d, m), getattr(t, m), rtol=1e-8, msg=m)
    (lp.sum() + d.entropy().sum()).backward()
    (tp.sum() + t.entropy().sum()).backward()
    for a, b in zip(la, ta):
        _close(a.grad, b.grad, rtol=1e-7, atol=1e-9)
    assert tuple(d.batch_shape) == (2,) and tuple(d.event_shape) == (3,)


def test_dirichlet_independent_and_mixture_match_torch():
    c = RNG.uniform(0.3, 3.0, (2, 4))
    d, t, la, ta = _both(D.Dirichlet, TD.Dirichlet, c, grad=True)
    v = RNG.dirichlet(np.ones(4), size=2)
    lp, tp = d.log_prob(lf.tensor(v)), t.log_prob(torch.tensor(v))
    _close(lp, tp)
    for m in ("mean", "variance", "mode"):
        _close(getattr(d, m), getattr(t, m), msg=m)
    (lp.sum() + d.entropy().sum()).backward()
    (tp.sum() + t.entropy().sum()).backward()
    _close(la[0].grad, ta[0].grad, rtol=1e-7)

    loc, scale = RNG.normal(size=(3, 5)), RNG.uniform(0.5, 2, (3, 5))
    ind, tind, _, _ = _both(
        lambda a, b: D.Independent(D.Normal(a, b), 1), lambda a, b: TD.Independent(TD.Normal(a, b), 1), loc, scale
    )
    v = RNG.normal(size=(3, 5))
    _close(ind.log_prob(lf.tensor(v)), tind.log_prob(torch.tensor(v)))
    _close(ind.entropy(), tind.entropy())
    assert tuple(ind.batch_shape) == (3,) and tuple(ind.event_shape) == (5,)

    logits, mloc, mscale = RNG.normal(size=(2, 3)), RNG.normal(size=(2, 3, 4)), RNG.uniform(0.5, 2, (2, 3, 4))
    mix, tmix, la, ta = _both(
        lambda w, a, b: D.MixtureSameFamily(D.Categorical(logits=w), D.Independent(D.Normal(a, b), 1)),
        lambda w, a, b: TD.MixtureSameFamily(TD.Categorical(logits=w), TD.Independent(TD.Normal(a, b), 1)),
        logits,
        mloc,
        mscale,
        grad=True,
    )
    v = RNG.normal(size=(5, 2, 4))
    lp, tp = mix.log_prob(lf.tensor(v)), tmix.log_prob(torch.tensor(v))
    _close(lp, tp)
    _close(mix.mean, tmix.mean)
    _close(mix.variance, tmix.variance)
    lp.sum().backward()
    tp.sum().backward()
    for a, b in zip(la, ta):
        _close(a.grad, b.grad, rtol=1e-7)
    assert tuple(mix.sample((6,)).shape) == (6, 2, 4)


TRANSFORMS = {
    "exp": (lambda L: [L.ExpTransform()], [0.2, 1.5, 3.0]),
    "sigmoid": (lambda L: [L.SigmoidTransform()], [0.1, 0.5, 0.9]),
    "tanh": (lambda L: [L.TanhTransform()], [-0.9, 0.1, 0.7]),
    "affine": (lambda L: [L.AffineTransform(1.0, -2.0)], [-0.9, 0.1, 0.7]),
    "compose": (lambda L: [L.ComposeTransform([L.AffineTransform(0.5, 2.0), L.TanhTransform()])], [-0.9, 0.1, 0.7]),
}


@pytest.mark.parametrize("name", sorted(TRANSFORMS))
def test_transformed_distribution_matches_torch(name):
    build, v = TRANSFORMS[name]
    v = np.array(v)
    loc = np.array([0.1, -0.4, 0.8])
    lloc, tloc = lf.tensor(loc, requires_grad=True), torch.tensor(loc, requires_grad=True)
    tmod = type("T", (), {k: getattr(TT, k) for k in dir(TT) if k.endswith("Transform")})
    d = D.TransformedDistribution(D.Normal(lloc, 1.0), build(D))
    t = TD.TransformedDistribution(TD.Normal(tloc, 1.0), build(tmod))
    lp, tp = d.log_prob(lf.tensor(v)), t.log_prob(torch.tensor(v))
    _close(lp, tp, rtol=1e-8)
    lp.sum().backward()
    tp.sum().backward()
    _close(lloc.grad, tloc.grad, rtol=1e-7)
    if name != "compose":  # torch's ComposeTransform has no sign for tanh either way; cdf needs it
        _close(d.cdf(lf.tensor(v)), t.cdf(torch.tensor(v)), rtol=1e-8)
        q = np.array([0.1, 0.5, 0.8])
        _close(d.icdf(lf.tensor(q)), t.icdf(torch.tensor(q)), rtol=1e-8)
    x = np.array([-1.0, 0.3, 2.0])
    for lt, tt in zip(build(D), build(tmod)):
        y = lt(lf.tensor(x))
        _close(y, tt(torch.tensor(x)))
        _close(
            lt.log_abs_det_jacobian(lf.tensor(x), y), tt.log_abs_det_jacobian(torch.tensor(x), torch.tensor(y.numpy()))
        )
        _close(lt.inv(y), torch.tensor(x), rtol=1e-7)


KL_PAIRS = {
    "Normal": (lambda L, a, b: L.Normal(a, b), 2),
    "Bernoulli": (lambda L, a: L.Bernoulli(probs=a), 1),
    "Categorical": (lambda L, a: L.Categorical(probs=a), "simplex"),
    "OneHotCategorical": (lambda L, a: L.OneHotCategorical(probs=a), "simplex"),
    "Beta": (lambda L, a, b: L.Beta(a, b), 2),
    "Gamma": (lambda L, a, b: L.Gamma(a, b), 2),
    "Dirichlet": (lambda L, a: L.Dirichlet(a), "pos"),
    "Exponential": (lambda L, a: L.Exponential(a), 1),
    "Uniform": (lambda L, a, b: L.Uniform(a, a + b), 2),
    "Independent": (lambda L, a, b: L.Independent(L.Normal(a, b), 1), 2),
    "MultivariateNormal": (lambda L, a, b: L.MultivariateNormal(a[..., 0, :], covariance_matrix=b), "mvn"),
}


def _kl_params(kind):
    if kind == "simplex":
        p = RNG.uniform(0.1, 1, (3, 4))
        return [p / p.sum(-1, keepdims=True)]
    if kind == "pos":
        return [RNG.uniform(0.3, 3, (3, 4))]
    if kind == "mvn":
        return [RNG.normal(size=(2, 1, 3)), _pd(3, (2,))]
    return [RNG.uniform(0.1, 0.9, (3, 4)) if kind == 1 else RNG.uniform(0.3, 2.0, (3, 4)) for _ in range(kind)]


@pytest.mark.parametrize("name", sorted(KL_PAIRS))
def test_kl_divergence_matches_torch(name):
    build, kind = KL_PAIRS[name]
    p_args, q_args = _kl_params(kind), _kl_params(kind)
    if name == "Uniform":
        q_args = [p_args[0] - 0.1, p_args[1] + 0.3]  # q covers p: a finite KL
    lp = [lf.tensor(a, requires_grad=True) for a in p_args]
    tp = [torch.tensor(a, requires_grad=True) for a in p_args]
    got = D.kl_divergence(build(D, *lp), build(D, *[lf.tensor(a) for a in q_args]))
    want = TD.kl_divergence(build(TD, *tp), build(TD, *[torch.tensor(a) for a in q_args]))
    _close(got, want, rtol=1e-8)
    got.sum().backward()
    want.sum().backward()
    for a, b in zip(lp, tp):
        _close(a.grad, b.grad, rtol=1e-6, atol=1e-9)


def test_kl_special_cases_and_registry():
    # q does not cover p: infinite, as torch
    got = D.kl_divergence(D.Uniform(lf.tensor([0.0]), lf.tensor([2.0])), D.Uniform(lf.tensor([0.5]), lf.tensor([3.0])))
    assert np.isinf(got.numpy()).all()
    got = D.kl_divergence(D.Bernoulli(lf.tensor([0.5, 0.0])), D.Bernoulli(lf.tensor([0.0, 0.3])))
    want = TD.kl_divergence(TD.Bernoulli(torch.tensor([0.5, 0.0])), TD.Bernoulli(torch.tensor([0.0, 0.3])))
    np.testing.assert_allclose(got.numpy(), want.numpy())
    with pytest.raises(NotImplementedError, match="Normal.*Laplace"):
        D.kl_divergence(D.Normal(0.0, 1.0), D.Laplace(0.0, 1.0))

    class MyNormal(D.Normal):
        pass

    # subclasses use the parent's rule; a new registration for the pair takes over
    np.testing.assert_allclose(D.kl_divergence(MyNormal(0.0, 1.0), D.Normal(1.0, 1.0)).item(), 0.5)

    @D.register_kl(MyNormal, D.Normal)
    def _kl(p, q):
        return lf.tensor(42.0)

    assert D.kl_divergence(MyNormal(0.0, 1.0), D.Normal(1.0, 1.0)).item() == 42.0
    with pytest.raises(TypeError):
        D.register_kl(int, D.Normal)


@pytest.mark.parametrize(
    "bad",
    [
        lambda L, T: L.Normal(T([0.0]), T([-1.0])),
        lambda L, T: L.Bernoulli(probs=T([1.5])),
        lambda L, T: L.Categorical(probs=T([0.5, -0.1])),
        lambda L, T: L.MultivariateNormal(T([0.0, 0.0]), covariance_matrix=T([[1.0, 2.0], [2.0, 1.0]])),
        lambda L, T: L.MultivariateNormal(T([0.0, 0.0]), scale_tril=T([[1.0, 1.0], [0.0, 1.0]])),
        lambda L, T: L.Gamma(T([1.0]), T([0.0])),
        lambda L, T: L.Beta(T([0.0]), T([1.0])),
        lambda L, T: L.Dirichlet(T([1.0, -1.0])),
        lambda L, T: L.Uniform(T([1.0]), T([1.0])),
        lambda L, T: L.Geometric(probs=T([0.0])),
        lambda L, T: L.Poisson(T([-1.0])),
        lambda L, T: L.Binomial(T([2.5]), probs=T([0.5])),
        lambda L, T: L.StudentT(T([-1.0])),
        lambda L, T: L.Exponential(T([-2.0])),
    ],
)
def test_bad_parameters_raise_value_error_like_torch(bad):
    with pytest.raises(ValueError) as tex:
        bad(TD, lambda v: torch.tensor(v))
    with pytest.raises(ValueError) as lex:
        bad(D, lambda v: lf.tensor(v))
    assert isinstance(lex.value, lf.ValueRangeError)
    head = str(tex.value).split(" of distribution")[0].split(" is not defined")[0]
    assert str(lex.value).startswith(head), (str(lex.value), head)


def test_values_outside_support_and_bad_shapes_raise():
    cases = [
        (lambda L: L.Exponential(1.0), -1.0),
        (lambda L: L.Bernoulli(0.3), 0.5),
        (lambda L: L.Beta(2.0, 2.0), 1.5),
        (lambda L: L.Poisson(2.0), 1.5),
        (lambda L: L.Uniform(0.0, 1.0), 2.0),
    ]
    for build, v in cases:
        with pytest.raises(ValueError, match="support"):
            build(TD).log_prob(torch.tensor(v))
        with pytest.raises(ValueError, match="support"):
            build(D).log_prob(lf.tensor(v))
    assert np.isfinite(D.Exponential(1.0, validate_args=False).log_prob(lf.tensor(-1.0)).item())
    with pytest.raises(ValueError, match="event_shape"):
        D.Dirichlet(lf.ones(3)).log_prob(lf.ones(4) / 4)
    with pytest.raises(ValueError, match="broadcastable"):
        D.Normal(lf.zeros(3), 1.0).log_prob(lf.zeros(4))
    with pytest.raises(ValueError, match="must all be instances"):
        D.Normal("a", 1.0)


def test_constructor_argument_errors():
    with pytest.raises(ValueError, match="Either `probs` or `logits`"):
        D.Bernoulli()
    with pytest.raises(ValueError, match="Either `probs` or `logits`"):
        D.Categorical(probs=lf.ones(2), logits=lf.ones(2))
    with pytest.raises(ValueError, match="Exactly one of covariance_matrix"):
        D.MultivariateNormal(lf.zeros(2))
    with pytest.raises(ValueError, match="at least one-dimensional"):
        D.MultivariateNormal(lf.tensor(0.0), scale_tril=lf.eye(1))
    with pytest.raises(ValueError, match="at least one-dimensional"):
        D.Dirichlet(lf.tensor(1.0))
    with pytest.raises(ValueError, match="Categorical"):
        D.MixtureSameFamily(D.Normal(0.0, 1.0), D.Normal(lf.zeros(2), 1.0))
    with pytest.raises(ValueError, match="does not equal"):
        D.MixtureSameFamily(D.Categorical(logits=lf.zeros(3)), D.Normal(lf.zeros(2), 1.0))
    with pytest.raises(ValueError, match="reinterpreted_batch_ndims"):
        D.Independent(D.Normal(lf.zeros(2), 1.0), 2)
    with pytest.raises(NotImplementedError, match="rsample"):
        D.Bernoulli(0.5).rsample()
    with pytest.raises(ValueError):
        D.Distribution.set_default_validate_args("yes")


def test_default_validate_args_switch():
    D.Distribution.set_default_validate_args(False)
    try:
        D.Normal(0.0, -1.0)  # accepted with validation off, as torch
        TD.Distribution.set_default_validate_args(False)
        TD.Normal(0.0, -1.0)
    finally:
        D.Distribution.set_default_validate_args(True)
        TD.Distribution.set_default_validate_args(True)
    with pytest.raises(ValueError):
        D.Normal(0.0, -1.0)
    D.Normal(0.0, -1.0, validate_args=False)


def test_constraints_check_like_torch():
    x = np.array([[-1.0, 0.0, 0.5, 1.0, 2.0, np.nan]])
    for name in ("real", "positive", "nonnegative", "unit_interval", "boolean", "nonnegative_integer"):
        got = getattr(C, name).check(lf.tensor(x)).numpy()
        want = getattr(TD.constraints, name).check(torch.tensor(x)).numpy()
        np.testing.assert_array_equal(got, want, err_msg=name)
    for lc, tc in [
        (C.interval(0.0, 1.0), TD.constraints.interval(0.0, 1.0)),
        (C.half_open_interval(0.0, 1.0), TD.constraints.half_open_interval(0.0, 1.0)),
        (C.greater_than(0.5), TD.constraints.greater_than(0.5)),
        (C.integer_interval(0, 1), TD.constraints.integer_interval(0, 1)),
    ]:
        np.testing.assert_array_equal(lc.check(lf.tensor(x)).numpy(), tc.check(torch.tensor(x)).numpy())
        assert repr(lc) == repr(tc)
    s = np.array([[0.2, 0.8], [0.5, 0.6], [-0.1, 1.1]])
    np.testing.assert_array_equal(
        C.simplex.check(lf.tensor(s)).numpy(), TD.constraints.simplex.check(torch.tensor(s)).numpy()
    )
    m = np.stack([np.eye(2), np.array([[1.0, 2.0], [2.0, 1.0]]), np.array([[1.0, 0.0], [1.0, -1.0]])])
    for name in ("positive_definite", "lower_cholesky", "lower_triangular"):
        got = getattr(C, name).check(lf.tensor(m)).numpy()
        np.testing.assert_array_equal(got, getattr(TD.constraints, name).check(torch.tensor(m)).numpy(), err_msg=name)
    assert C.is_dependent(D.Categorical(lf.ones(2)).support) is False and repr(C.real) == repr(TD.constraints.real)
    assert D.Normal.support.event_dim == 0 and D.MultivariateNormal.support.event_dim == 1


def test_low_rank_multivariate_normal_matches_torch():
    loc, w, dg = RNG.normal(size=(2, 4)), RNG.normal(size=(2, 4, 2)), RNG.uniform(0.5, 2.0, (2, 4))
    d, t, la, ta = _both(D.LowRankMultivariateNormal, TD.LowRankMultivariateNormal, loc, w, dg, grad=True)
    v = RNG.normal(size=(3, 2, 4))
    lp, tp = d.log_prob(lf.tensor(v)), t.log_prob(torch.tensor(v))
    _close(lp, tp)
    _close(d.entropy(), t.entropy())
    for m in ("mean", "variance", "covariance_matrix", "precision_matrix", "scale_tril"):
        _close(getattr(d, m), getattr(t, m), rtol=1e-8, msg=m)
    (lp.sum() + d.entropy().sum()).backward()
    (tp.sum() + t.entropy().sum()).backward()
    for a, b in zip(la, ta):
        _close(a.grad, b.grad, rtol=1e-7, atol=1e-9)
    x = D.LowRankMultivariateNormal(lf.tensor(loc), lf.tensor(w), lf.tensor(dg)).sample((20000,)).numpy()
    assert x.shape == (20000, 2, 4)
    se = np.sqrt(t.variance.detach().numpy() / 20000)
    assert np.all(np.abs(x.mean(0) - loc) <= 5 * se)
    np.testing.assert_allclose(x.var(0), t.variance.detach().numpy(), rtol=0.06)
    with pytest.raises(ValueError, match="cov_factor must be a batch"):
        D.LowRankMultivariateNormal(lf.zeros(3), lf.zeros(4, 2), lf.ones(3))
    with pytest.raises(ValueError, match="cov_diag must be a batch"):
        D.LowRankMultivariateNormal(lf.zeros(3), lf.zeros(3, 2), lf.ones(4))
    with pytest.raises(ValueError, match="cov_diag"):
        D.LowRankMultivariateNormal(lf.zeros(3), lf.zeros(3, 2), -lf.ones(3))
