"""nn.DataParallel in one process over 4 virtual CPU devices (run by tests/test_distributed_collectives.py):
training equals plain JAX (jax.grad + torch's SGD-momentum rule) on the same batches; parameters are replicated
over the local devices and inputs split along the batch dimension."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from _checks import check, main
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import lazyflow as lf
from lazyflow import nn

RNG = np.random.default_rng(0)
DATA = [
    (RNG.standard_normal((8, 5)).astype(np.float32), RNG.standard_normal((8, 2)).astype(np.float32)) for _ in range(3)
]


def mlp():
    lf.manual_seed(0)
    return nn.Sequential(nn.Linear(5, 16), nn.Tanh(), nn.Linear(16, 2))


def reference():
    p = {k: jnp.asarray(v.numpy()) for k, v in mlp().state_dict().items()}

    def loss_fn(p, x, y):
        z = jnp.tanh(x @ p["0.weight"].T + p["0.bias"]) @ p["2.weight"].T + p["2.bias"]
        return jnp.mean((z - y) ** 2)

    buf = None
    for x, y in DATA:
        g = jax.grad(loss_fn)(p, x, y)
        buf = g if buf is None else jax.tree.map(lambda b, gi: 0.9 * b + gi, buf, g)
        p = jax.tree.map(lambda w, b: w - 0.1 * b, p, buf)
    return {k: np.asarray(v) for k, v in p.items()}


@check
def data_parallel_trains_like_one_device():
    assert len(jax.local_devices()) == 4
    m = mlp()
    w = m[0].weight
    dp = nn.DataParallel(m)
    assert dp.module is m and m[0].weight is w and dp.device_ids == [0, 1, 2, 3]
    assert m[0].weight.sharding.spec == P() and len(m[0].weight.sharding.device_set) == 4
    assert list(dp.state_dict()) == [f"module.{k}" for k in m.state_dict()]
    opt = lf.optim.SGD(dp.parameters(), lr=0.1, momentum=0.9)
    for x, y in DATA:
        opt.zero_grad()
        out = dp(lf.tensor(x))
        assert isinstance(out.sharding, NamedSharding) and out.sharding.spec[0] == "batch"
        ((out - lf.tensor(y)) ** 2).mean().backward()
        opt.step()
    ref = reference()
    for k, v in m.state_dict().items():
        np.testing.assert_allclose(v.numpy(), ref[k], rtol=1e-5, atol=1e-6, err_msg=k)


@check
def data_parallel_odd_batches_and_device_ids():
    m = mlp()
    dp = nn.DataParallel(m, device_ids=[1])  # one device: only calls the module
    x = np.ones((3, 5), np.float32)
    np.testing.assert_allclose(dp(lf.tensor(x)).detach().numpy(), mlp()(lf.tensor(x)).detach().numpy(), rtol=1e-6)
    dp = nn.DataParallel(mlp())
    np.testing.assert_allclose(dp(lf.tensor(x)).detach().numpy(), mlp()(lf.tensor(x)).detach().numpy(), rtol=1e-6)
    for bad in ([4], [], [-1]):
        try:
            nn.DataParallel(mlp(), device_ids=bad)
        except ValueError as e:
            assert "device_ids must be indices in [0, 4)" in str(e)
        else:
            raise AssertionError(bad)
    try:
        nn.DataParallel(lambda x: x)
    except TypeError as e:
        assert "lf.nn.Module" in str(e)
    else:
        raise AssertionError("no TypeError")


if __name__ == "__main__":
    main()
