"""A few-second smoke test of the eager core against numpy."""

import numpy as np

import lazyflow as lf


def test_mlp_step_matches_numpy():
    rng = np.random.default_rng(0)
    xw = rng.standard_normal((4, 3)).astype(np.float32)
    ww = rng.standard_normal((3, 2)).astype(np.float32)
    x = lf.tensor(xw)
    w = lf.tensor(ww, requires_grad=True)
    loss = (lf.tanh(x @ w) ** 2).sum()
    loss.backward()
    h = np.tanh(xw @ ww)
    np.testing.assert_allclose(loss.item(), (h**2).sum(), rtol=1e-5)
    np.testing.assert_allclose(w.grad.numpy(), xw.T @ (2 * h * (1 - h**2)), rtol=1e-5, atol=1e-6)


def test_tensor_from_numpy_never_aliases_the_source():
    for make in (lf.tensor, lf.from_numpy, lf.as_tensor):
        for _ in range(10):  # JAX aliases only suitably aligned buffers: try several allocations
            a = np.zeros(4096, np.float32)
            t = make(a)
            a[:] = 5
            assert float(t.sum().item()) == 0.0, make.__name__
