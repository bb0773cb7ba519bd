"""interpolate / Upsample against torch 2.13 (the oracle): forward and input gradient for every mode, size and
scale_factor paths, align_corners, recompute_scale_factor and antialias, eager and compiled; torch's layer
repr; bad input. Small shapes so that the file stays fast."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as TF
from _harness import compiled

import lazyflow as lf
import lazyflow.nn.functional as F
from lazyflow._core.errors import DTypeError, ShapeError

CASES = [
    ((2, 3, 5), dict(size=8, mode="nearest")),
    ((2, 3, 5), dict(scale_factor=1.7, mode="nearest")),
    ((1, 2, 9), dict(scale_factor=0.33, mode="nearest")),
    ((2, 3, 7), dict(size=3, mode="nearest-exact")),
    ((1, 2, 5, 4), dict(scale_factor=(2.1, 1.5), mode="nearest-exact")),
    ((1, 2, 3, 4, 5), dict(scale_factor=(1.5, 2, 0.7), mode="nearest", recompute_scale_factor=True)),
    ((2, 3, 5), dict(size=12, mode="linear")),
    ((2, 3, 5), dict(scale_factor=0.5, mode="linear", align_corners=True)),
    ((1, 2, 5, 6), dict(size=(9, 4), mode="bilinear")),
    ((1, 2, 5, 6), dict(size=(9, 4), mode="bilinear", align_corners=True)),
    ((1, 2, 5, 6), dict(scale_factor=1.3, mode="bilinear", recompute_scale_factor=True)),
    ((1, 2, 5, 6), dict(scale_factor=(1.5, 0.6), mode="bicubic")),
    ((1, 2, 5, 6), dict(scale_factor=2.3, mode="bicubic", align_corners=True)),
    ((1, 2, 3, 4, 5), dict(size=(5, 3, 7), mode="trilinear")),
    ((1, 2, 3, 4, 5), dict(size=(4, 2, 6), mode="trilinear", align_corners=True)),
    ((2, 3, 7), dict(size=3, mode="area")),
    ((1, 2, 7, 6), dict(scale_factor=0.5, mode="area")),
    ((1, 2, 3, 4, 5), dict(size=(2, 3, 3), mode="area")),
    ((1, 2, 13, 11), dict(size=(4, 5), mode="bilinear", antialias=True)),
    ((1, 2, 13, 11), dict(scale_factor=0.37, mode="bilinear", antialias=True, align_corners=True)),
    ((1, 2, 13, 11), dict(size=(4, 15), mode="bicubic", antialias=True)),
    ((1, 2, 13, 11), dict(size=(5, 3), mode="bicubic", antialias=True, align_corners=True)),
]
IDS = [f"{len(s) - 2}d-" + "-".join(f"{k}={v}" for k, v in kw.items()) for s, kw in CASES]
COMPILED = {0, 4, 9, 13, 17, 20}  # one per mode family: each compiles a program


def _close(got, want, what):
    np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=1e-5, atol=3e-6, err_msg=what)


def _fn(kw):
    return lambda x: F.interpolate(x, **kw)


_FNS = [_fn(kw) for _, kw in CASES]


@pytest.mark.parametrize("case", range(len(CASES)), ids=IDS)
def test_interpolate_vs_torch_forward_and_grad(case):
    shape, kw = CASES[case]
    rng = np.random.default_rng(case)
    a = rng.standard_normal(shape).astype(np.float32)
    xt = torch.tensor(a, requires_grad=True)
    yt = TF.interpolate(xt, **kw)
    g = rng.standard_normal(tuple(yt.shape)).astype(np.float32)
    yt.backward(torch.tensor(g))
    modes = [False, True] if case in COMPILED else [False]
    for graph in modes:
        xl = lf.tensor(a, requires_grad=True)
        yl = (compiled(_FNS[case]) if graph else _FNS[case])(xl)
        assert tuple(yl.shape) == tuple(yt.shape)
        _close(yl.detach().numpy(), yt.detach().numpy(), f"forward graph={graph}")
        (yl * lf.tensor(g)).sum().backward()
        _close(xl.grad.numpy(), xt.grad.numpy(), f"grad graph={graph}")


def test_nearest_indices_are_torchs_float32_formula():
    """Output index i reads floor(float32(i) * float32(1/scale)) (nearest) / floor((i+0.5)*scale) (exact):
    compared value by value with torch over many sizes and scales, which hits float32 rounding edges."""
    for n in (7, 13):
        a = np.arange(n, dtype=np.float32).reshape(1, 1, n)
        for s in (0.3, 0.7, 1.3, 2.1, 3.7):
            for mode in ("nearest", "nearest-exact"):
                if int(n * s) == 0:
                    continue
                want = TF.interpolate(torch.tensor(a), scale_factor=s, mode=mode).numpy()
                got = F.interpolate(lf.tensor(a), scale_factor=s, mode=mode).numpy()
                np.testing.assert_array_equal(got, want, err_msg=f"n={n} scale={s} {mode}")


def test_nearest_grad_is_the_vjp_of_the_forward_when_out_equals_in():
    """scale_factor=1.3 on length 3 gives length 3: torch's forward reads [0, 0, 1] (scale 1/1.3) but its
    backward treats out == in as the identity. lazyflow's gradient is the VJP of the forward it computes
    (which equals torch's forward): checked against a one-hot sum."""
    a = np.arange(3, dtype=np.float32).reshape(1, 1, 3)
    want_fwd = TF.interpolate(torch.tensor(a), scale_factor=1.3, mode="nearest").numpy()
    x = lf.tensor(a, requires_grad=True)
    y = F.interpolate(x, scale_factor=1.3, mode="nearest")
    np.testing.assert_array_equal(y.detach().numpy(), want_fwd)
    (y * lf.tensor([[[1.0, 10.0, 100.0]]])).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[[11.0, 100.0, 0.0]]])


def test_float64_and_integer_nearest():
    a = np.random.default_rng(0).standard_normal((1, 2, 4, 5))
    want = TF.interpolate(torch.tensor(a), size=(7, 3), mode="bicubic").numpy()
    got = F.interpolate(lf.tensor(a), size=(7, 3), mode="bicubic")
    assert got.dtype is lf.float64
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-12)
    ai = np.arange(12, dtype=np.uint8).reshape(1, 1, 3, 4)
    got = F.interpolate(lf.tensor(ai), scale_factor=2, mode="nearest")
    assert got.dtype is lf.uint8
    np.testing.assert_array_equal(got.numpy(), TF.interpolate(torch.tensor(ai), scale_factor=2).numpy())


def test_upsample_layers_match_torch_and_repr():
    a = np.random.default_rng(1).standard_normal((1, 2, 3, 4)).astype(np.float32)
    pairs = [
        (lf.nn.Upsample(scale_factor=2), torch.nn.Upsample(scale_factor=2)),
        (lf.nn.Upsample(size=(5, 7), mode="bicubic"), torch.nn.Upsample(size=(5, 7), mode="bicubic")),
        (
            lf.nn.Upsample(scale_factor=(2, 1.5), mode="bilinear"),
            torch.nn.Upsample(scale_factor=(2, 1.5), mode="bilinear"),
        ),
        (lf.nn.UpsamplingNearest2d(size=5), torch.nn.UpsamplingNearest2d(size=5)),
        (lf.nn.UpsamplingBilinear2d(scale_factor=2), torch.nn.UpsamplingBilinear2d(scale_factor=2)),
    ]
    for i, (lm, tm) in enumerate(pairs):
        assert repr(lm) == repr(tm)
        assert lm.state_dict() == {} and not tm.state_dict()
        run = lf.compile(lm) if i == 4 else lm
        _close(run(lf.tensor(a)).numpy(), tm(torch.tensor(a)).numpy(), repr(lm))
    assert lf.nn.UpsamplingBilinear2d(size=3).align_corners is True


@pytest.mark.filterwarnings("ignore:`nn.functional.upsample")
def test_deprecated_aliases_match_torch():
    a = np.random.default_rng(2).standard_normal((1, 1, 3, 4)).astype(np.float32)
    t = torch.tensor(a)
    with pytest.warns(UserWarning, match="deprecated"):
        F.upsample(lf.tensor(a), size=5)
    _close(
        F.upsample_bilinear(lf.tensor(a), scale_factor=2).numpy(), TF.upsample_bilinear(t, scale_factor=2).numpy(), "ub"
    )
    _close(F.upsample_nearest(lf.tensor(a), size=5).numpy(), TF.upsample_nearest(t, size=5).numpy(), "un")
    _close(
        F.upsample(lf.tensor(a), size=5, mode="bilinear").numpy(), TF.upsample(t, size=5, mode="bilinear").numpy(), "u"
    )


BAD = [
    ((1, 1, 4), dict(size=2, scale_factor=2.0), ValueError, "only one of size or scale_factor"),
    ((1, 1, 4), dict(), ValueError, "either size or scale_factor"),
    ((1, 1, 4, 4), dict(size=(2, 2, 2)), ValueError, "same number of spatial dimensions"),
    ((1, 1, 4, 4), dict(scale_factor=(2.0,)), ValueError, "same number of spatial dimensions"),
    ((1, 1, 4), dict(size=2, mode="nearest", align_corners=True), ValueError, "align_corners option"),
    ((1, 1, 4), dict(size=2, recompute_scale_factor=True), ValueError, "not meaningful"),
    ((1, 1, 4), dict(size=2, mode="bilinear"), NotImplementedError, "bilinear"),
    ((1, 1, 4, 4), dict(size=2, mode="linear"), NotImplementedError, "linear"),
    ((1, 1, 4, 4), dict(size=2, mode="cubic"), NotImplementedError, "cubic"),
    ((4, 4), dict(size=2), NotImplementedError, "2-D input"),
    ((1, 1, 4), dict(size=2, mode="linear", antialias=True), ValueError, "anti-alias"),
    ((1, 1, 4), dict(scale_factor=0.1), ShapeError, "greater than 0"),
    ((1, 1, 4, 4), dict(size=(2, 2.5)), TypeError, "expected size"),
]


@pytest.mark.parametrize("shape,kw,err,pat", BAD, ids=[b[3] for b in BAD])
def test_bad_input_raises_like_torch(shape, kw, err, pat):
    a = np.zeros(shape, np.float32)
    with pytest.raises(err, match=pat):
        F.interpolate(lf.tensor(a), **kw)
    with pytest.raises((ValueError, NotImplementedError, RuntimeError, TypeError)):
        TF.interpolate(torch.tensor(a), **kw)


def test_bad_dtype_and_type():
    with pytest.raises(DTypeError, match="floating"):
        F.interpolate(lf.tensor(np.zeros((1, 1, 4), np.int64)), size=3, mode="linear")
    with pytest.raises(TypeError, match="lazyflow Tensor"):
        F.interpolate(np.zeros((1, 1, 4)), size=3)  # type: ignore[arg-type]


def test_empty_batch_like_torch():
    a = np.zeros((0, 2, 4, 4), np.float32)
    for kw in (dict(scale_factor=2, mode="bilinear"), dict(size=(3, 5), mode="bicubic", antialias=True)):
        want = tuple(TF.interpolate(torch.tensor(a), **kw).shape)
        assert tuple(F.interpolate(lf.tensor(a), **kw).shape) == want == (0, 2) + want[2:]
