"""lf.autograd.Function against torch.autograd.Function (the same class body run on both libraries), eagerly, under
lf.compile, in an lf.nn.Graph training step and under lf.func.grad; a straight-through estimator (whose backward is
NOT the derivative of its forward) shows the user's backward is what differentiates it everywhere."""

import numpy as np
import pytest
import torch

import lazyflow as lf
from lazyflow import nn
from lazyflow._core.errors import AutogradError, GraphError


def _np(t):
    return np.array(t.detach().numpy(), copy=True)


def _classes(lib):
    """The same user code for both libraries."""

    class ScaledTanh(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x, w, alpha):
            y = (x * w).tanh()
            ctx.save_for_backward(x, w, y)
            ctx.alpha = alpha
            return y * alpha

        @staticmethod
        def backward(ctx, g):
            x, w, y = ctx.saved_tensors
            d = g * ctx.alpha * (1 - y * y)
            return d * w, (d * x).sum(0), None

    class Ste(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return (x * 4).round() / 4

        @staticmethod
        def backward(ctx, g):
            return g * 1.0  # straight through: the true derivative of round() is zero almost everywhere

    class Cube(lib.autograd.Function):  # torch's newer style: forward without ctx + setup_context
        @staticmethod
        def forward(x):
            return x**3

        @staticmethod
        def setup_context(ctx, inputs, output):
            (x,) = inputs
            ctx.save_for_backward(x)

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * 3 * x * x

    return ScaledTanh, Ste, Cube


LF, TORCH = _classes(lf), _classes(torch)
RNG = np.random.default_rng(0)
X = RNG.standard_normal((4, 3)).astype(np.float32)
W = RNG.standard_normal(3).astype(np.float32)


def test_forward_backward_match_torch():
    outs = []
    for lib, (ScaledTanh, _, _) in ((lf, LF), (torch, TORCH)):
        x = lib.tensor(X, requires_grad=True)
        w = lib.tensor(W, requires_grad=True)
        y = ScaledTanh.apply(x, w, 0.5)
        (y * y).sum().backward()
        outs.append((_np(y), _np(x.grad), _np(w.grad), type(y.grad_fn).__name__ if lib is torch else y.grad_fn.name()))
    for a, b in zip(outs[0][:3], outs[1][:3]):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    assert outs[0][3] == outs[1][3] == "ScaledTanhBackward"


def test_setup_context_style_and_double_backward_match_torch():
    res = []
    for lib, (_, _, Cube) in ((lf, LF), (torch, TORCH)):
        x = lib.tensor(X[0], requires_grad=True)
        (g,) = lib.autograd.grad(Cube.apply(x).sum(), x, create_graph=True)
        g.sum().backward()  # d/dx of 3x^2 through the user's (differentiable) backward
        res.append((_np(g), _np(x.grad)))
    np.testing.assert_allclose(res[0][0], res[1][0], rtol=1e-5)
    np.testing.assert_allclose(res[0][1], res[1][1], rtol=1e-5)
    np.testing.assert_allclose(res[0][1], 6 * X[0], rtol=1e-5)


def test_straight_through_eager_and_under_compile():
    _, Ste, _ = LF
    c = lf.tensor([1.0, 2.0, 3.0])
    for run in (lambda x: (Ste.apply(x) * c).sum(), lf.compile(lambda x: (Ste.apply(x) * c).sum())):
        x = lf.tensor([0.1, 0.6, -0.3], requires_grad=True)
        run(x).backward()
        np.testing.assert_allclose(_np(x.grad), [1.0, 2.0, 3.0])  # autodiff of round() would give zeros


def test_straight_through_under_func_grad_and_vmap():
    _, Ste, _ = LF
    g = lf.func.grad(lambda x: (Ste.apply(x) * x).sum())(lf.tensor([0.1, 0.6]))
    # d/dx [ste(x) * x] = ste'(x) * x + ste(x) = x + round(4x)/4 with ste' = 1
    np.testing.assert_allclose(_np(g), [0.1 + 0.0, 0.6 + 0.5], rtol=1e-6)
    gv = lf.func.vmap(lf.func.grad(lambda x: Ste.apply(x).sum()))(lf.ones(3, 2))
    np.testing.assert_allclose(_np(gv), np.ones((3, 2)))


def test_straight_through_in_graph_training_step_matches_torch():
    def make(lib):
        lin = lib.nn.Linear(3, 2)
        with lib.no_grad():
            lin.weight.copy_(lib.tensor(RNG.standard_normal((2, 3)).astype(np.float32)))
            lin.bias.fill_(0.1)
        return lin

    torch.manual_seed(0)
    tl = make(torch)
    ll = make(lf)
    ll.load_state_dict({k: lf.tensor(v.detach().numpy()) for k, v in tl.state_dict().items()})
    _, TSte, _ = TORCH
    _, LSte, _ = LF

    class Step(nn.Graph):
        def __init__(self):
            super().__init__()
            self.model = ll
            self.add_optimizer(lf.optim.SGD(ll.parameters(), lr=0.5))

        def build(self, x):
            loss = (LSte.apply(self.model(x)) ** 2).sum()
            loss.backward()
            return loss

    topt = torch.optim.SGD(tl.parameters(), lr=0.5)
    w0 = _np(ll.weight).copy()
    step = Step()
    for _ in range(2):
        lossl = step(lf.tensor(X))
        topt.zero_grad()
        losst = (TSte.apply(tl(torch.tensor(X))) ** 2).sum()
        losst.backward()
        topt.step()
        np.testing.assert_allclose(float(lossl), float(losst.detach()), rtol=1e-5)
    np.testing.assert_allclose(_np(ll.weight), _np(tl.weight), rtol=1e-5, atol=1e-6)
    assert not np.allclose(_np(ll.weight), w0)  # autodiff of round() would leave the weights where they were


def _ctx_probe(lib, rec):
    class Probe(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x, y, k):
            rec.append(tuple(ctx.needs_input_grad))
            vals, idx = x.sort()
            ctx.mark_non_differentiable(idx)
            ctx.set_materialize_grads(False)
            return vals * k, idx, y * 2

        @staticmethod
        def backward(ctx, gv, gi, gy):
            rec.append((gv is None, gi is None, gy is None))
            return (gv * 0 + 1) if gv is not None else None, None if gy is None else gy * 2, None

    return Probe


def test_ctx_flags_match_torch():
    results = []
    for lib in (lf, torch):
        rec = []
        Probe = _ctx_probe(lib, rec)
        x = lib.tensor([3.0, 1.0, 2.0], requires_grad=True)
        y = lib.tensor([1.0, 1.0])
        vals, idx, y2 = Probe.apply(x, y, 2.0)
        vals.sum().backward()  # y2 unused: its grad arrives as None (materialize off)
        results.append((rec, idx.requires_grad, y2.requires_grad, vals.requires_grad, _np(x.grad)))
    assert results[0][0] == results[1][0] == [(True, False, False), (False, True, True)]
    assert results[0][1:4] == results[1][1:4] == (False, True, True)
    np.testing.assert_allclose(results[0][4], results[1][4])


def test_materialized_grads_are_zeros_by_default():
    got = []
    for lib in (lf, torch):
        seen = []

        class Two(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 2, x * 3

            @staticmethod
            def backward(ctx, ga, gb):
                seen.append(_np(gb))  # noqa: B023 (runs inside this iteration)
                return ga * 2 + gb * 3

        x = lib.tensor([1.0, 2.0], requires_grad=True)
        a, _ = Two.apply(x)
        a.sum().backward()
        got.append((seen[0], _np(x.grad)))
    np.testing.assert_array_equal(got[0][0], got[1][0])
    np.testing.assert_array_equal(got[0][1], got[1][1])


def test_once_differentiable_refuses_double_backward_like_torch():
    for lib in (lf, torch):

        class Sq(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x * x

            @staticmethod
            @lib.autograd.function.once_differentiable
            def backward(ctx, g):
                (x,) = ctx.saved_tensors
                return 2 * x * g

        x = lib.tensor([1.0, 2.0], requires_grad=True)
        v = lib.tensor([1.0, 1.0], requires_grad=True)
        (g,) = lib.autograd.grad(Sq.apply(x), x, grad_outputs=v, create_graph=True)
        np.testing.assert_allclose(_np(g), [2.0, 4.0])
        with pytest.raises(RuntimeError, match="differentiate twice a function that was marked with @once_diff"):
            g.sum().backward()


def test_mark_dirty_in_place_forward_matches_torch():
    res = []
    for lib in (lf, torch):

        class Double_(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                x.mul_(2)
                ctx.mark_dirty(x)
                return x

            @staticmethod
            def backward(ctx, g):
                return g * 2

        a = lib.tensor([1.0, 2.0], requires_grad=True)
        b = a * 1
        out = Double_.apply(b)
        assert out is b
        (out * out).sum().backward()
        res.append((_np(out), _np(a.grad)))
    np.testing.assert_allclose(res[0][0], res[1][0])
    np.testing.assert_allclose(res[0][1], res[1][1])


def _bad(lib, grads):
    class Bad(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x, k):
            return x * k

        @staticmethod
        def backward(ctx, g):
            return grads(g)

    return Bad


@pytest.mark.parametrize(
    "grads, match",
    [
        (lambda g: g, "incorrect number of gradients"),
        (lambda g: (g, None, None, g), "incorrect number of gradients"),
        (lambda g: (g[:1], None), "invalid gradient at index 0"),
        (lambda g: (g, g), "not a Tensor|not a Variable|different than None"),
    ],
)
def test_bad_backward_results_raise_like_torch(grads, match):
    for lib in (lf, torch):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y = _bad(lib, grads).apply(x, 2.0)
        with pytest.raises(RuntimeError, match=match) as ei:
            y.sum().backward()
        if lib is lf:
            assert isinstance(ei.value, AutogradError) and "BadBackward" in str(ei.value)


def test_trailing_none_and_broadcast_gradients_match_torch():
    res = []
    for lib in (lf, torch):
        Bad = _bad(lib, lambda g: (g.unsqueeze(0).expand(3, 2), None, None))  # sums back to [2]
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        Bad.apply(x, 2.0).sum().backward()
        res.append(_np(x.grad))
    np.testing.assert_allclose(res[0], res[1])
    np.testing.assert_allclose(res[0], [3.0, 3.0])


def test_saved_tensor_modified_in_place_raises_and_second_backward_raises():
    ScaledTanh = LF[0]
    x = lf.tensor(X, requires_grad=True)
    w = lf.tensor(W, requires_grad=True)
    xs = x * 1
    y = ScaledTanh.apply(xs, w, 1.0)
    with lf.no_grad():
        xs.add_(1)
    with pytest.raises(AutogradError, match="modified by an inplace operation"):
        y.sum().backward()
    y = ScaledTanh.apply(x, w, 1.0)
    y.sum().backward()
    with pytest.raises(AutogradError, match="second time"):
        y.sum().backward()


def test_apply_with_keywords_and_misuse():
    ScaledTanh = LF[0]
    x = lf.tensor(X, requires_grad=True)
    y = ScaledTanh.apply(x, w=lf.tensor(W), alpha=2.0)
    ref = ScaledTanh.apply(x, lf.tensor(W), 2.0)
    np.testing.assert_allclose(_np(y), _np(ref))
    with pytest.raises(RuntimeError, match="static forward"):
        ScaledTanh()(x)

    class NoForward(lf.autograd.Function):
        pass

    with pytest.raises(NotImplementedError, match="forward"):
        NoForward.apply(x)
    with pytest.raises(AutogradError, match="save_for_backward can only save tensors"):

        class SavesInt(lf.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(3)
                return x

        SavesInt.apply(x)


def test_no_grad_inputs_record_nothing():
    ScaledTanh = LF[0]
    y = ScaledTanh.apply(lf.tensor(X), lf.tensor(W), 1.0)
    assert not y.requires_grad and y.grad_fn is None
    with lf.no_grad():
        y = ScaledTanh.apply(lf.tensor(X, requires_grad=True), lf.tensor(W), 1.0)
    assert not y.requires_grad


def test_hook_inside_compile_is_a_graph_error():
    @lf.compile
    def f(x):
        y = x * 2
        y.register_hook(lambda g: g)
        return y.sum()

    with pytest.raises(GraphError, match="register_hook inside compiled code"):
        f(lf.ones(2, requires_grad=True))


class _Mixed(lf.autograd.Function):
    """A tensor kept as a ctx attribute (not save_for_backward), an integer output, a non-tensor output."""

    @staticmethod
    def forward(ctx, x, n):
        ctx.y = x.exp()
        i = x.argmax()
        ctx.mark_non_differentiable(i)
        return ctx.y * n, i, "tag"

    @staticmethod
    def backward(ctx, g, gi, gs):
        return g * ctx.y * 2, None  # twice the true derivative: shows this backward is the one used


def test_mixed_outputs_and_ctx_attributes_eager_compiled_and_transformed():
    x0 = np.array([0.1, 0.5, -0.2], np.float32)
    want = 2 * np.exp(x0)  # the true derivative would be 3 * exp(x)
    x = lf.tensor(x0, requires_grad=True)
    y, i, tag = _Mixed.apply(x, 3.0)
    assert tag == "tag" and int(i) == 1 and not i.requires_grad
    y.sum().backward()
    np.testing.assert_allclose(_np(x.grad), want, rtol=1e-6)
    x.grad = None
    lf.compile(lambda x: _Mixed.apply(x, 3.0)[0].sum())(x).backward()
    np.testing.assert_allclose(_np(x.grad), want, rtol=1e-6)
    g = lf.func.grad(lambda x: _Mixed.apply(x, 3.0)[0].sum())(lf.tensor(x0))
    np.testing.assert_allclose(_np(g), want, rtol=1e-6)
    gv = lf.func.vmap(lf.func.grad(lambda x: _Mixed.apply(x, 3.0)[0].sum()))(lf.tensor(np.stack([x0, x0])))
    np.testing.assert_allclose(_np(gv), np.stack([want, want]), rtol=1e-6)


def test_traced_bad_backward_and_forward_mode_errors():
    Bad = _bad(lf, lambda g: g)
    x = lf.ones(2, requires_grad=True)
    with pytest.raises(AutogradError, match="BadBackward returned an incorrect number of gradients"):
        lf.compile(lambda x: Bad.apply(x, 2.0).sum())(x).backward()
    with pytest.raises(AutogradError, match="BadBackward returned an incorrect number of gradients"):
        lf.func.grad(lambda x: Bad.apply(x, 2.0).sum())(lf.ones(2))
    _, Ste, Cube = LF
    with pytest.raises(RuntimeError, match="forward-mode differentiation through an lf.autograd.Function"):
        lf.func.jacfwd(Ste.apply)(lf.ones(2))
    with pytest.raises(RuntimeError, match="forward-mode"):
        lf.func.jvp(Ste.apply, (lf.ones(2),), (lf.ones(2),))
    # forward over reverse differentiates the user's backward (3 x^2 g), so hessian works: diag(6 x)
    h = lf.func.hessian(lambda x: Cube.apply(x).sum())(lf.tensor([1.0, 2.0]))
    np.testing.assert_allclose(_np(h), np.diag([6.0, 12.0]), rtol=1e-6)
