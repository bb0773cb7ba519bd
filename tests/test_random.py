"""Random ops: reproducibility under ``lf.manual_seed`` and ``lf.Generator``, no randomness baked into kernels,
eager == graph under the same seed, distribution sanity (moments within statistical tolerance), bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest
from _harness import compiled

import lazyflow as lf
import lazyflow.nn.functional as NF

N = 20_000


def _draws(generator=None):
    g = {} if generator is None else {"generator": generator}
    x = lf.zeros(5)
    return [
        lf.rand(4, **g),
        lf.randn(2, 3, **g),
        lf.randint(0, 10, (6,), **g),
        lf.randperm(7, **g),
        lf.normal(1.0, 2.0, (3,), **g),
        lf.bernoulli(lf.full((8,), 0.5), **g),
        lf.multinomial(lf.ones(5), 3, **g),
        x.clone().uniform_(-1, 1, **g),
        x.clone().normal_(**g),
        x.clone().bernoulli_(0.3, **g),
        x.clone().exponential_(**g),
        lf.normal(lf.zeros(3), lf.ones(3), **g),
    ]


def _same_draws(a, b):
    return all(np.array_equal(x.numpy(), y.numpy()) for x, y in zip(a, b))


def test_manual_seed_makes_every_random_op_reproducible():
    lf.manual_seed(123)
    first = _draws()
    second = _draws()
    lf.manual_seed(123)
    again = _draws()
    assert _same_draws(first, again)
    assert not any(np.array_equal(x.numpy(), y.numpy()) for x, y in zip(first[:2], second[:2]))
    lf.manual_seed(124)
    assert not np.array_equal(_draws()[1].numpy(), first[1].numpy())
    lf.manual_seed(123)
    assert np.array_equal(lf.rand_like(lf.zeros(4)).numpy(), first[0].numpy())


def test_generators_are_independent_streams():
    lf.manual_seed(0)
    state = lf.get_rng_state()
    g = lf.Generator().manual_seed(5)
    a = _draws(g)
    assert lf.get_rng_state().tolist() == state.tolist()  # the default generator did not move
    b = _draws(lf.Generator().manual_seed(5))
    assert _same_draws(a, b)
    c = _draws(lf.Generator().manual_seed(6))
    assert not np.array_equal(a[1].numpy(), c[1].numpy())
    lf.manual_seed(5)
    assert _same_draws(_draws(), a)  # same seed, same stream, whichever generator carries it
    assert g.initial_seed() == 5 and lf.initial_seed() == 5


def test_rng_state_round_trip():
    lf.manual_seed(9)
    lf.rand(3)
    s = lf.get_rng_state()
    x = lf.randn(4)
    lf.set_rng_state(s)
    np.testing.assert_array_equal(lf.randn(4).numpy(), x.numpy())
    g = lf.Generator().manual_seed(1)
    gs = g.get_state()
    y = lf.rand(2, generator=g)
    g.set_state(gs)
    np.testing.assert_array_equal(lf.rand(2, generator=g).numpy(), y.numpy())
    with pytest.raises(lf.ShapeError, match="3-element"):
        g.set_state([1, 2])


def test_no_randomness_is_baked_into_kernels():
    lf.rand(16)
    before = lf.eager.cache_info()
    a, b = lf.rand(16), lf.rand(16)
    after = lf.eager.cache_info()
    assert after.misses == before.misses and after.hits == before.hits + 2
    assert not np.array_equal(a.numpy(), b.numpy())


def test_graph_mode_draws_fresh_numbers_per_call_and_matches_eager():
    def f(x):
        return x + lf.rand(3), lf.randn(2) * 2, NF.dropout(lf.ones(8), 0.5, training=True)

    cf = compiled(f)
    lf.manual_seed(7)
    eager1, eager2 = f(lf.zeros(3)), f(lf.zeros(3))
    lf.manual_seed(7)
    g1, g2 = cf(lf.zeros(3)), cf(lf.zeros(3))
    for e, g in zip(eager1 + eager2, g1 + g2):
        np.testing.assert_array_equal(g.numpy(), e.numpy())
    assert not np.array_equal(g1[0].numpy(), g2[0].numpy())
    assert cf.cache_info().traces == 1


def test_non_default_generator_in_graph_mode_is_refused():
    g = lf.Generator().manual_seed(0)
    with pytest.raises(lf.GraphError, match="Generator"):
        lf.compile(lambda x: x + lf.rand(2, generator=g))(lf.zeros(2))


# ---------------------------------------------------------------- distributions
def _z(sample_mean, mean, var, n):
    return abs(sample_mean - mean) / math.sqrt(var / n)


def test_uniform_moments_and_range():
    lf.manual_seed(0)
    u = lf.rand(N).numpy().astype(np.float64)
    assert u.min() >= 0 and u.max() < 1
    assert _z(u.mean(), 0.5, 1 / 12, N) < 5
    assert abs(u.var() - 1 / 12) < 5 * math.sqrt(1 / 180 / N)  # var of (u - 1/2)^2 is 1/180
    v = lf.empty(N).uniform_(-3, 5).numpy()
    assert v.min() >= -3 and v.max() < 5 and _z(v.mean(), 1.0, 64 / 12, N) < 5


def test_normal_moments():
    lf.manual_seed(1)
    z = lf.randn(N, dtype=lf.float64).numpy()
    assert _z(z.mean(), 0, 1, N) < 5 and abs(z.var() - 1) < 5 * math.sqrt(2 / N)
    assert abs(np.mean(z**3)) < 5 * math.sqrt(15 / N)  # symmetric
    w = lf.normal(3.0, 0.5, (N,)).numpy()
    assert _z(w.mean(), 3.0, 0.25, N) < 5 and abs(w.std() - 0.5) < 0.02
    t = lf.normal(lf.full((N,), -2.0), lf.full((N,), 3.0)).numpy()
    assert _z(t.mean(), -2.0, 9.0, N) < 5 and abs(t.std() - 3.0) < 0.1
    n_ = lf.zeros(N).normal_(1.0, 2.0).numpy()
    assert _z(n_.mean(), 1.0, 4.0, N) < 5


def test_randint_is_uniform_over_its_range():
    lf.manual_seed(2)
    r = lf.randint(3, 9, (N,)).numpy()
    counts = np.bincount(r - 3, minlength=6)
    assert r.min() == 3 and r.max() == 8 and counts.size == 6
    chi2 = ((counts - N / 6) ** 2 / (N / 6)).sum()
    assert chi2 < 25  # 5 degrees of freedom: p < 1e-4 above 25


def test_randperm_is_a_permutation_with_uniform_positions():
    lf.manual_seed(3)
    firsts = np.array([lf.randperm(5)[0].item() for _ in range(500)])
    assert sorted(lf.randperm(50).tolist()) == list(range(50))
    assert np.all(np.bincount(firsts, minlength=5) > 60)  # expected 100 each
    assert lf.randperm(0).shape == (0,)


def test_bernoulli_rates():
    lf.manual_seed(4)
    p = lf.tensor(np.repeat([0.0, 0.2, 0.9, 1.0], N // 4).astype(np.float32))
    b = lf.bernoulli(p).numpy().reshape(4, -1)
    assert b[0].sum() == 0 and b[3].sum() == N // 4
    for k, q in ((1, 0.2), (2, 0.9)):
        assert _z(b[k].mean(), q, q * (1 - q), N // 4) < 5
    c = lf.zeros(N).bernoulli_(0.25).numpy()
    assert set(np.unique(c)) == {0.0, 1.0} and _z(c.mean(), 0.25, 0.1875, N) < 5


def test_multinomial_frequencies():
    lf.manual_seed(5)
    w = lf.tensor([1.0, 2.0, 0.0, 7.0])
    s = lf.multinomial(w, N, replacement=True).numpy()
    freq = np.bincount(s, minlength=4) / N
    assert freq[2] == 0
    np.testing.assert_allclose(freq, [0.1, 0.2, 0.0, 0.7], atol=0.015)
    rows = lf.multinomial(lf.tensor([[1.0, 1.0, 1.0, 1.0], [0.0, 1.0, 1.0, 0.0]]), 2).numpy()
    assert len(set(rows[0])) == 2 and sorted(rows[1]) == [1, 2]
    firsts = np.array([lf.multinomial(lf.tensor([1.0, 3.0]), 1).item() for _ in range(400)])
    assert 0.65 < firsts.mean() < 0.85  # P(first draw = 1) = 0.75


def test_exponential_and_dropout():
    lf.manual_seed(6)
    e = lf.zeros(N).exponential_(2.0).numpy()
    assert e.min() >= 0 and _z(e.mean(), 0.5, 0.25, N) < 5
    d = NF.dropout(lf.ones(N), 0.3, training=True).numpy()
    kept = d != 0
    assert _z(kept.mean(), 0.7, 0.21, N) < 5
    np.testing.assert_allclose(d[kept], 1 / 0.7, rtol=1e-6)


# ---------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    ("call", "exc", "match"),
    [
        (lambda: lf.randint(5, 2, (2,)), lf.OpError, r"randint: expected low < high, got low=5, high=2"),
        (lambda: lf.randint(5), lf.OpError, r"size"),
        (lambda: lf.rand(2, dtype=lf.int32), lf.DTypeError, r"rand: expected a floating dtype, got lazyflow.int32"),
        (lambda: lf.randn(-1), lf.ShapeError, r"non-negative"),
        (lambda: lf.normal(0.0, -1.0, (2,)), lf.OpError, r"std >= 0.0, got std=-1"),
        (lambda: lf.normal(0.0, 1.0), lf.OpError, r"size"),
        (lambda: lf.bernoulli(lf.ones(2, dtype=lf.int64)), lf.DTypeError, r"bernoulli .*int64"),
        (lambda: lf.zeros(2).bernoulli_(1.5), lf.OpError, r"p to be in \[0, 1\], got p=1.5"),
        (lambda: lf.multinomial(lf.ones(3), 5), lf.OpError, r"cannot sample 5 > 3 categories"),
        (lambda: lf.multinomial(lf.ones(2, 2, 2), 1), lf.ShapeError, r"1-D or 2-D .*\[2, 2, 2\]"),
        (lambda: lf.multinomial(lf.tensor([1.0, -1.0]), 1), lf.OpError, r"non-negative"),
        (lambda: lf.multinomial(lf.zeros(3), 1), lf.OpError, r"positive sum"),
        (lambda: lf.randperm(-2), lf.OpError, r"randperm: n must be non-negative, got -2"),
        (lambda: lf.rand(2, generator=object()), lf.DTypeError, r"lazyflow.Generator"),
        (lambda: lf.manual_seed(2**70), lf.OpError, r"seed must be within"),
        (lambda: lf.zeros(2).normal_(0, -1), lf.OpError, r"std >= 0.0"),
    ],
)
def test_bad_random_input(call, exc, match):
    with pytest.raises(exc, match=match):
        call()
