"""grid_sample / affine_grid, max_poolNd_with_indices and max_unpool1d/2d/3d (functional and MaxUnpool layers)
against torch 2.13: values and gradients (input and grid / theta), every mode, padding mode and align_corners,
eager and compiled, reprs, bad input."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as TF
from _harness import compiled

import lazyflow as lf
import lazyflow.nn.functional as F

RNG = np.random.default_rng(0)
X = RNG.standard_normal((2, 3, 5, 6)).astype(np.float32)
G = (RNG.random((2, 4, 7, 2)) * 2.6 - 1.3).astype(np.float32)


def _gs(mode, pm, ac):
    return lambda x, g: F.grid_sample(x, g, mode, pm, ac)


_GS = {
    (m, p, a): _gs(m, p, a)
    for m in ("bilinear", "nearest")
    for p in ("zeros", "border", "reflection")
    for a in (False, True)
}


@pytest.mark.parametrize("align", [False, True])
@pytest.mark.parametrize("pm", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
def test_grid_sample_vs_torch(mode, pm, align):
    xt, gt = torch.tensor(X, requires_grad=True), torch.tensor(G, requires_grad=True)
    yt = TF.grid_sample(xt, gt, mode, pm, align)
    ct = RNG.standard_normal(tuple(yt.shape)).astype(np.float32)
    yt.backward(torch.tensor(ct))
    graph_modes = [False, True] if (mode, pm, align) == ("bilinear", "zeros", False) else [False]
    for graph in graph_modes:
        xl, gl = lf.tensor(X, requires_grad=True), lf.tensor(G, requires_grad=True)
        fn = _GS[mode, pm, align]
        yl = (compiled(fn) if graph else fn)(xl, gl)
        np.testing.assert_allclose(yl.detach().numpy(), yt.detach().numpy(), rtol=1e-5, atol=1e-5)
        (yl * lf.tensor(ct)).sum().backward()
        np.testing.assert_allclose(xl.grad.numpy(), xt.grad.numpy(), rtol=1e-4, atol=1e-5)
        if mode == "nearest":  # a step function of the grid: torch returns zeros, lazyflow no gradient at all
            assert gl.grad is None and not gt.grad.any()
        else:
            np.testing.assert_allclose(gl.grad.numpy(), gt.grad.numpy(), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("size", [[2, 3, 4, 5], [2, 1, 3, 4, 2], [2, 3, 1, 5]])
@pytest.mark.parametrize("align", [False, True])
def test_affine_grid_and_spatial_transformer_vs_torch(size, align):
    nd = len(size) - 2
    th = RNG.standard_normal((2, nd, nd + 1)).astype(np.float32)
    tt = torch.tensor(th, requires_grad=True)
    gt = TF.affine_grid(tt, size, align)
    tl = lf.tensor(th, requires_grad=True)
    gl = F.affine_grid(tl, size, align)
    np.testing.assert_allclose(gl.detach().numpy(), gt.detach().numpy(), rtol=1e-5, atol=1e-6)
    if nd == 2:  # a spatial transformer: gradients reach theta through the sampler
        TF.grid_sample(torch.tensor(X[:, :, :, :]), gt, align_corners=align).sum().backward()
        F.grid_sample(lf.tensor(X), gl, align_corners=align).sum().backward()
    else:
        gt.pow(2).sum().backward()
        gl.pow(2).sum().backward()
    np.testing.assert_allclose(tl.grad.numpy(), tt.grad.numpy(), rtol=1e-4, atol=1e-4)


UNPOOL = [
    (1, (2, 3, 8), dict(kernel_size=2), None),
    (1, (2, 3, 9), dict(kernel_size=3, stride=2, padding=1), [2, 3, 9]),
    (2, (2, 3, 6, 7), dict(kernel_size=2), [6, 7]),
    (2, (1, 2, 7, 7), dict(kernel_size=3, stride=2, padding=1), None),
    (3, (1, 2, 4, 4, 6), dict(kernel_size=2), None),
]


@pytest.mark.parametrize("nd,shape,kw,out_size", UNPOOL)
def test_max_pool_with_indices_and_unpool_vs_torch(nd, shape, kw, out_size):
    a = RNG.standard_normal(shape).astype(np.float32)
    pool_t, pool_l = getattr(TF, f"max_pool{nd}d_with_indices"), getattr(F, f"max_pool{nd}d_with_indices")
    yt, it = pool_t(torch.tensor(a), **kw)
    yl, il = pool_l(lf.tensor(a), **kw)
    np.testing.assert_array_equal(il.numpy(), it.numpy())
    np.testing.assert_allclose(yl.numpy(), yt.numpy())
    vt = torch.tensor(yt.numpy(), requires_grad=True)
    ut = getattr(TF, f"max_unpool{nd}d")(vt, it, output_size=out_size, **kw)
    ct = RNG.standard_normal(tuple(ut.shape)).astype(np.float32)
    ut.backward(torch.tensor(ct))
    vl = lf.tensor(yt.numpy(), requires_grad=True)
    ul = getattr(F, f"max_unpool{nd}d")(vl, il, output_size=out_size, **kw)
    np.testing.assert_array_equal(ul.detach().numpy(), ut.detach().numpy())
    (ul * lf.tensor(ct)).sum().backward()
    np.testing.assert_allclose(vl.grad.numpy(), vt.grad.numpy())
    lm, tm = getattr(lf.nn, f"MaxUnpool{nd}d")(**kw), getattr(torch.nn, f"MaxUnpool{nd}d")(**kw)
    assert repr(lm) == repr(tm)
    np.testing.assert_array_equal(lm(yl, il, out_size).numpy(), tm(yt, it, out_size).numpy())


def test_unpool_compiled_and_autoencoder_roundtrip():
    pool, unpool = lf.nn.MaxPool2d(2, return_indices=True), lf.nn.MaxUnpool2d(2)

    def f(x):
        y, i = pool(x)
        return unpool(y, i)

    out = lf.compile(f)(lf.tensor(X))
    yt, it = TF.max_pool2d(torch.tensor(X), 2, return_indices=True)
    np.testing.assert_array_equal(out.numpy(), TF.max_unpool2d(yt, it, 2).numpy())


def test_bad_input():
    with pytest.raises(ValueError, match="padding_mode"):
        F.grid_sample(lf.tensor(X), lf.tensor(G), padding_mode="wrap")
    with pytest.raises(ValueError, match="mode"):
        F.grid_sample(lf.tensor(X), lf.tensor(G), mode="area")
    with pytest.raises(lf.NotSupportedError, match="bicubic"):
        F.grid_sample(lf.tensor(X), lf.tensor(G), mode="bicubic")
    with pytest.raises(lf.ShapeError, match="grid"):
        F.grid_sample(lf.tensor(X), lf.tensor(G[:1]))
    with pytest.raises(lf.ShapeError, match=r"\(N=2, 2, 3\)"):
        F.affine_grid(lf.zeros(2, 3, 3), [2, 3, 4, 5])
    with pytest.raises(lf.NotSupportedError, match="4D and 5D"):
        F.affine_grid(lf.zeros(2, 2, 3), [2, 3, 4])
    y, i = F.max_pool2d_with_indices(lf.tensor(X), 2)
    with pytest.raises(lf.ShapeError, match="indices of the input's shape"):
        F.max_unpool2d(y, i[:1], 2)
    with pytest.raises(lf.ShapeError, match="invalid output_size"):
        F.max_unpool2d(y, i, 2, output_size=[9, 9])
    with pytest.raises(lf.DTypeError, match="integer indices"):
        F.max_unpool2d(y, i.float(), 2)
    with pytest.raises(lf.IndexOutOfRangeError):
        F.max_unpool2d(y, i + 100, 2)
