"""lf.utils.scan.ScanLayers: identical blocks as one lax.scan body in compiled code; numbers and keys as the loop's
(torch's ModuleList loop as the reference)."""

import contextlib
import io

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from jax.ad_checkpoint import print_saved_residuals

import lazyflow as lf
from lazyflow.func import functional_call
from lazyflow.utils.jax import to_jax
from lazyflow.utils.scan import ScanLayers

X = np.random.RandomState(0).randn(4, 8).astype(np.float32)
N = 6


class Net(lf.nn.Module):
    def __init__(self, h):
        super().__init__()
        self.h = h
        self.head = lf.nn.Linear(8, 2)

    def forward(self, x):
        return self.head(self.h(x))


class TNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.h = torch.nn.ModuleList(
            [torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.LayerNorm(8), torch.nn.Tanh()) for _ in range(N)]
        )
        self.head = torch.nn.Linear(8, 2)

    def forward(self, x):
        for b in self.h:
            x = b(x)
        return self.head(x)


def _pair(checkpoint=False):
    lf.manual_seed(0)
    blocks = [lf.nn.Sequential(lf.nn.Linear(8, 8), lf.nn.LayerNorm(8), lf.nn.Tanh()) for _ in range(N)]
    m = Net(ScanLayers(blocks, checkpoint=checkpoint))
    tm = TNet()
    tm.load_state_dict({k: torch.tensor(v.numpy()) for k, v in m.state_dict().items()})
    return m, tm


def test_state_dict_keys_are_the_module_lists():
    m, tm = _pair()
    assert list(m.state_dict()) == list(tm.state_dict())
    assert isinstance(m.h, lf.nn.ModuleList) and len(m.h) == N and m.h[2] is list(m.h)[2]


@pytest.mark.parametrize("checkpoint", [False, True])
def test_compiled_forward_and_gradients_match_torch(checkpoint):
    m, tm = _pair(checkpoint)
    out = lf.compile(m)(lf.tensor(X))
    (out**2).sum().backward()
    tout = tm(torch.tensor(X))
    (tout**2).sum().backward()
    np.testing.assert_allclose(out.detach().numpy(), tout.detach().numpy(), rtol=1e-5, atol=1e-6)
    for k, p in tm.named_parameters():
        np.testing.assert_allclose(m.get_parameter(k).grad.numpy(), p.grad.numpy(), rtol=1e-4, atol=1e-6, err_msg=k)


def test_eager_and_nn_graph_run_the_loop_with_the_same_numbers():
    m, tm = _pair()
    ref = tm(torch.tensor(X)).detach().numpy()
    np.testing.assert_allclose(m(lf.tensor(X)).detach().numpy(), ref, rtol=1e-5, atol=1e-6)
    opt = lf.optim.SGD(m.parameters(), lr=0.1)

    class Step(lf.nn.Graph):
        def __init__(self):
            super().__init__()
            self.m = m
            self.add_optimizer(opt)

        def build(self, x):
            loss = (self.m(x) ** 2).mean()
            loss.backward()
            return loss

    loss = Step()(lf.tensor(X))
    np.testing.assert_allclose(loss.item(), float((ref**2).mean()), rtol=1e-5)


def test_the_program_holds_one_copy_of_the_block():
    m, _ = _pair()
    p = to_jax(dict(m.named_parameters()))
    jaxpr = str(jax.make_jaxpr(lambda p: functional_call(m, p, (jnp.asarray(X),)))(p))
    assert jaxpr.count("tanh") == 1 and "scan" in jaxpr
    loop = Net(lf.nn.Sequential(*list(m.h)))
    assert str(jax.make_jaxpr(lambda p: functional_call(loop, p, (jnp.asarray(X),)))(p)).count("tanh") == N


def test_checkpointed_scan_saves_fewer_residuals_and_jax_grad_matches_torch():
    def count(model):
        p = to_jax(dict(model.named_parameters()))
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            print_saved_residuals(lambda p: functional_call(model, p, (jnp.asarray(X),)).sum(), p)
        return len([ln for ln in buf.getvalue().splitlines() if "argument" not in ln])

    plain, ck = _pair(False)[0], _pair(True)[0]
    assert count(ck) < count(plain)
    _, tm = _pair(True)
    p = to_jax(dict(ck.named_parameters()))
    g = jax.grad(lambda p: functional_call(ck, p, (jnp.asarray(X),)).sum())(p)
    tm(torch.tensor(X)).sum().backward()
    for k, tp in tm.named_parameters():
        np.testing.assert_allclose(np.asarray(g[k]), tp.grad.numpy(), rtol=1e-4, atol=1e-6, err_msg=k)


def test_dropout_layers_draw_independent_masks():
    lf.manual_seed(0)
    m = ScanLayers([lf.nn.Dropout(0.5) for _ in range(2)])
    out = np.asarray(jax.jit(lambda x: functional_call(m, {}, (x,)))(jnp.ones(4000, jnp.float32)))
    assert set(np.unique(out)) <= {0.0, 4.0}
    assert 0.2 < (out != 0).mean() < 0.3  # independent masks keep 1/4; one shared mask would keep 1/2


def test_bad_inputs():
    with pytest.raises(lf.ArgumentError, match="differs from block 0"):
        ScanLayers([lf.nn.Linear(2, 2), lf.nn.Linear(2, 3)])
    with pytest.raises(lf.ArgumentError, match="differs from block 0"):
        ScanLayers([lf.nn.Linear(2, 2), lf.nn.Tanh()])
    grow = ScanLayers([lf.nn.Linear(2, 3), lf.nn.Linear(2, 3)])
    with pytest.raises(lf.ArgumentError, match="input's shape"):
        jax.jit(lambda x: functional_call(grow, {}, (x,)))(jnp.ones((1, 2), jnp.float32))
    bn = ScanLayers([lf.nn.BatchNorm1d(2), lf.nn.BatchNorm1d(2)])
    with pytest.raises(lf.GraphError, match="in-place"):
        jax.jit(lambda x: functional_call(bn, {}, (x,)))(jnp.ones((3, 2), jnp.float32))


class _GraphStep(lf.nn.Graph):
    def __init__(self, m, opt):
        super().__init__()
        self.m = m
        self.add_optimizer(opt)

    def build(self, x):
        loss = (self.m(x) ** 2).mean()
        loss.backward()
        return loss


def test_nn_graph_scans_the_blocks_and_trains_like_torch():
    """Inside an nn.Graph the blocks are one scan (one tape node, backward = jax.vjp of the scan): the program
    holds one copy of the block, and two SGD steps give torch's parameters."""
    m, tm = _pair()
    step = _GraphStep(m, lf.optim.SGD(m.parameters(), lr=0.1))
    topt = torch.optim.SGD(tm.parameters(), lr=0.1)
    step.debug(2)
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        for _ in range(2):
            step(lf.tensor(X))
    for _ in range(2):
        (tm(torch.tensor(X)) ** 2).mean().backward()
        topt.step()
        topt.zero_grad()
    program = buf.getvalue()
    assert "scan" in program and program.count("tanh") < N
    sd = m.state_dict()
    for k, v in tm.state_dict().items():
        np.testing.assert_allclose(sd[k].numpy(), v.numpy(), rtol=1e-4, atol=1e-6, err_msg=k)


def test_nn_graph_dropout_masks_of_forward_and_backward_agree():
    """The Graph's backward re-runs the scan: its dropout masks must be the forward's. Reference: the gradient of
    the same model under lf.compile (one jax.vjp of the whole program, same seed and offsets)."""

    def model():
        lf.manual_seed(3)
        blocks = [lf.nn.Sequential(lf.nn.Linear(8, 8), lf.nn.Dropout(0.5)) for _ in range(3)]
        return Net(ScanLayers(blocks))

    class GradStep(lf.nn.Graph):
        def __init__(self, m):
            super().__init__()
            self.m = m
            self.add_optimizer(lf.optim.SGD(m.parameters(), lr=0.0))

        def build(self, x):
            loss = self.m(x).sum()
            loss.backward()
            return loss, self.m.h[1][0].weight.grad

    a, b = model(), model()
    lf.manual_seed(11)
    loss_g, grad_g = GradStep(a)(lf.tensor(X))
    lf.manual_seed(11)
    out = lf.compile(b)(lf.tensor(X))
    out.sum().backward()
    np.testing.assert_allclose(loss_g.item(), out.sum().item(), rtol=1e-5)
    np.testing.assert_allclose(grad_g.numpy(), b.h[1][0].weight.grad.numpy(), rtol=1e-5, atol=1e-6)
    assert np.abs(grad_g.numpy()).sum() > 0
