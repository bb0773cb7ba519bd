"""``detach()`` inside ``lf.compile`` cuts the gradient of the compiled VJP, as it cuts the eager tape's (torch's
rule); spectral normalization's power iteration relies on it."""

from __future__ import annotations

import numpy as np
import torch

import lazyflow as lf


def test_detach_inside_compile_stops_the_gradient_like_torch():
    a = np.array([1.0, -2.0, 3.0], np.float32)

    def f(m, w):
        return (w.detach() * w).sum() + (w.detach() ** 2 * w.sin()).sum()

    wt = torch.tensor(a, requires_grad=True)
    f(torch, wt).backward()
    for fn in (lambda w: f(lf, w), lf.compile(lambda w: f(lf, w))):
        wl = lf.tensor(a, requires_grad=True)
        fn(wl).backward()
        np.testing.assert_allclose(wl.grad.numpy(), wt.grad.numpy(), rtol=1e-6)
