"""lf.distributions' draws: shapes (sample_shape + batch_shape + event_shape), statistics of 20k draws against
torch's mean/variance (a seed-independent check), reparameterised gradients against their analytic forms, seeding,
and sampling inside lf.compile and an nn.Graph step (a tiny VAE) against the same step in eager mode."""

import math

import numpy as np
import pytest
import scipy.special as sp
import scipy.stats as st
import torch
import torch.distributions as TD

import lazyflow as lf
import lazyflow.distributions as D
from lazyflow import nn

pytestmark = pytest.mark.usefixtures("torch_validates_distributions")  # tests/conftest.py


N = 20000


def _t(v):
    return lf.tensor(np.asarray(v, dtype=np.float64))


def _tt(v):
    return torch.tensor(np.asarray(v, dtype=np.float64))


# name -> (lazyflow distribution, torch distribution with the same parameters, relative tolerance on the variance)
def _cases():
    c = {}
    c["Normal"] = (D.Normal(_t([0.5, -2.0]), _t([1.0, 3.0])), TD.Normal(_tt([0.5, -2.0]), _tt([1.0, 3.0])), 0.06)
    c["Laplace"] = (D.Laplace(_t([0.5]), _t([2.0])), TD.Laplace(_tt([0.5]), _tt([2.0])), 0.1)
    c["Exponential"] = (D.Exponential(_t([0.5, 4.0])), TD.Exponential(_tt([0.5, 4.0])), 0.1)
    c["Gumbel"] = (D.Gumbel(_t([1.0]), _t([2.0])), TD.Gumbel(_tt([1.0]), _tt([2.0])), 0.1)
    c["Uniform"] = (D.Uniform(_t([-1.0, 2.0]), _t([3.0, 2.5])), TD.Uniform(_tt([-1.0, 2.0]), _tt([3.0, 2.5])), 0.05)
    c["Gamma"] = (
        D.Gamma(_t([0.3, 1.0, 7.5]), _t([1.0, 2.0, 0.5])),
        TD.Gamma(_tt([0.3, 1.0, 7.5]), _tt([1.0, 2.0, 0.5])),
        0.2,
    )
    c["Beta"] = (D.Beta(_t([0.5, 2.0]), _t([0.7, 5.0])), TD.Beta(_tt([0.5, 2.0]), _tt([0.7, 5.0])), 0.06)
    c["Dirichlet"] = (D.Dirichlet(_t([[0.4, 1.0, 3.0]])), TD.Dirichlet(_tt([[0.4, 1.0, 3.0]])), 0.08)
    c["StudentT"] = (D.StudentT(_t([8.0]), _t([1.0]), _t([2.0])), TD.StudentT(_tt([8.0]), _tt([1.0]), _tt([2.0])), 0.25)
    c["Chi2"] = (D.Chi2(_t([3.0])), TD.Chi2(_tt([3.0])), 0.1)
    c["LogNormal"] = (D.LogNormal(_t([0.0]), _t([0.5])), TD.LogNormal(_tt([0.0]), _tt([0.5])), 0.15)
    c["Bernoulli"] = (D.Bernoulli(_t([0.1, 0.5])), TD.Bernoulli(_tt([0.1, 0.5])), 0.06)
    c["Geometric"] = (D.Geometric(_t([0.2, 0.7])), TD.Geometric(_tt([0.2, 0.7])), 0.1)
    c["Poisson"] = (D.Poisson(_t([0.0, 0.7, 4.0, 12.0, 300.0])), TD.Poisson(_tt([0.0, 0.7, 4.0, 12.0, 300.0])), 0.08)
    c["Binomial"] = (
        D.Binomial(_t([5.0, 30.0, 0.0]), _t([0.3, 0.8, 0.5])),
        TD.Binomial(_tt([5.0, 30.0, 0.0]), _tt([0.3, 0.8, 0.5])),
        0.06,
    )
    cov = np.array([[2.0, 0.6], [0.6, 1.0]])
    c["MultivariateNormal"] = (
        D.MultivariateNormal(_t([1.0, -1.0]), covariance_matrix=_t(cov)),
        TD.MultivariateNormal(_tt([1.0, -1.0]), covariance_matrix=_tt(cov)),
        0.06,
    )
    c["OneHotCategorical"] = (
        D.OneHotCategorical(probs=_t([0.2, 0.3, 0.5])),
        TD.OneHotCategorical(probs=_tt([0.2, 0.3, 0.5])),
        0.06,
    )
    c["MixtureSameFamily"] = (
        D.MixtureSameFamily(D.Categorical(probs=_t([0.3, 0.7])), D.Normal(_t([-2.0, 3.0]), _t([1.0, 0.5]))),
        TD.MixtureSameFamily(TD.Categorical(probs=_tt([0.3, 0.7])), TD.Normal(_tt([-2.0, 3.0]), _tt([1.0, 0.5]))),
        0.06,
    )
    return c


CASES = _cases()


@pytest.mark.parametrize("name", sorted(CASES))
def test_sample_statistics_match_torch(name):
    d, t, var_tol = CASES[name]
    x = d.sample((N,)).numpy()
    assert x.shape == (N,) + tuple(t.batch_shape) + tuple(t.event_shape)
    mean, var = t.mean.numpy(), t.variance.numpy()
    se = np.sqrt(var / N)
    assert np.all(np.abs(x.mean(0) - mean) <= 5 * se + 1e-12), (x.mean(0), mean)
    np.testing.assert_allclose(x.var(0), var, rtol=var_tol, atol=1e-12)
    assert np.all(np.asarray(t.support.check(torch.tensor(x))))  # every draw lies in torch's support


def test_categorical_sample_frequencies():
    p = np.array([[0.1, 0.6, 0.3], [0.5, 0.25, 0.25]])
    x = D.Categorical(probs=_t(p)).sample((N,)).numpy()
    assert x.shape == (N, 2) and x.dtype == np.int64
    freq = np.stack([(x == k).mean(0) for k in range(3)], -1)
    assert np.all(np.abs(freq - p) <= 5 * np.sqrt(p * (1 - p) / N))


@pytest.mark.parametrize(
    "build",
    [
        lambda: D.Normal(_t(np.zeros((2, 3))), _t(np.ones((2, 3)))),
        lambda: D.Gamma(_t(np.ones((2, 3))), 1.0),
        lambda: D.Dirichlet(_t(np.ones((2, 3)))),
        lambda: D.MultivariateNormal(_t(np.zeros((2, 3))), scale_tril=_t(np.eye(3))),
        lambda: D.Independent(D.Normal(_t(np.zeros((2, 3))), _t(np.ones((2, 3)))), 1),
        lambda: D.Categorical(logits=_t(np.zeros((2, 3)))),
        lambda: D.OneHotCategorical(logits=_t(np.zeros((2, 3)))),
        lambda: D.Binomial(4, probs=_t(np.full((2, 3), 0.5))),
        lambda: D.Poisson(_t(np.ones((2, 3)))),
        lambda: D.Normal(0.0, 1.0),
    ],
)
@pytest.mark.parametrize("sample_shape", [(), (4, 1)])
def test_sample_shapes(build, sample_shape):
    d = build()
    want = tuple(sample_shape) + tuple(d.batch_shape) + tuple(d.event_shape)
    assert tuple(d.sample(sample_shape).shape) == want
    if d.has_rsample:
        assert tuple(d.rsample(sample_shape).shape) == want
    assert (
        tuple(d.expand((7,) + tuple(d.batch_shape)).sample(sample_shape).shape)
        == tuple(sample_shape) + (7,) + want[len(sample_shape) :]
    )


def test_manual_seed_repeats_draws_and_sample_has_no_grad():
    loc = lf.zeros(4, requires_grad=True)
    d = D.Normal(loc, lf.ones(4))
    lf.manual_seed(3)
    a = d.sample((2,))
    lf.manual_seed(3)
    b = d.sample((2,))
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert not a.requires_grad and d.rsample().requires_grad
    assert not np.array_equal(d.sample((2,)).numpy(), a.numpy())


def test_rsample_gradients_normal_laplace_analytic():
    loc = lf.tensor([0.5, -1.0], dtype=lf.float64, requires_grad=True)
    scale = lf.tensor([2.0, 0.3], dtype=lf.float64, requires_grad=True)
    x = D.Normal(loc, scale).rsample((100,))
    w = np.random.default_rng(0).normal(size=(100, 2))
    (x * lf.tensor(w)).sum().backward()
    eps = (x.detach().numpy() - [0.5, -1.0]) / [2.0, 0.3]  # dx/dloc = 1, dx/dscale = eps
    np.testing.assert_allclose(loc.grad.numpy(), w.sum(0), rtol=1e-10)
    np.testing.assert_allclose(scale.grad.numpy(), (w * eps).sum(0), rtol=1e-8)


def test_rsample_gradient_gamma_is_the_implicit_reparameterisation():
    """dx/da for x ~ Gamma(a, rate): -(dF/da)/f at the drawn x (F, f from scipy, dF/da by a fine difference)."""
    a_np, rate = np.array([0.4, 1.0, 3.5]), 2.0
    a = lf.tensor(a_np, dtype=lf.float64, requires_grad=True)
    x = D.Gamma(a, rate).rsample()
    x.sum().backward()
    z = x.detach().numpy() * rate  # the standard-gamma draw
    h = 1e-6
    dfda = (sp.gammainc(a_np + h, z) - sp.gammainc(a_np - h, z)) / (2 * h)
    want = -dfda / st.gamma.pdf(z, a_np) / rate
    np.testing.assert_allclose(a.grad.numpy(), want, rtol=1e-4)


@pytest.mark.parametrize("family", ["Beta", "Dirichlet", "Gamma"])
def test_rsample_gradient_of_the_sample_mean_matches_the_analytic_mean(family):
    """d/dparams of the mean of many reparameterised draws ~ d/dparams of the exact mean (torch's autograd)."""
    raw = np.array([0.8, 2.5])
    p = lf.tensor(raw, requires_grad=True)
    tp = torch.tensor(raw, requires_grad=True)
    if family == "Beta":
        x, tm = D.Beta(p[0], p[1]).rsample((N,)).mean(0), TD.Beta(tp[0], tp[1]).mean
    elif family == "Dirichlet":
        x, tm = D.Dirichlet(p).rsample((N,)).mean(0)[0], TD.Dirichlet(tp).mean[0]
    else:
        x, tm = D.Gamma(p[0], p[1]).rsample((N,)).mean(0), TD.Gamma(tp[0], tp[1]).mean
    x.backward()
    tm.backward()
    np.testing.assert_allclose(p.grad.numpy(), tp.grad.numpy(), rtol=0.1, atol=0.01)


def test_rsample_mvn_gradient_analytic():
    loc = lf.tensor([0.0, 1.0], dtype=lf.float64, requires_grad=True)
    L = lf.tensor([[1.0, 0.0], [0.5, 2.0]], dtype=lf.float64, requires_grad=True)
    x = D.MultivariateNormal(loc, scale_tril=L).rsample()
    w = np.array([0.3, -1.2])
    (x * lf.tensor(w)).sum().backward()
    eps = np.linalg.solve(np.array([[1.0, 0.0], [0.5, 2.0]]), x.detach().numpy() - [0.0, 1.0])
    np.testing.assert_allclose(loc.grad.numpy(), w, rtol=1e-12)
    np.testing.assert_allclose(L.grad.numpy(), np.outer(w, eps), rtol=1e-8, atol=1e-12)


def test_straight_through_and_tanh_rsample_gradients():
    probs = lf.tensor([0.2, 0.3, 0.5], dtype=lf.float64, requires_grad=True)
    (D.OneHotCategoricalStraightThrough(probs=probs).rsample() * lf.tensor([1.0, 2.0, 3.0])).sum().backward()
    # probs are normalised by their sum: d/dp_j sum_i w_i p_i / sum(p) = (w_j - sum_i w_i p_i) / sum(p)
    np.testing.assert_allclose(probs.grad.numpy(), np.array([1.0, 2.0, 3.0]) - 2.3, rtol=1e-10)
    loc = lf.tensor([0.3], dtype=lf.float64, requires_grad=True)
    y = D.TransformedDistribution(D.Normal(loc, 1.0), [D.TanhTransform()]).rsample()
    y.sum().backward()
    np.testing.assert_allclose(loc.grad.numpy(), 1 - y.detach().numpy() ** 2, rtol=1e-10)


def test_sampling_inside_compile_draws_fresh_noise_and_matches_eager_per_seed():
    def f(loc, conc):
        return D.Normal(loc, 1.0).rsample((3,)), D.Gamma(conc, 1.0).sample((2,)), D.Poisson(conc * 5).sample()

    cf = lf.compile(f)
    loc, conc = lf.zeros(2), lf.tensor([0.5, 4.0])
    lf.manual_seed(11)
    eager = f(loc, conc)
    lf.manual_seed(11)
    first = cf(loc, conc)
    second = cf(loc, conc)
    for e, c in zip(eager, first):
        np.testing.assert_allclose(c.numpy(), e.numpy(), rtol=1e-6)
    for a, b in zip(first, second):
        assert not np.array_equal(a.numpy(), b.numpy())


class _VAE(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Linear(4, 6)
        self.dec = nn.Linear(3, 4)

    def loss(self, x):
        h = self.enc(x)
        q = D.Normal(h[:, :3], nn.functional.softplus(h[:, 3:]) + 1e-3)
        z = q.rsample()
        recon = ((self.dec(z) - x) ** 2).sum()
        kl = D.kl_divergence(q, D.Normal(lf.zeros_like(z), lf.ones_like(z))).sum()
        return recon + kl


class _Step(nn.Graph):
    def __init__(self, model, opt):
        super().__init__()
        self.model = model
        self.add_optimizer(opt)

    def build(self, x):
        loss = self.model.loss(x)
        loss.backward()
        return loss


def test_vae_step_in_nn_graph_matches_eager_and_samples_fresh_noise():
    x = lf.tensor(np.random.default_rng(1).normal(size=(5, 4)).astype(np.float32))
    lf.manual_seed(0)
    eager_model, graph_model = _VAE(), _VAE()
    graph_model.load_state_dict(eager_model.state_dict())
    eager_opt = lf.optim.SGD(eager_model.parameters(), lr=0.05)
    step = _Step(graph_model, lf.optim.SGD(graph_model.parameters(), lr=0.05))
    lf.manual_seed(5)
    eager_opt.zero_grad()
    eager_loss = eager_model.loss(x)
    eager_loss.backward()
    eager_opt.step()
    lf.manual_seed(5)
    graph_loss = step(x)
    np.testing.assert_allclose(graph_loss.item(), eager_loss.item(), rtol=1e-5)
    for (k, a), b in zip(eager_model.state_dict().items(), graph_model.state_dict().values()):
        np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-5, atol=1e-6, err_msg=k)
    # same weights, same input, two calls: fresh noise each time, so the losses differ
    with lf.no_grad():
        cl = lf.compile(graph_model.loss)
        assert cl(x).item() != cl(x).item()
    assert math.isfinite(graph_loss.item())
