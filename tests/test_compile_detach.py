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


def _grads_vs_torch(f, arrays, wrap=lambda fn: fn):
    """``f(m, *tensors)`` with m = torch and m = lf (eager, lf.compile): the gradients of every input agree."""
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    f(torch, *ts).backward()
    for fn in (lambda *xs: f(lf, *xs), wrap(lf.compile(lambda *xs: f(lf, *xs)))):
        ls = [lf.tensor(a, requires_grad=True) for a in arrays]
        fn(*ls).backward()
        for lt, tt in zip(ls, ts):
            np.testing.assert_allclose(lt.grad.numpy(), tt.grad.numpy(), rtol=1e-6)


A = np.array([1.0, -2.0, 3.0], np.float32)
B = np.array([0.5, 2.0, -1.5], np.float32)


def test_no_grad_block_inside_compile_cuts_the_gradient_like_torch():
    def f(m, w):
        with m.no_grad():
            u = w * 3
        return (u * w).sum()

    _grads_vs_torch(f, [A])


def test_no_grad_decorator_set_grad_enabled_and_enable_grad_inside_compile():
    def f(m, w, v):
        @m.no_grad()
        def teacher(x):
            return (x * v).tanh()

        t = teacher(w)
        m.set_grad_enabled(False)
        s = w.exp()
        m.set_grad_enabled(True)
        with m.no_grad():
            with m.enable_grad():
                r = w.sin() * v
            q = r * 2
        return (t * w + s * w + r + q * w).sum()

    _grads_vs_torch(f, [A, B])


def test_in_place_under_no_grad_keeps_the_graph_position_like_torch():
    """torch: an in-place write under no_grad keeps the tensor's autograd history, so later uses differentiate
    to it as if unmodified (here: a non-leaf scaled in place, and a clamp of a captured leaf's clone)."""

    def f(m, x, w):
        y = x * w
        with m.no_grad():
            y.mul_(2)
            y.clamp_(max=5.0)
        return (y * y).sum()

    _grads_vs_torch(f, [A, B])


def test_parameter_clamped_under_no_grad_inside_a_compiled_forward():
    """A model that clamps its own parameter in place under no_grad inside forward (as weight-clipping code does):
    the compiled forward's gradient, and the written-back parameter, equal torch's."""

    class Clip:
        def __init__(self, m):
            class M(m.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.w = m.nn.Parameter(m.tensor(A * 2))

                def forward(self, x):
                    with m.no_grad():
                        self.w.clamp_(-1.0, 1.0)
                    return (self.w * x).pow(2).sum()

            self.model = M()

    t, e, c = Clip(torch), Clip(lf), Clip(lf)
    t.model(torch.tensor(B)).backward()
    e.model(lf.tensor(B)).backward()
    lf.compile(c.model)(lf.tensor(B)).backward()
    for o in (e, c):
        np.testing.assert_allclose(o.model.w.grad.numpy(), t.model.w.grad.numpy(), rtol=1e-6)
        np.testing.assert_allclose(o.model.w.detach().numpy(), t.model.w.detach().numpy())


def test_is_grad_enabled_inside_compile_is_torchs():
    seen = []

    def f(x):
        seen.append(lf.is_grad_enabled())
        with lf.no_grad():
            seen.append(lf.is_grad_enabled())
        return x * 2

    lf.compile(f)(lf.ones(2, requires_grad=True))
    with lf.no_grad():
        lf.compile(f)(lf.ones(2))
    assert seen == [True, False, False, False]
    assert lf.is_grad_enabled()


def test_func_grad_respects_an_inner_no_grad_like_torch_func():
    """torch.func.grad respects a no_grad inside the transformed function (and ignores an outer one)."""

    def f(m, x):
        with m.no_grad():
            c = x.cos()
        return (c * x).sum()

    want = torch.func.grad(lambda x: f(torch, x))(torch.tensor(A))
    got = lf.func.grad(lambda x: f(lf, x))(lf.tensor(A))
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)
    with torch.no_grad():
        want_outer = torch.func.grad(lambda x: (x.sin() * x).sum())(torch.tensor(A))
    with lf.no_grad():
        got_outer = lf.func.grad(lambda x: (x.sin() * x).sum())(lf.tensor(A))
    np.testing.assert_allclose(got_outer.numpy(), want_outer.numpy(), rtol=1e-6)
