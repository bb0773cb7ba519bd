"""lf.amp.GradScaler against torch.amp.GradScaler("cpu"): the same model, data and injected overflows give the same
scales, growth trackers, skipped steps, parameters and state_dict; bad calls raise torch's errors."""

import warnings

import numpy as np
import pytest
import torch

import lazyflow as lf
from lazyflow import nn


def _pair(seed=0):
    lf.manual_seed(seed)
    m = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))
    tm = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))
    tm.load_state_dict({k: torch.tensor(v.detach().numpy()) for k, v in m.state_dict().items()})
    return m, tm


@pytest.mark.parametrize("opt_name", ["SGD", "Adam"])
def test_training_with_overflows_matches_torch(opt_name):
    m, tm = _pair()
    kw = {"lr": 0.05, "momentum": 0.9} if opt_name == "SGD" else {"lr": 1e-2}
    opt = getattr(lf.optim, opt_name)(m.parameters(), **kw)
    topt = getattr(torch.optim, opt_name)(tm.parameters(), **kw)
    sc = lf.amp.GradScaler("cpu", init_scale=2.0**10, growth_interval=3)
    tsc = torch.amp.GradScaler("cpu", init_scale=2.0**10, growth_interval=3)
    rng = np.random.default_rng(0)
    skipped = []
    for step in range(12):
        x = rng.standard_normal((5, 6)).astype(np.float32)
        y = rng.integers(0, 3, 5)
        boost = 1e38 if step in (2, 3, 8) else 1.0  # an overflow to inf in the scaled loss: the step is skipped
        loss = nn.functional.cross_entropy(m(lf.tensor(x)), lf.tensor(y)) * boost
        tloss = torch.nn.functional.cross_entropy(tm(torch.tensor(x)), torch.tensor(y)) * boost
        opt.zero_grad()
        topt.zero_grad()
        sc.scale(loss).backward()
        tsc.scale(tloss).backward()
        if step % 4 == 1:  # unscale first (gradient clipping happens here in real loops)
            sc.unscale_(opt)
            tsc.unscale_(topt)
            for p, tp in zip(m.parameters(), tm.parameters()):
                np.testing.assert_allclose(p.grad.numpy(), tp.grad.numpy(), rtol=1e-5, atol=1e-7)
        before = [p.detach().numpy().copy() for p in m.parameters()]
        sc.step(opt)
        tsc.step(topt)
        skipped.append(all(np.array_equal(b, p.detach().numpy()) for b, p in zip(before, m.parameters())))
        sc.update()
        tsc.update()
        assert sc.get_scale() == tsc.get_scale(), step
        assert sc.state_dict() == tsc.state_dict(), step
        for p, tp in zip(m.parameters(), tm.parameters()):
            np.testing.assert_allclose(p.detach().numpy(), tp.detach().numpy(), rtol=1e-5, atol=1e-6)
    assert [i for i, s in enumerate(skipped) if s] == [2, 3, 8]


def test_scale_of_nested_outputs_and_state_dict_round_trip():
    sc = lf.amp.GradScaler("cpu", init_scale=4.0)
    a, b = lf.ones(2), lf.full((3,), 2.0)
    out = sc.scale([a, (b, a)])
    assert isinstance(out, list) and isinstance(out[1], tuple)
    np.testing.assert_array_equal(out[1][0].numpy(), [8.0, 8.0, 8.0])
    tsc = torch.amp.GradScaler("cpu", init_scale=4.0)
    tsc.scale(torch.ones(1))
    assert sc.state_dict() == tsc.state_dict()
    other = lf.amp.GradScaler("cpu")
    other.load_state_dict(tsc.state_dict())  # torch's dict loads, and back
    tsc2 = torch.amp.GradScaler("cpu")
    tsc2.load_state_dict(other.state_dict())
    assert tsc2.get_scale() == other.get_scale() == 4.0


def test_without_a_gpu_the_default_scaler_disables_itself_like_torchs_cpu_build():
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        sc = lf.amp.GradScaler()
        tsc = torch.amp.GradScaler()
    if lf.cuda.is_available():
        pytest.skip("a GPU is present: the default scaler is enabled there")
    assert any("CUDA is not available" in str(x.message) for x in w)
    assert sc.is_enabled() is tsc.is_enabled() is False
    assert sc.get_scale() == tsc.get_scale() == 1.0
    assert sc.state_dict() == tsc.state_dict() == {}
    x = lf.ones(2)
    assert sc.scale(x) is x
    m, _ = _pair()
    opt = lf.optim.SGD(m.parameters(), lr=0.1)
    m(lf.ones(1, 6)).sum().backward()
    before = m[0].weight.detach().numpy().copy()
    sc.step(opt)  # just opt.step()
    assert not np.array_equal(before, m[0].weight.detach().numpy())
    with pytest.warns(FutureWarning, match="deprecated"):
        lf.cuda.amp.GradScaler()


def test_bad_calls_raise_torchs_errors():
    m, _ = _pair()
    opt = lf.optim.SGD(m.parameters(), lr=0.1)
    sc = lf.amp.GradScaler("cpu")
    sc.scale(m(lf.ones(1, 6)).sum()).backward()
    sc.unscale_(opt)
    with pytest.raises(RuntimeError, match="already been called"):
        sc.unscale_(opt)
    sc.step(opt)
    with pytest.raises(RuntimeError, match="step\\(\\) has already been called"):
        sc.step(opt)
    with pytest.raises(RuntimeError, match="after step"):
        sc.unscale_(opt)
    sc.update()
    with pytest.raises(RuntimeError, match="No inf checks"):
        sc.update()
    with pytest.raises(RuntimeError, match="Closure"):
        sc.step(opt, closure=lambda: 0.0)
    with pytest.raises(ValueError, match="outputs must be a Tensor"):
        sc.scale(3.0)
    with pytest.raises(ValueError, match="growth factor"):
        lf.amp.GradScaler("cpu", growth_factor=1.0)
    with pytest.raises(RuntimeError, match="empty"):
        sc.load_state_dict({})
    with pytest.raises(KeyError, match="missing keys"):
        sc.load_state_dict({"scale": 2.0})
    half = nn.Linear(2, 2).half()
    hopt = lf.optim.SGD(half.parameters(), lr=0.1)
    half(lf.ones(1, 2, dtype=lf.float16)).sum().backward()
    with pytest.raises(ValueError, match="FP16 gradients"):
        lf.amp.GradScaler("cpu").unscale_(hopt)
    sc.update(new_scale=8.0)
    assert sc.get_scale() == 8.0
    sc.update(new_scale=lf.tensor(16.0))
    assert sc.get_scale() == 16.0
    with pytest.raises(ValueError, match="1-element"):
        sc.update(new_scale=lf.ones(2))
