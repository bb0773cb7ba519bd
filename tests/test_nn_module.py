"""The Module/Parameter contracts against torch.nn.Module: attribute routing, traversal order, state_dict
layout, load_state_dict (in place, strict errors, numpy/torch values), hooks, conversion, repr, copy/pickle,
and the containers."""

from __future__ import annotations

import copy
import pickle
from collections import OrderedDict

import numpy as np
import pytest
import torch

import lazyflow as lf
import lazyflow.nn as nn


def _build(m, T):
    """The same architecture in torch (m=torch.nn, T=torch.zeros) and lazyflow (m=lf.nn, T=lf.zeros):
    own parameters and buffers, a non-persistent buffer, a shared submodule, a None parameter/module."""

    class Block(m.Module):
        def __init__(self):
            super().__init__()
            self.scale = m.Parameter(T(3))
            self.fc = m.Linear(3, 3)
            self.register_buffer("count", T(1))
            self.register_buffer("cache", T(2), persistent=False)
            self.register_parameter("unused", None)

        def forward(self, x):
            return self.fc(x) * self.scale

    class Net(m.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("step", T(()))
            self.first = Block()
            self.body = m.Sequential(m.Linear(3, 4), m.ReLU(), m.Linear(4, 3))
            self.shared = self.first
            self.heads = m.ModuleDict({"a": m.Linear(3, 2), "b": m.Linear(3, 1)})
            self.extra = m.ParameterList([m.Parameter(T(2)), m.Parameter(T(2, 2))])
            self.nothing = None
            self.bias = m.Parameter(T(3))

        def forward(self, x):
            h = self.body(self.first(x)) + self.bias
            return self.heads["a"](self.shared(h))

    return Net()


@pytest.fixture
def pair():
    return _build(nn, lf.zeros), _build(torch.nn, torch.zeros)


def _names(it):
    return [n for n, _ in it]


def test_traversal_orders_match_torch(pair):
    lm, tm = pair
    assert _names(lm.named_parameters()) == _names(tm.named_parameters())
    assert _names(lm.named_buffers()) == _names(tm.named_buffers())
    assert _names(lm.named_children()) == _names(tm.named_children())
    assert _names(lm.named_modules()) == _names(tm.named_modules())
    assert _names(lm.named_modules(remove_duplicate=False)) == _names(tm.named_modules(remove_duplicate=False))
    assert _names(lm.named_parameters(remove_duplicate=False)) == _names(tm.named_parameters(remove_duplicate=False))
    assert _names(lm.named_parameters(prefix="p", recurse=False)) == _names(
        tm.named_parameters(prefix="p", recurse=False)
    )
    assert _names(lm.first.named_buffers(prefix="x")) == _names(tm.first.named_buffers(prefix="x"))
    assert len(list(lm.parameters())) == len(list(tm.parameters()))
    assert len(list(lm.children())) == len(list(tm.children()))
    assert len(list(lm.modules())) == len(list(tm.modules()))


def test_state_dict_layout_matches_torch(pair):
    lm, tm = pair
    assert [(k, tuple(v.shape)) for k, v in lm.state_dict().items()] == [
        (k, tuple(v.shape)) for k, v in tm.state_dict().items()
    ]
    sd = lm.state_dict()
    assert isinstance(sd, OrderedDict) and "first.cache" not in sd
    assert type(sd["bias"]) is lf.Tensor and not sd["bias"].requires_grad
    kv = lm.state_dict(keep_vars=True)
    assert kv["bias"] is lm.bias and kv["step"] is lm.step
    dest = OrderedDict(old=1)
    out = lm.state_dict(destination=dest, prefix="model.")
    assert out is dest and list(out)[1:] == ["model." + k for k in sd]


def test_setattr_routing_and_registration():
    m = nn.Module()
    m.p = nn.Parameter(lf.ones(2))
    m.sub = nn.Linear(2, 2)
    m.register_buffer("b", lf.zeros(2))
    m.plain = 3
    assert list(m._parameters) == ["p"] and list(m._modules) == ["sub"] and list(m._buffers) == ["b"]
    assert m.plain == 3 and "plain" not in m._parameters
    m.b = lf.ones(2)  # assigning a tensor to a buffer name replaces the buffer
    assert list(m._buffers) == ["b"] and m.b.numpy().tolist() == [1, 1]
    m.p = None
    assert m._parameters["p"] is None and "p" not in m.state_dict()
    with pytest.raises(TypeError, match="parameter 'p'"):
        m.p = lf.ones(2)
    with pytest.raises(TypeError, match="child module 'sub'"):
        m.sub = lf.ones(2)
    m.sub = nn.Parameter(lf.ones(1))  # a parameter takes over the name from the module
    assert "sub" not in m._modules and "sub" in m._parameters
    m.buf2 = nn.Buffer(lf.ones(1), persistent=False)
    assert "buf2" in m._buffers and "buf2" not in m.state_dict()
    del m.buf2
    assert "buf2" not in m._buffers
    with pytest.raises(KeyError, match="already exists"):
        m.register_buffer("plain", lf.ones(1))
    with pytest.raises(KeyError, match="contain"):
        m.register_parameter("a.b", None)
    with pytest.raises(TypeError, match="lazyflow.nn.Parameter or None required"):
        m.register_parameter("q", lf.ones(1))
    with pytest.raises(TypeError, match="is not a Module subclass"):
        m.add_module("x", 3)
    with pytest.raises(AttributeError, match="'Module' object has no attribute 'missing'"):
        _ = m.missing

    class Early(nn.Module):
        def __init__(self):
            self.w = nn.Parameter(lf.ones(1))

    with pytest.raises(AttributeError, match="before Module.__init__"):
        Early()


def test_get_submodule_parameter_buffer(pair):
    lm, _ = pair
    assert lm.get_submodule("body.2") is lm.body[2]
    assert lm.get_submodule("") is lm
    assert lm.get_parameter("first.fc.weight") is lm.first.fc.weight
    assert lm.get_buffer("first.count") is lm.first.count
    with pytest.raises(AttributeError, match="has no submodule `nope`"):
        lm.get_submodule("body.nope")
    with pytest.raises(AttributeError, match=r"did you mean \['first.fc.weight'"):
        lm.get_parameter("first.fc.weigth")
    lm.set_submodule("body.1", nn.Tanh())
    assert isinstance(lm.body[1], nn.Tanh)


def test_load_torch_state_dict_numpy_in_place(pair):
    lm, tm = pair
    torch.manual_seed(0)
    for p in tm.parameters():
        torch.nn.init.normal_(p)
    tm.first.count.fill_(5)
    ids = {n: id(p) for n, p in lm.named_parameters()}
    versions = {n: p._version for n, p in lm.named_parameters()}
    lm.bias.grad = lf.ones(3)
    result = lm.load_state_dict({k: v.numpy() for k, v in tm.state_dict().items()})
    assert result.missing_keys == [] and result.unexpected_keys == []
    assert repr(result) == "<All keys matched successfully>"
    for n, p in lm.named_parameters():
        assert id(p) == ids[n] and p._version > versions[n] and p.requires_grad and type(p) is nn.Parameter
        np.testing.assert_array_equal(p.detach().numpy(), tm.get_parameter(n).detach().numpy())
    assert lm.first.count.numpy().tolist() == [5.0]
    assert lm.bias.grad is not None  # loading leaves gradients alone
    x = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)
    np.testing.assert_allclose(lm(lf.tensor(x)).detach().numpy(), tm(torch.tensor(x)).detach().numpy(), rtol=1e-5)


def test_load_state_dict_accepts_tensors_lists_and_casts_to_parameter_dtype():
    m = nn.Linear(2, 1).double()
    m.load_state_dict({"weight": [[1, 2]], "bias": lf.tensor([0.5], dtype=lf.float32)})
    assert m.weight.dtype is lf.float64 and m.bias.dtype is lf.float64
    assert m.weight.detach().numpy().tolist() == [[1.0, 2.0]] and m.bias.detach().numpy().tolist() == [0.5]


def test_load_state_dict_strict_reports_every_problem_once():
    m = nn.Sequential(nn.Linear(2, 3), nn.Linear(3, 1))
    sd = m.state_dict()
    bad = {"0.weight": sd["0.weight"], "0.bias": lf.zeros(4), "1.wieght": sd["1.weight"], "2.bias": lf.zeros(1)}
    with pytest.raises(lf.CheckpointError) as info:
        m.load_state_dict(bad)
    msg = str(info.value)
    assert msg.startswith("Error(s) in loading state_dict for Sequential:")
    assert 'Missing key(s) in state_dict: "1.weight", "1.bias".' in msg
    # torch's order (each module reports the keys under its own prefix), each with its nearest key
    assert (
        'Unexpected key(s) in state_dict: "2.bias" (did you mean "1.bias"?), "1.wieght" (did you mean "1.weight"?).'
    ) in msg
    assert (
        "size mismatch for 0.bias: copying a param with shape (4,) from checkpoint, the shape in current model is (3,)."
    ) in msg
    assert isinstance(info.value, RuntimeError)


def test_load_state_dict_non_strict_returns_keys_but_still_rejects_shape_mismatch():
    m = nn.Sequential(nn.Linear(2, 3), nn.Linear(3, 1))
    before = m[1].weight.detach().numpy().copy()
    sd = {"0.weight": lf.ones(3, 2), "0.bias": lf.ones(3), "junk": lf.ones(1)}
    res = m.load_state_dict(sd, strict=False)
    assert res.missing_keys == ["1.weight", "1.bias"] and res.unexpected_keys == ["junk"]
    assert res == (["1.weight", "1.bias"], ["junk"])
    np.testing.assert_array_equal(m[0].weight.detach().numpy(), np.ones((3, 2)))
    np.testing.assert_array_equal(m[1].weight.detach().numpy(), before)
    with pytest.raises(lf.CheckpointError, match="size mismatch for 0.bias"):
        m.load_state_dict({"0.bias": lf.ones(2)}, strict=False)


def test_load_state_dict_assign_replaces_objects():
    m = nn.Linear(2, 2)
    old = m.weight
    m.load_state_dict({"weight": lf.ones(2, 2, dtype=lf.float64), "bias": lf.zeros(2)}, assign=True)
    assert m.weight is not old and type(m.weight) is nn.Parameter and m.weight.dtype is lf.float64
    assert m.weight.requires_grad


def test_custom_load_and_save_hooks():
    class Legacy(nn.Linear):
        def _save_to_state_dict(self, destination, prefix, keep_vars):
            super()._save_to_state_dict(destination, prefix, keep_vars)
            destination[prefix + "version"] = lf.tensor(2)

        def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing, unexpected, errors):
            state_dict = dict(state_dict)
            if prefix + "w" in state_dict:  # an old name for the weight
                state_dict[prefix + "weight"] = state_dict.pop(prefix + "w")
            state_dict.pop(prefix + "version", None)
            super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing, unexpected, errors)

    m = nn.Sequential(Legacy(2, 2))
    assert list(m.state_dict()) == ["0.weight", "0.bias", "0.version"]
    m.load_state_dict({"0.w": lf.ones(2, 2), "0.bias": lf.zeros(2), "0.version": lf.tensor(1)})
    np.testing.assert_array_equal(m[0].weight.detach().numpy(), np.ones((2, 2)))


def test_forward_hooks_and_handles():
    m = nn.Linear(2, 2)
    calls = []
    h1 = m.register_forward_pre_hook(lambda mod, args: (args[0] * 0,))
    h2 = m.register_forward_hook(lambda mod, args, out: calls.append("b") or out + 1)
    m.register_forward_hook(lambda mod, args, out: calls.append("a"), prepend=True)
    out = m(lf.ones(1, 2))
    np.testing.assert_allclose(out.detach().numpy(), m.bias.detach().numpy()[None] + 1, rtol=1e-6)
    assert calls == ["a", "b"]
    h1.remove()
    h2.remove()
    h2.remove()  # idempotent
    np.testing.assert_allclose(m(lf.zeros(1, 2)).detach().numpy(), m.bias.detach().numpy()[None], rtol=1e-6)
    with m.register_forward_pre_hook(lambda mod, args, kwargs: ((args[0] + 1,), kwargs), with_kwargs=True):
        expected = np.ones((1, 2), np.float32) @ m.weight.detach().numpy().T + m.bias.detach().numpy()
        np.testing.assert_allclose(m(lf.zeros(1, 2)).detach().numpy(), expected, rtol=1e-6)
    np.testing.assert_allclose(m(lf.zeros(1, 2)).detach().numpy(), m.bias.detach().numpy()[None], rtol=1e-6)
    seen = []
    m.register_forward_hook(lambda mod, args, out: seen.append(out), always_call=True)
    with pytest.raises(lf.ShapeError):
        m(lf.zeros(3))
    assert seen == [None]


def test_zero_grad_requires_grad_and_apply():
    m = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 1))
    m(lf.ones(1, 2)).sum().backward()
    assert all(p.grad is not None for p in m.parameters())
    m.zero_grad(set_to_none=False)
    assert all(np.all(p.grad.numpy() == 0) for p in m.parameters())
    m.zero_grad()
    assert all(p.grad is None for p in m.parameters())
    m.requires_grad_(False)
    assert not any(p.requires_grad for p in m.parameters())
    seen = []
    assert m.apply(lambda mod: seen.append(type(mod).__name__)) is m
    assert seen == ["Linear", "Linear", "Sequential"]


def test_to_and_float_conversions_keep_parameter_identity():
    m = nn.Sequential(nn.Linear(2, 2), nn.Embedding(3, 2))
    m.register_buffer("ids", lf.tensor([1, 2]))
    w = m[0].weight
    m[0].weight.grad = lf.ones(2, 2)
    assert m.double() is m and w.dtype is lf.float64 and m[0].weight is w and w.grad.dtype is lf.float64
    assert m.ids.dtype is lf.int64  # integer buffers are left alone
    m.half()
    assert w.dtype is lf.float16
    m.to(lf.float32)
    assert w.dtype is lf.float32 and m[1].weight.dtype is lf.float32
    m.to("cpu")
    assert m[0].weight is w and w.device.type == "cpu"
    with pytest.raises(lf.DTypeError, match="floating point"):
        m.to(lf.int32)
    out = m[0](lf.ones(1, 2))
    assert out.dtype is lf.float32


def test_module_repr_matches_torch(pair):
    lm, tm = pair
    assert repr(lm) == repr(tm).replace("torch.float32", "lazyflow.float32")
    assert repr(nn.ModuleList([nn.Linear(2, 2)] * 3 + [nn.ReLU()])) == repr(
        torch.nn.ModuleList([torch.nn.Linear(2, 2)] * 3 + [torch.nn.ReLU()])
    )


def _check_clone(clone, original, x, ref):
    assert list(clone.state_dict()) == list(original.state_dict())
    np.testing.assert_allclose(clone(x).detach().numpy(), ref, rtol=1e-6)
    assert all(a is not b for a, b in zip(clone.parameters(), original.parameters()))
    assert all(type(p) is nn.Parameter and p.requires_grad for p in clone.parameters())


def test_deepcopy_preserves_structure_and_sharing(pair):
    lm, _ = pair
    lf.manual_seed(0)
    for p in lm.parameters():
        nn.init.normal_(p)
    x = lf.randn(2, 3)
    clone = copy.deepcopy(lm)
    _check_clone(clone, lm, x, lm(x).detach().numpy())
    assert clone.shared is clone.first  # a shared submodule stays shared
    assert "cache" in clone.first._buffers and "cache" not in clone.first.state_dict()


def test_pickle_round_trip():
    lin = nn.Linear(3, 3)
    m = nn.Sequential(lin, nn.GELU(), lin, nn.Dropout(0.2)).eval()
    m.register_buffer("cache", lf.ones(2), persistent=False)
    x = lf.randn(2, 3)
    clone = pickle.loads(pickle.dumps(m))
    _check_clone(clone, m, x, m(x).detach().numpy())
    assert clone[0] is clone[2] and not clone.training
    assert "cache" in clone._buffers and "cache" not in clone.state_dict()


def test_parameter_basics():
    p = nn.Parameter(lf.tensor([1.0, 2.0]))
    assert isinstance(p, lf.Tensor) and p.requires_grad and p.is_leaf
    assert repr(p) == "Parameter containing:\ntensor([1., 2.], requires_grad=True)"
    assert repr(nn.Parameter(lf.ones(1), requires_grad=False)) == "Parameter containing:\ntensor([1.])"
    q = copy.deepcopy(p)
    assert type(q) is nn.Parameter and q is not p and q.requires_grad
    r = pickle.loads(pickle.dumps(p))
    assert type(r) is nn.Parameter and r.detach().numpy().tolist() == [1.0, 2.0]
    assert nn.Parameter().shape == (0,)
    with pytest.raises(lf.DTypeError):
        nn.Parameter(lf.tensor([1, 2]))
    assert type(p * 2) is lf.Tensor
    b = nn.Buffer(lf.ones(2), persistent=False)
    assert not b.persistent and not copy.deepcopy(b).persistent and not pickle.loads(pickle.dumps(b)).persistent


def test_sequential_indexing_slicing_append():
    a, b, c = nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1)
    s = nn.Sequential(a, b)
    assert s.append(c) is s and len(s) == 3 and list(s) == [a, b, c]
    assert s[0] is a and s[-1] is c
    sub = s[1:]
    assert type(sub) is nn.Sequential and list(sub) == [b, c] and list(sub._modules) == ["1", "2"]
    with pytest.raises(lf.IndexOutOfRangeError):
        s[3]
    del s[1]
    assert list(s._modules) == ["0", "1"] and list(s) == [a, c]
    s.insert(1, b)
    assert list(s) == [a, b, c]
    named = nn.Sequential(OrderedDict([("enc", a), ("act", b)]))
    assert list(named.state_dict()) == ["enc.weight", "enc.bias"] and named.act is b
    x = lf.ones(4, 2)
    np.testing.assert_allclose(s(x).detach().numpy(), c(b(a(x))).detach().numpy(), rtol=1e-6)


def test_module_list_and_dict_and_parameter_containers():
    ml = nn.ModuleList([nn.Linear(1, 1)])
    ml.append(nn.ReLU())
    ml.extend([nn.Tanh()])
    ml += [nn.Sigmoid()]
    assert len(ml) == 4 and isinstance(ml[-1], nn.Sigmoid) and len(ml[1:3]) == 2
    ml.insert(0, nn.Identity())
    assert isinstance(ml[0], nn.Identity) and isinstance(ml[1], nn.Linear)
    md = nn.ModuleDict({"x": nn.Linear(1, 1)})
    md["y"] = nn.ReLU()
    md.update([("z", nn.Tanh())])
    assert list(md.keys()) == ["x", "y", "z"] and "y" in md and len(md) == 3
    assert isinstance(md.pop("y"), nn.ReLU) and list(md) == ["x", "z"]
    pl = nn.ParameterList([lf.ones(2)])
    pl.append(nn.Parameter(lf.zeros(3)))
    assert len(pl) == 2 and type(pl[0]) is nn.Parameter and pl[1].shape == (3,)
    assert list(pl.state_dict()) == ["0", "1"]
    pd = nn.ParameterDict({"a": lf.ones(1)})
    pd["b"] = lf.zeros(2)
    assert list(pd.keys()) == ["a", "b"] and type(pd["b"]) is nn.Parameter
    assert list(dict(pd.named_parameters())) == ["a", "b"]
    tl = torch.nn.ParameterList([torch.nn.Parameter(torch.ones(2)), torch.nn.Parameter(torch.zeros(3))])
    assert repr(pl) == repr(tl).replace("torch.float32", "lazyflow.float32")


def test_module_state_is_only_in_parameters_and_buffers():
    """Graph mode relies on this: every tensor a layer holds is a registered Parameter or buffer."""
    from lazyflow.nn import modules

    layers = [
        nn.Linear(2, 2),
        nn.Bilinear(2, 2, 2),
        nn.Embedding(3, 2, padding_idx=0),
        nn.CrossEntropyLoss(weight=lf.ones(3)),
        nn.BCEWithLogitsLoss(pos_weight=lf.ones(2)),
    ]
    for layer in layers:
        for k, v in vars(layer).items():
            assert not isinstance(v, lf.Tensor), f"{type(layer).__name__}.{k} is a plain tensor attribute"
    assert set(modules.__all__) >= {"Linear", "Sequential", "CrossEntropyLoss", "Embedding", "Dropout"}


def test_load_state_dict_and_conversion_keep_a_compiled_wrapper_valid():
    lf.manual_seed(0)
    m = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    cm = lf.compile(m)
    x = lf.randn(5, 3)
    before = cm(x).detach().numpy()
    other = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    m.load_state_dict(other.state_dict())
    after = cm(x).detach().numpy()
    assert not np.allclose(before, after)
    np.testing.assert_allclose(after, other(x).detach().numpy(), rtol=1e-6)
    assert list(cm.state_dict()) == list(m.state_dict())
    m.double()
    out = cm(x.double())
    assert out.dtype is lf.float64
    np.testing.assert_allclose(out.detach().numpy(), other.double()(x.double()).detach().numpy(), rtol=1e-12)


def test_load_state_dict_never_changes_the_callers_mapping():
    """An old checkpoint without num_batches_tracked: torch fills it in its own copy; so does lazyflow."""
    import torch

    t_bn, l_bn = torch.nn.BatchNorm1d(3), lf.nn.BatchNorm1d(3)
    t_sd = {k: v for k, v in t_bn.state_dict().items() if k != "num_batches_tracked"}
    l_sd = {k: v.numpy() for k, v in t_sd.items()}
    t_bn.load_state_dict(t_sd)
    l_bn.load_state_dict(l_sd)
    assert sorted(l_sd) == sorted(t_sd) == ["bias", "running_mean", "running_var", "weight"]
