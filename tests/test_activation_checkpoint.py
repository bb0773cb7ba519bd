"""lf.utils.checkpoint against torch.utils.checkpoint (same weights), eager and compiled; memory drops."""

import contextlib
import io
import math
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
import torch.utils.checkpoint as tckpt
from jax.ad_checkpoint import print_saved_residuals

import lazyflow as lf
from lazyflow.func import functional_call
from lazyflow.utils.checkpoint import checkpoint, checkpoint_sequential
from lazyflow.utils.jax import to_jax

X = np.random.RandomState(0).randn(6, 5).astype(np.float32)


def _pair(n=4, width=5):
    lf.manual_seed(0)
    layers, tlayers = [], []
    for _ in range(n):
        layers += [lf.nn.Linear(width, width), lf.nn.Tanh()]
        tlayers += [torch.nn.Linear(width, width), torch.nn.Tanh()]
    m, tm = lf.nn.Sequential(*layers), torch.nn.Sequential(*tlayers)
    tm.load_state_dict({k: torch.tensor(v.numpy()) for k, v in m.state_dict().items()})
    return m, tm


def _grads(m):
    return {k: p.grad.numpy() for k, p in m.named_parameters()}


def _tgrads(tm):
    return {k: p.grad.numpy() for k, p in tm.named_parameters()}


def _close(a, b):
    assert a.keys() == b.keys()
    for k in a:
        np.testing.assert_allclose(a[k], b[k], rtol=1e-5, atol=1e-6, err_msg=k)


class Ckpt(lf.nn.Module):
    """Runs ``inner`` under checkpoint."""

    def __init__(self, inner, **kw):
        super().__init__()
        self.inner, self.kw = inner, kw

    def forward(self, x):
        return checkpoint(self.inner, x, use_reentrant=False, **self.kw)


def test_eager_gradients_match_torch_checkpoint():
    m, tm = _pair()
    x = lf.tensor(X, requires_grad=True)
    tx = torch.tensor(X, requires_grad=True)
    out = checkpoint(m, x, use_reentrant=False)
    tout = tckpt.checkpoint(tm, tx, use_reentrant=False)
    np.testing.assert_allclose(out.detach().numpy(), tout.detach().numpy(), rtol=1e-5, atol=1e-6)
    (out**2).sum().backward()
    (tout**2).sum().backward()
    _close(_grads(m), _tgrads(tm))
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-5, atol=1e-6)
    assert out.grad_fn.name() == "CheckpointBackward0"


def test_inputs_without_grad_still_give_parameter_gradients():
    m, tm = _pair()
    (checkpoint(m, lf.tensor(X)) ** 2).sum().backward()
    (tckpt.checkpoint(tm, torch.tensor(X), use_reentrant=False) ** 2).sum().backward()
    _close(_grads(m), _tgrads(tm))


def test_autograd_grad_through_checkpoint_leaves_dot_grad_alone():
    m, tm = _pair()
    params = list(m.parameters())
    gs = lf.autograd.grad((checkpoint(m, lf.tensor(X)) ** 2).sum(), params)
    tgs = torch.autograd.grad(
        (tckpt.checkpoint(tm, torch.tensor(X), use_reentrant=False) ** 2).sum(), list(tm.parameters())
    )
    for g, tg in zip(gs, tgs):
        np.testing.assert_allclose(g.numpy(), tg.numpy(), rtol=1e-5, atol=1e-6)
    assert all(p.grad is None for p in params)


def test_several_inputs_outputs_kwargs_and_non_tensor_arguments():
    def fn(a, b, k, *, scale):
        return a * b * k * scale, (a + b).sum(), "tag"

    a = lf.tensor([1.0, 2.0], requires_grad=True)
    b = lf.tensor([3.0, 4.0], requires_grad=True)
    x, s, tag = checkpoint(fn, a, b, 2, scale=lf.tensor(0.5))
    assert tag == "tag"
    (x.sum() + s * 3).backward()
    ta = torch.tensor([1.0, 2.0], requires_grad=True)
    tb = torch.tensor([3.0, 4.0], requires_grad=True)
    tx, ts, _ = tckpt.checkpoint(fn, ta, tb, 2, scale=torch.tensor(0.5), use_reentrant=False)
    (tx.sum() + ts * 3).backward()
    np.testing.assert_allclose(a.grad.numpy(), ta.grad.numpy())
    np.testing.assert_allclose(b.grad.numpy(), tb.grad.numpy())


@pytest.mark.parametrize("order", ["closure_first", "closure_last"])
def test_a_non_leaf_the_segment_closes_over_gets_its_gradient(order):
    def run(mod, w0):
        w = mod.tensor(w0, requires_grad=True)
        x = mod.tensor([1.0, 1.0], requires_grad=True)
        h = (w * 3).exp()
        z = h.sum()
        ck = checkpoint if mod is lf else lambda f, *a: tckpt.checkpoint(f, *a, use_reentrant=False)
        y = ck(lambda t: (t * h).sum(), x)
        (z * 2 + y if order == "closure_first" else y + z * 2).backward()
        return w.grad.numpy(), x.grad.numpy()

    for a, b in zip(run(lf, [0.1, 0.2]), run(torch, [0.1, 0.2])):
        np.testing.assert_allclose(a, b, rtol=1e-6)


def test_an_input_returned_unchanged_stays_connected():
    def fn(a, b):
        return a * 2, b

    def run(mod, ck):
        x = mod.tensor([1.0, 2.0], requires_grad=True)
        y = mod.tensor([3.0, 4.0], requires_grad=True)
        o1, o2 = ck(fn, x, y)
        (o1.sum() + (o2 * 3).sum()).backward()
        return x.grad.numpy(), y.grad.numpy(), o2 is y

    ours = run(lf, checkpoint)
    theirs = run(torch, lambda f, *a: tckpt.checkpoint(f, *a, use_reentrant=False))
    np.testing.assert_allclose(ours[0], theirs[0])
    np.testing.assert_allclose(ours[1], theirs[1])
    assert ours[2]


def test_checkpoint_sequential_matches_torch():
    m, tm = _pair(6)
    x = lf.tensor(X, requires_grad=True)
    tx = torch.tensor(X, requires_grad=True)
    out = checkpoint_sequential(m, 3, x, use_reentrant=False)
    tout = tckpt.checkpoint_sequential(tm, 3, tx, use_reentrant=False)
    np.testing.assert_allclose(out.detach().numpy(), tout.detach().numpy(), rtol=1e-5, atol=1e-6)
    out.sum().backward()
    tout.sum().backward()
    _close(_grads(m), _tgrads(tm))
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-5, atol=1e-6)


def _dropout_grad(preserve):
    lf.manual_seed(3)
    x = lf.ones(2000, requires_grad=True)
    y = checkpoint(lambda t: lf.nn.functional.dropout(t, 0.5) * 3.0, x, preserve_rng_state=preserve)
    y.sum().backward()
    mask = y.detach().numpy() != 0  # the forward's mask, read from its output
    return x.grad.numpy(), mask


def test_dropout_recomputation_replays_the_forward_mask():
    g, mask = _dropout_grad(True)
    np.testing.assert_allclose(g, mask * 2.0 * 3.0)  # d(dropout(x) * 3)/dx = mask / (1 - p) * 3
    assert 0.4 < mask.mean() < 0.6


def test_without_preserve_rng_state_the_recomputation_draws_a_new_mask():
    g, mask = _dropout_grad(False)
    assert not np.allclose(g, mask * 6.0)


def test_the_checkpointed_segment_frees_its_activations():
    """Bytes held by the tape (saved operands of every node reachable from the loss) drop with checkpointing."""

    def tape_bytes(t):
        seen, bufs, stack = set(), {}, [t.grad_fn]
        while stack:
            n = stack.pop()
            if n is None or id(n) in seen:
                continue
            seen.add(id(n))
            for a in n.inputs or ():
                v = getattr(a, "_value", None)
                if v is not None:
                    bufs[id(v)] = v.nbytes
            stack.extend(e[0] for e in n.edges if e is not None)
        return sum(bufs.values())

    m, _ = _pair(8, 64)
    x = lf.randn(32, 64)
    blocks = lf.nn.Sequential(*[Ckpt(lf.nn.Sequential(*list(m)[i : i + 4])) for i in range(0, 16, 4)])
    plain = tape_bytes((m(x) ** 2).sum())
    ckpt = tape_bytes((blocks(x) ** 2).sum())
    params = sum(p.numel() * 4 for p in m.parameters())
    assert ckpt - params < 0.5 * (plain - params), (plain, ckpt, params)


def test_compiled_gradients_match_torch_and_use_jax_checkpoint():
    m, tm = _pair()
    model = Ckpt(m)
    step = lf.compile(model)
    loss = (step(lf.tensor(X)) ** 2).sum()
    loss.backward()
    tloss = (tckpt.checkpoint(tm, torch.tensor(X), use_reentrant=False) ** 2).sum()
    tloss.backward()
    np.testing.assert_allclose(loss.item(), tloss.item(), rtol=1e-5)
    _close(_grads(m), _tgrads(tm))
    p = to_jax(dict(model.named_parameters()))
    jaxpr = str(jax.make_jaxpr(jax.grad(lambda p: functional_call(model, p, (jnp.asarray(X),)).sum()))(p))
    assert "checkpoint" in jaxpr or "remat" in jaxpr


def test_nn_graph_training_step_matches_torch():
    m, tm = _pair()
    model = Ckpt(m)
    opt = lf.optim.SGD(model.parameters(), lr=0.1)
    topt = torch.optim.SGD(tm.parameters(), lr=0.1)

    class Step(lf.nn.Graph):
        def __init__(self):
            super().__init__()
            self.model = model
            self.add_optimizer(opt)

        def build(self, x):
            loss = (self.model(x) ** 2).mean()
            loss.backward()
            return loss

    step = Step()
    for _ in range(3):
        loss = step(lf.tensor(X))
        topt.zero_grad()
        tloss = (tckpt.checkpoint(tm, torch.tensor(X), use_reentrant=False) ** 2).mean()
        tloss.backward()
        topt.step()
        np.testing.assert_allclose(loss.item(), tloss.item(), rtol=1e-5)
    for k, v in tm.state_dict().items():
        np.testing.assert_allclose(m.state_dict()[k].numpy(), v.numpy(), rtol=1e-5, atol=1e-6)


def _residual_bytes(model):
    """Bytes JAX keeps from the forward for the backward (jax.ad_checkpoint.saved_residuals), parameters excluded."""
    p = to_jax(dict(model.named_parameters()))
    x = jnp.asarray(np.random.RandomState(0).randn(64, 32).astype(np.float32))
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        print_saved_residuals(lambda p: (functional_call(model, p, (x,)) ** 2).sum(), p)
    total = 0
    for line in buf.getvalue().splitlines():  # "f32[64,32] output of tanh from ..." / "... from the argument p[...]"
        m = re.match(r"(f32|f64|i32|i64|bool)\[([\d,]*)\]", line)
        if m and "argument" not in line:
            total += math.prod(int(d) for d in m.group(2).split(",") if d) * {"f64": 8, "i64": 8, "bool": 1}.get(
                m.group(1), 4
            )
    return total


def test_compiled_program_saves_fewer_residuals_with_checkpointing():
    lf.manual_seed(0)
    blocks = [
        lf.nn.Sequential(lf.nn.Linear(32, 32), lf.nn.Tanh(), lf.nn.Linear(32, 32), lf.nn.Tanh()) for _ in range(8)
    ]
    plain = _residual_bytes(lf.nn.Sequential(*blocks))
    ckpt = _residual_bytes(lf.nn.Sequential(*[Ckpt(b) for b in blocks]))
    assert ckpt < 0.5 * plain, (plain, ckpt)


def test_policy_by_name_and_callable():
    m, tm = _pair()
    for policy in ("dots_saveable", jax.checkpoint_policies.nothing_saveable):
        model = Ckpt(m, policy=policy)
        p = to_jax(dict(model.named_parameters()))
        g = jax.grad(lambda p, model=model: (functional_call(model, p, (jnp.asarray(X),)) ** 2).sum())(p)
        tm.zero_grad()
        (tm(torch.tensor(X)) ** 2).sum().backward()
        _close({k.removeprefix("inner."): np.asarray(v) for k, v in g.items()}, _tgrads(tm))


def test_context_fn_wraps_forward_and_recomputation():
    log = []

    @contextlib.contextmanager
    def tag(name):
        log.append(name)
        yield

    x = lf.ones(2, requires_grad=True)
    y = checkpoint(lambda t: t * 2, x, context_fn=lambda: (tag("forward"), tag("recompute")))
    assert log == ["forward"]
    y.sum().backward()
    assert log == ["forward", "recompute"]


def test_bad_inputs():
    x = lf.ones(2, requires_grad=True)
    with pytest.raises(lf.ArgumentError, match="callable"):
        checkpoint(3, x)  # type: ignore[arg-type]
    with pytest.raises(lf.ArgumentError, match="policy"):
        checkpoint(lambda t: t, x, policy="no_such_policy")
    with pytest.raises(lf.ArgumentError, match="determinism_check"):
        checkpoint(lambda t: t, x, determinism_check="strict")
    with pytest.raises(lf.ArgumentError, match="segments"):
        checkpoint_sequential([lambda t: t], 2, x)
    y = checkpoint(lambda t: (t * t).sum(), x)
    with pytest.raises(lf.AutogradError, match="create_graph"):
        lf.autograd.grad(y, [x], create_graph=True)


def test_a_recomputation_that_changes_shape_is_refused():
    calls = []

    def fn(t):
        calls.append(1)
        return t * 2 if len(calls) == 1 else lf.cat([t, t]) * 2

    y = checkpoint(fn, lf.ones(2, requires_grad=True))
    with pytest.raises(lf.AutogradError, match="recomputation"):
        y.sum().backward()


def test_no_grad_runs_the_function_plainly():
    with lf.no_grad():
        y = checkpoint(lambda t: t * 2, lf.ones(2, requires_grad=True))
    assert not y.requires_grad
    np.testing.assert_array_equal(y.numpy(), [2.0, 2.0])
