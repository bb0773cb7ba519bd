"""Single-process checks on 8 virtual CPU devices (run by tests/test_distributed.py with XLA_FLAGS set).

Placement API, eager ops on sharded tensors (vs numpy, gradients vs jax.grad), the eager op cache keyed by
placement, and Graph training under ``data_parallel`` / ``shard_parameters`` against a plain-JAX reference of
the same model and torch's SGD-momentum / Adam update rules (and against single-device lazyflow training).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from _checks import check, main
from jax.sharding import NamedSharding, SingleDeviceSharding
from jax.sharding import PartitionSpec as P

import lazyflow as lf
from lazyflow import nn
from lazyflow._core.errors import DeviceError, ShapeError

F = nn.functional
D = lf.distributed
RNG = np.random.default_rng(0)
X = RNG.standard_normal((8, 6)).astype(np.float32)
W = RNG.standard_normal((6, 4)).astype(np.float32)


def _raises(exc, fn, *words):
    try:
        fn()
    except exc as e:
        for w in words:
            assert w in str(e), (w, str(e))
        return
    raise AssertionError(f"{fn} did not raise {exc.__name__}")


# ------------------------------------------------------------------------------------------ placement
@check
def mesh_and_errors():
    assert len(jax.devices()) == 8
    m = D.Mesh((2, 4), ("data", "model"))
    assert isinstance(m, jax.sharding.Mesh) and dict(m.shape) == {"data": 2, "model": 4}
    assert [d.id for d in m.devices.flat] == list(range(8))
    assert dict(D.Mesh(8, "data").shape) == {"data": 8}
    _raises(DeviceError, lambda: D.Mesh((16,), ("data",)), "needs 16 devices", "only 8")
    _raises(DeviceError, lambda: D.Mesh((3, 3), ("a", "b")), "needs 9 devices")
    _raises(ShapeError, lambda: D.Mesh((2, 4), ("data",)), "2 dimensions")
    _raises(ShapeError, lambda: D.Mesh((2, 2), ("a", "a")), "distinct")
    _raises(ShapeError, lambda: D.Mesh((0,), ("a",)), "positive")


@check
def shard_replicate_to():
    mesh = D.Mesh((2, 4), ("data", "model"))
    x = lf.tensor(X)
    assert not x.is_sharded and isinstance(x.sharding, SingleDeviceSharding)
    s = D.shard(x, mesh, ("data", None))
    assert s.is_sharded and s.sharding == NamedSharding(mesh, P("data", None))
    assert s.shape == (8, 6) and s.dtype == lf.float32
    np.testing.assert_array_equal(s.numpy(), X)
    for sh in s.jax().addressable_shards:  # every device holds exactly its numpy slice
        np.testing.assert_array_equal(np.asarray(sh.data), X[sh.index])
        assert sh.data.shape == (4, 6)
    s2 = D.shard(x, mesh, P(("data", "model")))  # dim 0 over both axes: 8 pieces of 1 row
    assert {sh.data.shape for sh in s2.jax().addressable_shards} == {(1, 6)}
    s3 = D.shard(x, mesh, (None, "data"))
    assert {sh.data.shape for sh in s3.jax().addressable_shards} == {(8, 3)}
    r = D.replicate(x, mesh)
    assert r.is_sharded and r.sharding.spec == P() and len(r.sharding.device_set) == 8
    for sh in r.jax().addressable_shards:
        np.testing.assert_array_equal(np.asarray(sh.data), X)
    t = x.to(NamedSharding(mesh, P(None, "data")))  # Tensor.to(sharding)
    assert t.sharding.spec == P(None, "data")
    np.testing.assert_array_equal(t.numpy(), X)
    back = s.to(SingleDeviceSharding(jax.devices()[3]))
    assert not back.is_sharded and back.sharding.device_set == {jax.devices()[3]}
    np.testing.assert_array_equal(back.numpy(), X)
    jm = jax.sharding.Mesh(np.array(jax.devices()[:4]), ("d",))  # a plain jax Mesh works as well
    assert D.shard(x, jm, "d").sharding == NamedSharding(jm, P("d"))


@check
def shard_bad_specs():
    mesh = D.Mesh((2, 4), ("data", "model"))
    x = lf.tensor(X)  # (8, 6)
    _raises(ShapeError, lambda: D.shard(x, mesh, (None, "model")), "dim 1 of size 6", "not divisible")
    _raises(ShapeError, lambda: D.shard(x, mesh, ("data", None, None)), "3 entries", "2-d")
    _raises(ShapeError, lambda: D.shard(x, mesh, ("batch",)), "'batch'", "('data', 'model')")
    _raises(ShapeError, lambda: D.shard(x, mesh, ("data", "data")), "more than one dimension")
    _raises(TypeError, lambda: D.shard(X, mesh, ("data",)), "lazyflow Tensor")


@check
def shard_passes_gradients():
    mesh = D.Mesh((8,), ("data",))
    x = lf.tensor(X, requires_grad=True)
    w = lf.tensor(W, requires_grad=True)
    loss = (D.shard(x, mesh, ("data", None)) @ D.replicate(w, mesh)).tanh().sum()
    loss.backward()
    gx, gw = jax.grad(lambda a, b: jnp.tanh(a @ b).sum(), (0, 1))(X, W)
    np.testing.assert_allclose(x.grad.numpy(), gx, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(w.grad.numpy(), gw, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(loss.item(), np.tanh(X @ W).sum(), rtol=1e-5)


@check
def one_process_group_calls():
    assert D.get_rank() == 0 and D.get_world_size() == 1 and not D.is_initialized()
    D.barrier()
    objs = ["a", 1]
    D.broadcast_object_list(objs)
    assert objs == ["a", 1]
    slots = [None]
    D.all_gather_object(slots, {"x": 1})
    assert slots == [{"x": 1}]
    _raises(ValueError, lambda: D.all_gather_object([None, None], 1), "2 slots for 1 processes")
    _raises(ValueError, lambda: D.broadcast_object_list(objs, src=1), "src 1")
    _raises(
        DeviceError,
        lambda: D.init_process_group(coordinator_address="127.0.0.1:1", num_processes=2, process_id=0),
        "before JAX starts its backend",
    )


# ------------------------------------------------------------------------------------------ eager ops
@check
def eager_ops_on_sharded_tensors():
    mesh = D.Mesh((2, 4), ("data", "model"))
    x = D.shard(lf.tensor(X), mesh, ("data", None))
    w = D.shard(lf.tensor(W), mesh, (None, "model"))
    b = D.replicate(lf.tensor(W[0]), mesh)
    y = x @ w + b
    np.testing.assert_allclose(y.numpy(), X @ W + W[0], rtol=1e-5, atol=1e-6)
    assert y.is_sharded  # the result lives on the mesh (JAX propagated the placement)
    np.testing.assert_allclose(F.relu(y).sum(dim=0).numpy(), np.maximum(X @ W + W[0], 0).sum(0), rtol=1e-5, atol=1e-5)
    sm = F.softmax(y, dim=1).numpy()
    ref = np.exp(X @ W + W[0])
    np.testing.assert_allclose(sm, ref / ref.sum(1, keepdims=True), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose((x * 2 - 1).mean().item(), (X * 2 - 1).mean(), rtol=1e-5)
    np.testing.assert_allclose(x.t().numpy(), X.T)
    np.testing.assert_allclose(x[2:6, ::2].numpy(), X[2:6, ::2])
    z = x.clone()
    z[0] = 5.0  # in place on a sharded tensor
    ref = X.copy()
    ref[0] = 5.0
    np.testing.assert_array_equal(z.numpy(), ref)
    np.testing.assert_array_equal(x.numpy(), X)
    c = lf.cat([x, x], dim=0)
    np.testing.assert_array_equal(c.numpy(), np.concatenate([X, X]))


@check
def op_cache_key_includes_placement():
    mesh = D.Mesh((8,), ("data",))
    a, b = lf.tensor(X), lf.tensor(X + 1)
    sa, sb = D.shard(a, mesh, ("data", None)), D.shard(b, mesh, ("data", None))
    ra = D.replicate(a, mesh)
    lf.eager.clear_cache()

    def info():
        i = lf.eager.cache_info()
        return i.misses, i.hits, i.currsize

    (a * b).sum()
    m0, h0, n0 = info()
    (sa * sb).sum()  # same shapes and dtypes, other placement: new entries, not a hit on the unsharded kernels
    m1, h1, n1 = info()
    assert m1 - m0 == 2 and n1 - n0 == 2 and h1 == h0, (m0, h0, n0, m1, h1, n1)
    (ra * ra).sum()  # replicated is a third placement
    m2, h2, n2 = info()
    assert m2 - m1 == 2 and n2 - n1 == 2, (m1, n1, m2, n2)
    out = (sa * sb).sum()  # repeated: hits only
    m3, h3, n3 = info()
    assert m3 == m2 and n3 == n2 and h3 - h2 == 2, (m2, h2, m3, h3)
    np.testing.assert_allclose(out.item(), (X * (X + 1)).sum(), rtol=1e-5)
    (a * b).sum()
    assert info()[0] == m3  # the unsharded entries are still there


@check
def compiled_function_on_sharded_inputs():
    mesh = D.Mesh((8,), ("data",))

    @lf.compile
    def f(x, w):
        return F.relu(x @ w).sum(dim=1)

    x = D.shard(lf.tensor(X), mesh, ("data", None))
    w = D.replicate(lf.tensor(W), mesh)
    np.testing.assert_allclose(f(x, w).numpy(), np.maximum(X @ W, 0).sum(1), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(f(lf.tensor(X), lf.tensor(W)).numpy(), np.maximum(X @ W, 0).sum(1), rtol=1e-5, atol=1e-5)


# ------------------------------------------------------------------------------------------ graph training
B, STEPS = 32, 10
DATA = [(RNG.standard_normal((B, 16)).astype(np.float32), RNG.integers(0, 4, B)) for _ in range(STEPS)]
KEYS = ["0.weight", "0.bias", "2.weight", "2.bias"]


def _model():
    lf.manual_seed(0)
    return nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))


class Step(nn.Graph):
    def __init__(self, m, o):
        super().__init__()
        self.m = m
        self.add_optimizer(o)

    def build(self, x, y):
        loss = F.cross_entropy(self.m(x), y)
        loss.backward()
        return loss


def _ref_loss(p, x, y):
    h = jnp.maximum(x @ p["0.weight"].T + p["0.bias"], 0)
    z = h @ p["2.weight"].T + p["2.bias"]
    return -jnp.mean(jax.nn.log_softmax(z)[jnp.arange(len(y)), y])


def _reference(opt: str, init: dict):
    """Plain JAX: the model, its gradients by jax.grad, and torch's SGD(momentum, weight_decay) / Adam rules."""
    p = {k: jnp.asarray(v) for k, v in init.items()}
    st = {k: None for k in p}
    m = {k: jnp.zeros_like(v) for k, v in p.items()}
    v2 = {k: jnp.zeros_like(v) for k, v in p.items()}
    losses = []
    for t, (x, y) in enumerate(DATA, 1):
        loss, g = jax.value_and_grad(_ref_loss)(p, x, y)
        losses.append(float(loss))
        for k in p:
            if opt == "sgd":
                gk = g[k] + 1e-3 * p[k]
                st[k] = gk if st[k] is None else 0.9 * st[k] + gk
                p[k] = p[k] - 0.05 * st[k]
            else:
                m[k] = 0.9 * m[k] + 0.1 * g[k]
                v2[k] = 0.999 * v2[k] + 0.001 * g[k] ** 2
                denom = jnp.sqrt(v2[k]) / np.sqrt(1 - 0.999**t) + 1e-8
                p[k] = p[k] - (1e-2 / (1 - 0.9**t)) * m[k] / denom
    return np.array(losses), {k: np.asarray(v) for k, v in p.items()}


def _train(opt: str, mode: str, mesh=None, data_axis="data", param_axis="data"):
    m = _model()
    o = (
        lf.optim.SGD(m.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-3)
        if opt == "sgd"
        else lf.optim.Adam(m.parameters(), lr=1e-2)
    )
    st = Step(m, o)
    if mode in ("dp", "fsdp"):
        st.config.data_parallel(mesh, data_axis)
    if mode == "fsdp":
        st.config.shard_parameters(mesh, param_axis)
    losses = [st(lf.tensor(x), lf.tensor(y)).item() for x, y in DATA]
    return np.array(losses), m, o, st


_INIT = {k: v.numpy() for k, v in _model().state_dict().items()}
_REF = {opt: _reference(opt, _INIT) for opt in ("sgd", "adam")}
_SINGLE_RUNS = {opt: _train(opt, "single") for opt in ("sgd", "adam")}
_SINGLE = {opt: r[0] for opt, r in _SINGLE_RUNS.items()}
# compiles of single-device training (one each: SGD-momentum starts from a zero buffer)
_COMPILES = {opt: r[3].cache_info().compiles for opt, r in _SINGLE_RUNS.items()}


def _matches(opt, losses, m):
    ref_losses, ref_params = _REF[opt]
    rel = np.abs(losses - ref_losses) / np.abs(ref_losses)
    assert rel.max() <= 1e-5, (opt, rel)
    rel1 = np.abs(losses - _SINGLE[opt]) / np.abs(_SINGLE[opt])
    assert rel1.max() <= 1e-5, (opt, rel1)
    sd = m.state_dict()
    assert all(not np.allclose(sd[k].numpy(), _INIT[k]) for k in KEYS)  # it trained: every parameter moved
    assert list(sd) == KEYS and [tuple(sd[k].shape) for k in KEYS] == [tuple(_INIT[k].shape) for k in KEYS]
    for k in KEYS:
        np.testing.assert_allclose(sd[k].numpy(), ref_params[k], rtol=1e-5, atol=2e-6, err_msg=k)
    return sd


@check
def single_device_matches_reference():
    assert _COMPILES == {"sgd": 1, "adam": 1}, _COMPILES  # SGD-momentum starts with a zero buffer: one program
    for opt in ("sgd", "adam"):
        ref = _REF[opt][0]
        rel = np.abs(_SINGLE[opt] - ref) / np.abs(ref)
        assert rel.max() <= 1e-5, (opt, rel)


@check
def data_parallel_matches_single_device():
    mesh = D.Mesh((8,), ("data",))
    for opt in ("sgd", "adam"):
        losses, m, o, st = _train(opt, "dp", mesh)
        sd = _matches(opt, losses, m)
        assert st.cache_info().compiles == st.cache_info().traces == _COMPILES[opt], st.cache_info()
        for k in KEYS:  # parameters replicated on the mesh, in the eager layout
            assert sd[k].sharding == NamedSharding(mesh, P()), (k, sd[k].sharding)
        for s in o.state.values():
            for v in s.values():
                if isinstance(v, lf.Tensor) and v.ndim:
                    assert v.sharding.spec == P()


@check
def shard_parameters_matches_single_device():
    mesh = D.Mesh((8,), ("data",))
    specs = {"0.weight": P("data", None), "0.bias": P("data"), "2.weight": P(None, "data"), "2.bias": P()}
    for opt in ("sgd", "adam"):
        losses, m, o, st = _train(opt, "fsdp", mesh)
        sd = _matches(opt, losses, m)
        assert st.cache_info().compiles == _COMPILES[opt], st.cache_info()
        for k in KEYS:
            assert sd[k].sharding == NamedSharding(mesh, specs[k]), (k, sd[k].sharding)
        assert sd["0.weight"].is_sharded
        shapes = {sh.data.shape for sh in sd["0.weight"].jax().addressable_shards}
        assert shapes == {(4, 16)}, shapes  # each device holds 1/8 of the weight, not a copy
        names = ["momentum_buffer"] if opt == "sgd" else ["exp_avg", "exp_avg_sq"]
        params = dict(m.named_parameters())
        for k in KEYS:  # optimizer state sharded like its parameter
            for n in names:
                assert o.state[params[k]][n].sharding == NamedSharding(mesh, specs[k]), (opt, k, n)
        osd = o.state_dict()
        eager_o = (
            lf.optim.SGD(_model().parameters(), lr=0.05, momentum=0.9)
            if opt == "sgd"
            else lf.optim.Adam(_model().parameters(), lr=1e-2)
        )
        for p in eager_o.param_groups[0]["params"]:
            p.grad = lf.zeros_like(p)
        eager_o.step()
        esd = eager_o.state_dict()
        assert sorted(osd["state"]) == sorted(esd["state"]) == [0, 1, 2, 3]
        for i in range(4):
            assert sorted(osd["state"][i]) == sorted(esd["state"][i]), (osd["state"][i].keys(), esd["state"][i])
            for n in names:
                assert osd["state"][i][n].shape == esd["state"][i][n].shape


@check
def data_and_parameter_axes_on_a_2d_mesh():
    mesh = D.Mesh((2, 4), ("data", "model"))  # batch over 2, parameters split over 4
    losses, m, o, st = _train("adam", "fsdp", mesh, data_axis="data", param_axis="model")
    sd = _matches("adam", losses, m)
    assert sd["0.weight"].sharding == NamedSharding(mesh, P("model", None))
    assert {sh.data.shape for sh in sd["0.weight"].jax().addressable_shards} == {(8, 16)}
    assert sd["2.weight"].sharding == NamedSharding(mesh, P("model", None))  # 4 rows over 4 devices


@check
def eager_use_after_sharded_training():
    """After FSDP training the model (sharded parameters) still runs eagerly on an ordinary batch, an eager
    optimizer step works on it, and load_state_dict into an unsharded model gives the same outputs."""
    mesh = D.Mesh((8,), ("data",))
    _, m, o, _ = _train("adam", "fsdp", mesh)
    ref_params = {k: jnp.asarray(v) for k, v in _REF["adam"][1].items()}
    x, y = DATA[0]
    loss = F.cross_entropy(m(lf.tensor(x)), lf.tensor(y))
    np.testing.assert_allclose(loss.item(), float(_ref_loss(ref_params, x, y)), rtol=1e-5)
    loss.backward()
    g = jax.grad(_ref_loss)(ref_params, x, y)
    np.testing.assert_allclose(m[0].weight.grad.numpy(), g["0.weight"], rtol=1e-4, atol=1e-6)
    o.step()
    assert m[0].weight.sharding.spec == P("data", None)
    plain = _model()
    plain.load_state_dict(m.state_dict())
    assert not plain[0].weight.is_sharded
    np.testing.assert_allclose(
        plain(lf.tensor(x)).detach().numpy(), m(lf.tensor(x)).detach().numpy(), rtol=1e-5, atol=1e-6
    )


if __name__ == "__main__":
    main()
