"""nn.utils: parametrize, parametrizations.weight_norm/spectral_norm, the legacy weight_norm/spectral_norm hooks,
prune basics and fusion, against torch 2.13: state_dict keys (torch's state_dict loads), values and gradients after
loading, power-iteration buffers, eager and compiled, removal, and bad input."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.utils.parametrize as TP
import torch.nn.utils.prune

import lazyflow as lf
import lazyflow.nn.utils.parametrize as P
from lazyflow.nn.utils import parametrizations as LPZ
from lazyflow.nn.utils import prune

RNG = np.random.default_rng(0)


def _sd(tm):
    return {k: lf.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()}


def _pair(lf_ctor, torch_ctor):
    torch.manual_seed(0)
    tm = torch_ctor()
    lm = lf_ctor()
    return lm, tm


def _check_forward_and_grads(lm, tm, x, rtol=1e-5, atol=1e-6):
    yt = tm(torch.tensor(x))
    g = RNG.standard_normal(tuple(yt.shape)).astype(np.float32)
    (yt * torch.tensor(g)).sum().backward()
    yl = lm(lf.tensor(x))
    np.testing.assert_allclose(yl.detach().numpy(), yt.detach().numpy(), rtol=rtol, atol=atol)
    (yl * lf.tensor(g)).sum().backward()
    tgrads = {k: p.grad for k, p in tm.named_parameters()}
    for k, p in lm.named_parameters():
        np.testing.assert_allclose(p.grad.numpy(), tgrads[k].numpy(), rtol=1e-4, atol=1e-5, err_msg=k)


@pytest.mark.parametrize("dim", [0, 1, None])
def test_parametrizations_weight_norm_vs_torch(dim):
    lm, tm = _pair(
        lambda: LPZ.weight_norm(lf.nn.Conv2d(3, 4, 3), dim=dim),
        lambda: torch.nn.utils.parametrizations.weight_norm(torch.nn.Conv2d(3, 4, 3), dim=dim),
    )
    assert type(lm).__name__ == "ParametrizedConv2d" and repr(lm) == repr(tm)
    assert list(lm.state_dict()) == list(tm.state_dict())
    assert lm.parametrizations.weight.original0.shape == tm.parametrizations.weight.original0.shape
    # right_inverse at registration: the magnitude is the norm of the initial weight (over all dims but dim)
    w = lm.parametrizations.weight.original1.detach().numpy()
    axes = tuple(d for d in range(4) if d != dim) if dim is not None else None
    np.testing.assert_allclose(
        lm.parametrizations.weight.original0.detach().numpy().reshape(-1),
        np.sqrt((w**2).sum(axis=axes)).reshape(-1),
        rtol=1e-5,
    )
    lm.load_state_dict(_sd(tm))
    _check_forward_and_grads(lm, tm, RNG.standard_normal((2, 3, 6, 6)).astype(np.float32))


def test_parametrizations_spectral_norm_vs_torch_power_iteration_and_graph():
    lm, tm = _pair(
        lambda: LPZ.spectral_norm(lf.nn.Linear(5, 4)),
        lambda: torch.nn.utils.parametrizations.spectral_norm(torch.nn.Linear(5, 4)),
    )
    assert list(lm.state_dict()) == list(tm.state_dict())
    lm.load_state_dict(_sd(tm))
    x = RNG.standard_normal((3, 5)).astype(np.float32)
    for _ in range(2):  # training mode: one power-iteration step per forward, on both sides
        lm.zero_grad(), tm.zero_grad()
        _check_forward_and_grads(lm, tm, x)
    np.testing.assert_allclose(
        lm.parametrizations.weight[0]._u.numpy(), tm.parametrizations.weight[0]._u.numpy(), rtol=1e-5, atol=1e-6
    )
    # the estimate converges to the largest singular value
    s = np.linalg.svd(tm.parametrizations.weight.original.detach().numpy(), compute_uv=False)[0]
    np.testing.assert_allclose(np.linalg.svd(lm.weight.detach().numpy(), compute_uv=False)[0], 1.0, rtol=1e-3)
    assert s > 0
    # graph mode: the _u/_v buffers advance in place, as in eager
    lc = lf.compile(lm)
    with torch.no_grad():
        yt = tm(torch.tensor(x))
    yl = lc(lf.tensor(x))
    np.testing.assert_allclose(yl.detach().numpy(), yt.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(
        lm.parametrizations.weight[0]._v.numpy(), tm.parametrizations.weight[0]._v.numpy(), rtol=1e-5, atol=1e-6
    )
    lm.eval(), tm.eval()
    u = lm.parametrizations.weight[0]._u.numpy().copy()
    lm(lf.tensor(x))
    np.testing.assert_array_equal(lm.parametrizations.weight[0]._u.numpy(), u)  # eval: no iteration


class _Symmetric(lf.nn.Module):
    def forward(self, x):
        return x.triu() + x.triu(1).transpose(0, 1)


class _TSymmetric(torch.nn.Module):
    def forward(self, x):
        return x.triu() + x.triu(1).transpose(0, 1)


class _Scale(lf.nn.Module):
    def forward(self, x):
        return x * 2

    def right_inverse(self, x):
        return x / 2


class _TScale(torch.nn.Module):
    def forward(self, x):
        return x * 2

    def right_inverse(self, x):
        return x / 2


class _Transpose(lf.nn.Module):
    def forward(self, x):
        return x.t()


def test_register_remove_cached_and_assignment():
    lm = lf.nn.Linear(3, 3)
    w0 = lm.weight
    P.register_parametrization(lm, "weight", _Symmetric())
    assert P.is_parametrized(lm) and P.is_parametrized(lm, "weight") and not P.is_parametrized(lm, "bias")
    assert P.type_before_parametrizations(lm) is lf.nn.Linear
    assert lm.parametrizations.weight.original is w0  # the same Parameter object, as torch's
    tm = torch.nn.Linear(3, 3)
    TP.register_parametrization(tm, "weight", _TSymmetric())
    assert list(lm.state_dict()) == list(tm.state_dict())
    lm.load_state_dict(_sd(tm))
    _check_forward_and_grads(lm, tm, RNG.standard_normal((2, 3)).astype(np.float32))
    with P.cached():
        assert lm.weight is lm.weight
    assert lm.weight is not lm.weight
    # a second parametrization chains; assignment goes through right_inverse
    P.register_parametrization(lm, "weight", _Scale())
    assert len(lm.parametrizations.weight) == 2
    with pytest.raises(RuntimeError, match="right_inverse"):
        lm.weight = lf.zeros(3, 3)
    with pytest.raises(RuntimeError, match="right_inverse"):
        tm.weight = torch.zeros(3, 3)  # torch raises the same
    P.remove_parametrizations(lm, "weight", leave_parametrized=True)
    assert type(lm) is lf.nn.Linear and not hasattr(lm, "parametrizations")
    TP.register_parametrization(tm, "weight", _TScale())
    TP.remove_parametrizations(tm, "weight", leave_parametrized=True)
    assert lm.weight is w0 and list(lm.state_dict()) == list(tm.state_dict()) == ["bias", "weight"]
    np.testing.assert_allclose(lm.weight.detach().numpy(), tm.weight.detach().numpy(), rtol=1e-6)
    m = P.register_parametrization(lf.nn.Linear(2, 2), "weight", _Scale())
    m.weight = lf.ones(2, 2)
    np.testing.assert_allclose(m.parametrizations.weight.original.detach().numpy(), np.full((2, 2), 0.5))
    np.testing.assert_allclose(m.weight.detach().numpy(), np.ones((2, 2)))
    P.remove_parametrizations(m, "weight", leave_parametrized=False)
    np.testing.assert_allclose(m.weight.detach().numpy(), np.full((2, 2), 0.5))


def test_legacy_weight_norm_and_spectral_norm_hooks_vs_torch():
    lm, tm = _pair(
        lambda: lf.nn.utils.weight_norm(lf.nn.Linear(4, 3)), lambda: torch.nn.utils.weight_norm(torch.nn.Linear(4, 3))
    )
    assert list(lm.state_dict()) == list(tm.state_dict()) == ["bias", "weight_g", "weight_v"]
    lm.load_state_dict(_sd(tm))
    x = RNG.standard_normal((2, 4)).astype(np.float32)
    _check_forward_and_grads(lm, tm, x)
    lf.nn.utils.remove_weight_norm(lm), torch.nn.utils.remove_weight_norm(tm)
    assert list(lm.state_dict()) == list(tm.state_dict())
    np.testing.assert_allclose(lm.weight.detach().numpy(), tm.weight.detach().numpy(), rtol=1e-6)
    with pytest.raises(ValueError, match="weight_norm of 'weight' not found"):
        lf.nn.utils.remove_weight_norm(lm)

    lm, tm = _pair(
        lambda: lf.nn.utils.spectral_norm(lf.nn.Conv1d(2, 3, 2)),
        lambda: torch.nn.utils.spectral_norm(torch.nn.Conv1d(2, 3, 2)),
    )
    assert list(lm.state_dict()) == list(tm.state_dict())
    lm.load_state_dict(_sd(tm))
    x = RNG.standard_normal((2, 2, 5)).astype(np.float32)
    for _ in range(2):
        lm.zero_grad(), tm.zero_grad()
        _check_forward_and_grads(lm, tm, x)
    np.testing.assert_allclose(lm.weight_u.numpy(), tm.weight_u.numpy(), rtol=1e-5, atol=1e-6)
    lf.nn.utils.remove_spectral_norm(lm), torch.nn.utils.remove_spectral_norm(tm)
    np.testing.assert_allclose(lm.weight.detach().numpy(), tm.weight.detach().numpy(), rtol=1e-5, atol=1e-6)
    with pytest.raises(RuntimeError, match="two normalization hooks"):
        lf.nn.utils.weight_norm(lf.nn.utils.weight_norm(lf.nn.Linear(2, 2)), "weight")
    with pytest.raises(ValueError, match="no parameter named 'w'"):
        lf.nn.utils.spectral_norm(lf.nn.Linear(2, 2), "w")


def test_prune_keys_masks_and_remove():
    torch.manual_seed(0)
    tm = torch.nn.Linear(4, 5)
    lm = lf.nn.Linear(4, 5)
    lm.load_state_dict(_sd(tm))
    torch.nn.utils.prune.l1_unstructured(tm, "weight", amount=0.3)
    prune.l1_unstructured(lm, "weight", amount=0.3)
    assert list(lm.state_dict()) == list(tm.state_dict()) == ["bias", "weight_orig", "weight_mask"]
    np.testing.assert_array_equal(lm.weight_mask.numpy(), tm.weight_mask.numpy())
    # iterative: the second amount counts among the remaining entries, as torch's PruningContainer
    torch.nn.utils.prune.l1_unstructured(tm, "weight", amount=3)
    prune.l1_unstructured(lm, "weight", amount=3)
    np.testing.assert_array_equal(lm.weight_mask.numpy(), tm.weight_mask.numpy())
    assert prune.is_pruned(lm)
    x = RNG.standard_normal((2, 4)).astype(np.float32)
    _check_forward_and_grads(lm, tm, x)  # the gradient of weight_orig is masked
    prune.remove(lm, "weight"), torch.nn.utils.prune.remove(tm, "weight")
    assert list(lm.state_dict()) == list(tm.state_dict()) == ["bias", "weight"]
    np.testing.assert_array_equal(lm.weight.detach().numpy(), tm.weight.detach().numpy())
    assert not prune.is_pruned(lm)
    m = prune.random_unstructured(lf.nn.Linear(10, 10), "weight", amount=0.25)
    assert int((m.weight_mask == 0).sum()) == 25
    m = prune.identity(lf.nn.Linear(3, 3), "bias")
    assert float(m.bias_mask.sum()) == 3
    with pytest.raises(ValueError, match="float in the range"):
        prune.l1_unstructured(lf.nn.Linear(2, 2), "weight", amount=1.5)
    with pytest.raises(ValueError, match="smaller than the number"):
        prune.l1_unstructured(lf.nn.Linear(2, 2), "weight", amount=5)
    with pytest.raises(ValueError, match="has to be pruned before"):
        prune.remove(lf.nn.Linear(2, 2), "weight")


def test_fusion_vs_torch():
    torch.manual_seed(1)
    conv, bn = torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4)
    with torch.no_grad():
        bn.running_mean.normal_(), bn.running_var.uniform_(0.5, 2), bn.weight.normal_(), bn.bias.normal_()
    conv.eval(), bn.eval()
    lc, lb = lf.nn.Conv2d(3, 4, 3), lf.nn.BatchNorm2d(4)
    lc.load_state_dict(_sd(conv)), lb.load_state_dict(_sd(bn))
    lc.eval(), lb.eval()
    fused = lf.nn.utils.fuse_conv_bn_eval(lc, lb)
    x = RNG.standard_normal((2, 3, 5, 5)).astype(np.float32)
    ref = torch.nn.utils.fuse_conv_bn_eval(conv, bn)(torch.tensor(x)).detach().numpy()
    np.testing.assert_allclose(fused(lf.tensor(x)).detach().numpy(), ref, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(
        fused(lf.tensor(x)).detach().numpy(), lb(lc(lf.tensor(x))).detach().numpy(), rtol=1e-4, atol=1e-5
    )
    assert fused is not lc and isinstance(fused.weight, lf.nn.Parameter)
    lin, bn1 = torch.nn.Linear(3, 4).eval(), torch.nn.BatchNorm1d(4).eval()
    with torch.no_grad():
        bn1.running_mean.normal_(), bn1.running_var.uniform_(0.5, 2)
    ll, lb1 = lf.nn.Linear(3, 4), lf.nn.BatchNorm1d(4)
    ll.load_state_dict(_sd(lin)), lb1.load_state_dict(_sd(bn1))
    ll.eval(), lb1.eval()
    y = lf.nn.utils.fuse_linear_bn_eval(ll, lb1)(lf.tensor(x[:, :, 0, 0]))
    np.testing.assert_allclose(
        y.detach().numpy(),
        torch.nn.utils.fuse_linear_bn_eval(lin, bn1)(torch.tensor(x[:, :, 0, 0])).detach().numpy(),
        rtol=1e-5,
        atol=1e-5,
    )
    with pytest.raises(ValueError, match="Fusion only for eval"):
        lf.nn.utils.fuse_conv_bn_eval(lf.nn.Conv2d(3, 4, 3), lf.nn.BatchNorm2d(4))


def test_parametrize_bad_input():
    with pytest.raises(ValueError, match="does not have a parameter"):
        P.register_parametrization(lf.nn.Linear(2, 2), "nope", _Symmetric())
    with pytest.raises(lf.ShapeError, match="may not change the shape"):
        P.register_parametrization(lf.nn.Linear(2, 3), "weight", _Transpose())
    with pytest.raises(ValueError, match="does not have a parametrization"):
        P.remove_parametrizations(lf.nn.Linear(2, 2), "weight")
    with pytest.raises(ValueError, match="n_power_iterations"):
        LPZ.spectral_norm(lf.nn.Linear(2, 2), n_power_iterations=0)
    with pytest.raises(TypeError, match="lazyflow.nn.Module"):
        P.register_parametrization(lf.nn.Linear(2, 2), "weight", lambda x: x)


def test_hook_forms_and_pruning_under_compile():
    """The legacy hooks and pruning in a compiled forward: same values and gradients as eager, the spectral
    buffers advance in place, and the derived ``weight`` reads concrete values afterwards."""
    x = lf.tensor(RNG.standard_normal((4, 3)).astype(np.float32))
    for make in [
        lambda: lf.nn.utils.weight_norm(lf.nn.Linear(3, 2)),
        lambda: lf.nn.utils.spectral_norm(lf.nn.Linear(3, 2)),
        lambda: prune.l1_unstructured(lf.nn.Linear(3, 2), "weight", 2),
    ]:
        lf.manual_seed(0)
        a = make()
        lf.manual_seed(0)
        b = make()
        ya = a(x)
        ya.sum().backward()
        yb = lf.compile(b)(x)
        yb.sum().backward()
        np.testing.assert_allclose(yb.detach().numpy(), ya.detach().numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(b.weight.detach().numpy(), a.weight.detach().numpy(), rtol=1e-5, atol=1e-6)
        for (k, pa), (_, pb) in zip(a.named_parameters(), b.named_parameters()):
            np.testing.assert_allclose(pb.grad.numpy(), pa.grad.numpy(), rtol=1e-5, atol=1e-6, err_msg=k)
        for (k, ba), (_, bb) in zip(a.named_buffers(), b.named_buffers()):
            np.testing.assert_allclose(bb.numpy(), ba.numpy(), rtol=1e-5, atol=1e-6, err_msg=k)
        assert repr(a).startswith("Linear(")
