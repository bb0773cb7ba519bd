"""The Transformer step's lowerings (issue 14): nll_loss without a scatter, split's backward as one concatenate, and
linear's gradients (first and second order) -- against torch, eager and in ``lf.nn.Graph``, and the shape of the
programs (counted in the jaxpr)."""

from __future__ import annotations

import jax
import jax.extend
import jax.numpy as jnp
import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import lazyflow as lf
import lazyflow.nn.functional as F
from lazyflow._core import dtypes as D
from lazyflow.ops.table import REGISTRY, specialize

RNG = np.random.default_rng(0)


def _arr(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


def _prims(fn, *args) -> list[str]:
    out: list[str] = []

    def walk(jaxpr):
        for e in jaxpr.eqns:
            out.append(e.primitive.name)
            for sub in jax.extend.core.jaxprs_in_params(e.params):
                walk(sub)

    walk(jax.make_jaxpr(fn)(*args).jaxpr)
    return out


def _op_fn(name, statics, *arrays):
    descs = tuple((tuple(a.shape), D.from_jax_dtype(a.dtype), None) for a in arrays)
    return specialize(REGISTRY[name], statics, descs)


# ---------------------------------------------------------------- linear
LINEAR_SHAPES = [((7, 4), (5, 4), True), ((2, 3, 4), (5, 4), True), ((4,), (5, 4), True), ((6, 4), (3, 4), False)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("xs, ws, bias", LINEAR_SHAPES)
@pytest.mark.parametrize("mode", ["eager", "graph"])
def test_linear_grads_match_torch(xs, ws, bias, dtype, mode):
    x, w = _arr(*xs, dtype=dtype), _arr(*ws, dtype=dtype)
    b = _arr(ws[0], dtype=dtype) if bias else None
    up = _arr(*(xs[:-1] + (ws[0],)), dtype=dtype)
    tx, tw = (torch.tensor(a, requires_grad=True) for a in (x, w))
    tb = torch.tensor(b, requires_grad=True) if bias else None
    (TF.linear(tx, tw, tb) * torch.tensor(up)).sum().backward()
    tol = 1e-5 if dtype == np.float32 else 1e-12
    if mode == "graph":  # the whole step compiled; SGD with lr 1 turns the gradients into parameter changes
        m = lf.nn.Module()
        m.w = lf.nn.Parameter(lf.tensor(w))
        m.b = lf.nn.Parameter(lf.tensor(b)) if bias else None

        class Step(lf.nn.Graph):
            def __init__(self):
                super().__init__()
                self.m = m
                self.add_optimizer(lf.optim.SGD(m.parameters(), lr=1.0))

            def build(self, x):
                loss = (F.linear(x, self.m.w, self.m.b) * lf.tensor(up)).sum()
                loss.backward()
                return loss

        Step()(lf.tensor(x))
        got = [w - m.w.detach().numpy()] + ([b - m.b.detach().numpy()] if bias else [])
        want = [tw.grad] + ([tb.grad] if bias else [])
    else:
        lx, lw = (lf.tensor(a, requires_grad=True) for a in (x, w))
        lb = lf.tensor(b, requires_grad=True) if bias else None
        (F.linear(lx, lw, lb) * lf.tensor(up)).sum().backward()
        got = [t.grad for t in (lx, lw, lb) if t is not None]
        want = [t.grad for t in (tx, tw, tb) if t is not None]
    for g, t in zip(got, want, strict=True):
        np.testing.assert_allclose(np.asarray(g), t.numpy(), rtol=tol, atol=tol)


def test_linear_second_order_matches_torch():
    x, w, b = _arr(6, 4, dtype=np.float64), _arr(3, 4, dtype=np.float64), _arr(3, dtype=np.float64)
    tx, tw, tb = (torch.tensor(a, requires_grad=True) for a in (x, w, b))
    gx, gw = torch.autograd.grad((TF.linear(tx, tw, tb) ** 2).sum(), [tx, tw], create_graph=True)
    ((gx**2).sum() + (gw**3).sum()).backward()
    lx, lw, lb = (lf.tensor(a, requires_grad=True) for a in (x, w, b))
    hx, hw = lf.autograd.grad((F.linear(lx, lw, lb) ** 2).sum(), [lx, lw], create_graph=True)
    ((hx**2).sum() + (hw**3).sum()).backward()
    for lt, tt in ((lx, tx), (lw, tw), (lb, tb)):
        np.testing.assert_allclose(lt.grad.numpy(), tt.grad.numpy(), rtol=1e-10, atol=1e-10)


def test_linear_complex_grads_match_torch():
    x = (_arr(5, 3) + 1j * _arr(5, 3)).astype(np.complex64)
    w = (_arr(2, 3) + 1j * _arr(2, 3)).astype(np.complex64)
    tx, tw = (torch.tensor(a, requires_grad=True) for a in (x, w))
    TF.linear(tx, tw).abs().sum().backward()
    lx, lw = (lf.tensor(a, requires_grad=True) for a in (x, w))
    F.linear(lx, lw).abs().sum().backward()
    np.testing.assert_allclose(lx.grad.numpy(), tx.grad.numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(lw.grad.numpy(), tw.grad.numpy(), rtol=1e-5, atol=1e-5)


def test_linear_bad_shapes_still_raise():
    with pytest.raises(lf.ShapeError):
        F.linear(lf.randn(3, 4), lf.randn(5, 3))


# ---------------------------------------------------------------- nll_loss / cross_entropy
CE_CASES = [
    dict(shape=(9, 6), kw={}),
    dict(shape=(9, 6), kw=dict(ignore_index=2)),
    dict(shape=(9, 6), kw=dict(reduction="sum", weight=True)),
    dict(shape=(9, 6), kw=dict(reduction="none", ignore_index=0)),
    dict(shape=(4, 5, 3), kw=dict(weight=True, ignore_index=1)),
    dict(shape=(5,), kw={}),
    dict(shape=(9, 6), kw=dict(label_smoothing=0.1)),
]


@pytest.mark.parametrize("case", CE_CASES, ids=[str(i) for i in range(len(CE_CASES))])
@pytest.mark.parametrize("mode", ["eager", "graph"])
def test_cross_entropy_grads_match_torch(case, mode):
    shape, kw = case["shape"], dict(case["kw"])
    c = shape[0] if len(shape) == 1 else shape[1]
    x = _arr(*shape, dtype=np.float64)
    tshape = () if len(shape) == 1 else (shape[0],) + shape[2:]
    t = RNG.integers(0, c, tshape)
    if "ignore_index" in kw and t.ndim:
        t.flat[0] = kw["ignore_index"]  # at least one ignored target
    wt = _arr(c, dtype=np.float64) ** 2 if kw.pop("weight", False) else None
    tx = torch.tensor(x, requires_grad=True)
    tl = TF.cross_entropy(tx, torch.tensor(t), weight=None if wt is None else torch.tensor(wt), **kw)
    (tl.sum() if tl.ndim else tl).backward()
    lw = None if wt is None else lf.tensor(wt)
    lt = lf.tensor(t)
    if mode == "graph":  # an identity Linear in front; SGD with lr 1 from a zero bias leaves -grad in the bias
        model = lf.nn.Linear(c, c, dtype=lf.float64)
        with lf.no_grad():
            model.weight.copy_(lf.eye(c, dtype=lf.float64))
            model.bias.zero_()
        xin = lf.tensor(x)

        class Step(lf.nn.Graph):
            def __init__(self):
                super().__init__()
                self.m = model
                self.add_optimizer(lf.optim.SGD(model.parameters(), lr=1.0))

            def build(self, x, t):
                out = self.m(x.movedim(1, -1) if x.ndim > 2 else x)
                out = out.movedim(-1, 1) if x.ndim > 2 else out
                loss = F.cross_entropy(out, t, weight=lw, **kw)
                loss = loss.sum() if loss.ndim else loss
                loss.backward()
                return loss

        loss = Step()(xin, lt)
        np.testing.assert_allclose(loss.numpy(), (tl.sum() if tl.ndim else tl).detach().numpy(), rtol=1e-10)
        # the bias gradient is the logits' gradient summed over everything but the class dim
        axes = tuple(i for i in range(x.ndim) if i != (0 if x.ndim == 1 else 1))
        np.testing.assert_allclose(-model.bias.detach().numpy(), tx.grad.numpy().sum(axis=axes), rtol=1e-9, atol=1e-12)
        return
    lx = lf.tensor(x, requires_grad=True)
    ll = F.cross_entropy(lx, lt, weight=lw, **kw)
    (ll.sum() if ll.ndim else ll).backward()
    np.testing.assert_allclose(ll.detach().numpy(), tl.detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(lx.grad.numpy(), tx.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_nll_loss_picks_the_target_exactly_and_ignores_other_infinities():
    # the masked sum adds exact zeros: the loss is the picked entry bit for bit, and -inf elsewhere in a row does
    # not leak into it (nor NaN into the gradient)
    logp = np.full((3, 4), -np.inf, np.float32)
    logp[[0, 1, 2], [1, 3, 0]] = [-0.1234567, -2.5e-8, -7.0]
    x = lf.tensor(logp, requires_grad=True)
    loss = F.nll_loss(x, lf.tensor(np.array([1, 3, 0])), reduction="none")
    np.testing.assert_array_equal(loss.detach().numpy(), -logp[[0, 1, 2], [1, 3, 0]])
    loss.sum().backward()
    want = np.zeros((3, 4), np.float32)
    want[[0, 1, 2], [1, 3, 0]] = -1.0
    np.testing.assert_array_equal(x.grad.numpy(), want)


def test_nll_loss_backward_has_no_scatter():
    logp, t = jnp.zeros((8, 5), jnp.float32), jnp.zeros(8, jnp.int32)
    f = _op_fn("nll_loss", (-100, "mean"), logp, t)
    prims = _prims(jax.grad(lambda a: f(a, t, None)), logp)
    assert not [p for p in prims if p.startswith("scatter") or p == "gather"], prims


def test_nll_loss_bad_target_still_raises():
    with pytest.raises(lf.ShapeError):
        F.nll_loss(lf.randn(4, 3), lf.tensor(np.array([0, 1])))


# ---------------------------------------------------------------- split
def test_split_backward_is_one_concatenate_and_matches_torch():
    x = _arr(4, 9, dtype=np.float64)
    f = _op_fn("split", ((2, 3, 4), 1), x)
    prims = _prims(jax.grad(lambda a: sum(p.sum() * (i + 1) for i, p in enumerate(f(a)))), jnp.asarray(x))
    assert prims.count("concatenate") == 1 and "pad" not in prims, prims
    tx = torch.tensor(x, requires_grad=True)
    lx = lf.tensor(x, requires_grad=True)
    for xx, mod in ((tx, torch), (lx, lf)):
        a, b, c = mod.split(xx, [2, 3, 4], 1)
        (a.sum() * 2 + (b**2).sum() + c.exp().sum()).backward()
    np.testing.assert_allclose(lx.grad.numpy(), tx.grad.numpy(), rtol=1e-12)
    # an unused piece: a zero block in the gradient
    lx2 = lf.tensor(x, requires_grad=True)
    lf.split(lx2, [2, 7], 1)[0].sum().backward()
    want = np.zeros_like(x)
    want[:, :2] = 1.0
    np.testing.assert_array_equal(lx2.grad.numpy(), want)


def test_split_bad_sizes_still_raise():
    with pytest.raises(lf.ShapeError):
        lf.split(lf.randn(4, 9), [2, 3], 1)
