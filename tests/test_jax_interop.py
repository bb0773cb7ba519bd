"""lf.utils.jax (to_jax, from_jax, wrap) and DLPack, against jax.grad of the plain JAX functions, numpy and torch."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
import torch
from flax import nnx

import lazyflow as lf
from lazyflow.eager import cache as eager_cache
from lazyflow.utils.jax import from_jax, to_jax, wrap


def _ptr(a) -> int:
    return a.unsafe_buffer_pointer()


# -- to_jax / from_jax ------------------------------------------------------------------------------------------------


def test_to_jax_hands_out_the_tensors_buffer_without_a_copy():
    t = lf.arange(6.0).reshape(2, 3)
    tree = to_jax({"t": t, "n": 3, "s": "x", "l": [t]})
    assert isinstance(tree["t"], jax.Array) and tree["n"] == 3 and tree["s"] == "x"
    assert _ptr(tree["t"]) == _ptr(t.jax()) == _ptr(tree["l"][0])


def test_to_jax_array_keeps_its_value_after_the_tensor_changes_in_place():
    t = lf.zeros(4)
    a = to_jax(t)
    t.add_(1)
    np.testing.assert_array_equal(np.asarray(a), np.zeros(4))  # not deleted (no donation), not changed
    np.testing.assert_array_equal(t.numpy(), np.ones(4))


def test_from_jax_wraps_jax_arrays_without_a_copy():
    a = jnp.arange(5.0)
    t = from_jax(a)
    assert isinstance(t, lf.Tensor) and _ptr(t.jax()) == _ptr(a)
    tree = from_jax({"a": a, "k": (a, None, 2)})
    assert _ptr(tree["k"][0].jax()) == _ptr(a) and tree["k"][1] is None and tree["k"][2] == 2


def test_from_jax_copies_numpy_memory():
    src = np.arange(4, dtype=np.float32)
    t = from_jax(src)
    src[0] = 100.0  # the caller still owns src
    np.testing.assert_array_equal(t.numpy(), [0, 1, 2, 3])


# -- wrap ------------------------------------------------------------------------------------------------------------


def _jfn(x, w, *, power=2):
    return jnp.sin(x @ w) ** power + jnp.sum(w)


def test_wrap_forward_and_gradients_match_jax_grad():
    rs = np.random.RandomState(0)
    x, w = rs.randn(3, 4).astype(np.float32), rs.randn(4, 2).astype(np.float32)
    f = wrap(_jfn)
    lx, lw = lf.tensor(x, requires_grad=True), lf.tensor(w, requires_grad=True)
    out = f(lx, lw, power=3)
    np.testing.assert_allclose(out.detach().numpy(), np.asarray(_jfn(x, w, power=3)), rtol=1e-5)
    (out * lf.tensor(np.arange(6.0, dtype=np.float32).reshape(3, 2))).sum().backward()
    ref = jax.grad(lambda x, w: (_jfn(x, w, power=3) * jnp.arange(6.0).reshape(3, 2)).sum(), argnums=(0, 1))(x, w)
    np.testing.assert_allclose(lx.grad.numpy(), np.asarray(ref[0]), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(lw.grad.numpy(), np.asarray(ref[1]), rtol=1e-5, atol=1e-6)


def test_wrap_pytrees_in_and_out_and_integer_operands():
    def fn(p, idx):
        h = p["a"][idx] * p["b"]
        return {"h": h, "n": idx * 2}

    f = wrap(fn)
    a = lf.tensor([1.0, 2.0, 3.0], requires_grad=True)
    b = lf.tensor(5.0, requires_grad=True)
    out = f({"a": a, "b": b}, lf.tensor([2, 0]))
    assert set(out) == {"h", "n"} and out["n"].dtype == lf.int64 and not out["n"].requires_grad
    np.testing.assert_allclose(out["h"].detach().numpy(), [15.0, 5.0])
    out["h"].sum().backward()
    ref = jax.grad(lambda p: fn(p, jnp.array([2, 0]))["h"].sum())({"a": jnp.array([1.0, 2, 3]), "b": jnp.array(5.0)})
    np.testing.assert_allclose(a.grad.numpy(), np.asarray(ref["a"]))
    np.testing.assert_allclose(b.grad.numpy(), np.asarray(ref["b"]))


def test_wrap_is_one_cached_kernel_per_signature():
    traces = []

    def fn(x):
        traces.append(x.shape)
        return jnp.tanh(x) * 2

    f = wrap(fn)
    misses = eager_cache.stats.misses
    for _ in range(3):
        f(lf.ones(3))
    assert len(traces) == 1 and eager_cache.stats.misses == misses + 1
    f(lf.ones(4))
    f(lf.ones(4))
    assert len(traces) == 2


def test_wrap_double_backward_matches_jax():
    f = wrap(jnp.sin)
    x = lf.tensor([0.3, 1.2], requires_grad=True)
    (g,) = lf.autograd.grad(f(x).sum(), [x], create_graph=True)
    g.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), -np.sin([0.3, 1.2]), rtol=1e-6)


def test_wrap_under_lf_compile_matches_jax_grad():
    f = wrap(_jfn)
    rs = np.random.RandomState(1)
    x, w = rs.randn(3, 4).astype(np.float32), rs.randn(4, 2).astype(np.float32)
    step = lf.compile(lambda x, w: f(x, w).sum())
    lw = lf.tensor(w, requires_grad=True)
    loss = step(lf.tensor(x), lw)
    loss.backward()
    np.testing.assert_allclose(loss.item(), float(_jfn(x, w).sum()), rtol=1e-5)
    np.testing.assert_allclose(lw.grad.numpy(), np.asarray(jax.grad(lambda w: _jfn(x, w).sum())(w)), rtol=1e-5)
    step(lf.tensor(x), lw)
    assert step.cache_info().traces == 1


def test_wrap_bad_inputs():
    with pytest.raises(TypeError, match="callable"):
        wrap(3)  # type: ignore[arg-type]
    with pytest.raises(lf.ArgumentError, match="must return jax arrays"):
        wrap(lambda x: "nope")(lf.ones(2))
    with pytest.raises(lf.ArgumentError, match="hashable"):
        wrap(lambda x, opts: x)(lf.ones(2), [{"a": [1]}, {1, 2}])


# -- a Flax NNX module and an optax transform used from lazyflow ------------------------------------------------------


class FlaxBlock(lf.nn.Module):
    """A Flax NNX module as a lazyflow module: its state leaves are lazyflow parameters."""

    def __init__(self, module):
        super().__init__()
        graphdef, st = nnx.split(module)
        leaves, treedef = jax.tree_util.tree_flatten(st)
        self.n = len(leaves)
        for i, leaf in enumerate(leaves):
            self.register_parameter(f"p{i}", lf.nn.Parameter(from_jax(leaf)))
        self.fn = wrap(lambda ls, x: nnx.merge(graphdef, jax.tree_util.tree_unflatten(treedef, ls))(x), name="flax")

    def forward(self, x):
        return self.fn([getattr(self, f"p{i}") for i in range(self.n)], x)


def _flax_model_and_reference():
    lf.manual_seed(0)
    lin = lf.nn.Linear(4, 8)
    flax_lin = nnx.Linear(8, 3, rngs=nnx.Rngs(0))
    model = lf.nn.Sequential(lin, lf.nn.Tanh(), FlaxBlock(flax_lin))
    graphdef, st = nnx.split(flax_lin)
    leaves, treedef = jax.tree_util.tree_flatten(st)
    params = {
        "w": jnp.asarray(lin.weight.numpy(force=True)),
        "b": jnp.asarray(lin.bias.numpy(force=True)),
        "flax": list(leaves),
    }

    def ref_loss(p, x, y):
        h = jnp.tanh(x @ p["w"].T + p["b"])
        out = nnx.merge(graphdef, jax.tree_util.tree_unflatten(treedef, p["flax"]))(h)
        return ((out - y) ** 2).mean()

    return model, params, ref_loss


def _data():
    rs = np.random.RandomState(2)
    return rs.randn(6, 4).astype(np.float32), rs.randn(6, 3).astype(np.float32)


def test_flax_nnx_module_trains_eagerly_like_plain_jax():
    model, params, ref_loss = _flax_model_and_reference()
    x, y = _data()
    opt = lf.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(3):
        opt.zero_grad()
        loss = ((model(lf.tensor(x)) - lf.tensor(y)) ** 2).mean()
        loss.backward()
        opt.step()
        rl, g = jax.value_and_grad(ref_loss)(params, x, y)
        params = jax.tree_util.tree_map(lambda p, g: p - 0.1 * g, params, g)
        np.testing.assert_allclose(loss.item(), float(rl), rtol=1e-5)
    np.testing.assert_allclose(model[0].weight.numpy(force=True), np.asarray(params["w"]), rtol=1e-5, atol=1e-6)
    for i, leaf in enumerate(params["flax"]):
        np.testing.assert_allclose(getattr(model[2], f"p{i}").numpy(force=True), np.asarray(leaf), rtol=1e-5, atol=1e-6)


def test_flax_nnx_module_trains_in_an_nn_graph_like_plain_jax():
    model, params, ref_loss = _flax_model_and_reference()
    x, y = _data()
    opt = lf.optim.SGD(model.parameters(), lr=0.1)

    class Step(lf.nn.Graph):
        def __init__(self):
            super().__init__()
            self.model = model
            self.add_optimizer(opt)

        def build(self, x, y):
            loss = ((self.model(x) - y) ** 2).mean()
            loss.backward()
            return loss

    step = Step()
    for _ in range(3):
        loss = step(lf.tensor(x), lf.tensor(y))
        rl, g = jax.value_and_grad(ref_loss)(params, x, y)
        params = jax.tree_util.tree_map(lambda p, g: p - 0.1 * g, params, g)
        np.testing.assert_allclose(loss.item(), float(rl), rtol=1e-5)
    for i, leaf in enumerate(params["flax"]):
        np.testing.assert_allclose(getattr(model[2], f"p{i}").numpy(force=True), np.asarray(leaf), rtol=1e-5, atol=1e-6)


def test_optax_transform_used_as_a_lazyflow_optimizer_matches_optax():
    tx = optax.adamw(1e-2, weight_decay=0.1)
    update = wrap(lambda g, s, p: tx.update(g, s, p), name="adamw_update")
    lf.manual_seed(0)
    model = lf.nn.Linear(3, 2)
    x, y = np.random.RandomState(4).randn(5, 3).astype(np.float32), np.ones((5, 2), np.float32)
    params = list(model.parameters())
    opt_state = from_jax(tx.init(to_jax([p.detach() for p in params])))
    ref_params = [jnp.asarray(p.numpy(force=True)) for p in params]
    ref_state = tx.init(ref_params)

    def ref_loss(ps):
        return ((x @ ps[0].T + ps[1] - y) ** 2).mean()

    for _ in range(4):
        loss = ((model(lf.tensor(x)) - lf.tensor(y)) ** 2).mean()
        grads = lf.autograd.grad(loss, params)
        with lf.no_grad():
            updates, opt_state = update(list(grads), opt_state, [p.detach() for p in params])
            for p, u in zip(params, updates):
                p.add_(u)
        g = jax.grad(ref_loss)(ref_params)
        u, ref_state = tx.update(g, ref_state, ref_params)
        ref_params = optax.apply_updates(ref_params, u)
    for p, r in zip(params, ref_params):
        np.testing.assert_allclose(p.numpy(force=True), np.asarray(r), rtol=1e-5, atol=1e-6)


# -- DLPack ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [lf.float32, lf.float64, lf.int64, lf.int32, lf.bool])
def test_dlpack_export_to_numpy_torch_and_jax_shares_the_buffer(dtype):
    t = (lf.arange(6) % 3).to(dtype).reshape(2, 3)
    ref = t.numpy()
    a = np.from_dlpack(t)
    tt = torch.from_dlpack(t)
    j = jnp.from_dlpack(t)
    np.testing.assert_array_equal(a, ref)
    np.testing.assert_array_equal(tt.numpy(), ref)
    np.testing.assert_array_equal(np.asarray(j), ref)
    assert tt.data_ptr() == _ptr(t.jax()) == _ptr(j) == a.ctypes.data
    assert t.__dlpack_device__() == t.jax().__dlpack_device__()


def test_from_dlpack_copies_numpy_and_torch_memory():
    src = np.arange(4, dtype=np.float32)
    t = lf.from_dlpack(src)
    src[0] = 9
    np.testing.assert_array_equal(t.numpy(), [0, 1, 2, 3])
    ts = torch.arange(4, dtype=torch.int64)
    u = lf.from_dlpack(ts)
    ts[1] = 9
    np.testing.assert_array_equal(u.numpy(), [0, 1, 2, 3])
    assert u.dtype == lf.int64


def test_from_dlpack_shares_jax_and_lazyflow_buffers():
    a = jnp.arange(3.0)
    assert _ptr(lf.from_dlpack(a).jax()) == _ptr(a)
    t = lf.ones(2)
    u = lf.from_dlpack(t)
    assert u is not t and _ptr(u.jax()) == _ptr(t.jax())


def test_from_dlpack_copy_and_device_flags():
    a = jnp.arange(3.0)
    c = lf.from_dlpack(a, copy=True)
    assert _ptr(c.jax()) != _ptr(a)
    np.testing.assert_array_equal(c.numpy(), [0, 1, 2])
    assert _ptr(lf.from_dlpack(a, copy=False).jax()) == _ptr(a)
    with pytest.raises(lf.NotSupportedError, match="caller memory"):
        lf.from_dlpack(np.ones(2), copy=False)
    with pytest.raises(NotImplementedError):
        lf.from_dlpack(torch.ones(2), copy=False)
    assert lf.from_dlpack(np.ones(2), device="cpu").device == lf.device("cpu")


def test_dlpack_round_trips():
    t = lf.randn(3, 2)
    np.testing.assert_array_equal(lf.from_dlpack(torch.from_dlpack(t)).numpy(), t.numpy())
    np.testing.assert_array_equal(lf.from_dlpack(np.from_dlpack(t)).numpy(), t.numpy())
    np.testing.assert_array_equal(lf.from_dlpack(jnp.from_dlpack(t)).numpy(), t.numpy())


def test_dlpack_bad_inputs():
    with pytest.raises(lf.DTypeError, match="__dlpack__"):
        lf.from_dlpack([1, 2])
    with pytest.raises(lf.GraphError, match="__dlpack__"):
        lf.compile(lambda x: lf.tensor(np.from_dlpack(x)))(lf.ones(2))
