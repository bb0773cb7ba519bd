"""Normalization layers against torch (the oracle): state_dict keys/shapes and repr, forward and gradient
parity with torch's weights copied in (train and eval, eager and compiled), BatchNorm running statistics over
several steps (exponential and cumulative momentum) updated in place, functional forms, and bad input."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import lazyflow as lf
import lazyflow.nn.functional as F

RTOL = 1e-5


def _close(got, want, what=""):
    want = np.asarray(want, np.float64)
    scale = max(float(np.max(np.abs(want))) if want.size else 0.0, 1e-6)
    np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=RTOL, atol=RTOL * scale, err_msg=what)


def _pair(shape, seed):
    a = (np.random.default_rng(seed).standard_normal(shape) * 2 + 0.5).astype(np.float32)
    return lf.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)


# (id, constructor over a namespace, input shape)
LAYERS = [
    ("bn1d_2d", lambda m: m.BatchNorm1d(4), (5, 4)),
    ("bn1d_3d", lambda m: m.BatchNorm1d(3, momentum=0.3), (4, 3, 5)),
    ("bn2d", lambda m: m.BatchNorm2d(3), (2, 3, 4, 4)),
    ("bn2d_cumulative", lambda m: m.BatchNorm2d(3, momentum=None, eps=1e-3), (2, 3, 3, 4)),
    ("bn2d_noaffine", lambda m: m.BatchNorm2d(3, affine=False), (2, 3, 4, 3)),
    ("bn2d_nobias", lambda m: m.BatchNorm2d(3, bias=False), (2, 3, 4, 3)),
    ("bn2d_untracked", lambda m: m.BatchNorm2d(3, track_running_stats=False), (2, 3, 4, 4)),
    ("bn3d", lambda m: m.BatchNorm3d(2), (2, 2, 3, 2, 3)),
    ("ln", lambda m: m.LayerNorm(6), (2, 3, 6)),
    ("ln_2d_nobias", lambda m: m.LayerNorm((3, 4), eps=1e-3, bias=False), (2, 3, 4)),
    ("ln_noaffine", lambda m: m.LayerNorm(5, elementwise_affine=False), (4, 5)),
    ("gn", lambda m: m.GroupNorm(2, 6), (2, 6, 3, 3)),
    ("gn_noaffine", lambda m: m.GroupNorm(3, 3, affine=False), (2, 3, 5)),
    ("rms", lambda m: m.RMSNorm(6), (2, 3, 6)),
    ("rms_eps_2d", lambda m: m.RMSNorm([2, 3], eps=1e-4), (4, 2, 3)),
    ("rms_noaffine", lambda m: m.RMSNorm(4, elementwise_affine=False), (3, 4)),
]
IDS = [r[0] for r in LAYERS]


def _randomize(tm):
    """Non-trivial affine parameters and running statistics on the torch layer (the defaults are 1/0)."""
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in tm.parameters():
            p.copy_(torch.randn(p.shape, generator=g))
        for name, b in tm.named_buffers():
            if name.endswith("running_mean"):
                b.copy_(torch.randn(b.shape, generator=g))
            elif name.endswith("running_var"):
                b.copy_(torch.rand(b.shape, generator=g) + 0.5)


def _pair_module(ctor):
    torch.manual_seed(0)
    tm, lm = ctor(torch.nn), ctor(lf.nn)
    _randomize(tm)
    lm.load_state_dict({k: v.detach().numpy() for k, v in tm.state_dict().items()})
    return lm, tm


def _check_buffers(lm, tm):
    tb = dict(tm.named_buffers())
    for k, b in lm.named_buffers():
        if k.endswith("num_batches_tracked"):
            assert b.dtype == lf.int64 and int(b.item()) == int(tb[k].item()), k
        else:
            _close(b.numpy(), tb[k].numpy(), k)


@pytest.mark.parametrize("case", LAYERS, ids=IDS)
def test_keys_shapes_repr_and_defaults(case):
    _, ctor, _ = case
    tm, lm = ctor(torch.nn), ctor(lf.nn)
    assert [(k, tuple(v.shape)) for k, v in lm.state_dict().items()] == [
        (k, tuple(v.shape)) for k, v in tm.state_dict().items()
    ]
    assert repr(lm) == repr(tm)
    for k, v in tm.state_dict().items():  # default init: ones/zeros, int64 counter
        np.testing.assert_array_equal(lm.state_dict()[k].numpy(), v.numpy(), err_msg=k)


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "graph"])
@pytest.mark.parametrize("mode", ["train", "eval"])
@pytest.mark.parametrize("case", LAYERS, ids=IDS)
def test_forward_backward_vs_torch(case, mode, compiled):
    _, ctor, xs = case
    lm, tm = _pair_module(ctor)
    lm.train(mode == "train")
    tm.train(mode == "train")
    run = lf.compile(lm) if compiled else lm
    xl, xt = _pair(xs, 3)
    yl, yt = run(xl), tm(xt)
    _close(yl.detach().numpy(), yt.detach().numpy(), "forward")
    g = np.random.default_rng(4).standard_normal(xs).astype(np.float32)
    (yl * lf.tensor(g)).sum().backward()
    (yt * torch.tensor(g)).sum().backward()
    _close(xl.grad.numpy(), xt.grad.numpy(), "input grad")
    tp = dict(tm.named_parameters())
    for k, p in lm.named_parameters():
        _close(p.grad.numpy(), tp[k].grad.numpy(), f"grad of {k}")
    _check_buffers(lm, tm)


BN = [r for r in LAYERS if r[0].startswith("bn")]


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "graph"])
@pytest.mark.parametrize("case", BN, ids=[r[0] for r in BN])
def test_batchnorm_running_stats_over_steps_in_place(case, compiled):
    _, ctor, xs = case
    lm, tm = _pair_module(ctor)
    bufs = {k: id(b) for k, b in lm.named_buffers()}
    run = lf.compile(lm) if compiled else lm
    for step in range(4):
        xl, xt = _pair(xs, 10 + step)
        _close(run(xl).detach().numpy(), tm(xt).detach().numpy(), f"train step {step}")
        _check_buffers(lm, tm)
    assert {k: id(b) for k, b in lm.named_buffers()} == bufs  # updated in place, same objects
    lm.eval()
    tm.eval()
    xl, xt = _pair(xs, 20)
    _close(run(xl).detach().numpy(), tm(xt).detach().numpy(), "eval uses running stats")
    _check_buffers(lm, tm)


def test_batchnorm_loads_checkpoint_without_counter():
    _, tm = _pair_module(lambda m: m.BatchNorm2d(3))
    lm = lf.nn.BatchNorm2d(3)
    sd = {k: v.numpy() for k, v in tm.state_dict().items() if k != "num_batches_tracked"}
    res = lm.load_state_dict(sd)
    assert res.missing_keys == [] and res.unexpected_keys == []
    _close(lm.running_var.numpy(), tm.running_var.numpy())


# ---------------------------------------------------------------- functional forms (eager; graph via the layers)
def test_functional_forms_vs_torch():
    xl, xt = _pair((3, 4, 5), 0)
    wl, wt = _pair((4,), 1)
    bl, bt = _pair((4,), 2)
    rm, rv = np.zeros(4, np.float32), np.ones(4, np.float32)
    rml, rvl = lf.tensor(rm), lf.tensor(rv)
    rmt, rvt = torch.tensor(rm), torch.tensor(rv)
    cases = [
        (
            F.batch_norm(xl, rml, rvl, wl, bl, True, 0.2, 1e-3),
            torch.nn.functional.batch_norm(xt, rmt, rvt, wt, bt, True, 0.2, 1e-3),
        ),
        (F.batch_norm(xl, rml, rvl, wl, bl, False), torch.nn.functional.batch_norm(xt, rmt, rvt, wt, bt, False)),
        (F.batch_norm(xl, None, None, training=True), torch.nn.functional.batch_norm(xt, None, None, training=True)),
        (F.group_norm(xl, 2, wl, bl), torch.nn.functional.group_norm(xt, 2, wt, bt)),
        (F.layer_norm(xl, (5,)), torch.nn.functional.layer_norm(xt, (5,))),
        (F.rms_norm(xl, [4, 5]), torch.nn.functional.rms_norm(xt, [4, 5])),
    ]
    for i, (a, b) in enumerate(cases):
        _close(a.detach().numpy(), b.detach().numpy(), f"case {i}")
    _close(rml.numpy(), rmt.numpy(), "running_mean")
    _close(rvl.numpy(), rvt.numpy(), "running_var")
    sum(((a * (i + 1)).sum() for i, (a, _) in enumerate(cases)), lf.tensor(0.0)).backward()
    sum(((b * (i + 1)).sum() for i, (_, b) in enumerate(cases)), torch.tensor(0.0)).backward()
    for a, b, name in ((xl, xt, "x"), (wl, wt, "weight"), (bl, bt, "bias")):
        _close(a.grad.numpy(), b.grad.numpy(), name)


# ---------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    "layer,shape,pattern",
    [
        (lambda: lf.nn.BatchNorm2d(3), (2, 4, 5, 5), r"BatchNorm2d\(3, .*\(N, 3, H, W\).*\[2, 4, 5, 5\]"),
        (lambda: lf.nn.BatchNorm2d(3), (2, 3, 5), r"BatchNorm2d.*\[2, 3, 5\]"),
        (lambda: lf.nn.BatchNorm1d(3), (2, 3, 4, 4), r"BatchNorm1d.*\(N, 3\) or \(N, 3, L\).*\[2, 3, 4, 4\]"),
        (lambda: lf.nn.LayerNorm(4), (2, 5), r"LayerNorm\(\(4,\).*\(\*, 4\).*\[2, 5\]"),
        (lambda: lf.nn.GroupNorm(2, 4), (2, 6, 3), r"GroupNorm\(2, 4.*\(N, 4, \*\).*\[2, 6, 3\]"),
        (lambda: lf.nn.RMSNorm((2, 3)), (4, 3, 2), r"RMSNorm.*\(\*, 2, 3\).*\[4, 3, 2\]"),
        (lambda: lf.nn.BatchNorm1d(3), (1, 3), r"more than 1 value per channel.*\[1, 3\]"),
    ],
)
def test_bad_input_names_layer_and_shapes(layer, shape, pattern):
    with pytest.raises(lf.ShapeError, match=pattern):
        layer()(lf.zeros(*shape))


def test_bad_arguments():
    with pytest.raises(ValueError, match="divisible"):
        lf.nn.GroupNorm(4, 6)
    with pytest.raises(ValueError, match="evaluation mode"):
        F.batch_norm(lf.zeros(2, 3), None, None, training=False)
    with pytest.raises(lf.ShapeError, match="running_mean"):
        F.batch_norm(lf.zeros(2, 3), lf.zeros(4), lf.ones(4))
    with pytest.raises(lf.DTypeError):
        F.layer_norm(lf.zeros(2, 3, dtype=lf.int64), (3,))


@pytest.mark.parametrize("affine", ["both", "weight", "none"])
def test_batchnorm_closed_form_vjp_matches_autodiff_of_plain_jax(affine):
    import jax
    import jax.numpy as jnp

    from lazyflow.ops import nn as opsnn

    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.standard_normal((3, 4, 5, 2)) * 2 + 1, jnp.float32)
    w = jnp.asarray(rng.standard_normal(4), jnp.float32) if affine != "none" else None
    b = jnp.asarray(rng.standard_normal(4), jnp.float32) if affine == "both" else None

    def plain(x, w, b):  # the textbook formula, differentiated by JAX
        mean = jnp.mean(x, axis=(0, 2, 3))
        var = jnp.mean((x - mean[None, :, None, None]) ** 2, axis=(0, 2, 3))
        y = (x - mean[None, :, None, None]) / jnp.sqrt(var[None, :, None, None] + 1e-5)
        y = y if w is None else y * w[None, :, None, None]
        return (y if b is None else y + b[None, :, None, None]), mean, var

    outs, pull = jax.vjp(lambda x, w, b: opsnn._bn_train(x, w, b, 1e-5), x, w, b)
    ref_outs, ref_pull = jax.vjp(plain, x, w, b)
    for o, r in zip(outs, ref_outs):
        _close(o, r)
    cts = tuple(jnp.asarray(rng.standard_normal(o.shape), jnp.float32) for o in outs)  # stats get gradients too
    for g, r, name in zip(pull(cts), ref_pull(cts), ("x", "weight", "bias")):
        if r is None:
            assert g is None, name
        else:
            _close(g, r, name)


def test_batchnorm_state_dict_round_trip_and_deepcopy():
    import copy

    lm, tm = _pair_module(lambda m: m.BatchNorm2d(3, momentum=None))
    for seed in (1, 2):
        xl, xt = _pair((2, 3, 4, 4), seed)
        lm(xl)
        tm(xt)
    clone = copy.deepcopy(lm)
    assert clone.running_mean is not lm.running_mean
    _check_buffers(clone, tm)
    tm2 = torch.nn.BatchNorm2d(3, momentum=None)
    tm2.load_state_dict({k: torch.tensor(v.numpy()) for k, v in lm.state_dict().items()})
    assert int(tm2.num_batches_tracked) == 2 and tm2.num_batches_tracked.dtype == torch.int64
    _check_buffers(lm, tm2)
