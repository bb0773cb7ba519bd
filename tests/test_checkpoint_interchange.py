"""One checkpoint for every mode: eager modules, ``lf.compile(module)`` and ``lf.nn.Graph`` training steps save
the same state dicts, any checkpoint loads into any of them, and an optimizer saved after graph steps resumes
eager training (and the reverse) on the trajectory of an uninterrupted run -- checked against torch running the
same model, data and optimizer without interruption."""

import collections

import numpy as np
import pytest
import torch

import lazyflow as lf
from lazyflow import nn
from lazyflow.nn import functional as F

N_BEFORE, N_AFTER = 4, 4
RNG = np.random.default_rng(0)
X = RNG.standard_normal((32, 6)).astype(np.float32)
Y = RNG.integers(0, 3, 32).astype(np.int64)


def make(nn_mod):
    return nn_mod.Sequential(nn_mod.Linear(6, 16), nn_mod.BatchNorm1d(16), nn_mod.ReLU(), nn_mod.Linear(16, 3))


def make_opt(kind, params, mod):
    if kind == "sgd":
        return mod.SGD(params, lr=0.1, momentum=0.9, weight_decay=1e-3)
    return mod.Adam(params, lr=0.01, betas=(0.8, 0.95), weight_decay=1e-3)


class Step(nn.Graph):
    def __init__(self, model, opt):
        super().__init__()
        self.model = model
        self.add_optimizer(opt)

    def build(self, x, y):
        loss = F.cross_entropy(self.model(x), y)
        loss.backward()
        return loss


def train(mode, model, opt, n):
    x, y = lf.tensor(X), lf.tensor(Y)
    losses = []
    if mode == "graph":
        step = Step(model, opt)
        return [step(x, y).item() for _ in range(n)]
    fwd = lf.compile(model) if mode == "compiled" else model
    for _ in range(n):
        loss = F.cross_entropy(fwd(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    return losses


def torch_reference(init_state, kind, n):
    """The uninterrupted run in torch from the same initial state: final state dict and losses."""
    model = make(torch.nn)
    model.load_state_dict({k: torch.tensor(np.asarray(v)) for k, v in init_state.items()})
    opt = make_opt(kind, model.parameters(), torch.optim)
    x, y = torch.tensor(X), torch.tensor(Y)
    losses = []
    for _ in range(n):
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return {k: v.detach().numpy() for k, v in model.state_dict().items()}, losses


def fresh(init_state, kind):
    model = make(nn)
    model.load_state_dict({k: lf.tensor(np.asarray(v)) for k, v in init_state.items()})
    return model, make_opt(kind, model.parameters(), lf.optim)


def _np_state(sd):
    return {k: np.asarray(v.numpy()) for k, v in sd.items()}


@pytest.mark.parametrize(
    "first,then,kind",
    [
        ("graph", "eager", "sgd"),
        ("eager", "graph", "adam"),
        ("compiled", "graph", "sgd"),
        ("graph", "compiled", "adam"),
    ],
)
def test_resumed_training_continues_the_uninterrupted_trajectory(tmp_path, first, then, kind):
    init = _np_state(make(nn).state_dict())
    ref_state, ref_losses = torch_reference(init, kind, N_BEFORE + N_AFTER)

    model, opt = fresh(init, kind)
    losses = train(first, model, opt, N_BEFORE)
    lf.save({"model": model.state_dict(), "optim": opt.state_dict(), "epoch": 1}, tmp_path / "ckpt")
    del model, opt

    ck = lf.load(tmp_path / "ckpt")
    model2, opt2 = fresh(init, kind)  # different objects, re-initialised: everything must come from the file
    model2.load_state_dict(ck["model"])
    opt2.load_state_dict(ck["optim"])
    losses += train(then, model2, opt2, N_AFTER)

    np.testing.assert_allclose(losses, ref_losses, rtol=2e-4, atol=1e-5)
    got = _np_state(model2.state_dict())
    assert list(got) == list(ref_state)
    for k, ref in ref_state.items():
        np.testing.assert_allclose(got[k], ref, rtol=2e-4, atol=2e-5, err_msg=k)


def test_every_mode_saves_the_same_layout_and_loads_into_every_other(tmp_path):
    init = _np_state(make(nn).state_dict())
    paths = {}
    for mode in ("eager", "compiled", "graph"):
        model, opt = fresh(init, "sgd")
        train(mode, model, opt, 2)
        sd = (lf.compile(model) if mode == "compiled" else model).state_dict()
        paths[mode] = tmp_path / mode
        lf.save({"model": sd, "optim": opt.state_dict()}, paths[mode])
    listings = {
        m: [(i.key, i.shape, i.dtype, i.kind, i.storage) for i in lf.checkpoint.inspect(p).values()]
        for m, p in paths.items()
    }
    assert listings["eager"] == listings["compiled"] == listings["graph"]
    keys = [k for k, *_ in listings["eager"]]
    assert "model.1.running_mean" in keys and "optim.state.0.momentum_buffer" in keys
    assert not any(k.startswith(("model._orig_mod", "model.module.")) for k in keys)

    for src, p in paths.items():
        ck = lf.load(p)
        assert type(ck["model"]) is collections.OrderedDict
        for dst in ("eager", "compiled", "graph"):
            model, opt = fresh(init, "sgd")
            target = lf.compile(model) if dst == "compiled" else model
            result = target.load_state_dict(ck["model"])
            assert list(result.missing_keys) == [] and list(result.unexpected_keys) == []
            opt.load_state_dict(ck["optim"])
            for k, v in model.state_dict().items():
                np.testing.assert_array_equal(v.numpy(), ck["model"][k].numpy(), err_msg=f"{src}->{dst}:{k}")
            for i, st in opt.state_dict()["state"].items():
                np.testing.assert_array_equal(
                    st["momentum_buffer"].numpy(), ck["optim"]["state"][i]["momentum_buffer"].numpy()
                )
