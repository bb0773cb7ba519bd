"""The convolution's backward rule: the weight-gradient formulation (``shift``) against
``jax.vjp`` of ``lax.conv_general_dilated`` (strides, asymmetric padding, dilation, groups, depthwise, 1d/2d/3d),
the per-shape choice, and the conv op's gradients -- first and second order, eager and compiled, with bias --
against torch on shapes where ``shift`` is chosen (a counter proves it ran) and where XLA's own VJP is kept."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from jax import lax

import lazyflow as lf
import lazyflow.nn.functional as F
from lazyflow.ops import conv_grad

RTOL = 2e-5


def _close(got, want, what=""):
    want = np.asarray(want, np.float64)
    scale = max(float(np.max(np.abs(want))) if want.size else 0.0, 1e-6)
    np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=RTOL, atol=RTOL * scale, err_msg=what)


# (x shape, w shape, stride, padding pairs, dilation, groups)
CASES = [
    ((2, 4, 9, 8), (6, 4, 3, 3), (1, 1), ((1, 1), (1, 1)), (1, 1), 1),
    ((2, 4, 9, 8), (6, 2, 3, 2), (2, 3), ((2, 0), (1, 1)), (2, 1), 2),  # strided, asymmetric, dilated, grouped
    ((1, 6, 7, 7), (6, 1, 3, 3), (1, 1), ((1, 1), (1, 1)), (1, 1), 6),  # depthwise
    ((2, 6, 7, 7), (12, 1, 3, 3), (2, 2), ((0, 1), (1, 0)), (1, 1), 6),  # depthwise, multiplier 2
    ((2, 8, 5, 5), (4, 8, 1, 1), (2, 2), ((0, 0), (0, 0)), (1, 1), 1),  # strided 1x1
    ((2, 3, 11), (5, 3, 4), (2,), ((3, 1),), (1,), 1),  # 1d
    ((2, 4, 13), (4, 2, 3), (1,), ((2, 2),), (3,), 2),  # 1d dilated, grouped
    ((1, 2, 5, 4, 6), (3, 2, 2, 3, 2), (1, 2, 1), ((1, 0), (1, 1), (0, 1)), (1, 1, 2), 1),  # 3d
]


def _conv_ref(x, w, stride, padding, dilation, groups):
    dn = {1: ("NCH", "OIH", "NCH"), 2: ("NCHW", "OIHW", "NCHW"), 3: ("NCDHW", "OIDHW", "NCDHW")}[x.ndim - 2]
    return lax.conv_general_dilated(
        x, w, stride, padding, rhs_dilation=dilation, feature_group_count=groups, dimension_numbers=dn,
        precision=lax.Precision.HIGHEST,
    )  # fmt: skip


def test_every_formulation_is_tested():
    assert set(conv_grad.DW_FORMULATIONS) == {"shift"}


@pytest.mark.parametrize("per_sample_max", [1 << 20, 0], ids=["per-sample", "one-dot"])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_dw_formulations_match_lax_vjp(case, per_sample_max, monkeypatch):
    monkeypatch.setattr(conv_grad, "_PER_SAMPLE_MAX", per_sample_max)  # both contractions of dw_shift
    xs, ws, stride, padding, dilation, groups = CASES[case]
    rng = np.random.default_rng(case)
    x = jnp.asarray(rng.standard_normal(xs), jnp.float32)
    w = jnp.asarray(rng.standard_normal(ws), jnp.float32)
    kw = dict(stride=stride, padding=padding, dilation=dilation, groups=groups)
    y, pull = jax.vjp(lambda w: _conv_ref(x, w, stride, padding, dilation, groups), w)
    ct = jnp.asarray(rng.standard_normal(y.shape), jnp.float32)
    (want,) = pull(ct)

    @jax.jit
    def every(x, ct):  # one compile per case
        return {name: f(x, ct, ws, **kw) for name, f in conv_grad.DW_FORMULATIONS.items()}

    for name, got in every(x, ct).items():
        assert got.shape == ws, name
        _close(got, want, name)


@pytest.mark.parametrize(
    "xs,ws,stride,pad,groups,want",
    [
        ((32, 32, 32, 32), (64, 32, 3, 3), (1, 1), ((1, 1), (1, 1)), 1, "shift"),  # small CNN's second conv
        ((16, 16, 32, 32), (8, 16, 3, 3), (1, 1), ((1, 1), (1, 1)), 1, "shift"),  # 16384 positions, 16 channels
        ((15, 16, 32, 32), (8, 16, 3, 3), (1, 1), ((1, 1), (1, 1)), 1, "xla"),  # 15360 positions
        ((16, 15, 32, 32), (8, 15, 3, 3), (1, 1), ((1, 1), (1, 1)), 1, "xla"),  # 15 channels
        ((32, 3, 32, 32), (32, 3, 3, 3), (1, 1), ((1, 1), (1, 1)), 1, "xla"),  # small CNN's first conv
        ((2, 3, 224, 224), (64, 3, 7, 7), (2, 2), ((3, 3), (3, 3)), 1, "xla"),  # RGB stem
        ((2, 64, 56, 56), (64, 64, 3, 3), (1, 1), ((1, 1), (1, 1)), 1, "xla"),  # 6272 positions
        ((32, 64, 32, 32), (64, 8, 3, 3), (1, 1), ((1, 1), (1, 1)), 8, "xla"),  # grouped
    ],
)
def test_dw_formulation_choice(xs, ws, stride, pad, groups, want):
    assert conv_grad.dw_formulation(xs, ws, stride, pad, (1, 1), groups) == want


@pytest.fixture
def counted(monkeypatch):
    """Counts how often each formulation is traced (the op's rule looks them up at trace time)."""
    calls = {name: 0 for name in conv_grad.DW_FORMULATIONS}
    for name, f in list(conv_grad.DW_FORMULATIONS.items()):

        def wrapped(*a, _f=f, _name=name, **k):
            calls[_name] += 1
            return _f(*a, **k)

        monkeypatch.setitem(conv_grad.DW_FORMULATIONS, name, wrapped)
    return calls


# shapes unique to this file (a cached eager kernel would skip the trace the counter watches)
# (x shape, w shape, kwargs, formulation chosen for dw or None for XLA's own)
OP_CASES = [
    ((17, 17, 32, 32), (5, 17, 3, 3), {"padding": 1}, "shift"),
    ((14, 16, 34, 36), (3, 16, 3, 3), {"padding": (1, 2), "stride": 1, "dilation": (2, 1)}, "shift"),
    ((12, 18, 90, 90), (4, 18, 3, 2), {"padding": 1, "stride": (2, 3)}, "shift"),
    ((2, 3, 17, 20), (5, 3, 4, 3), {"padding": "same", "dilation": 2}, None),
    ((2, 40, 12, 12), (6, 40, 3, 3), {"padding": 1}, None),
]


def _torch_conv(x, w, b, kw):
    return torch.nn.functional.conv2d(x, w, b, **kw)


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "graph"])
@pytest.mark.parametrize("case", range(len(OP_CASES)))
def test_conv_gradients_vs_torch(case, compiled, counted):
    xs, ws, kw, how = OP_CASES[case]
    rng = np.random.default_rng(case)
    a = [rng.standard_normal(s).astype(np.float32) for s in (xs, ws, ws[:1])]
    lt = [lf.tensor(v, requires_grad=True) for v in a]
    tt = [torch.tensor(v, requires_grad=True) for v in a]
    yt = _torch_conv(tt[0], tt[1], tt[2], kw)
    g = rng.standard_normal(tuple(yt.shape)).astype(np.float32)

    def loss(x, w, b):
        return (F.conv2d(x, w, b, **kw) * lf.tensor(g)).sum()

    (lf.compile(loss) if compiled else loss)(*lt).backward()
    (yt * torch.tensor(g)).sum().backward()
    for name, l, t in zip(("dx", "dw", "db"), lt, tt):
        assert l.grad is not None and t.grad is not None
        _close(l.grad.numpy(), t.grad.numpy(), name)
    assert sum(counted.values()) == (0 if how is None else 1) and (how is None or counted[how] == 1), counted


@pytest.mark.parametrize("case", [0, 3])
def test_conv_second_order_vs_torch(case):
    """The rule is itself differentiable: the gradient of a gradient norm equals torch's double backward."""
    xs, ws, kw, _ = OP_CASES[case]
    rng = np.random.default_rng(10 + case)
    a = [rng.standard_normal(s).astype(np.float32) for s in (xs, ws)]
    lt = [lf.tensor(v, requires_grad=True) for v in a]
    tt = [torch.tensor(v, requires_grad=True) for v in a]
    yt = _torch_conv(tt[0], tt[1], None, kw)
    g = rng.standard_normal(tuple(yt.shape)).astype(np.float32)
    gl = lf.autograd.grad((F.conv2d(lt[0], lt[1], **kw) * lf.tensor(g)).sum(), lt, create_graph=True)
    gt = torch.autograd.grad((yt * torch.tensor(g)).sum(), tt, create_graph=True)
    ((gl[0] ** 2).sum() + (gl[1] ** 2).sum()).backward()
    ((gt[0] ** 2).sum() + (gt[1] ** 2).sum()).backward()
    for name, l, t in zip(("x", "w"), lt, tt):
        assert l.grad is not None and t.grad is not None
        _close(l.grad.numpy(), t.grad.numpy(), name)
