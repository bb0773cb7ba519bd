"""lf.compile on a device mesh (8 virtual CPU devices, in a subprocess so XLA_FLAGS applies before jax starts)."""

import os
import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent("""
    import numpy as np
    import jax, jax.numpy as jnp
    import lazyflow as lf
    from lazyflow import nn
    assert len(jax.devices()) == 8
    lf.manual_seed(0)
    m = nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 4))
    x = lf.randn(32, 16)
    w = {k: v.numpy() for k, v in m.state_dict().items()}
    def ref(w, x):
        return jnp.tanh(x @ w["0.weight"].T + w["0.bias"]) @ w["2.weight"].T + w["2.bias"]
    cm = lf.compile(m)
    mesh = lf.distributed.Mesh((8,), ("data",))
    cm.config.data_parallel(mesh, "data")
    cm.config.shard_parameters(mesh, "data")
    out = cm(x)
    np.testing.assert_allclose(out.detach().numpy(), np.asarray(ref(w, x.numpy())), rtol=1e-5, atol=1e-6)
    assert out.is_sharded and m[0].weight.is_sharded
    assert m[0].weight.sharding.spec == jax.sharding.PartitionSpec('data', None)
    out.sum().backward()
    g = jax.grad(lambda w: ref(w, x.numpy()).sum())(w)
    np.testing.assert_allclose(m[0].weight.grad.numpy(), np.asarray(g["0.weight"]), rtol=1e-5, atol=1e-6)
    assert list(m.state_dict()) == list(w)
    cm(x)
    assert cm.cache_info().compiles == 1, cm.cache_info()
    print("OK")
""")


def test_compile_data_parallel_and_sharded_parameters_match_a_jax_reference():
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=8")
    r = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "OK" in r.stdout, r.stdout + r.stderr
