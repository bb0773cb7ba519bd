"""lf.func.functional_call / stack_module_state against torch.func (same weights), and under JAX transforms against
jax.grad / torch autograd references."""

import os
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
import torch
from torch.func import functional_call as t_functional_call
from torch.func import stack_module_state as t_stack_module_state

import lazyflow as lf
from lazyflow.func import TiedWeightsError, functional_call, stack_module_state
from lazyflow.utils.jax import to_jax


def _pair(seed=0):
    """The same MLP in lazyflow and torch."""
    lf.manual_seed(seed)
    m = lf.nn.Sequential(lf.nn.Linear(3, 8), lf.nn.Tanh(), lf.nn.Linear(8, 2))
    tm = torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
    tm.load_state_dict({k: torch.tensor(v.numpy()) for k, v in m.state_dict().items()})
    return m, tm


def _new_params(m, scale=0.5, seed=1):
    rs = np.random.RandomState(seed)
    return {k: (rs.randn(*v.shape) * scale).astype(np.float32) for k, v in m.named_parameters()}


def _snapshot(m):
    return {k: (v, v.numpy(force=True).copy()) for k, v in m.state_dict(keep_vars=True).items()}


def _assert_untouched(m, snap):
    for k, v in m.state_dict(keep_vars=True).items():
        obj, val = snap[k]
        assert v is obj
        np.testing.assert_array_equal(v.numpy(force=True), val)
        assert v.grad is None


X = np.random.RandomState(0).randn(5, 3).astype(np.float32)


def test_tensor_inputs_match_torch_and_gradients_reach_the_given_tensors():
    m, tm = _pair()
    snap = _snapshot(m)
    new = _new_params(m)
    lp = {k: lf.tensor(v, requires_grad=True) for k, v in new.items()}
    tp = {k: torch.tensor(v, requires_grad=True) for k, v in new.items()}
    out = functional_call(m, lp, (lf.tensor(X),))
    tout = t_functional_call(tm, tp, (torch.tensor(X),))
    assert isinstance(out, lf.Tensor)
    np.testing.assert_allclose(out.detach().numpy(), tout.detach().numpy(), rtol=1e-5, atol=1e-6)
    out.pow(2).sum().backward()
    tout.pow(2).sum().backward()
    for k in new:
        np.testing.assert_allclose(lp[k].grad.numpy(), tp[k].grad.numpy(), rtol=1e-5, atol=1e-6)
    _assert_untouched(m, snap)


def test_partial_dict_keeps_the_modules_own_tensors():
    m, tm = _pair()
    w = np.zeros((2, 8), np.float32)
    out = functional_call(m, {"2.weight": lf.tensor(w)}, lf.tensor(X))  # a single argument need not be a tuple
    ref = t_functional_call(tm, {"2.weight": torch.tensor(w)}, torch.tensor(X))
    np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=1e-6)


def test_jax_inputs_give_jax_outputs_under_jit_and_eagerly():
    m, tm = _pair()
    snap = _snapshot(m)
    new = _new_params(m)
    jp = {k: jnp.asarray(v) for k, v in new.items()}
    ref = t_functional_call(tm, {k: torch.tensor(v) for k, v in new.items()}, (torch.tensor(X),)).detach().numpy()
    eager = functional_call(m, jp, (jnp.asarray(X),))
    jitted = jax.jit(lambda p, x: functional_call(m, p, (x,)))(jp, jnp.asarray(X))
    for out in (eager, jitted):
        assert isinstance(out, jax.Array)
        np.testing.assert_allclose(np.asarray(out), ref, rtol=1e-5, atol=1e-6)
    _assert_untouched(m, snap)


def test_jax_grad_matches_torch_autograd():
    m, tm = _pair()
    snap = _snapshot(m)
    new = _new_params(m)
    jp = {k: jnp.asarray(v) for k, v in new.items()}
    g = jax.jit(jax.grad(lambda p, x: (functional_call(m, p, (x,)) ** 2).sum()))(jp, jnp.asarray(X))
    tp = {k: torch.tensor(v, requires_grad=True) for k, v in new.items()}
    t_functional_call(tm, tp, (torch.tensor(X),)).pow(2).sum().backward()
    for k in new:
        np.testing.assert_allclose(np.asarray(g[k]), tp[k].grad.numpy(), rtol=1e-5, atol=1e-6)
    _assert_untouched(m, snap)


def test_jax_vmap_over_examples_matches_torch_per_example_gradients():
    m, tm = _pair()
    jp = to_jax(dict(m.named_parameters()))

    def loss(p, x):
        return (functional_call(m, p, (x[None],)) ** 2).sum()

    per_ex = jax.vmap(jax.grad(loss), in_axes=(None, 0))(jp, jnp.asarray(X))
    tp = {k: v.detach() for k, v in tm.named_parameters()}

    def tloss(p, x):
        return t_functional_call(tm, p, (x[None],)).pow(2).sum()

    tper = torch.func.vmap(torch.func.grad(tloss), in_dims=(None, 0))(tp, torch.tensor(X))
    for k in tp:
        assert per_ex[k].shape == (5, *tp[k].shape)
        np.testing.assert_allclose(np.asarray(per_ex[k]), tper[k].numpy(), rtol=1e-5, atol=1e-6)


def test_stack_module_state_and_vmap_ensemble_match_torch():
    models, tmodels = zip(*(_pair(s) for s in range(3)))
    params, buffers = stack_module_state(models)
    tparams, tbuffers = t_stack_module_state(tmodels)
    assert list(params) == list(tparams) and buffers == {} and tbuffers == {}
    for k in params:
        assert params[k].shape == tuple(tparams[k].shape) and params[k].requires_grad
        np.testing.assert_array_equal(params[k].detach().numpy(), tparams[k].detach().numpy())
    base = models[0]
    out = jax.vmap(lambda p, x: functional_call(base, p, (x,)), in_axes=(0, None))(to_jax(params), jnp.asarray(X))
    tbase = tmodels[0]
    tout = torch.vmap(lambda p, x: t_functional_call(tbase, p, (x,)), in_dims=(0, None))(
        {k: v.detach() for k, v in tparams.items()}, torch.tensor(X)
    )
    assert out.shape == (3, 5, 2)
    np.testing.assert_allclose(np.asarray(out), tout.numpy(), rtol=1e-5, atol=1e-6)


def test_stack_module_state_bad_inputs():
    with pytest.raises(lf.ArgumentError, match="at least one"):
        stack_module_state([])
    with pytest.raises(lf.ArgumentError, match="same class"):
        stack_module_state([lf.nn.Linear(2, 2), lf.nn.Tanh()])
    with pytest.raises(lf.ArgumentError, match="different shapes"):
        stack_module_state([lf.nn.Linear(2, 2), lf.nn.Linear(2, 3)])
    with pytest.raises(lf.ArgumentError, match="same mode"):
        stack_module_state([lf.nn.Linear(2, 2), lf.nn.Linear(2, 2).eval()])


def test_optax_adam_training_matches_torch_adam():
    m, tm = _pair()
    y = np.random.RandomState(3).randn(5, 2).astype(np.float32)
    params = to_jax(dict(m.named_parameters()))
    tx = optax.adam(1e-2)
    opt_state = tx.init(params)

    @jax.jit
    def step(params, opt_state, x, y):
        loss, g = jax.value_and_grad(lambda p: ((functional_call(m, p, (x,)) - y) ** 2).mean())(params)
        updates, opt_state = tx.update(g, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    topt = torch.optim.Adam(tm.parameters(), lr=1e-2)
    for _ in range(5):
        params, opt_state, loss = step(params, opt_state, jnp.asarray(X), jnp.asarray(y))
        topt.zero_grad()
        tloss = (tm(torch.tensor(X)) - torch.tensor(y)).pow(2).mean()
        tloss.backward()
        topt.step()
        np.testing.assert_allclose(float(loss), tloss.item(), rtol=1e-5)
    for k, v in tm.named_parameters():
        np.testing.assert_allclose(np.asarray(params[k]), v.detach().numpy(), rtol=1e-4, atol=1e-6)


def test_batchnorm_buffers_given_in_training_mode_update_only_inside_the_call():
    lf.manual_seed(0)
    m = lf.nn.BatchNorm1d(3)
    tm = torch.nn.BatchNorm1d(3)
    snap = _snapshot(m)
    sd = {k: jnp.asarray(v.numpy()) for k, v in m.state_dict().items()}
    kept = {k: np.asarray(v).copy() for k, v in sd.items()}
    out = jax.jit(lambda s, x: functional_call(m, s, (x,)))(sd, jnp.asarray(X))
    ref = tm(torch.tensor(X)).detach().numpy()
    np.testing.assert_allclose(np.asarray(out), ref, rtol=1e-5, atol=1e-5)
    concrete = functional_call(m, sd, (jnp.asarray(X),))  # outside any JAX trace: eager kernels, same rule
    np.testing.assert_allclose(np.asarray(concrete), ref, rtol=1e-5, atol=1e-5)
    for k in sd:
        np.testing.assert_array_equal(np.asarray(sd[k]), kept[k])
    _assert_untouched(m, snap)


def test_inplace_write_to_a_buffer_not_given_is_an_error_under_jax():
    m = lf.nn.BatchNorm1d(3)
    params = to_jax(dict(m.named_parameters()))
    with pytest.raises(lf.GraphError, match="in-place"):
        jax.jit(lambda p, x: functional_call(m, p, (x,)))(params, jnp.asarray(X))
    m.eval()  # eval mode reads the module's own running statistics: fine
    out = jax.jit(lambda p, x: functional_call(m, p, (x,)))(params, jnp.asarray(X))
    np.testing.assert_allclose(np.asarray(out), X / np.sqrt(1 + 1e-5), rtol=1e-5)


class Tied(lf.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = lf.nn.Linear(2, 2, bias=False)
        self.b = lf.nn.Linear(2, 2, bias=False)
        self.b.weight = self.a.weight

    def forward(self, x):
        return self.b(self.a(x))


class TTied(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(2, 2, bias=False)
        self.b = torch.nn.Linear(2, 2, bias=False)
        self.b.weight = self.a.weight

    def forward(self, x):
        return self.b(self.a(x))


def test_tie_weights_matches_torch():
    m, tm = Tied(), TTied()
    with torch.no_grad():
        tm.a.weight.copy_(torch.tensor(m.a.weight.numpy(force=True)))
    w = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)
    x = np.ones((1, 2), np.float32)
    for tie in (True, False):
        out = functional_call(m, {"a.weight": lf.tensor(w)}, (lf.tensor(x),), tie_weights=tie)
        ref = t_functional_call(tm, {"a.weight": torch.tensor(w)}, (torch.tensor(x),), tie_weights=tie)
        np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=1e-6)
    with pytest.raises(TiedWeightsError, match="tied"):
        functional_call(m, {"a.weight": lf.tensor(w), "b.weight": lf.tensor(w * 2)}, (lf.tensor(x),))
    with pytest.raises(ValueError):  # torch's class
        t_functional_call(tm, {"a.weight": torch.tensor(w), "b.weight": torch.tensor(w * 2)}, (torch.tensor(x),))
    # the same object under both names is fine
    same = lf.tensor(w)
    out = functional_call(m, {"a.weight": same, "b.weight": same}, (lf.tensor(x),))
    np.testing.assert_allclose(out.numpy(), x @ w.T @ w.T, rtol=1e-6)


def test_strict_and_unknown_names_follow_torch():
    m, tm = _pair()
    w = {"0.weight": lf.zeros(8, 3)}
    with pytest.raises(lf.OpError, match="Missing key"):
        functional_call(m, w, (lf.tensor(X),), strict=True)
    with pytest.raises(RuntimeError, match="Missing key"):
        t_functional_call(tm, {"0.weight": torch.zeros(8, 3)}, (torch.tensor(X),), strict=True)
    with pytest.raises(lf.OpError, match="Unexpected key"):
        functional_call(m, {**dict(m.named_parameters()), "nope": lf.zeros(1)}, (lf.tensor(X),), strict=True)
    out = functional_call(m, {"nope": lf.zeros(1)}, (lf.tensor(X),))  # ignored without strict, as torch
    np.testing.assert_allclose(out.detach().numpy(), tm(torch.tensor(X)).detach().numpy(), rtol=1e-5, atol=1e-6)


def test_tuple_of_dicts_and_kwargs():
    m, tm = _pair()
    new = _new_params(m)
    first = {k: lf.tensor(v) for k, v in list(new.items())[:2]}
    second = {k: lf.tensor(v) for k, v in list(new.items())[2:]}
    out = functional_call(m, (first, second), (), {"input": lf.tensor(X)})
    ref = t_functional_call(tm, {k: torch.tensor(v) for k, v in new.items()}, (torch.tensor(X),))
    np.testing.assert_allclose(out.numpy(), ref.detach().numpy(), rtol=1e-5, atol=1e-6)
    with pytest.raises(lf.ArgumentError, match="multiple dictionaries"):
        functional_call(m, (first, first), (lf.tensor(X),))


def test_bad_inputs():
    m, _ = _pair()
    with pytest.raises(lf.ArgumentError, match="lf.nn.Module"):
        functional_call(lambda x: x, {}, (lf.tensor(X),))  # type: ignore[arg-type]
    with pytest.raises(lf.ArgumentError, match="numpy|ndarray"):
        functional_call(m, {"0.weight": np.zeros((8, 3), np.float32)}, (lf.tensor(X),))
    with pytest.raises(lf.ArgumentError, match="dict"):
        functional_call(m, 3, (lf.tensor(X),))  # type: ignore[arg-type]


def test_module_is_restored_when_forward_raises():
    m, _ = _pair()
    snap = _snapshot(m)
    with pytest.raises(lf.ShapeError):
        functional_call(m, {"0.weight": lf.zeros(8, 3)}, (lf.zeros(5, 4),))
    with pytest.raises(lf.ShapeError):
        jax.jit(lambda p, x: functional_call(m, p, (x,)))(
            {"0.weight": jnp.zeros((8, 3), jnp.float32)}, jnp.zeros((5, 4), jnp.float32)
        )
    _assert_untouched(m, snap)


def test_dropout_under_jit_draws_a_mask_and_fresh_numbers_per_trace():
    lf.manual_seed(0)
    m = lf.nn.Dropout(0.5)
    x = jnp.ones((1000,), jnp.float32)
    f = lambda x: functional_call(m, {}, (x,))
    a = np.asarray(jax.jit(f)(x))
    b = np.asarray(jax.jit(lambda x: f(x) + 0)(x))  # a second trace
    assert set(np.unique(a)) <= {0.0, 2.0} and 0.4 < (a == 0).mean() < 0.6
    assert (a != b).any()
    g = jax.jit(f)
    np.testing.assert_array_equal(np.asarray(g(x)), np.asarray(g(x)))  # one trace, one draw: replayed per call


SHARD_SCRIPT = textwrap.dedent("""
    import numpy as np, jax, jax.numpy as jnp
    from jax.sharding import Mesh, PartitionSpec as P
    import lazyflow as lf
    from lazyflow.func import functional_call
    from lazyflow.utils.jax import to_jax
    assert len(jax.devices()) == 4
    lf.manual_seed(0)
    m = lf.nn.Sequential(lf.nn.Linear(3, 8), lf.nn.Tanh(), lf.nn.Linear(8, 2))
    p = to_jax(dict(m.named_parameters()))
    x = jnp.asarray(np.random.RandomState(0).randn(8, 3).astype(np.float32))
    mesh = Mesh(np.array(jax.devices()), ("data",))
    def loss(p, x):
        l = (functional_call(m, p, (x,)) ** 2).sum()
        return jax.lax.psum(l, "data")
    f = jax.jit(jax.shard_map(jax.value_and_grad(loss), mesh=mesh, in_specs=(P(), P("data")), out_specs=(P(), P())))
    val, g = f(p, x)
    def ref(p, x):
        h = jnp.tanh(x @ p["0.weight"].T + p["0.bias"])
        return ((h @ p["2.weight"].T + p["2.bias"]) ** 2).sum()
    rv, rg = jax.value_and_grad(ref)(p, x)
    np.testing.assert_allclose(float(val), float(rv), rtol=1e-5)
    for k in rg:  # shard_map's grad of replicated params: each device's partial, psum'd by the transpose
        np.testing.assert_allclose(np.asarray(g[k]), np.asarray(rg[k]) , rtol=1e-4, atol=1e-5)
    print("OK")
""")


def test_shard_map_data_parallel_gradients_match_plain_jax():
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=4")
    r = subprocess.run([sys.executable, "-c", SHARD_SCRIPT], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "OK" in r.stdout, r.stderr[-3000:]
