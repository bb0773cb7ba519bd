"""lf.optim.lr_scheduler against torch.optim.lr_scheduler: 100 steps side by side, state_dict resume."""

import math

import numpy as np
import pytest
import torch

import lazyflow as lf
from lazyflow.optim import lr_scheduler as S
from lazyflow.optim import optimizer as O

STEPS = 100


def _lam(epoch):
    return 0.97**epoch + 0.01 * (epoch % 3)


def _mul(epoch):
    return 0.99 if epoch % 2 else 0.995


# name -> (optimizer name, function (sched module, optimizer) -> scheduler)
CASES = {
    "step": ("SGD", lambda m, o: m.StepLR(o, step_size=7, gamma=0.5)),
    "multistep": ("SGD", lambda m, o: m.MultiStepLR(o, milestones=[10, 30, 30, 80], gamma=0.3)),
    "exponential": ("SGD", lambda m, o: m.ExponentialLR(o, gamma=0.97)),
    "cosine": ("SGD", lambda m, o: m.CosineAnnealingLR(o, T_max=30, eta_min=0.001)),
    "lambda": ("SGD", lambda m, o: m.LambdaLR(o, lr_lambda=_lam)),
    "lambda_per_group": ("SGD", lambda m, o: m.LambdaLR(o, lr_lambda=[_lam, lambda e: 1.0 / (1 + e)])),
    "multiplicative": ("SGD", lambda m, o: m.MultiplicativeLR(o, lr_lambda=_mul)),
    "linear": ("SGD", lambda m, o: m.LinearLR(o, start_factor=0.1, end_factor=0.9, total_iters=40)),
    "constant": ("SGD", lambda m, o: m.ConstantLR(o, factor=0.25, total_iters=12)),
    "polynomial": ("SGD", lambda m, o: m.PolynomialLR(o, total_iters=60, power=2.0)),
    "onecycle_sgd": ("SGD", lambda m, o: m.OneCycleLR(o, max_lr=[1.0, 0.5], total_steps=STEPS)),
    "onecycle_adam_linear_3phase": (
        "Adam",
        lambda m, o: m.OneCycleLR(
            o, max_lr=0.01, epochs=10, steps_per_epoch=10, anneal_strategy="linear", three_phase=True
        ),
    ),
    "sequential": (
        "SGD",
        lambda m, o: m.SequentialLR(
            o,
            [
                m.LinearLR(o, start_factor=0.1, total_iters=10),
                m.ExponentialLR(o, gamma=0.9),
                m.CosineAnnealingLR(o, T_max=20),
            ],
            milestones=[10, 40],
        ),
    ),
    "chained": (
        "SGD",
        lambda m, o: m.ChainedScheduler([m.ConstantLR(o, factor=0.5, total_iters=5), m.ExponentialLR(o, gamma=0.98)]),
    ),
    "warm_restarts": ("SGD", lambda m, o: m.CosineAnnealingWarmRestarts(o, T_0=7, T_mult=2, eta_min=1e-4)),
    "cyclic_triangular": ("SGD", lambda m, o: m.CyclicLR(o, base_lr=0.01, max_lr=[0.1, 0.2], step_size_up=7)),
    "cyclic_triangular2": (
        "SGD",
        lambda m, o: m.CyclicLR(o, base_lr=0.01, max_lr=0.1, step_size_up=5, step_size_down=9, mode="triangular2"),
    ),
    "cyclic_exp_range_adam": (
        "Adam",
        lambda m, o: m.CyclicLR(o, base_lr=1e-4, max_lr=1e-2, step_size_up=6, mode="exp_range", gamma=0.97),
    ),
    "cyclic_custom": (
        "SGD",
        lambda m, o: m.CyclicLR(
            o, 0.01, 0.1, step_size_up=4, scale_fn=lambda x: 1 / (1 + x), scale_mode="iterations", cycle_momentum=False
        ),
    ),
}


def _optimizer(lib, name):
    p1 = lib.tensor([1.0, 2.0], requires_grad=True)
    p2 = lib.tensor([3.0], requires_grad=True)
    kwargs = {"momentum": 0.9} if name == "SGD" else {}
    return getattr(lib.optim, name)([{"params": [p1]}, {"params": [p2], "lr": 0.05}], lr=0.1, **kwargs)


def _group_values(opt):
    out = []
    for g in opt.param_groups:
        out.append((g["lr"], g.get("momentum"), tuple(g["betas"]) if "betas" in g else None))
    return out


@pytest.mark.parametrize("case", sorted(CASES))
def test_learning_rates_match_torch_with_resume(case):
    opt_name, make = CASES[case]
    lo, to = _optimizer(lf, opt_name), _optimizer(torch, opt_name)
    ls, ts = make(S, lo), make(torch.optim.lr_scheduler, to)
    assert ls.get_last_lr() == ts.get_last_lr()
    for k in range(STEPS - 1 if case.startswith("onecycle") else STEPS):
        if k == STEPS // 2:  # resume in a fresh optimizer + scheduler from state dicts
            osd, ssd = lo.state_dict(), ls.state_dict()
            lo = _optimizer(lf, opt_name)
            ls = make(S, lo)
            lo.load_state_dict(osd)
            ls.load_state_dict(ssd)
        lo.step()
        to.step()
        ls.step()
        ts.step()
        np.testing.assert_allclose(ls.get_last_lr(), ts.get_last_lr(), rtol=1e-13, atol=0)
        for mine, theirs in zip(_group_values(lo), _group_values(to)):
            np.testing.assert_allclose(
                [v for v in mine if v is not None and not isinstance(v, tuple)],
                [v for v in theirs if v is not None and not isinstance(v, tuple)],
                rtol=1e-13,
                atol=0,
            )
            if mine[2] is not None:
                np.testing.assert_allclose(mine[2], theirs[2], rtol=1e-13)


@pytest.mark.parametrize(
    "case", ["step", "cosine", "onecycle_sgd", "warm_restarts", "lambda", "linear", "cyclic_triangular"]
)
def test_state_dict_keys_match_torch(case):
    opt_name, make = CASES[case]
    ls, ts = make(S, _optimizer(lf, opt_name)), make(torch.optim.lr_scheduler, _optimizer(torch, opt_name))
    for _ in range(3):
        ls.optimizer.step()
        ts.optimizer.step()
        ls.step()
        ts.step()
    mine, theirs = ls.state_dict(), ts.state_dict()
    assert set(mine) == set(theirs)
    for k in ("last_epoch", "base_lrs", "_step_count", "_last_lr"):
        if k in theirs:
            assert mine[k] == pytest.approx(theirs[k], rel=1e-13)


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(mode="min", factor=0.5, patience=3, threshold=0.01, cooldown=2, min_lr=[0.01, 0.002]),
        dict(mode="max", factor=0.3, patience=2, threshold=0.1, threshold_mode="abs", min_lr=0.004),
    ],
)
def test_reduce_lr_on_plateau_matches_torch(kwargs):
    rng = np.random.default_rng(0)
    metrics = np.concatenate([np.linspace(1.0, 0.5, 20), 0.5 + 0.01 * rng.standard_normal(80)])
    if kwargs["mode"] == "max":
        metrics = -metrics
    lo, to = _optimizer(lf, "SGD"), _optimizer(torch, "SGD")
    ls = S.ReduceLROnPlateau(lo, **kwargs)
    ts = torch.optim.lr_scheduler.ReduceLROnPlateau(to, **kwargs)
    for k, m in enumerate(metrics):
        if k == 50:
            sd = ls.state_dict()
            ls = S.ReduceLROnPlateau(lo, **kwargs)
            ls.load_state_dict(sd)
        ls.step(lf.tensor(float(m)) if k % 2 else float(m))
        ts.step(float(m))
        assert ls.get_last_lr() == pytest.approx(ts.get_last_lr(), rel=1e-13)
    assert ls.get_last_lr() != [0.1, 0.05]  # the schedule did reduce


def test_closed_form_epoch_argument_matches_torch():
    lo, to = _optimizer(lf, "SGD"), _optimizer(torch, "SGD")
    ls, ts = S.StepLR(lo, step_size=5, gamma=0.5), torch.optim.lr_scheduler.StepLR(to, step_size=5, gamma=0.5)
    with pytest.warns(UserWarning):
        ls.step(17)
    with pytest.warns(UserWarning):
        ts.step(17)
    assert ls.get_last_lr() == ts.get_last_lr()


def test_warm_restarts_fractional_epochs_match_torch():
    lo, to = _optimizer(lf, "SGD"), _optimizer(torch, "SGD")
    ls = S.CosineAnnealingWarmRestarts(lo, T_0=5, T_mult=2)
    ts = torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(to, T_0=5, T_mult=2)
    for e in np.arange(0, 40, 0.37):
        ls.step(float(e))
        ts.step(float(e))
        assert ls.get_last_lr() == pytest.approx(ts.get_last_lr(), rel=1e-13)


def test_schedules_do_not_recompile_the_optimizer():
    p = lf.tensor([1.0, 2.0], requires_grad=True)
    opt = lf.optim.Adam([p], lr=0.1)
    sched = S.OneCycleLR(opt, max_lr=0.5, total_steps=20)
    p.grad = lf.tensor([1.0, -1.0])
    opt.step()
    sched.step()
    traces = O.cache_info().traces
    for _ in range(10):
        p.grad = lf.tensor([1.0, -1.0])
        opt.step()
        sched.step()
    assert O.cache_info().traces == traces
    assert opt.param_groups[0]["betas"][0] != 0.9  # beta1 was cycled, as an argument


@pytest.mark.parametrize(
    "ctor,exc,match",
    [
        (lambda o: S.StepLR(object(), 3), TypeError, "is not an Optimizer"),
        (lambda o: S.LambdaLR(o, [_lam]), ValueError, "Expected 2 lr_lambdas"),
        (lambda o: S.MultiplicativeLR(o, 3.0), TypeError, "should be a function"),
        (lambda o: S.ConstantLR(o, factor=1.5), ValueError, "between 0 and 1"),
        (lambda o: S.LinearLR(o, start_factor=0.0), ValueError, "greater than 0"),
        (lambda o: S.OneCycleLR(o, max_lr=1.0), ValueError, "total_steps OR"),
        (lambda o: S.OneCycleLR(o, max_lr=1.0, total_steps=10, pct_start=1.5), ValueError, "pct_start"),
        (lambda o: S.OneCycleLR(o, max_lr=1.0, total_steps=10, anneal_strategy="exp"), ValueError, "anneal_strategy"),
        (lambda o: S.ReduceLROnPlateau(o, factor=1.0), ValueError, "Factor"),
        (lambda o: S.ReduceLROnPlateau(o, mode="avg"), ValueError, "unknown"),
        (lambda o: S.CosineAnnealingWarmRestarts(o, T_0=0), ValueError, "T_0"),
        (lambda o: S.SequentialLR(o, [S.StepLR(o, 3)], milestones=[3]), ValueError, "one more"),
        (lambda o: S.StepLR(o, 3, last_epoch=4), KeyError, "initial_lr"),
        (lambda o: S.CyclicLR(o, 0.01, 0.1, mode="sawtooth"), ValueError, "mode is invalid"),
        (lambda o: S.CyclicLR(o, [0.01], 0.1), ValueError, "same length as optimizer.param_groups"),
    ],
)
def test_invalid_arguments(ctor, exc, match):
    with pytest.raises(exc, match=match):
        ctor(_optimizer(lf, "SGD"))


def test_cyclic_momentum_needs_momentum_or_betas():
    p = lf.tensor([1.0], requires_grad=True)
    with pytest.raises(ValueError, match="momentum or beta1"):
        S.CyclicLR(lf.optim.Adagrad([p], lr=0.1), 0.01, 0.1)


def test_onecycle_too_many_steps():
    sched = S.OneCycleLR(_optimizer(lf, "SGD"), max_lr=1.0, total_steps=3)
    sched.step()
    sched.step()
    sched.step()
    with pytest.raises(ValueError, match="Tried to step 4 times"):
        sched.step()


def test_cosine_reference_values():
    # independent of torch: the closed form 0.5 * base * (1 + cos(pi * t / T)) for t <= T
    sched = S.CosineAnnealingLR(_optimizer(lf, "SGD"), T_max=10)
    for t in range(1, 11):
        sched.step()
        assert sched.get_last_lr()[0] == pytest.approx(0.05 * (1 + math.cos(math.pi * t / 10)), abs=1e-12)
