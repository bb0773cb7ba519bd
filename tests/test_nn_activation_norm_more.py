"""hardshrink, softshrink, prelu, rrelu, gumbel_softmax, alpha dropouts, cosine_similarity, pairwise_distance, pdist,
channel_shuffle, local_response_norm, instance_norm and their layers (PReLU, InstanceNorm*, LocalResponseNorm,
CrossMapLRN2d, SyncBatchNorm, Container ...) against torch 2.13: forward, input gradient, eager and compiled,
reprs, state_dict keys (torch's state_dict loads), special points and bad input."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as TF
from _harness import compiled

import lazyflow as lf
import lazyflow.nn.functional as F

W6 = np.linspace(-0.5, 0.7, 6).astype(np.float32)
CASES = [
    ("hardshrink", lambda m, x: m.hardshrink(x, 0.3), (3, 7)),
    ("softshrink", lambda m, x: m.softshrink(x, 0.4), (3, 7)),
    ("prelu-channel", lambda m, x: m.prelu(x, (lf if m is F else torch).tensor(W6)), (2, 6, 3)),
    ("prelu-shared", lambda m, x: m.prelu(x, (lf if m is F else torch).tensor([0.1])), (5,)),
    ("rrelu-eval", lambda m, x: m.rrelu(x, 0.1, 0.3), (4, 5)),
    ("cosine", lambda m, x: m.cosine_similarity(x, x.flip(0) * 2 + 0.5, 1), (4, 5, 2)),
    ("cosine-bcast", lambda m, x: m.cosine_similarity(x, x[:1], -1), (4, 5)),
    ("pairwise", lambda m, x: m.pairwise_distance(x, x.flip(0)), (4, 5)),
    ("pairwise-p1-keep", lambda m, x: m.pairwise_distance(x, x.flip(0), 1.0, 1e-3, True), (4, 5)),
    ("pdist", lambda m, x: m.pdist(x), (5, 3)),
    ("pdist-p3", lambda m, x: m.pdist(x, 3.0), (4, 3)),
    ("shuffle", lambda m, x: m.channel_shuffle(x, 3), (2, 6, 2, 2)),
    ("lrn3d", lambda m, x: m.local_response_norm(x, 3, 0.5, 0.75, 1.5), (2, 6, 5)),
    ("lrn4d-even", lambda m, x: m.local_response_norm(x, 4, 0.3), (2, 5, 3, 4)),
    ("lrn5d", lambda m, x: m.local_response_norm(x, 5), (1, 7, 2, 3, 2)),
    ("instance", lambda m, x: m.instance_norm(x), (2, 3, 5, 4)),
    (
        "instance-affine",
        lambda m, x: m.instance_norm(x, weight=(lf if m is F else torch).tensor(W6[:3]), bias=x.new_ones(3)),
        (2, 3, 7),
    ),
]
COMPILED = {"prelu-channel", "cosine", "lrn4d-even", "instance-affine", "pdist", "softshrink"}


def _lf_fn(fn):
    return lambda x: fn(F, x)


_LF = {cid: _lf_fn(fn) for cid, fn, _ in CASES}


@pytest.mark.parametrize("cid,fn,shape", CASES, ids=[c[0] for c in CASES])
def test_functional_vs_torch(cid, fn, shape):
    rng = np.random.default_rng(len(cid))
    a = rng.standard_normal(shape).astype(np.float32)
    xt = torch.tensor(a, requires_grad=True)
    yt = fn(TF if not cid.startswith("pdist") else torch.nn.functional, xt)
    g = rng.standard_normal(tuple(yt.shape)).astype(np.float32)
    yt.backward(torch.tensor(g))
    for graph in [False, True] if cid in COMPILED else [False]:
        xl = lf.tensor(a, requires_grad=True)
        yl = (compiled(_LF[cid]) if graph else _LF[cid])(xl)
        np.testing.assert_allclose(yl.detach().numpy(), yt.detach().numpy(), rtol=1e-5, atol=1e-5)
        (yl * lf.tensor(g)).sum().backward()
        np.testing.assert_allclose(xl.grad.numpy(), xt.grad.numpy(), rtol=1e-4, atol=1e-5)


def test_shrink_and_prelu_special_points():
    """Gradients at the thresholds and at 0 follow torch's strict comparisons."""
    a = np.array([-0.5, -0.3, 0.0, 0.3, 0.5, 1.0], np.float32)
    for name, args in [("hardshrink", (0.5,)), ("softshrink", (0.5,)), ("rrelu", (0.1, 0.3))]:
        xt = torch.tensor(a, requires_grad=True)
        getattr(TF, name)(xt, *args).sum().backward()
        xl = lf.tensor(a, requires_grad=True)
        yl = getattr(F, name)(xl, *args)
        yl.sum().backward()
        np.testing.assert_allclose(yl.detach().numpy(), getattr(TF, name)(torch.tensor(a), *args).numpy())
        np.testing.assert_array_equal(xl.grad.numpy(), xt.grad.numpy())
    xt = torch.tensor(a, requires_grad=True)
    wt = torch.tensor([0.25], requires_grad=True)
    TF.prelu(xt, wt).sum().backward()
    xl, wl = lf.tensor(a, requires_grad=True), lf.tensor([0.25], requires_grad=True)
    F.prelu(xl, wl).sum().backward()
    np.testing.assert_array_equal(xl.grad.numpy(), xt.grad.numpy())
    np.testing.assert_allclose(wl.grad.numpy(), wt.grad.numpy())
    # zero vectors: cosine similarity's eps clamp gives 0, like torch
    z = np.zeros((2, 3), np.float32)
    np.testing.assert_array_equal(F.cosine_similarity(lf.tensor(z), lf.tensor(z)).numpy(), [0.0, 0.0])


def test_random_ones_follow_their_distribution():
    lf.manual_seed(0)
    x = -lf.ones(20000)
    y = F.rrelu(x, 0.1, 0.3, training=True)
    v = -y.numpy()
    assert 0.1 <= v.min() and v.max() <= 0.3 and abs(v.mean() - 0.2) < 0.005
    # alpha dropout keeps a unit-variance, zero-mean input's statistics (its reason to exist)
    z = lf.randn(200000)
    out = F.alpha_dropout(z, 0.3, training=True).numpy()
    assert abs(out.mean()) < 0.02 and abs(out.std() - 1) < 0.02
    al, p = 1.7580993408473766, 0.3
    a = 1 / np.sqrt((al * al * p + 1) * (1 - p))
    zn = z.numpy()
    kept = np.isclose(out, zn * a + al * a * p, atol=1e-5)
    np.testing.assert_allclose(out[~kept], al * a * (p - 1), rtol=1e-5)  # dropped: SELU's saturation, affinely moved
    assert abs((~kept).mean() - p) < 0.01
    f = F.feature_alpha_dropout(lf.ones(50, 4, 3), 0.5, training=True).numpy()
    assert (f == f[:, :, :1]).all()  # one draw per channel
    np.testing.assert_array_equal(F.alpha_dropout(lf.ones(3), 0.5).numpy(), [1, 1, 1])  # eval: identity
    g = F.gumbel_softmax(lf.zeros(4000, 3), tau=0.5, hard=True)
    np.testing.assert_array_equal(g.sum(-1).numpy(), np.ones(4000))
    assert abs(g.numpy()[:, 0].mean() - 1 / 3) < 0.03
    logits = lf.zeros(2, 3, requires_grad=True)
    (F.gumbel_softmax(logits, hard=True) * lf.tensor([1.0, 2.0, 3.0])).sum().backward()
    assert np.abs(logits.grad.numpy()).sum() > 0  # straight-through: the soft sample's gradient


def _load_torch(lm, tm):
    sd = {k: lf.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()}
    assert list(lm.state_dict().keys()) == list(tm.state_dict().keys())
    lm.load_state_dict(sd)


def test_layers_match_torch_repr_state_dict_and_values():
    rng = np.random.default_rng(3)
    a = rng.standard_normal((2, 4, 5, 6)).astype(np.float32)
    pairs = [
        (lf.nn.PReLU(4), torch.nn.PReLU(4)),
        (lf.nn.PReLU(), torch.nn.PReLU()),
        (lf.nn.Hardshrink(0.2), torch.nn.Hardshrink(0.2)),
        (lf.nn.Softshrink(), torch.nn.Softshrink()),
        (lf.nn.RReLU(0.1, 0.2), torch.nn.RReLU(0.1, 0.2)),
        (lf.nn.Softmax2d(), torch.nn.Softmax2d()),
        (lf.nn.ChannelShuffle(2), torch.nn.ChannelShuffle(2)),
        (lf.nn.LocalResponseNorm(3), torch.nn.LocalResponseNorm(3)),
        (lf.nn.CrossMapLRN2d(3, 0.5), torch.nn.CrossMapLRN2d(3, 0.5)),
        (lf.nn.CrossMapLRN2d(5, 1e-2, 0.5, 2), torch.nn.CrossMapLRN2d(5, 1e-2, 0.5, 2)),
        (lf.nn.InstanceNorm2d(4), torch.nn.InstanceNorm2d(4)),
        (
            lf.nn.InstanceNorm2d(4, affine=True, track_running_stats=True),
            torch.nn.InstanceNorm2d(4, affine=True, track_running_stats=True),
        ),
        (lf.nn.SyncBatchNorm(4), torch.nn.SyncBatchNorm(4)),
        (lf.nn.AlphaDropout(0.2), torch.nn.AlphaDropout(0.2)),
        (lf.nn.FeatureAlphaDropout(), torch.nn.FeatureAlphaDropout()),
    ]
    for lm, tm in pairs:
        assert repr(lm) == repr(tm)
        if tm.state_dict():
            with torch.no_grad():
                for p in tm.parameters():
                    p.copy_(torch.tensor(rng.standard_normal(tuple(p.shape)).astype(np.float32)))
        _load_torch(lm, tm)
        lm.eval(), tm.eval()
        big = np.abs(a) * 3 if isinstance(lm, lf.nn.CrossMapLRN2d) else a
        np.testing.assert_allclose(
            lm(lf.tensor(big)).detach().numpy(), tm(torch.tensor(big)).detach().numpy(), rtol=1e-5, atol=1e-5
        )
    for lm, tm in [
        (lf.nn.CosineSimilarity(0), torch.nn.CosineSimilarity(0)),
        (lf.nn.PairwiseDistance(1.0), torch.nn.PairwiseDistance(1.0)),
    ]:
        assert repr(lm) == repr(tm)
        np.testing.assert_allclose(
            lm(lf.tensor(a), lf.tensor(a[::-1].copy())).detach().numpy(),
            tm(torch.tensor(a), torch.tensor(a[::-1].copy())).numpy(),
            rtol=1e-5,
            atol=1e-5,
        )


def test_cross_map_lrn_gradient_is_the_derivative_of_torchs_forward():
    """torch's backward approximates; ours differentiates the same forward: checked with torch's autograd through an
    independent re-implementation of torch's loop in float64."""
    a = np.random.default_rng(4).standard_normal((1, 6, 2, 3))
    size, alpha, beta, k = 3, 0.5, 0.75, 1.0
    xt = torch.tensor(a, requires_grad=True)
    sq = xt * xt
    pre = int((size - 1) / 2 + 1)
    scale = [sum(sq[:, j] for j in range(pre))]
    for c in range(1, 6):
        s = scale[-1]
        if c < 6 - pre + 1:
            s = s + sq[:, c + pre - 1]
        if c > pre:
            s = s - sq[:, c - pre]
        scale.append(s)
    ref = xt * (torch.stack(scale, 1) * (alpha / size) + k) ** (-beta)
    ref.sum().backward()
    with torch.no_grad():
        np.testing.assert_allclose(
            torch.nn.CrossMapLRN2d(size, alpha, beta, k)(xt).numpy(), ref.detach().numpy(), rtol=1e-10
        )
    xl = lf.tensor(a, requires_grad=True)
    lf.nn.CrossMapLRN2d(size, alpha, beta, k)(xl).sum().backward()
    np.testing.assert_allclose(xl.grad.numpy(), xt.grad.numpy(), rtol=1e-9)


def test_instance_norm_running_stats_and_unbatched_vs_torch():
    rng = np.random.default_rng(7)
    lm = lf.nn.InstanceNorm1d(3, momentum=0.3, track_running_stats=True)
    tm = torch.nn.InstanceNorm1d(3, momentum=0.3, track_running_stats=True)
    for _ in range(2):
        a = rng.standard_normal((4, 3, 6)).astype(np.float32)
        lm(lf.tensor(a)), tm(torch.tensor(a))
    np.testing.assert_allclose(lm.running_mean.numpy(), tm.running_mean.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(lm.running_var.numpy(), tm.running_var.numpy(), rtol=1e-5, atol=1e-6)
    assert int(lm.num_batches_tracked) == int(tm.num_batches_tracked) == 0  # torch never counts here
    lm.eval(), tm.eval()
    u = rng.standard_normal((3, 6)).astype(np.float32)
    np.testing.assert_allclose(lm(lf.tensor(u)).numpy(), tm(torch.tensor(u)).numpy(), rtol=1e-5, atol=1e-5)
    # graph mode: the running statistics are written back into the same buffers
    lg = lf.nn.InstanceNorm3d(2, track_running_stats=True)
    tg = torch.nn.InstanceNorm3d(2, track_running_stats=True)
    v = rng.standard_normal((2, 2, 3, 3, 3)).astype(np.float32)
    y = lf.compile(lg)(lf.tensor(v))
    np.testing.assert_allclose(y.numpy(), tg(torch.tensor(v)).detach().numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(lg.running_var.numpy(), tg.running_var.numpy(), rtol=1e-5, atol=1e-6)


def test_sync_batch_norm_conversion_and_container():
    net = lf.nn.Sequential(lf.nn.Conv2d(3, 4, 1), lf.nn.BatchNorm2d(4), lf.nn.ReLU())
    bn_w = net[1].weight
    conv = lf.nn.SyncBatchNorm.convert_sync_batchnorm(net)
    assert type(conv[1]) is lf.nn.SyncBatchNorm and conv[1].weight is bn_w
    assert list(conv.state_dict()) == list(
        torch.nn.SyncBatchNorm.convert_sync_batchnorm(
            torch.nn.Sequential(torch.nn.Conv2d(3, 4, 1), torch.nn.BatchNorm2d(4), torch.nn.ReLU())
        ).state_dict()
    )
    with pytest.warns(DeprecationWarning):
        c = lf.nn.Container(a=lf.nn.Linear(2, 3))
    assert list(c.state_dict()) == ["a.weight", "a.bias"]


def test_bad_input():
    with pytest.raises(lf.ShapeError, match="one per channel"):
        F.prelu(lf.zeros(2, 3, 4), lf.zeros(2))
    with pytest.raises(ValueError, match="lambd"):
        F.softshrink(lf.zeros(2), -1.0)
    with pytest.raises(ValueError, match="lower bound"):
        F.rrelu(lf.zeros(2), 0.5, 0.1)
    with pytest.raises(ValueError, match="between 0 and 1"):
        F.alpha_dropout(lf.zeros(2), 1.5, True)
    with pytest.raises(lf.ShapeError, match="divisible by groups"):
        F.channel_shuffle(lf.zeros(1, 5, 2), 2)
    with pytest.raises(lf.ShapeError, match="3D or higher"):
        F.local_response_norm(lf.zeros(2, 3), 2)
    with pytest.raises(lf.ShapeError, match="2-D"):
        F.pdist(lf.zeros(3))
    with pytest.raises(lf.ShapeError, match="more than 1 spatial"):
        F.instance_norm(lf.zeros(2, 3, 1))
    with pytest.raises(lf.ShapeError, match="3D .*or 4D"):
        lf.nn.Softmax2d()(lf.zeros(2, 3))
    with pytest.raises(lf.ShapeError, match="num_features"):
        lf.nn.InstanceNorm2d(3, affine=True)(lf.zeros(1, 4, 2, 2))
    with pytest.raises(lf.ShapeError, match="3D .unbatched. or 4D"):
        lf.nn.InstanceNorm2d(3)(lf.zeros(3, 2))
    with pytest.raises(lf.ShapeError, match="4D"):
        lf.nn.CrossMapLRN2d(3)(lf.zeros(1, 3, 2))
    with pytest.raises(ValueError, match="positive"):
        lf.nn.ChannelShuffle(0)
    with pytest.raises(TypeError, match="lazyflow Tensor"):
        F.hardshrink(np.zeros(3))
