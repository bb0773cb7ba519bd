"""lf.optim.swa_utils against torch.optim.swa_utils: the same training run averaged by SWA and EMA gives the same
averaged parameters (bit for bit where torch lerps), the same state_dict keys, SWALR's learning rates, and
update_bn's recomputed statistics."""

import numpy as np
import pytest
import torch

import lazyflow as lf
from lazyflow import nn
from lazyflow.optim import swa_utils as S


def _pair():
    lf.manual_seed(0)
    m = nn.Sequential(nn.Linear(4, 6), nn.BatchNorm1d(6), nn.ReLU(), nn.Linear(6, 2))
    tm = torch.nn.Sequential(torch.nn.Linear(4, 6), torch.nn.BatchNorm1d(6), torch.nn.ReLU(), torch.nn.Linear(6, 2))
    tm.load_state_dict({k: torch.tensor(v.detach().numpy()) for k, v in m.state_dict().items()})
    return m, tm


def _train_step(m, opt, x, y, lib):
    opt.zero_grad()
    F = lib.nn.functional
    F.cross_entropy(m(lib.tensor(x)), lib.tensor(y)).backward()
    opt.step()


@pytest.mark.parametrize("kind", ["swa", "ema", "ema_buffers", "avg_fn"])
def test_averages_match_torch(kind):
    m, tm = _pair()
    opt, topt = lf.optim.SGD(m.parameters(), lr=0.1), torch.optim.SGD(tm.parameters(), lr=0.1)
    kw = {
        "swa": ({}, {}),
        "ema": (
            {"multi_avg_fn": S.get_ema_multi_avg_fn(0.9)},
            {"multi_avg_fn": torch.optim.swa_utils.get_ema_multi_avg_fn(0.9)},
        ),
        "ema_buffers": (
            {"multi_avg_fn": S.get_ema_multi_avg_fn(0.8), "use_buffers": True},
            {"multi_avg_fn": torch.optim.swa_utils.get_ema_multi_avg_fn(0.8), "use_buffers": True},
        ),
        "avg_fn": ({"avg_fn": S.get_ema_avg_fn(0.7)}, {"avg_fn": torch.optim.swa_utils.get_ema_avg_fn(0.7)}),
    }[kind]
    avg, tavg = S.AveragedModel(m, **kw[0]), torch.optim.swa_utils.AveragedModel(tm, **kw[1])
    rng = np.random.default_rng(0)
    for _ in range(6):
        x, y = rng.standard_normal((8, 4)).astype(np.float32), rng.integers(0, 2, 8)
        _train_step(m, opt, x, y, lf)
        _train_step(tm, topt, x, y, torch)
        avg.update_parameters(m)
        tavg.update_parameters(tm)
    sd, tsd = avg.state_dict(), tavg.state_dict()
    assert list(sd) == list(tsd)
    for k in sd:
        np.testing.assert_allclose(sd[k].numpy(), tsd[k].numpy(), rtol=1e-5, atol=1e-6, err_msg=k)
    x = rng.standard_normal((3, 4)).astype(np.float32)
    avg.eval()
    tavg.eval()
    np.testing.assert_allclose(
        avg(lf.tensor(x)).detach().numpy(), tavg(torch.tensor(x)).detach().numpy(), rtol=1e-5, atol=1e-6
    )


def test_swa_running_mean_follows_torch_given_equal_inputs():
    # torch's CPU path is avg + (cur - avg) / (n + 1); XLA divides by a broadcast scalar as a multiplication by its
    # reciprocal (1 ulp on some elements), so equal to a float32 ulp, not bit for bit
    rng = np.random.default_rng(1)
    vals = [rng.standard_normal(50).astype(np.float32) for _ in range(5)]
    p, tp = nn.Parameter(lf.tensor(vals[0])), torch.nn.Parameter(torch.tensor(vals[0]))
    lm, tmod = nn.Module(), torch.nn.Module()
    lm.w, tmod.w = p, tp
    avg, tavg = S.AveragedModel(lm), torch.optim.swa_utils.AveragedModel(tmod)
    for v in vals:
        with lf.no_grad():
            p.copy_(lf.tensor(v))
        with torch.no_grad():
            tp.copy_(torch.tensor(v))
        avg.update_parameters(lm)
        tavg.update_parameters(tmod)
    np.testing.assert_allclose(avg.module.w.detach().numpy(), tavg.module.w.detach().numpy(), rtol=3e-7, atol=1e-7)
    assert int(avg.n_averaged.item()) == int(tavg.n_averaged.item()) == 5


def test_update_bn_matches_torch():
    m, tm = _pair()
    rng = np.random.default_rng(2)
    data = [rng.standard_normal((5, 4)).astype(np.float32) * 3 + 1 for _ in range(4)]
    m.eval()
    tm.eval()
    S.update_bn([(lf.tensor(d), 0) for d in data], m)
    torch.optim.swa_utils.update_bn([(torch.tensor(d), 0) for d in data], tm)
    assert m.training is False and m[1].momentum == 0.1
    for k in ("1.running_mean", "1.running_var", "1.num_batches_tracked"):
        np.testing.assert_allclose(m.state_dict()[k].numpy(), tm.state_dict()[k].numpy(), rtol=1e-5, err_msg=k)


@pytest.mark.parametrize("strategy, epochs", [("cos", 5), ("linear", 3), ("cos", 0)])
def test_swalr_matches_torch(strategy, epochs):
    p, tp = lf.tensor([1.0], requires_grad=True), torch.tensor([1.0], requires_grad=True)
    opt = lf.optim.SGD([{"params": [p]}], lr=0.5)
    topt = torch.optim.SGD([{"params": [tp]}], lr=0.5)
    s = S.SWALR(opt, swa_lr=0.05, anneal_epochs=epochs, anneal_strategy=strategy)
    ts = torch.optim.swa_utils.SWALR(topt, swa_lr=0.05, anneal_epochs=epochs, anneal_strategy=strategy)
    for _ in range(8):
        opt.step()
        topt.step()
        s.step()
        ts.step()
        np.testing.assert_allclose(s.get_last_lr(), ts.get_last_lr(), rtol=1e-13)


def test_bad_arguments():
    m, _ = _pair()
    with pytest.raises(ValueError, match="Only one of avg_fn and multi_avg_fn"):
        S.AveragedModel(m, avg_fn=S.get_swa_avg_fn(), multi_avg_fn=S.get_swa_multi_avg_fn())
    with pytest.raises(ValueError, match="Invalid decay"):
        S.get_ema_multi_avg_fn(1.5)
    opt = lf.optim.SGD(m.parameters(), lr=0.1)
    with pytest.raises(ValueError, match="anneal_strategy"):
        S.SWALR(opt, 0.05, anneal_strategy="exp")
    with pytest.raises(ValueError, match="anneal_epochs"):
        S.SWALR(opt, 0.05, anneal_epochs=-1)
