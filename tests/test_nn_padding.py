"""Padding layers against torch 2.13: every class (1d/2d/3d of constant, zero, reflection, replication, circular),
forward and input gradient, eager and (for one per mode) compiled, repr and stored padding, bad input."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import lazyflow as lf

# (class name, constructor args, input shape)
CASES = [
    ("ConstantPad1d", ((1, 2), 1.5), (2, 3, 4)),
    ("ConstantPad2d", (1, -0.5), (3, 4, 5)),
    ("ConstantPad3d", ((1, 0, 2, 1, 0, 1), 2.0), (1, 2, 3, 3, 2)),
    ("ZeroPad1d", (2,), (3, 4)),
    ("ZeroPad2d", ((1, 2, 0, 3),), (1, 2, 3, 4)),
    ("ZeroPad3d", (1,), (2, 2, 3, 2)),
    ("ReflectionPad1d", ((2, 1),), (2, 3, 4)),
    ("ReflectionPad2d", (1,), (3, 4, 5)),
    ("ReflectionPad3d", ((1, 0, 2, 1, 0, 1),), (1, 2, 3, 3, 2)),
    ("ReplicationPad1d", (3,), (3, 4)),
    ("ReplicationPad2d", ((1, 2, 0, 3),), (1, 2, 3, 4)),
    ("ReplicationPad3d", (1,), (2, 2, 3, 2)),
    ("CircularPad1d", ((2, 1),), (2, 3, 4)),
    ("CircularPad2d", (1,), (3, 4, 5)),
    ("CircularPad3d", ((1, 0, 2, 1, 0, 1),), (1, 2, 3, 3, 2)),
]
COMPILED = {"ConstantPad2d", "ReflectionPad2d", "ReplicationPad3d", "CircularPad1d"}


@pytest.mark.parametrize("name,args,shape", CASES, ids=[c[0] for c in CASES])
def test_padding_layer_vs_torch(name, args, shape):
    lm, tm = getattr(lf.nn, name)(*args), getattr(torch.nn, name)(*args)
    assert repr(lm) == repr(tm) and tuple(lm.padding) == tuple(tm.padding)
    rng = np.random.default_rng(len(name))
    a = rng.standard_normal(shape).astype(np.float32)
    xt = torch.tensor(a, requires_grad=True)
    yt = tm(xt)
    g = rng.standard_normal(tuple(yt.shape)).astype(np.float32)
    yt.backward(torch.tensor(g))
    for run in [lm, lf.compile(lm)] if name in COMPILED else [lm]:
        xl = lf.tensor(a, requires_grad=True)
        yl = run(xl)
        np.testing.assert_array_equal(yl.detach().numpy(), yt.detach().numpy())
        (yl * lf.tensor(g)).sum().backward()
        np.testing.assert_allclose(xl.grad.numpy(), xt.grad.numpy(), rtol=1e-6, atol=1e-6)


BAD = [
    ("ReflectionPad1d", (1,), (2, 2, 2, 3), NotImplementedError, "3D input"),
    ("ReplicationPad3d", (1,), (2, 3, 3), NotImplementedError, "5D input"),
    ("CircularPad2d", (1,), (3, 3), ValueError, "expected 3D or 4D input"),
    ("ReflectionPad1d", (3,), (2, 3), RuntimeError, "reflect"),
    ("ZeroPad2d", (1,), (3,), RuntimeError, "padding length"),
]


@pytest.mark.parametrize("name,args,shape,err,pat", BAD, ids=[f"{b[0]}-{b[4]}" for b in BAD])
def test_bad_input_raises_torchs_class(name, args, shape, err, pat):
    a = np.zeros(shape, np.float32)
    with pytest.raises(err, match=pat):
        getattr(lf.nn, name)(*args)(lf.tensor(a))
    with pytest.raises(err):
        getattr(torch.nn, name)(*args)(torch.tensor(a))
