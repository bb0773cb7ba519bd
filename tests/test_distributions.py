"""lf.distributions against torch.distributions: the same parameters and values through both libraries --
log_prob, entropy, mean/variance/stddev/mode, cdf/icdf (float32 and float64), and the gradients of log_prob and
entropy with respect to the parameters (lazyflow's backward vs torch's autograd)."""

import numpy as np
import pytest
import torch
import torch.distributions as TD

import lazyflow as lf
import lazyflow.distributions as D

pytestmark = pytest.mark.usefixtures("torch_validates_distributions")  # tests/conftest.py


RNG = np.random.default_rng(0)
SHAPE = (3, 4)


def _pos(lo=0.3, hi=3.0):
    return lambda: RNG.uniform(lo, hi, SHAPE)


def _real():
    return RNG.normal(size=SHAPE)


def _unit():
    return RNG.uniform(0.05, 0.95, SHAPE)


# name: (params {name: generator}, value generator taking the params, methods to compare)
CASES = {
    "Normal": (
        {"loc": _real, "scale": _pos()},
        lambda p: RNG.normal(size=SHAPE) * 2,
        "lp ent mean var std mode cdf icdf",
    ),
    "Laplace": (
        {"loc": _real, "scale": _pos()},
        lambda p: RNG.normal(size=SHAPE) * 2,
        "lp ent mean var std mode cdf icdf",
    ),
    "Cauchy": ({"loc": _real, "scale": _pos()}, lambda p: RNG.normal(size=SHAPE) * 2, "lp ent mean var mode cdf icdf"),
    "Gumbel": (
        {"loc": _real, "scale": _pos()},
        lambda p: RNG.normal(size=SHAPE) * 2,
        "lp ent mean var std mode cdf icdf",
    ),
    "Exponential": ({"rate": _pos()}, lambda p: RNG.uniform(0.0, 3.0, SHAPE), "lp ent mean var std mode cdf icdf"),
    "Uniform": (
        {"low": _real, "high": lambda: 2.5 + RNG.uniform(0, 1, SHAPE)},
        lambda p: RNG.uniform(p["low"], p["high"]),
        "lp ent mean var std cdf icdf",
    ),
    "Gamma": (
        {"concentration": _pos(), "rate": _pos()},
        lambda p: RNG.uniform(0.1, 4.0, SHAPE),
        "lp ent mean var std mode cdf",
    ),
    "Chi2": ({"df": _pos(0.5, 6.0)}, lambda p: RNG.uniform(0.1, 4.0, SHAPE), "lp ent mean var mode cdf"),
    "Beta": (
        {"concentration1": _pos(), "concentration0": _pos()},
        lambda p: RNG.uniform(0.05, 0.95, SHAPE),
        "lp ent mean var std mode",
    ),
    "StudentT": (
        {"df": _pos(0.5, 6.0), "loc": _real, "scale": _pos()},
        lambda p: RNG.normal(size=SHAPE) * 2,
        "lp ent mean var mode",
    ),
    "LogNormal": (
        {"loc": _real, "scale": _pos(0.3, 1.5)},
        lambda p: RNG.uniform(0.1, 5.0, SHAPE),
        "lp ent mean var mode cdf icdf",
    ),
    "Bernoulli": ({"probs": _unit}, lambda p: RNG.integers(0, 2, SHAPE).astype(float), "lp ent mean var"),
    "Geometric": ({"probs": _unit}, lambda p: RNG.integers(0, 6, SHAPE).astype(float), "lp ent mean var mode"),
    "Poisson": ({"rate": _pos(0.5, 20.0)}, lambda p: RNG.integers(0, 12, SHAPE).astype(float), "lp mean var mode"),
}


def _make(name, params, lib, dtype, grad=False):
    if lib == "lf":
        t = {k: lf.tensor(v, dtype=dtype, requires_grad=grad) for k, v in params.items()}
        return getattr(D, name)(**t), t
    t = {k: torch.tensor(v, dtype=dtype, requires_grad=grad) for k, v in params.items()}
    return getattr(TD, name)(**t), t


METHODS = {
    "lp": lambda d, v: d.log_prob(v),
    "ent": lambda d, v: d.entropy(),
    "mean": lambda d, v: d.mean,
    "var": lambda d, v: d.variance,
    "std": lambda d, v: d.stddev,
    "mode": lambda d, v: d.mode,
    "cdf": lambda d, v: d.cdf(v),
}


def _np(t):
    return t.detach().numpy() if isinstance(t, torch.Tensor) else t.detach().numpy()


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_values_match_torch(name, dtype):
    gens, value_gen, methods = CASES[name]
    params = {k: g() for k, g in gens.items()}
    value = value_gen(params)
    d, _ = _make(name, params, "lf", getattr(lf, dtype))
    t, _ = _make(name, params, "torch", getattr(torch, dtype))
    lv, tv = lf.tensor(value, dtype=getattr(lf, dtype)), torch.tensor(value, dtype=getattr(torch, dtype))
    rtol = 2e-4 if dtype == "float32" else 1e-9
    for m in methods.split():
        if m == "icdf":
            q = RNG.uniform(0.02, 0.98, SHAPE)
            got, want = (
                d.icdf(lf.tensor(q, dtype=getattr(lf, dtype))),
                t.icdf(torch.tensor(q, dtype=getattr(torch, dtype))),
            )
        else:
            got, want = METHODS[m](d, lv), METHODS[m](t, tv)
        assert str(got.dtype).split(".")[-1] == dtype, (m, got.dtype)
        np.testing.assert_allclose(_np(got), _np(want), rtol=rtol, atol=rtol, err_msg=f"{name}.{m}")
    assert tuple(d.batch_shape) == tuple(t.batch_shape) and tuple(d.event_shape) == tuple(t.event_shape)


@pytest.mark.parametrize("name", sorted(CASES))
def test_gradients_match_torch(name):
    gens, value_gen, methods = CASES[name]
    params = {k: g() for k, g in gens.items()}
    value = value_gen(params)
    d, lp = _make(name, params, "lf", lf.float64, grad=True)
    t, tp = _make(name, params, "torch", torch.float64, grad=True)
    lv, tv = lf.tensor(value, dtype=lf.float64), torch.tensor(value, dtype=torch.float64)
    w = RNG.normal(size=SHAPE)
    loss = (d.log_prob(lv) * lf.tensor(w)).sum()
    tloss = (t.log_prob(tv) * torch.tensor(w)).sum()
    if "ent" in methods.split():
        loss = loss + d.entropy().sum()
        tloss = tloss + t.entropy().sum()
    loss.backward()
    tloss.backward()
    for k in params:
        np.testing.assert_allclose(
            lp[k].grad.numpy(), tp[k].grad.numpy(), rtol=1e-7, atol=1e-9, err_msg=f"{name} d/d{k}"
        )


def test_bernoulli_logits_and_probs_agree_with_torch():
    logits = RNG.normal(size=SHAPE) * 4
    d, t = D.Bernoulli(logits=lf.tensor(logits)), TD.Bernoulli(logits=torch.tensor(logits))
    v = RNG.integers(0, 2, SHAPE).astype(float)
    np.testing.assert_allclose(d.log_prob(lf.tensor(v)).numpy(), t.log_prob(torch.tensor(v)).numpy(), rtol=1e-9)
    np.testing.assert_allclose(d.probs.numpy(), t.probs.numpy(), rtol=1e-12)
    np.testing.assert_allclose(d.entropy().numpy(), t.entropy().numpy(), rtol=1e-9)
    mode = D.Bernoulli(probs=lf.tensor([0.2, 0.5, 0.7])).mode.numpy()
    np.testing.assert_array_equal(mode, TD.Bernoulli(probs=torch.tensor([0.2, 0.5, 0.7])).mode.numpy())


@pytest.mark.parametrize("kw", ["probs", "logits"])
def test_categorical_and_onehot_match_torch(kw):
    raw = RNG.uniform(0.1, 2.0, (3, 5)) if kw == "probs" else RNG.normal(size=(3, 5))
    lraw = lf.tensor(raw, requires_grad=True)
    traw = torch.tensor(raw, requires_grad=True)
    d, t = D.Categorical(**{kw: lraw}), TD.Categorical(**{kw: traw})
    v = np.array([0, 4, 2])
    np.testing.assert_allclose(
        d.log_prob(lf.tensor(v)).detach().numpy(), t.log_prob(torch.tensor(v)).detach().numpy(), rtol=1e-9
    )
    np.testing.assert_allclose(d.probs.detach().numpy(), t.probs.detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(d.logits.detach().numpy(), t.logits.detach().numpy(), rtol=1e-9, atol=1e-12)
    np.testing.assert_array_equal(d.mode.numpy(), t.mode.numpy())
    (d.log_prob(lf.tensor(v)).sum() + d.entropy().sum()).backward()
    (t.log_prob(torch.tensor(v)).sum() + t.entropy().sum()).backward()
    np.testing.assert_allclose(lraw.grad.numpy(), traw.grad.numpy(), rtol=1e-7, atol=1e-10)
    np.testing.assert_array_equal(d.enumerate_support().numpy(), t.enumerate_support().numpy())
    np.testing.assert_array_equal(d.enumerate_support(expand=False).numpy(), t.enumerate_support(expand=False).numpy())
    o, to = D.OneHotCategorical(**{kw: lf.tensor(raw)}), TD.OneHotCategorical(**{kw: torch.tensor(raw)})
    hot = np.eye(5)[v]
    np.testing.assert_allclose(o.log_prob(lf.tensor(hot)).numpy(), to.log_prob(torch.tensor(hot)).numpy(), rtol=1e-9)
    np.testing.assert_allclose(o.entropy().numpy(), to.entropy().numpy(), rtol=1e-9)
    np.testing.assert_allclose(o.variance.numpy(), to.variance.numpy(), rtol=1e-9)
    np.testing.assert_array_equal(o.mode.numpy(), to.mode.numpy())
    np.testing.assert_array_equal(o.enumerate_support().numpy(), to.enumerate_support().numpy())


@pytest.mark.parametrize("count", ["scalar", "tensor"])
def test_binomial_matches_torch(count):
    n = 7.0 if count == "scalar" else RNG.integers(1, 12, (4,)).astype(float)
    p = RNG.uniform(0.05, 0.95, (4,))
    d = D.Binomial(n if count == "scalar" else lf.tensor(n), probs=lf.tensor(p))
    t = TD.Binomial(n if count == "scalar" else torch.tensor(n), probs=torch.tensor(p))
    k = np.minimum(RNG.integers(0, 12, (4,)), n).astype(float)
    np.testing.assert_allclose(d.log_prob(lf.tensor(k)).numpy(), t.log_prob(torch.tensor(k)).numpy(), rtol=1e-9)
    for m in ("mean", "variance", "mode"):
        np.testing.assert_allclose(getattr(d, m).numpy(), getattr(t, m).numpy(), rtol=1e-9, err_msg=m)
    if count == "scalar":
        np.testing.assert_allclose(d.entropy().numpy(), t.entropy().numpy(), rtol=1e-9)
        np.testing.assert_array_equal(d.enumerate_support().numpy(), t.enumerate_support().numpy())
    else:
        with pytest.raises(NotImplementedError, match="Inhomogeneous"):
            d.entropy()
        with pytest.raises(NotImplementedError, match="Inhomogeneous"):
            TD.Binomial(torch.tensor(n), probs=torch.tensor(p)).entropy()


def test_special_points_match_torch():
    """Boundary values torch treats specially: probs 0/1 in Bernoulli/Geometric, value 0 in Gamma/Poisson, the
    Uniform bounds, Exponential at 0."""
    cases = [
        (lambda L: L.Bernoulli(probs=L_t(L, [0.0, 1.0, 0.0, 1.0])), [0.0, 1.0, 1.0, 0.0]),
        (lambda L: L.Geometric(probs=L_t(L, [1.0, 1.0, 0.5])), [0.0, 2.0, 0.0]),
        (lambda L: L.Gamma(L_t(L, [1.0, 2.0, 0.5]), L_t(L, [1.0, 1.0, 1.0])), [0.0, 0.0, 1.0]),
        (lambda L: L.Poisson(L_t(L, [0.0, 0.0, 2.0])), [0.0, 1.0, 0.0]),
        (lambda L: L.Uniform(L_t(L, [0.0, 0.0]), L_t(L, [1.0, 1.0])), [0.0, 0.999]),
        (lambda L: L.Exponential(L_t(L, [2.0])), [0.0]),
    ]
    for build, v in cases:
        d, t = build(D), build(TD)
        got = d.log_prob(lf.tensor(v, dtype=lf.float64)).numpy()
        want = t.log_prob(torch.tensor(v, dtype=torch.float64)).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12, err_msg=repr(d))


def L_t(L, v):
    return (lf.tensor if L is D else torch.tensor)(v, dtype=lf.float64 if L is D else torch.float64)
