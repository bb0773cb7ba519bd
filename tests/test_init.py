"""lf.nn.init against torch's formulas (statistically, on large samples) and torch's deterministic results;
lf.nn.utils (gradient clipping, vector conversion) against torch."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import lazyflow as lf
import lazyflow.nn as nn
from lazyflow.nn import init


def _param(*shape):
    return nn.Parameter(lf.zeros(*shape))


def _moments_ok(values, mean, var, k=6.0):
    """Sample mean and variance within k standard errors of the expected ones (normal-ish samples)."""
    n = values.size
    assert abs(values.mean() - mean) < k * math.sqrt(var / n), (values.mean(), mean)
    assert abs(values.var() - var) < k * var * math.sqrt(2.0 / n), (values.var(), var)


@pytest.mark.parametrize(
    "nonlinearity,param",
    [
        ("linear", None),
        ("conv2d", None),
        ("sigmoid", None),
        ("tanh", None),
        ("relu", None),
        ("leaky_relu", None),
        ("leaky_relu", 0.2),
        ("selu", None),
    ],
)
def test_calculate_gain_matches_torch(nonlinearity, param):
    assert init.calculate_gain(nonlinearity, param) == torch.nn.init.calculate_gain(nonlinearity, param)


def test_calculate_gain_rejects_unknown():
    with pytest.raises(ValueError, match="Unsupported nonlinearity"):
        init.calculate_gain("swish")
    with pytest.raises(ValueError, match="not a valid number"):
        init.calculate_gain("leaky_relu", "x")


@pytest.mark.parametrize("shape", [(5, 3), (8, 4, 3), (6, 2, 3, 5)])
def test_fan_in_and_fan_out_match_torch(shape):
    assert init._calculate_fan_in_and_fan_out(lf.zeros(shape)) == torch.nn.init._calculate_fan_in_and_fan_out(
        torch.zeros(shape)
    )
    with pytest.raises(ValueError, match="fewer than 2 dimensions"):
        init._calculate_fan_in_and_fan_out(lf.zeros(3))


def test_uniform_and_normal_distributions_in_place():
    p = _param(200, 200)
    ident = id(p)
    assert init.uniform_(p, -2.0, 3.0) is p and id(p) == ident
    v = p.detach().numpy()
    assert v.min() >= -2.0 and v.max() < 3.0
    _moments_ok(v, 0.5, 25 / 12)
    assert p.is_leaf and p.requires_grad and p.grad_fn is None
    init.normal_(p, 1.5, 0.5)
    _moments_ok(p.detach().numpy(), 1.5, 0.25)


@pytest.mark.parametrize("gain", [1.0, 2.0])
def test_xavier_distributions(gain):
    p = _param(300, 100)
    std = gain * math.sqrt(2.0 / 400)
    init.xavier_uniform_(p, gain=gain)
    v = p.detach().numpy()
    assert np.abs(v).max() <= math.sqrt(3) * std + 1e-7
    _moments_ok(v, 0.0, std**2)
    init.xavier_normal_(p, gain=gain)
    _moments_ok(p.detach().numpy(), 0.0, std**2)


@pytest.mark.parametrize(
    "a,mode,nonlinearity",
    [
        (0, "fan_in", "leaky_relu"),
        (math.sqrt(5), "fan_in", "leaky_relu"),
        (0, "fan_out", "relu"),
        (0.1, "fan_in", "tanh"),
    ],
)
def test_kaiming_distributions(a, mode, nonlinearity):
    p = _param(120, 30, 3, 3)
    fan_in, fan_out = 270, 1080
    std = torch.nn.init.calculate_gain(nonlinearity, a) / math.sqrt(fan_in if mode == "fan_in" else fan_out)
    init.kaiming_uniform_(p, a=a, mode=mode, nonlinearity=nonlinearity)
    v = p.detach().numpy()
    assert np.abs(v).max() <= math.sqrt(3) * std + 1e-7
    _moments_ok(v, 0.0, std**2)
    init.kaiming_normal_(p, a=a, mode=mode, nonlinearity=nonlinearity)
    _moments_ok(p.detach().numpy(), 0.0, std**2)
    with pytest.raises(ValueError, match="Mode fan_avg not supported"):
        init.kaiming_uniform_(p, mode="fan_avg")


@pytest.mark.parametrize("mean,std,a,b", [(0.0, 1.0, -2.0, 2.0), (0.5, 2.0, -1.0, 4.0), (0.0, 0.02, -0.04, 0.04)])
def test_trunc_normal_bounds_and_moments(mean, std, a, b):
    p = _param(300, 300)
    init.trunc_normal_(p, mean, std, a, b)
    v = p.detach().numpy().astype(np.float64)
    assert v.min() >= a and v.max() <= b
    # moments of the truncated normal, in closed form
    alpha, beta = (a - mean) / std, (b - mean) / std
    pdf = lambda x: math.exp(-x * x / 2) / math.sqrt(2 * math.pi)
    cdf = lambda x: (1 + math.erf(x / math.sqrt(2))) / 2
    z = cdf(beta) - cdf(alpha)
    m = mean + std * (pdf(alpha) - pdf(beta)) / z
    var = std**2 * (1 + (alpha * pdf(alpha) - beta * pdf(beta)) / z - ((pdf(alpha) - pdf(beta)) / z) ** 2)
    _moments_ok(v, m, var)


@pytest.mark.parametrize("shape", [(6, 6), (4, 9), (10, 3), (4, 2, 3)])
def test_orthogonal_rows_or_columns_are_orthonormal(shape):
    p = _param(*shape)
    init.orthogonal_(p, gain=2.0)
    w = p.detach().numpy().reshape(shape[0], -1).astype(np.float64)
    gram = w @ w.T if w.shape[0] <= w.shape[1] else w.T @ w
    np.testing.assert_allclose(gram, 4.0 * np.eye(gram.shape[0]), atol=1e-5)
    with pytest.raises(ValueError, match="2 or more dimensions"):
        init.orthogonal_(_param(3))


def test_orthogonal_matrices_are_haar_distributed():
    """QR with the sign fix gives Haar matrices: E[W_00] = 0 and E[W_00^2] = 1/n."""
    n, draws = 4, 400
    firsts = []
    for _ in range(draws):
        p = _param(n, n)
        init.orthogonal_(p)
        firsts.append(p.detach().numpy()[0, 0])
    firsts = np.array(firsts)
    assert abs(firsts.mean()) < 6 * math.sqrt(1 / n / draws)
    assert abs((firsts**2).mean() - 1 / n) < 0.05


def test_deterministic_initialisers_match_torch():
    for shape in ((3, 5), (4, 4)):
        np.testing.assert_array_equal(
            init.eye_(_param(*shape)).detach().numpy(), torch.nn.init.eye_(torch.empty(shape)).numpy()
        )
    for shape, groups in (((4, 2, 3), 1), ((6, 3, 3, 3), 2), ((2, 2, 1, 3, 3), 1)):
        np.testing.assert_array_equal(
            init.dirac_(_param(*shape), groups).detach().numpy(),
            torch.nn.init.dirac_(torch.empty(shape), groups).numpy(),
        )
    p = _param(2, 3)
    assert np.all(init.constant_(p, 0.25).detach().numpy() == 0.25)
    assert np.all(init.ones_(p).detach().numpy() == 1) and np.all(init.zeros_(p).detach().numpy() == 0)
    with pytest.raises(lf.ShapeError, match="2-D"):
        init.eye_(_param(2, 2, 2))


def test_sparse_zeroes_a_fixed_fraction_of_each_column():
    p = _param(20, 30)
    init.sparse_(p, sparsity=0.3, std=0.5)
    zeros_per_col = (p.detach().numpy() == 0).sum(axis=0)
    assert np.all(zeros_per_col == math.ceil(0.3 * 20))


def test_initialisers_use_the_given_generator():
    g1, g2 = lf.Generator().manual_seed(5), lf.Generator().manual_seed(5)
    a, b = _param(4, 4), _param(4, 4)
    for fn in (
        init.uniform_,
        init.normal_,
        init.xavier_uniform_,
        init.kaiming_normal_,
        init.trunc_normal_,
        init.orthogonal_,
    ):
        fn(a, generator=g1)
        fn(b, generator=g2)
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())
    lf.manual_seed(0)
    c = init.normal_(_param(4, 4)).detach().numpy()
    lf.manual_seed(0)
    np.testing.assert_array_equal(init.normal_(_param(4, 4)).detach().numpy(), c)


# ---------------------------------------------------------------- nn.utils
def _grads_pair(seed=0):
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal(s).astype(np.float32) for s in ((3, 4), (5,), (2, 2, 2))]
    lps = [nn.Parameter(lf.tensor(a)) for a in arrays]
    tps = [torch.nn.Parameter(torch.tensor(a)) for a in arrays]
    for lp, tp, a in zip(lps, tps, arrays):
        g = (a * 3).astype(np.float32)
        lp.grad = lf.tensor(g)
        tp.grad = torch.tensor(g)
    return lps, tps


@pytest.mark.parametrize("max_norm,norm_type", [(1.0, 2.0), (100.0, 2.0), (0.5, 1.0), (2.0, float("inf")), (1.0, 3.0)])
def test_clip_grad_norm_matches_torch(max_norm, norm_type):
    lps, tps = _grads_pair()
    grad_objects = [p.grad for p in lps]
    total = nn.utils.clip_grad_norm_(lps, max_norm, norm_type)
    ttotal = torch.nn.utils.clip_grad_norm_(tps, max_norm, norm_type)
    np.testing.assert_allclose(total.numpy(), ttotal.numpy(), rtol=1e-5)
    for lp, tp, g in zip(lps, tps, grad_objects):
        assert lp.grad is g  # clipped in place
        np.testing.assert_allclose(lp.grad.numpy(), tp.grad.numpy(), rtol=1e-5, atol=1e-7)


def test_clip_grad_norm_edge_cases():
    p = nn.Parameter(lf.ones(2))
    assert nn.utils.clip_grad_norm_([p], 1.0).item() == 0.0  # no gradients: norm 0
    p.grad = lf.tensor([float("inf"), 1.0])
    with pytest.raises(lf.OpError, match="non-finite"):
        nn.utils.clip_grad_norm_(p, 1.0, error_if_nonfinite=True)
    with pytest.raises(ValueError, match="norm_type"):
        nn.utils.clip_grad_norm_(p, 1.0, norm_type=-1)
    lps, tps = _grads_pair(1)
    np.testing.assert_allclose(
        nn.utils.get_total_norm([p.grad for p in lps]).numpy(),
        torch.nn.utils.get_total_norm([p.grad for p in tps]).numpy(),
        rtol=1e-5,
    )


def test_clip_grad_value_matches_torch():
    lps, tps = _grads_pair(2)
    nn.utils.clip_grad_value_(lps, 1.5)
    torch.nn.utils.clip_grad_value_(tps, 1.5)
    for lp, tp in zip(lps, tps):
        np.testing.assert_array_equal(lp.grad.numpy(), tp.grad.numpy())


def test_parameters_to_vector_and_back_match_torch():
    lps, tps = _grads_pair(3)
    vec = nn.utils.parameters_to_vector(lps)
    np.testing.assert_array_equal(vec.detach().numpy(), torch.nn.utils.parameters_to_vector(tps).detach().numpy())
    ids = [id(p) for p in lps]
    new = np.arange(vec.shape[0], dtype=np.float32)
    nn.utils.vector_to_parameters(lf.tensor(new), lps)
    torch.nn.utils.vector_to_parameters(torch.tensor(new), tps)
    assert [id(p) for p in lps] == ids
    for lp, tp in zip(lps, tps):
        np.testing.assert_array_equal(lp.detach().numpy(), tp.detach().numpy())
        assert type(lp) is nn.Parameter and lp.requires_grad
    with pytest.raises(lf.ShapeError, match="has 3 elements but the parameters hold 25"):
        nn.utils.vector_to_parameters(lf.zeros(3), lps)
    # the vector is differentiable with respect to the parameters
    p = nn.Parameter(lf.ones(2, 2))
    (nn.utils.parameters_to_vector([p]) * lf.arange(4.0)).sum().backward()
    np.testing.assert_array_equal(p.grad.numpy(), np.arange(4.0).reshape(2, 2))


def test_clip_grad_norm_inside_compiled_function_matches_torch():
    lps, tps = _grads_pair(4)
    grads = [lf.tensor(p.grad.numpy()) for p in lps]
    torch.nn.utils.clip_grad_norm_(tps, 0.7)

    @lf.compile
    def clip(*gs):
        holders = []
        for g in gs:
            h = nn.Parameter(lf.zeros(*g.shape))
            h.grad = g * 1.0
            holders.append(h)
        total = nn.utils.clip_grad_norm_(holders, 0.7)
        return (total, *[h.grad for h in holders])

    out = clip(*grads)
    for got, tp in zip(out[1:], tps):
        np.testing.assert_allclose(got.numpy(), tp.grad.numpy(), rtol=1e-5, atol=1e-7)
