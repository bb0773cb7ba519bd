"""pixel_shuffle/unshuffle, unfold/fold (functional and layers) and Tensor.unfold against torch 2.13: forward and
input gradient, eager and compiled, layer repr, bad input. Small shapes so the file stays fast."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as TF
from _harness import compiled

import lazyflow as lf
import lazyflow.nn.functional as F
from lazyflow._core.errors import ShapeError, ValueRangeError

# (id, lazyflow fn, torch fn, input shape); the same callable is used for both libraries where possible
CASES = [
    ("shuffle", lambda m, x: m.pixel_shuffle(x, 2), (2, 8, 3, 4)),
    ("shuffle-unbatched-r3", lambda m, x: m.pixel_shuffle(x, 3), (9, 2, 3)),
    ("unshuffle-5d", lambda m, x: m.pixel_unshuffle(x, 2), (2, 1, 3, 4, 6)),
    ("unfold-all-args", lambda m, x: m.unfold(x, (2, 3), dilation=(1, 2), padding=(1, 0), stride=(2, 1)), (2, 3, 6, 7)),
    ("unfold-unbatched", lambda m, x: m.unfold(x, 2), (3, 4, 5)),
    ("fold-all-args", lambda m, x: m.fold(x, (5, 6), (2, 3), dilation=(2, 1), padding=1, stride=(1, 2)), (2, 12, 15)),
    ("fold-unbatched-overlap", lambda m, x: m.fold(x, 4, 2), (8, 9)),
    ("tensor-unfold", lambda m, x: x.unfold(1, 3, 2), (2, 7, 3)),
    ("tensor-unfold-last", lambda m, x: x.unfold(-1, 2, 1), (4,)),
    ("tensor-unfold-0d", lambda m, x: x.unfold(0, 1, 1), ()),
]
COMPILED = {"shuffle", "unshuffle-5d", "unfold-all-args", "fold-all-args", "tensor-unfold"}
_LF = {cid: (lambda f: lambda x: f(F, x))(fn) for cid, fn, _ in CASES}


@pytest.mark.parametrize("cid,fn,shape", CASES, ids=[c[0] for c in CASES])
def test_vs_torch_forward_and_grad(cid, fn, shape):
    rng = np.random.default_rng(len(cid))
    a = rng.standard_normal(shape).astype(np.float32)
    xt = torch.tensor(a, requires_grad=True)
    yt = fn(TF, xt)
    g = rng.standard_normal(tuple(yt.shape)).astype(np.float32)
    yt.backward(torch.tensor(g))
    for graph in [False, True] if cid in COMPILED else [False]:
        xl = lf.tensor(a, requires_grad=True)
        yl = (compiled(_LF[cid]) if graph else _LF[cid])(xl)
        assert tuple(yl.shape) == tuple(yt.shape)
        # pure data movement (and sums of at most a few terms): equal to float32 rounding
        np.testing.assert_allclose(yl.detach().numpy(), yt.detach().numpy(), rtol=1e-6, atol=1e-6)
        (yl * lf.tensor(g)).sum().backward()
        np.testing.assert_allclose(xl.grad.numpy(), xt.grad.numpy(), rtol=1e-6, atol=1e-6)


def test_fold_of_unfold_counts_overlaps_like_torch():
    """fold(unfold(x)) multiplies each pixel by the number of blocks covering it (torch's documented identity)."""
    a = np.ones((1, 2, 5, 5), np.float32)
    kw = dict(kernel_size=3, padding=1, stride=2)
    want = TF.fold(TF.unfold(torch.tensor(a), **kw), (5, 5), **kw).numpy()
    got = F.fold(F.unfold(lf.tensor(a), **kw), (5, 5), **kw).numpy()
    np.testing.assert_array_equal(got, want)
    assert got.max() == 4.0  # a real overlap count, not all ones


def test_tensor_unfold_is_a_copy_not_a_view():
    """torch returns a view; lazyflow documents a copy: a write to the result does not reach the source."""
    x = lf.arange(6.0)
    y = x.unfold(0, 2, 2)
    y[0, 0] = 100.0
    assert x.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    assert tuple(x.unfold(0, 0, 1).shape) == tuple(torch.arange(6.0).unfold(0, 0, 1).shape) == (7, 0)


def test_layers_match_torch_and_repr():
    a = np.random.default_rng(3).standard_normal((2, 8, 4, 4)).astype(np.float32)
    pairs = [
        (lf.nn.PixelShuffle(2), torch.nn.PixelShuffle(2)),
        (lf.nn.PixelUnshuffle(2), torch.nn.PixelUnshuffle(2)),
        (lf.nn.Unfold(2, padding=1), torch.nn.Unfold(2, padding=1)),
    ]
    for lm, tm in pairs:
        assert repr(lm) == repr(tm) and lm.state_dict() == {}
        np.testing.assert_array_equal(lm(lf.tensor(a)).numpy(), tm(torch.tensor(a)).numpy())
    c = np.random.default_rng(4).standard_normal((2, 8, 9)).astype(np.float32)
    lm, tm = lf.nn.Fold((4, 4), 2), torch.nn.Fold((4, 4), 2)
    assert repr(lm) == repr(tm)
    np.testing.assert_allclose(lf.compile(lm)(lf.tensor(c)).numpy(), tm(torch.tensor(c)).numpy(), rtol=1e-6)


BAD = [
    (lambda m, x: m.pixel_shuffle(x, 2), (5, 2, 2), ShapeError, "divisible by the square"),
    (lambda m, x: m.pixel_shuffle(x, 2), (4, 2), ShapeError, "at least 3 dimensions"),
    (lambda m, x: m.pixel_shuffle(x, 0), (4, 2, 2), ValueRangeError, "positive upscale_factor"),
    (lambda m, x: m.pixel_unshuffle(x, 2), (4, 3, 2), ShapeError, "height to be divisible"),
    (lambda m, x: m.unfold(x, 2), (1, 3, 5, 5, 5), ShapeError, "3D or 4D"),
    (lambda m, x: m.unfold(x, 3), (1, 3, 2, 2), ShapeError, "at least one"),
    (lambda m, x: m.unfold(x, 2, stride=0), (1, 3, 4, 4), ValueRangeError, "greater than zero"),
    (lambda m, x: m.fold(x, (4, 4), 2), (2, 13, 9), ShapeError, "divisible by the product"),
    (lambda m, x: m.fold(x, (4, 4), 2), (2, 12, 8), ShapeError, "3 \\* 3 = 9"),
    (lambda m, x: m.fold(x, (4, 4), 2), (2, 2, 12, 8), ShapeError, "2D or 3D"),
    (lambda m, x: x.unfold(1, 5, 1), (3, 4), ShapeError, "maximum size"),
    (lambda m, x: x.unfold(1, 2, 0), (3, 4), ValueRangeError, "step is 0"),
    (lambda m, x: x.unfold(2, 2, 1), (3, 4), IndexError, "out of range"),
]


@pytest.mark.parametrize("fn,shape,err,pat", BAD, ids=[b[3] for b in BAD])
def test_bad_input_raises_like_torch(fn, shape, err, pat):
    a = np.zeros(shape, np.float32)
    with pytest.raises(err, match=pat):
        fn(F, lf.tensor(a))
    with pytest.raises((RuntimeError, IndexError)):
        fn(TF, torch.tensor(a))


def test_empty_batch_like_torch():
    a = np.zeros((0, 8, 4, 4), np.float32)
    for fn in (lambda m, x: m.unfold(x, 2), lambda m, x: m.pixel_shuffle(x, 2)):
        assert tuple(fn(F, lf.tensor(a)).shape) == tuple(fn(TF, torch.tensor(a)).shape)
    # torch 2.13 hands an empty input to pixel_unshuffle back unchanged ((0, 8, 4, 4)); lazyflow keeps the
    # documented (*, C * r^2, H / r, W / r), which torch itself gives for every non-empty input
    assert tuple(TF.pixel_unshuffle(torch.tensor(a), 2).shape) == (0, 8, 4, 4)
    assert tuple(F.pixel_unshuffle(lf.tensor(a), 2).shape) == (0, 32, 2, 2)
    c = np.zeros((0, 8, 6), np.float32)
    assert tuple(F.fold(lf.tensor(c), (3, 4), 2).shape) == tuple(TF.fold(torch.tensor(c), (3, 4), 2).shape)
