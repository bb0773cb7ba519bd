"""Building a model: seeded and reproducible (in this process and in a new one), torch's distributions, a bounded
number of XLA compiles whatever the parameter shapes, values that alias nothing, and no compile after the first
step of a training loop with fixed shapes. Compiles are counted with JAX's own compile events in fresh processes."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

import lazyflow as lf
import lazyflow.nn as nn
from lazyflow import _sample
from lazyflow._core.context import state
from lazyflow.nn import init
from lazyflow.ops.random import CHUNK
from lazyflow.ops.table import REGISTRY as R

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_SCRIPT = textwrap.dedent(
    """
    import hashlib, json, sys
    import jax
    jax.config.update("jax_enable_compilation_cache", False)
    compiles = []
    jax.monitoring.register_event_duration_secs_listener(
        lambda ev, d, **kw: compiles.append(1) if ev == "/jax/core/compile/backend_compile_duration" else None
    )
    import lazyflow as lf
    import lazyflow.nn as nn

    def model(widths):
        layers = []
        for i, (a, b) in enumerate(zip(widths, widths[1:])):
            layers += [nn.Linear(a, b), nn.BatchNorm1d(b), nn.LayerNorm(b), nn.Embedding(a + 3, b), nn.Conv2d(a, b, 3)]
            nn.init.trunc_normal_(layers[-1].weight, std=0.02)
            nn.init.xavier_normal_(layers[-2].weight)
            nn.init.kaiming_normal_(layers[0 - 5].weight)
        return nn.Sequential(*layers)

    def digest(m):
        h = hashlib.sha256()
        for name, t in m.state_dict().items():
            h.update(name.encode() + t.detach().numpy().tobytes())
        return h.hexdigest()

    out = {}
    lf.manual_seed(int(sys.argv[1]))
    n = len(compiles)
    a = model([5 + 3 * i for i in range(8)])  # 7 blocks: 35 modules, ~90 distinct parameter shapes
    out["compiles_a"] = len(compiles) - n
    n = len(compiles)
    b = model([40 + 7 * i for i in range(15)])  # 14 blocks of other shapes
    out["compiles_b"] = len(compiles) - n
    out["digests"] = [digest(a), digest(b)]
    out["cache_misses"] = lf.eager.cache_info().misses

    steps = {}
    for name, make in [
        ("sgd_momentum", lambda p: lf.optim.SGD(p, lr=0.1, momentum=0.9)),
        ("sgd_nesterov", lambda p: lf.optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-4)),
        ("adam", lambda p: lf.optim.Adam(p, lr=1e-3)),
        ("adamw", lambda p: lf.optim.AdamW(p, lr=1e-3)),
        ("rmsprop", lambda p: lf.optim.RMSprop(p, lr=1e-3, momentum=0.9)),
        ("adagrad", lambda p: lf.optim.Adagrad(p, lr=1e-2)),
    ]:
        m = nn.Sequential(nn.Linear(6, 9), nn.ReLU(), nn.Linear(9, 2))
        opt = make(m.parameters())
        x, y = lf.randn(5, 6), lf.randint(0, 2, (5,))
        per_step = []
        for _ in range(4):
            n = len(compiles)
            opt.zero_grad()
            lf.nn.functional.cross_entropy(m(x), y).backward()
            opt.step()
            per_step.append(len(compiles) - n)
        steps[name] = per_step
    out["steps"] = steps
    print(json.dumps(out))
    """
)


def _run(seed: int) -> dict:
    env = dict(os.environ, PYTHONPATH=ROOT, JAX_PLATFORMS="cpu")
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    proc = subprocess.run(
        [sys.executable, "-c", _SCRIPT, str(seed)], env=env, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def fresh():
    return _run(3), _run(3), _run(4)


def test_compiles_do_not_grow_with_parameter_shapes(fresh):
    r = fresh[0]
    # the first model compiles the fill kernels (the float32 uniform chunk, in the background, and a 3-op probe of
    # XLA's rounding for the host fills meanwhile; the normal chunk); the second model, with other shapes and twice
    # as many of them, compiles nothing (the background compile may finish while it is built: count both together)
    assert r["compiles_a"] + r["compiles_b"] <= 3, r
    assert r["cache_misses"] <= 2, r


def test_same_seed_same_parameters_in_a_new_process(fresh):
    (a, b, other) = fresh
    assert a["digests"] == b["digests"]
    assert other["digests"][0] != a["digests"][0] and other["digests"][1] != a["digests"][1]


def test_same_seed_same_parameters_in_this_process():
    def build():
        return nn.Sequential(nn.Linear(7, 13), nn.Conv2d(3, 5, 3), nn.Embedding(11, 4), nn.LayerNorm(13))

    lf.manual_seed(11)
    a = build().state_dict()
    lf.manual_seed(11)
    b = build().state_dict()
    for k in a:
        np.testing.assert_array_equal(a[k].detach().numpy(), b[k].detach().numpy(), err_msg=k)
    g1, g2 = lf.Generator().manual_seed(2), lf.Generator().manual_seed(2)
    p, q = nn.Parameter(lf.zeros(300, 301)), nn.Parameter(lf.zeros(300, 301))
    init.kaiming_uniform_(p, generator=g1)
    init.kaiming_uniform_(q, generator=g2)
    np.testing.assert_array_equal(p.detach().numpy(), q.detach().numpy())


def test_no_compile_after_the_first_optimizer_step(fresh):
    for name, per_step in fresh[0]["steps"].items():
        assert per_step[1:] == [0, 0, 0], (name, per_step)


@pytest.mark.parametrize("shape", [(3,), (7, 5), (CHUNK + 3,), (2, CHUNK + 1), (3 * CHUNK,), (0, 4)])
@pytest.mark.parametrize("dtype", [lf.float32, lf.bfloat16, lf.float16, lf.float64])
def test_host_fill_draws_what_the_per_shape_op_draws(shape, dtype):
    # the chunked fill (eager construction) and the per-shape kernel (what graph mode traces) give the same numbers
    for op, fill, params in [
        (R["uniform_into"], _sample.uniform, (-0.5, 2.0)),
        (R["normal_into"], _sample.normal, (0.3, 1.7, -0.5, 0.75, -1.0, 2.5)),  # truncated to [-1, 2.5]
    ]:
        draw = (12345, 6)
        t = lf.zeros(shape, dtype=dtype)
        state.interp.apply_inplace(op, t, (t, *draw, *params))
        np.testing.assert_array_equal(fill(draw, shape, dtype, *params), t.numpy(), err_msg=op.name)


@pytest.mark.parametrize(
    "low, high",
    [(0.0, 1.0), (-0.1, 0.1), (-3.7, 2.2), (1e-3, 5e4), (-1e-30, 1e-30), (3.0, 3.0000002), (-2.0, -1.9999999)],
)
def test_host_uniform_is_the_kernels_bit_for_bit(low, high):
    # float32 uniforms are computed with numpy on the host (threefry + XLA's rounding of lo + u * span); the
    # per-shape kernel graph mode traces is the reference, over spans where one rounding and two differ often
    draw = (987654321, 41)
    for shape in [(5,), (2 * CHUNK + 7,)]:
        t = lf.zeros(shape)
        state.interp.apply_inplace(R["uniform_into"], t, (t, *draw, low, high))
        np.testing.assert_array_equal(_sample.uniform(draw, shape, lf.float32, low, high), t.numpy())


def test_host_fma_rounds_once_at_a_halfway_point():
    # lo + u * span = 1 + 2**-24 + 2**-60 exactly: float64 rounds it to the float32 halfway point 1 + 2**-24, and a
    # second rounding to float32 would give 1.0; a fused multiply-add (one rounding) gives 1 + 2**-23. XLA's own
    # kernel is the reference for what this machine's backend does.
    import jax

    u = np.array([38737 * 2.0**-16, 0.25, 0.75], np.float32)  # 38737 * 1774001 == 2**36 + 1
    span, lo = np.float32(1774001 * 2.0**-44), np.float32(1.0)
    want = np.asarray(jax.jit(lambda u, s, l: l + u * s)(u, span, lo))
    np.testing.assert_array_equal(_sample._affine(u.copy(), lo, span), want)
    if _sample._contracts():
        assert want[0] == np.float32(1 + 2.0**-23)


def test_graph_mode_init_matches_eager():
    def f(x):
        w = lf.zeros(70_000)
        init.uniform_(w, -1.0, 1.0)
        v = lf.zeros(3, 5)
        init.trunc_normal_(v, std=0.5)
        return x + w.sum(), v

    lf.manual_seed(5)
    e = f(lf.zeros(()))
    lf.manual_seed(5)
    g = lf.compile(f)(lf.zeros(()))
    np.testing.assert_allclose(g[0].numpy(), e[0].numpy(), rtol=1e-5)
    np.testing.assert_array_equal(g[1].numpy(), e[1].numpy())


def test_large_fills_have_torch_moments_across_chunks():
    n = 5 * CHUNK + 17
    p = nn.Parameter(lf.zeros(n // 17, 17))
    bound = init.kaiming_uniform_(p, a=math.sqrt(5)).detach().numpy()
    t = torch.empty(n // 17, 17)
    torch.nn.init.kaiming_uniform_(t, a=math.sqrt(5))
    b = float(t.abs().max())
    assert np.abs(bound).max() <= 1 / math.sqrt(17) and np.abs(bound).max() > 0.99 * b
    assert abs(bound.mean()) < 6 * math.sqrt(1 / 17 / 3 / bound.size)
    flat = bound.ravel()
    chunks = [flat[k * CHUNK : (k + 1) * CHUNK] for k in range(5)]
    assert all(np.mean(a == b) < 1e-3 for i, a in enumerate(chunks) for b in chunks[i + 1 :])  # no chunk repeats
    z = init.normal_(nn.Parameter(lf.zeros(n)), 1.0, 2.0).detach().numpy().astype(np.float64)
    assert abs(z.mean() - 1.0) < 6 * 2.0 / math.sqrt(n) and abs(z.var() - 4.0) < 6 * 4.0 * math.sqrt(2.0 / n)
    tn = init.trunc_normal_(nn.Parameter(lf.zeros(n)), 0.0, 1.0, -0.5, 0.5).detach().numpy()
    assert tn.min() >= -0.5 and tn.max() <= 0.5 and tn.min() < -0.49 and tn.max() > 0.49


def test_init_values_alias_nothing():
    m = nn.Sequential(nn.Linear(64, 64), nn.Linear(64, 64), nn.BatchNorm1d(64), nn.LayerNorm(64))
    tensors = list(m.state_dict().values())
    views = [np.asarray(t._value) for t in tensors]
    for i in range(len(views)):
        for j in range(i + 1, len(views)):
            assert not np.shares_memory(views[i], views[j]), (i, j)
    before = [t.detach().numpy().copy() for t in tensors]
    with lf.no_grad():
        m[0].weight.add_(1.0)  # may donate its buffer: nothing else may change
        m[2].running_var.mul_(3.0)
    after = [t.detach().numpy() for t in m.state_dict().values()]
    for k, (x, y) in enumerate(zip(before, after)):
        if k in (0, 7):  # the two tensors written (state_dict order: 0.weight, ..., 2.running_var)
            continue
        np.testing.assert_array_equal(x, y, err_msg=str(k))
    np.testing.assert_allclose(after[0], before[0] + 1.0)
    # a constant made on the host is a fresh buffer each time, and an exported copy does not write back
    z1, z2 = lf.zeros(4096), lf.zeros(4096)
    assert not np.shares_memory(np.asarray(z1._value), np.asarray(z2._value))
    exported = m[3].weight.detach().numpy()
    exported[:] = 7.0
    assert np.all(m[3].weight.detach().numpy() == 1.0)
