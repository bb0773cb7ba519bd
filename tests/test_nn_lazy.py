"""Lazy modules (LazyLinear, LazyConv*, LazyConvTranspose1d/2d, LazyBatchNorm*, LazyInstanceNorm*) against torch
2.13: reprs and state_dict keys before and after the first call, inferred shapes, the class they become, torch's
weights loading (also into an uninitialized module), the same Parameter objects (an optimizer built early keeps
working), compile after a dry run, and the errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import lazyflow as lf

RNG = np.random.default_rng(0)
CASES = [
    ("LazyLinear", (4,), (2, 3)),
    ("LazyLinear", (4, False), (2, 5, 3)),
    ("LazyConv1d", (4, 3), (2, 3, 7)),
    ("LazyConv2d", (4, 3, 2, 1, 1, 1), (2, 3, 6, 6)),
    ("LazyConv3d", (2, 2), (1, 2, 3, 4, 4)),
    ("LazyConvTranspose1d", (4, 3, 2), (2, 3, 5)),
    ("LazyConvTranspose2d", (4, 3), (2, 6, 4, 4)),
    ("LazyConvTranspose3d", (2, 2, 2, 0, 1), (1, 3, 2, 3, 2)),
    ("LazyBatchNorm1d", (), (4, 3)),
    ("LazyBatchNorm2d", (), (4, 3, 2, 2)),
    ("LazyBatchNorm3d", (1e-3, 0.2), (2, 3, 2, 2, 2)),
    ("LazyInstanceNorm1d", (), (2, 3, 5)),
    ("LazyInstanceNorm2d", (1e-5, 0.1, False, False), (2, 3, 4, 4)),
    ("LazyInstanceNorm3d", (), (1, 3, 2, 2, 3)),
]


@pytest.mark.parametrize("name,args,shape", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
@pytest.mark.filterwarnings("ignore:input's size at dim=1 does not match num_features")
def test_lazy_modules_vs_torch(name, args, shape):
    lm, tm = getattr(lf.nn, name)(*args), getattr(torch.nn, name)(*args)
    assert repr(lm) == repr(tm)
    assert list(lm.state_dict()) == list(tm.state_dict())
    assert lm.has_uninitialized_params() == tm.has_uninitialized_params()
    params_before = list(lm.parameters())
    x = RNG.standard_normal(shape).astype(np.float32)
    lm(lf.tensor(x)), tm(torch.tensor(x))
    assert type(lm).__name__ == type(tm).__name__ == name[4:]
    assert isinstance(lm, getattr(lf.nn, name[4:]))
    assert repr(lm) == repr(tm)
    assert [tuple(v.shape) for v in lm.state_dict().values()] == [tuple(v.shape) for v in tm.state_dict().values()]
    assert all(a is b for a, b in zip(params_before, lm.parameters()))  # materialized in place
    assert all(type(p) is lf.nn.Parameter for p in lm.parameters())
    # torch's weights load; then the numbers are torch's (eager and compiled)
    lm.load_state_dict({k: lf.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    lm.eval(), tm.eval()
    with torch.no_grad():
        ref = tm(torch.tensor(x)).numpy()
    np.testing.assert_allclose(lm(lf.tensor(x)).detach().numpy(), ref, rtol=1e-5, atol=1e-5)
    if name in ("LazyLinear", "LazyConv2d", "LazyBatchNorm2d"):
        np.testing.assert_allclose(lf.compile(lm)(lf.tensor(x)).detach().numpy(), ref, rtol=1e-5, atol=1e-5)


def test_loading_materializes_an_uninitialized_module_and_default_init_bounds():
    tm = torch.nn.Linear(6, 3)
    lm = lf.nn.LazyLinear(3)
    lm.load_state_dict({k: lf.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    assert tuple(lm.weight.shape) == (3, 6) and not lm.has_uninitialized_params()
    x = RNG.standard_normal((2, 6)).astype(np.float32)
    np.testing.assert_allclose(lm(lf.tensor(x)).detach().numpy(), tm(torch.tensor(x)).detach().numpy(), rtol=1e-5)
    np.testing.assert_array_equal(lm.weight.detach().numpy(), tm.weight.detach().numpy())  # not re-drawn
    assert type(lm) is lf.nn.Linear and lm.in_features == 6
    m = lf.nn.LazyLinear(50)
    m(lf.ones(1, 400))
    w = m.weight.detach().numpy()
    assert np.abs(w).max() <= 1 / 20 and w.std() > 0.02  # U(-1/sqrt(400), 1/sqrt(400)), torch's default


def test_optimizer_built_before_the_first_call_trains():
    m = lf.nn.Sequential(lf.nn.LazyLinear(8), lf.nn.ReLU(), lf.nn.LazyLinear(1))
    opt = lf.optim.SGD(m.parameters(), lr=0.1)
    x, y = lf.randn(16, 5), lf.randn(16, 1)
    first = None
    for _ in range(5):
        loss = ((m(x) - y) ** 2).mean()
        first = loss.item() if first is None else first
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.item() < first


def test_errors():
    with pytest.raises(lf.GraphError, match="eager forward"):
        lf.compile(lf.nn.LazyLinear(3))(lf.ones(2, 4))
    with pytest.raises(ValueError, match="divisible by groups"):
        lf.nn.LazyConv2d(4, 3, groups=2)(lf.ones(1, 3, 5, 5))
    with pytest.raises(lf.ShapeError, match="3D .unbatched. or 4D"):
        lf.nn.LazyConv2d(4, 3)(lf.ones(5, 5))
    m = lf.nn.LazyLinear(3)
    m(lf.ones(2, 4))
    with pytest.raises(lf.ShapeError):
        m(lf.ones(2, 5))  # now a Linear(4, 3)
