"""lf.distributions' relaxations and extra families against torch: RelaxedBernoulli, RelaxedOneHotCategorical,
Multinomial, HalfNormal, Pareto, NegativeBinomial, Weibull, HalfCauchy, the Abs/Power/Softplus transforms; and
what the README says about lf.compile (validation skipped while tracing, Binomial needing a known total_count)."""

import numpy as np
import pytest
import torch
import torch.distributions as TD
from torch.distributions import transforms as TT

import lazyflow as lf
import lazyflow.distributions as D

pytestmark = pytest.mark.usefixtures("torch_validates_distributions")  # tests/conftest.py


RNG = np.random.default_rng(3)


def _close(a, b, rtol=1e-9, atol=1e-10):
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=rtol, atol=atol)


def test_relaxed_bernoulli_and_one_hot_match_torch():
    logits = RNG.normal(size=(2, 3))
    la, ta = lf.tensor(logits, requires_grad=True), torch.tensor(logits, requires_grad=True)
    d, t = (
        D.RelaxedBernoulli(lf.tensor(0.7, dtype=lf.float64), logits=la),
        TD.RelaxedBernoulli(torch.tensor(0.7, dtype=torch.float64), logits=ta),
    )
    v = RNG.uniform(0.05, 0.95, (2, 3))
    lp, tp = d.log_prob(lf.tensor(v)), t.log_prob(torch.tensor(v))
    _close(lp, tp, rtol=1e-8)
    lp.sum().backward()
    tp.sum().backward()
    _close(la.grad, ta.grad, rtol=1e-7)
    x = d.rsample((500,))
    assert tuple(x.shape) == (500, 2, 3) and float(x.min()) > 0 and float(x.max()) < 1

    lo = lf.tensor(logits, requires_grad=True)
    to = torch.tensor(logits, requires_grad=True)
    o = D.RelaxedOneHotCategorical(lf.tensor(0.5, dtype=lf.float64), logits=lo)
    tt = TD.RelaxedOneHotCategorical(torch.tensor(0.5, dtype=torch.float64), logits=to)
    s = RNG.dirichlet(np.ones(3), size=2)
    lp, tp = o.log_prob(lf.tensor(s)), tt.log_prob(torch.tensor(s))
    _close(lp, tp, rtol=1e-8)
    lp.sum().backward()
    tp.sum().backward()
    _close(lo.grad, to.grad, rtol=1e-7)
    lo.grad = None
    y = D.RelaxedOneHotCategorical(lf.tensor(0.5, dtype=lf.float64), logits=lo).rsample((4,))
    assert tuple(y.shape) == (4, 2, 3)
    np.testing.assert_allclose(y.sum(-1).detach().numpy(), 1.0, rtol=1e-9)
    y.sum().backward()  # reparameterised: gradients reach the logits
    assert lo.grad is not None


def test_multinomial_matches_torch():
    p = RNG.uniform(0.1, 1.0, (2, 4))
    d, t = D.Multinomial(6, probs=lf.tensor(p)), TD.Multinomial(6, probs=torch.tensor(p))
    v = np.array([[1.0, 2.0, 0.0, 3.0], [6.0, 0.0, 0.0, 0.0]])
    _close(d.log_prob(lf.tensor(v)), t.log_prob(torch.tensor(v)))
    _close(d.mean, t.mean)
    _close(d.variance, t.variance)
    x = d.sample((20000,)).numpy()
    assert x.shape == (20000, 2, 4) and np.all(x.sum(-1) == 6)
    se = np.sqrt(t.variance.numpy() / 20000)
    assert np.all(np.abs(x.mean(0) - t.mean.numpy()) <= 5 * se)
    with pytest.raises(NotImplementedError, match="inhomogeneous"):
        D.Multinomial(lf.tensor([2.0, 3.0]), probs=lf.tensor(p))
    with pytest.raises(ValueError, match="support"):
        d.log_prob(lf.tensor([[1.0, 2.0, 0.0, 9.0], [6.0, 0.0, 0.0, 0.0]]))


@pytest.mark.parametrize("name", ["HalfNormal", "Pareto"])
def test_half_normal_and_pareto_match_torch(name):
    if name == "HalfNormal":
        raw = [RNG.uniform(0.5, 2.0, (3,))]
        v = RNG.uniform(0.1, 3.0, (3,))
    else:
        raw = [RNG.uniform(0.5, 2.0, (3,)), RNG.uniform(2.5, 5.0, (3,))]
        v = raw[0] + RNG.uniform(0.1, 3.0, (3,))
    la = [lf.tensor(a, requires_grad=True) for a in raw]
    ta = [torch.tensor(a, requires_grad=True) for a in raw]
    d, t = getattr(D, name)(*la), getattr(TD, name)(*ta)
    lp, tp = d.log_prob(lf.tensor(v)), t.log_prob(torch.tensor(v))
    _close(lp, tp)
    for m in ("mean", "variance", "mode"):
        _close(getattr(d, m), getattr(t, m))
    _close(d.entropy(), t.entropy())
    _close(d.cdf(lf.tensor(v)), t.cdf(torch.tensor(v)))
    (lp.sum() + d.entropy().sum()).backward()
    (tp.sum() + t.entropy().sum()).backward()
    for a, b in zip(la, ta):
        _close(a.grad, b.grad, rtol=1e-7)
    x = d.sample((20000,)).numpy()
    assert np.all(np.abs(x.mean(0) - t.mean.detach().numpy()) <= 5 * np.sqrt(t.variance.detach().numpy() / 20000))
    with pytest.raises(ValueError):
        getattr(D, name)(*[lf.tensor(-a) for a in raw])


@pytest.mark.parametrize("name", ["AbsTransform", "PowerTransform", "SoftplusTransform"])
def test_more_transforms_match_torch(name):
    x = RNG.uniform(0.2, 3.0, (5,))
    args = (2.5,) if name == "PowerTransform" else ()
    lt, tt = getattr(D, name)(*args), getattr(TT, name)(*args)
    y = lt(lf.tensor(x))
    _close(y, tt(torch.tensor(x)))
    _close(lt.inv(y), tt.inv(torch.tensor(y.numpy())))
    if name != "AbsTransform":
        _close(
            lt.log_abs_det_jacobian(lf.tensor(x), y), tt.log_abs_det_jacobian(torch.tensor(x), torch.tensor(y.numpy()))
        )


def test_validation_is_skipped_while_tracing_and_binomial_needs_a_known_count():
    @lf.compile
    def f(scale):
        return D.Normal(0.0, scale).log_prob(lf.tensor(0.5))

    # a negative scale is not seen while tracing (eagerly it raises); the compiled call computes torch's formula
    got = f(lf.tensor(-1.0))
    want = TD.Normal(0.0, torch.tensor(-1.0), validate_args=False).log_prob(torch.tensor(0.5))
    assert np.isnan(got.item()) == np.isnan(want.item())
    with pytest.raises(ValueError):
        D.Normal(0.0, lf.tensor(-1.0))

    @lf.compile
    def g(n):
        return D.Binomial(n, probs=lf.tensor(0.5)).sample()

    with pytest.raises(NotImplementedError, match="total_count"):
        g(lf.tensor(3.0))

    @lf.compile
    def h(p):
        return D.Binomial(4, probs=p).sample((1000,))

    x = h(lf.tensor([0.25, 0.75])).numpy()
    assert x.shape == (1000, 2) and x.min() >= 0 and x.max() <= 4
    assert abs(x.mean(0)[0] - 1.0) < 0.2 and abs(x.mean(0)[1] - 3.0) < 0.2


EXTRA = {
    "NegativeBinomial": (
        lambda L, T: L.NegativeBinomial(T([2.0, 5.0, 0.5]), probs=T([0.3, 0.6, 0.8])),
        [0.0, 3.0, 7.0],
        ("mean", "variance", "mode"),
    ),
    "Weibull": (
        lambda L, T: L.Weibull(T([1.0, 2.0, 0.5]), T([0.7, 3.0, 1.5])),
        [0.5, 1.5, 0.2],
        ("mean", "variance", "mode"),
    ),
    "HalfCauchy": (lambda L, T: L.HalfCauchy(T([2.0, 0.5, 1.0])), [1.0, 0.1, 3.0], ("mean", "mode")),
}


@pytest.mark.parametrize("name", sorted(EXTRA))
def test_negative_binomial_weibull_half_cauchy_match_torch(name):
    build, v, props = EXTRA[name]
    lparams, tparams = [], []

    def lt(x):
        lparams.append(lf.tensor(np.array(x), requires_grad=True))
        return lparams[-1]

    def tt(x):
        tparams.append(torch.tensor(np.array(x), requires_grad=True))
        return tparams[-1]

    d, t = build(D, lt), build(TD, tt)
    lp, tp = d.log_prob(lf.tensor(np.array(v))), t.log_prob(torch.tensor(np.array(v)))
    _close(lp, tp, rtol=1e-8)
    for m in props:
        _close(getattr(d, m), getattr(t, m), rtol=1e-8)
    loss, tloss = lp.sum(), tp.sum()
    if name != "NegativeBinomial":
        _close(d.entropy(), t.entropy(), rtol=1e-8)
        loss, tloss = loss + d.entropy().sum(), tloss + t.entropy().sum()
    loss.backward()
    tloss.backward()
    for a, b in zip(lparams, tparams):
        _close(a.grad, b.grad, rtol=1e-6, atol=1e-9)
    x = d.sample((20000,)).numpy()
    assert x.shape == (20000, 3) and np.all(np.asarray(t.support.check(torch.tensor(x))))
    if name != "HalfCauchy":  # no finite mean
        se = np.sqrt(t.variance.detach().numpy() / 20000)
        assert np.all(np.abs(x.mean(0) - t.mean.detach().numpy()) <= 5 * se)
