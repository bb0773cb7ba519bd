"""Convolution and pooling: every conv lowering against ``lax.conv_general_dilated`` (forward and VJP), the
functional forms (eager) and the layers (eager and compiled: every op here sits in some layer of the table, so
graph mode covers each) against torch (the oracle) with torch's weights copied in; state_dict keys/shapes,
repr, default init, and bad input."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from jax import lax

import lazyflow as lf
import lazyflow.nn.functional as F
from lazyflow.ops import nn as opsnn

RTOL = 1e-5


def _close(got, want, what=""):
    want = np.asarray(want, np.float64)
    scale = max(float(np.max(np.abs(want))) if want.size else 0.0, 1e-6)
    np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=RTOL, atol=RTOL * scale, err_msg=what)


# ---------------------------------------------------------------- lowerings vs lax.conv_general_dilated
# (x shape, w shape, stride, padding pairs, dilation, groups)
CONV_CASES = [
    ((2, 4, 9, 8), (6, 4, 3, 3), (1, 1), ((1, 1), (1, 1)), (1, 1), 1),
    ((2, 4, 9, 8), (6, 2, 3, 2), (2, 3), ((2, 0), (1, 1)), (2, 1), 2),
    ((1, 6, 7, 7), (6, 1, 3, 3), (1, 1), ((1, 1), (1, 1)), (1, 1), 6),
    ((2, 8, 5, 5), (4, 8, 1, 1), (2, 2), ((0, 0), (0, 0)), (1, 1), 1),
    ((2, 8, 2, 2), (8, 8, 3, 3), (1, 1), ((1, 1), (1, 1)), (1, 1), 1),
    ((2, 3, 11), (5, 3, 4), (2,), ((3, 1),), (1,), 1),
    ((1, 2, 5, 4, 6), (3, 2, 2, 3, 2), (1, 2, 1), ((1, 0), (1, 1), (0, 1)), (1, 1, 2), 1),
]


def _conv_ref(x, w, stride, padding, dilation, groups):
    nd = x.ndim - 2
    dn = {1: ("NCH", "OIH", "NCH"), 2: ("NCHW", "OIHW", "NCHW"), 3: ("NCDHW", "OIDHW", "NCDHW")}[nd]
    return lax.conv_general_dilated(
        x,
        w,
        stride,
        padding,
        rhs_dilation=dilation,
        feature_group_count=groups,
        dimension_numbers=dn,
        precision=lax.Precision.HIGHEST,
    )


def test_every_lowering_is_tested():
    assert set(opsnn.CONV_LOWERINGS) == {"xla", "xla_nhwc", "im2col"}


@pytest.mark.parametrize("case", range(len(CONV_CASES)))
def test_conv_lowerings_match_lax_forward_and_vjp(case):
    xs, ws, stride, padding, dilation, groups = CONV_CASES[case]
    rng = np.random.default_rng(case)
    x = jnp.asarray(rng.standard_normal(xs), jnp.float32)
    w = jnp.asarray(rng.standard_normal(ws), jnp.float32)
    y_ref = _conv_ref(x, w, stride, padding, dilation, groups)
    ct = jnp.asarray(rng.standard_normal(y_ref.shape), jnp.float32)
    names = sorted(opsnn.CONV_LOWERINGS)

    @jax.jit
    def all_lowerings(x, w, ct):  # one compile per case: every lowering and the reference, with their VJPs
        res = {}
        for name in names + ["ref"]:
            if name == "ref":

                def f(x, w):
                    return _conv_ref(x, w, stride, padding, dilation, groups)
            else:

                def f(x, w, impl=opsnn.CONV_LOWERINGS[name]):
                    return impl(x, w, stride=stride, padding=padding, dilation=dilation, groups=groups)

            y, pull = jax.vjp(f, x, w)
            res[name] = (y, *pull(ct))
        return res

    res = all_lowerings(x, w, ct)
    for name in names:
        for got, want, what in zip(res[name], res["ref"], ("forward", "dx", "dw")):
            _close(got, want, f"{name} {what}")


@pytest.mark.parametrize(
    "xs,ws,stride,pad,want",
    [
        ((8, 512, 2, 2), (512, 512, 3, 3), (1, 1), ((1, 1), (1, 1)), "im2col"),  # small spatial, many channels
        ((2, 512, 7, 7), (512, 512, 3, 3), (1, 1), ((1, 1), (1, 1)), "im2col"),
        ((2, 256, 14, 14), (256, 256, 3, 3), (1, 1), ((1, 1), (1, 1)), "xla"),
        ((2, 256, 56, 56), (64, 256, 1, 1), (1, 1), ((0, 0), (0, 0)), "im2col"),  # every 1x1 is one dot
        ((32, 32, 32, 32), (64, 32, 3, 3), (1, 1), ((1, 1), (1, 1)), "xla"),  # large activation
        ((2, 3, 224, 224), (64, 3, 7, 7), (2, 2), ((3, 3), (3, 3)), "xla"),  # RGB stem
        ((2, 8, 4, 4), (8, 2, 3, 3), (1, 1), ((1, 1), (1, 1)), "xla"),  # grouped
    ],
)
def test_conv_lowering_choice(xs, ws, stride, pad, want):
    groups = xs[1] // ws[1]
    assert opsnn.conv_lowering(xs, ws, stride, pad, (1, 1), groups) == want


def _pair(shape, seed, grad=True):
    a = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    return lf.tensor(a, requires_grad=grad), torch.tensor(a, requires_grad=grad)


def _check_fn(lf_fn, torch_fn, shapes, seed=0, compiled=False):
    """Forward and gradients of every input of ``lf_fn`` against ``torch_fn``."""
    pairs = [_pair(s, seed + i) for i, s in enumerate(shapes)]
    run = lf.compile(lf_fn) if compiled else lf_fn
    yl = run(*[p[0] for p in pairs])
    yt = torch_fn(*[p[1] for p in pairs])
    _close(yl.detach().numpy(), yt.detach().numpy(), "forward")
    g = np.random.default_rng(seed + 99).standard_normal(tuple(yt.shape)).astype(np.float32)
    (yl * lf.tensor(g)).sum().backward()
    (yt * torch.tensor(g)).sum().backward()
    for i, (a, b) in enumerate(pairs):
        _close(a.grad.numpy(), b.grad.numpy(), f"grad of input {i}")


# (x shape, w shape, bias?, kwargs) through conv{1,2,3}d
FUNC_CONV = [
    ((2, 3, 8, 8), (4, 3, 3, 3), True, {"padding": 1}),
    ((2, 4, 9, 7), (6, 2, 3, 2), True, {"stride": (2, 1), "padding": (1, 0), "dilation": (1, 2), "groups": 2}),
    ((2, 3, 8, 9), (4, 3, 4, 3), False, {"padding": "same", "dilation": 2}),
    ((2, 3, 8, 8), (4, 3, 3, 3), True, {"padding": "valid", "stride": 2}),
    ((3, 7, 7), (4, 3, 3, 3), True, {"padding": 2}),  # unbatched
    ((2, 16, 2, 2), (16, 16, 3, 3), True, {"padding": 1}),
    ((2, 3, 10), (5, 3, 3), True, {"stride": 2, "padding": 1}),
    ((1, 2, 4, 5, 4), (3, 2, 2, 2, 2), True, {"padding": 1}),
]


@pytest.mark.parametrize("case", range(len(FUNC_CONV)))
def test_conv_functional_vs_torch(case):
    _conv_case(case, False)


@pytest.mark.parametrize("lowering", ["xla", "xla_nhwc", "im2col"])
@pytest.mark.parametrize("case", [1, 4])
def test_conv_functional_forced_lowering_vs_torch(case, lowering, monkeypatch):
    monkeypatch.setattr(opsnn, "CONV_LOWERING", lowering)
    _conv_case(case, False)


def _conv_case(case, compiled):
    xs, ws, bias, kw = FUNC_CONV[case]
    nd = len(ws) - 2
    lfn = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}[nd]
    tfn = {1: torch.nn.functional.conv1d, 2: torch.nn.functional.conv2d, 3: torch.nn.functional.conv3d}[nd]
    shapes = [xs, ws] + ([(ws[0],)] if bias else [])
    _check_fn(
        lambda *a: lfn(*a[:2], a[2] if bias else None, **kw),
        lambda *a: tfn(*a[:2], a[2] if bias else None, **kw),
        shapes,
        seed=case,
        compiled=compiled,
    )


FUNC_CONV_T = [
    ((2, 4, 5, 5), (4, 3, 3, 3), {"stride": 2, "padding": 1, "output_padding": 1}),
    ((2, 4, 5, 4), (4, 2, 3, 2), {"stride": (2, 3), "padding": (0, 1), "groups": 2, "dilation": (1, 2)}),
    ((1, 2, 3, 3), (2, 5, 4, 4), {"stride": 2, "padding": 3}),
    ((4, 3, 3), (4, 3, 2, 2), {}),  # unbatched
    ((2, 3, 6), (3, 2, 3), {"stride": 2, "output_padding": 1}),
    ((1, 2, 3, 4, 3), (2, 3, 2, 3, 2), {"stride": (2, 1, 2), "padding": (0, 1, 0), "output_padding": (1, 0, 0)}),
]


@pytest.mark.parametrize("case", range(len(FUNC_CONV_T)))
def test_conv_transpose_vs_torch(case, compiled=False):
    xs, ws, kw = FUNC_CONV_T[case]
    nd = len(ws) - 2
    cout = ws[1] * kw.get("groups", 1)
    lfn = getattr(F, f"conv_transpose{nd}d")
    tfn = getattr(torch.nn.functional, f"conv_transpose{nd}d")
    _check_fn(
        lambda x, w, b: lfn(x, w, b, **kw),
        lambda x, w, b: tfn(x, w, b, **kw),
        [xs, ws, (cout,)],
        seed=10 + case,
        compiled=compiled,
    )


# (function name, input shape, kwargs)
POOLS = [
    ("max_pool2d", (2, 3, 9, 8), {"kernel_size": 3, "stride": 2, "padding": 1}),
    ("max_pool2d", (2, 3, 9, 8), {"kernel_size": (3, 2), "stride": 2, "ceil_mode": True}),
    ("max_pool2d", (2, 3, 10, 9), {"kernel_size": 2, "stride": 3, "dilation": 2, "ceil_mode": True, "padding": 1}),
    ("max_pool1d", (2, 3, 11), {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True}),
    ("avg_pool2d", (2, 3, 9, 8), {"kernel_size": 3, "stride": 2, "padding": 1}),
    ("avg_pool2d", (2, 3, 9, 8), {"kernel_size": 3, "stride": 2, "padding": 1, "count_include_pad": False}),
    (
        "avg_pool2d",
        (2, 3, 8, 7),
        {"kernel_size": 2, "stride": 2, "padding": 1, "ceil_mode": True, "count_include_pad": False},
    ),
    ("avg_pool2d", (2, 3, 8, 7), {"kernel_size": 3, "divisor_override": 4}),
    ("avg_pool1d", (2, 3, 10), {"kernel_size": 4, "stride": 3, "padding": 2, "ceil_mode": True}),
    ("adaptive_avg_pool2d", (2, 3, 7, 9), {"output_size": (3, 4)}),  # non-divisible bins (overlapping)
    ("adaptive_avg_pool2d", (2, 3, 8, 8), {"output_size": (4, None)}),
    ("adaptive_avg_pool2d", (2, 3, 4, 3), {"output_size": (6, 5)}),  # upsampling bins
    ("adaptive_avg_pool1d", (2, 3, 10), {"output_size": 3}),
]


@pytest.mark.parametrize("case", range(len(POOLS)))
def test_pool_vs_torch(case, compiled=False):
    name, xs, kw = POOLS[case]
    _check_fn(
        lambda x: getattr(F, name)(x, **kw),
        lambda x: getattr(torch.nn.functional, name)(x, **kw),
        [xs],
        seed=20 + case,
        compiled=compiled,
    )


@pytest.mark.parametrize(
    "nd,xs,kw",
    [
        (2, (2, 3, 9, 8), {"kernel_size": 3, "stride": 2, "padding": 1}),
        (2, (2, 3, 10, 9), {"kernel_size": 2, "stride": 3, "dilation": 2, "ceil_mode": True, "padding": 1}),
        (1, (2, 3, 11), {"kernel_size": 3, "stride": 2, "ceil_mode": True}),
    ],
)
def test_max_pool_return_indices_vs_torch(nd, xs, kw):
    xl, xt = _pair(xs, 3)
    fn = F.max_pool2d if nd == 2 else F.max_pool1d
    tfn = torch.nn.functional.max_pool2d if nd == 2 else torch.nn.functional.max_pool1d
    yl, il = fn(xl, return_indices=True, **kw)
    yt, it = tfn(xt, return_indices=True, **kw)
    _close(yl.detach().numpy(), yt.detach().numpy())
    assert il.dtype == lf.int64
    np.testing.assert_array_equal(il.numpy(), it.numpy())
    yl.sum().backward()
    yt.sum().backward()
    _close(xl.grad.numpy(), xt.grad.numpy())


def test_max_pool_ties_route_gradient_like_torch():
    x = np.zeros((1, 1, 4, 4), np.float32)
    xl, xt = lf.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    F.max_pool2d(xl, 2).sum().backward()
    torch.nn.functional.max_pool2d(xt, 2).sum().backward()
    np.testing.assert_array_equal(xl.grad.numpy(), xt.grad.numpy())


def test_adaptive_bins_are_torchs():
    assert opsnn.adaptive_bins(7, 3) == [(0, 3), (2, 5), (4, 7)]
    assert opsnn.adaptive_bins(4, 6) == [(0, 1), (0, 2), (1, 2), (2, 3), (2, 4), (3, 4)]


# ---------------------------------------------------------------- layers
# (id, constructor over a namespace, input shape)
LAYERS = [
    ("conv1d", lambda m: m.Conv1d(3, 4, 3, stride=2, padding=1), (2, 3, 9)),
    ("conv1d_same", lambda m: m.Conv1d(3, 4, 4, padding="same", dilation=2, bias=False), (3, 9)),
    ("conv2d", lambda m: m.Conv2d(3, 4, 3, padding=1), (2, 3, 6, 6)),
    ("conv2d_groups", lambda m: m.Conv2d(4, 6, (3, 2), stride=(2, 1), padding=(1, 0), groups=2), (2, 4, 7, 6)),
    ("conv2d_reflect", lambda m: m.Conv2d(2, 3, 3, padding=1, padding_mode="reflect"), (1, 2, 5, 5)),
    ("conv2d_circular", lambda m: m.Conv2d(2, 3, 3, padding=(1, 2), padding_mode="circular"), (1, 2, 5, 6)),
    ("conv3d", lambda m: m.Conv3d(2, 3, 2, padding=1), (1, 2, 3, 4, 3)),
    ("convT1d", lambda m: m.ConvTranspose1d(3, 2, 3, stride=2), (2, 3, 5)),
    ("convT2d", lambda m: m.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2), (2, 4, 4, 4)),
    ("maxpool1d", lambda m: m.MaxPool1d(3, 2, 1), (2, 3, 9)),
    ("maxpool2d", lambda m: m.MaxPool2d(3, 2, 1, ceil_mode=True), (2, 3, 8, 8)),
    ("avgpool1d", lambda m: m.AvgPool1d(3, 2, 1, count_include_pad=False), (2, 3, 9)),
    ("avgpool2d", lambda m: m.AvgPool2d(3, 2, 1, ceil_mode=True), (2, 3, 8, 8)),
    ("adaptive1d", lambda m: m.AdaptiveAvgPool1d(4), (2, 3, 9)),
    ("adaptive2d", lambda m: m.AdaptiveAvgPool2d((3, None)), (2, 3, 7, 5)),
    (
        "cnn",
        lambda m: m.Sequential(
            m.Conv2d(3, 8, 3, padding=1),
            m.ReLU(),
            m.MaxPool2d(2),
            m.Conv2d(8, 8, 1),
            m.AdaptiveAvgPool2d(1),
            m.Flatten(),
            m.Linear(8, 3),
        ),
        (2, 3, 8, 8),
    ),
]
LAYER_IDS = [r[0] for r in LAYERS]


_BUILT: dict = {}


def _pair_module(ctor):
    """(lazyflow, torch) layers with torch's weights loaded; lazyflow layers are built once per constructor
    (eager random init compiles a kernel per parameter shape) and reloaded and zero-graded on every use."""
    torch.manual_seed(0)
    tm = ctor(torch.nn)
    lm = _BUILT.get(ctor)
    if lm is None:
        lm = _BUILT[ctor] = ctor(lf.nn)
    lm.load_state_dict({k: v.detach().numpy() for k, v in tm.state_dict().items()})
    lm.zero_grad()
    return lm, tm


@pytest.mark.parametrize("case", LAYERS, ids=LAYER_IDS)
def test_layer_keys_shapes_and_repr(case):
    _, ctor, _ = case
    lm, tm = _pair_module(ctor)
    assert [(k, tuple(v.shape)) for k, v in lm.state_dict().items()] == [
        (k, tuple(v.shape)) for k, v in tm.state_dict().items()
    ]
    assert [k for k, _ in lm.named_parameters()] == [k for k, _ in tm.named_parameters()]
    assert repr(lm) == repr(tm)


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "graph"])
@pytest.mark.parametrize("case", LAYERS, ids=LAYER_IDS)
def test_layer_forward_backward_vs_torch(case, compiled):
    _, ctor, xs = case
    lm, tm = _pair_module(ctor)
    xl, xt = _pair(xs, 7)
    run = lf.compile(lm) if compiled else lm
    yl, yt = run(xl), tm(xt)
    _close(yl.detach().numpy(), yt.detach().numpy(), "forward")
    g = np.random.default_rng(8).standard_normal(tuple(yt.shape)).astype(np.float32)
    (yl * lf.tensor(g)).sum().backward()
    (yt * torch.tensor(g)).sum().backward()
    _close(xl.grad.numpy(), xt.grad.numpy(), "input grad")
    tp = dict(tm.named_parameters())
    for k, p in lm.named_parameters():
        _close(p.grad.numpy(), tp[k].grad.numpy(), f"grad of {k}")


@pytest.mark.parametrize(
    "ctor,fan_in",
    [
        (lambda m: m.Conv2d(6, 8, 3, groups=2), 27),
        (lambda m: m.Conv1d(5, 40, 4), 20),
        (lambda m: m.ConvTranspose2d(8, 6, 3, groups=2), 27),
    ],
)
def test_conv_default_init_distribution(ctor, fan_in):
    lf.manual_seed(0)
    sizes = []
    for _ in range(6):
        m = ctor(lf.nn)
        w, b = m.weight.detach().numpy(), m.bias.detach().numpy()
        bound = 1 / math.sqrt(fan_in)  # kaiming_uniform_(a=sqrt(5)) gives exactly 1/sqrt(fan_in)
        assert np.abs(w).max() <= bound and np.abs(b).max() <= bound
        sizes.append(w.ravel())
    allw = np.concatenate(sizes)
    assert abs(allw.std() - bound / math.sqrt(3)) < 0.08 * bound
    assert abs(allw.mean()) < 0.05 * bound


def test_conv_transpose_output_size_vs_torch():
    lm, tm = _pair_module(lambda m: m.ConvTranspose2d(3, 2, 3, stride=2, padding=1))
    xl, xt = _pair((1, 3, 4, 4), 1)
    yl, yt = lm(xl, output_size=[8, 8]), tm(xt, output_size=[8, 8])
    assert yl.shape == tuple(yt.shape) == (1, 2, 8, 8)
    _close(yl.detach().numpy(), yt.detach().numpy())
    with pytest.raises(lf.ShapeError, match="ConvTranspose2d"):
        lm(xl, output_size=[12, 12])


# ---------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    "layer,shape,pattern",
    [
        (lambda: lf.nn.Conv2d(3, 4, 3), (2, 5, 8, 8), r"Conv2d\(3, 4.*\(N, 3, H, W\).*\[2, 5, 8, 8\]"),
        (lambda: lf.nn.Conv2d(3, 4, 3), (2, 3, 8), r"Conv2d.*\[2, 3, 8\]"),
        (lambda: lf.nn.Conv1d(3, 4, 3), (2, 3, 8, 8), r"Conv1d.*\(N, 3, L\).*\[2, 3, 8, 8\]"),
        (lambda: lf.nn.ConvTranspose2d(3, 4, 3), (2, 4, 8, 8), r"ConvTranspose2d.*\[2, 4, 8, 8\]"),
        (lambda: lf.nn.MaxPool2d(2), (8, 8), r"MaxPool2d.*\[8, 8\]"),
        (lambda: lf.nn.AvgPool1d(2), (2, 3, 8, 8), r"AvgPool1d.*\[2, 3, 8, 8\]"),
        (lambda: lf.nn.AdaptiveAvgPool2d(2), (8,), r"AdaptiveAvgPool2d.*\[8\]"),
    ],
)
def test_layer_bad_input_names_layer_and_shapes(layer, shape, pattern):
    with pytest.raises(lf.ShapeError, match=pattern):
        layer()(lf.zeros(*shape))


def test_functional_bad_arguments():
    x, w = lf.zeros(1, 3, 4, 4), lf.zeros(2, 3, 3, 3)
    with pytest.raises(lf.ShapeError, match="kernel size"):
        F.conv2d(lf.zeros(1, 3, 2, 2), w)
    with pytest.raises(ValueError, match="strided"):
        F.conv2d(x, w, padding="same", stride=2)
    with pytest.raises(lf.ShapeError, match="bias"):
        F.conv2d(x, w, lf.zeros(3))
    with pytest.raises(lf.DTypeError):
        F.conv2d(lf.ones(1, 3, 4, 4, dtype=lf.int64), w)
    with pytest.raises(ValueError, match="half of effective kernel"):
        F.max_pool2d(x, 2, padding=2)
    with pytest.raises(ValueError, match="output padding"):
        F.conv_transpose2d(x, lf.zeros(3, 2, 3, 3), stride=1, output_padding=1)
    with pytest.raises(ValueError, match="divisible"):
        lf.nn.Conv2d(3, 4, 3, groups=2)


@pytest.mark.parametrize("case", [r for r in LAYERS if r[0] in ("conv2d_groups", "convT2d", "cnn")], ids=lambda r: r[0])
def test_state_dict_round_trip_and_deepcopy(case):
    import copy

    _, ctor, xs = case
    lm, tm = _pair_module(ctor)
    x = lf.tensor(np.random.default_rng(5).standard_normal(xs).astype(np.float32))
    want = lm(x).detach().numpy()
    clone = copy.deepcopy(lm)
    assert all(a is not b for a, b in zip(clone.parameters(), lm.parameters()))
    np.testing.assert_array_equal(clone(x).detach().numpy(), want)
    tm2 = ctor(torch.nn)  # lazyflow's state_dict loads into torch and gives torch's numbers
    tm2.load_state_dict({k: torch.tensor(v.numpy()) for k, v in lm.state_dict().items()})
    _close(want, tm2(torch.tensor(x.numpy())).detach().numpy())
