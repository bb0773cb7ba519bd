"""Programs outside the op table kept in the kernel store (lazyflow/eager/kernel_store.py ``Program``): the
optimizer's fused step and gradient accumulation.

A fresh process with a warm cache traces neither (JAX's trace events, by function name) and gets torch's numbers;
a damaged stored step program is removed and recompiled with the right result; a user's optimizer subclass is not
stored (its code is not in the store's source hash).
"""

import json
import os
import subprocess
import sys
import textwrap

import jax
import numpy as np
import pytest
import torch

import lazyflow as lf
from lazyflow._core import compile_cache as cc
from lazyflow.eager import interpreter
from lazyflow.eager import kernel_store as ks
from lazyflow.optim import optimizer as optimizer_mod

SCRIPT = textwrap.dedent(
    """
    import collections, json, sys
    import jax
    traced = collections.Counter()
    jax.monitoring.register_event_duration_secs_listener(
        lambda ev, d, fun_name=None, **kw: traced.update([fun_name])
        if ev == "/jax/core/compile/jaxpr_trace_duration" else None
    )
    import numpy as np
    import lazyflow as lf

    w1, w2, x = (np.asarray(a, np.float32) for a in json.loads(sys.argv[1]))
    lin1, lin2 = lf.nn.Linear(4, 4, bias=False), lf.nn.Linear(4, 4, bias=False)
    with lf.no_grad():
        lin1.weight.copy_(lf.tensor(w1))
        lin2.weight.copy_(lf.tensor(w2))
    opt = lf.optim.SGD([lin1.weight, lin2.weight], lr=0.1, momentum=0.9)
    traced.clear()
    for _ in range(2):
        h = lin1(lf.tensor(x)).tanh()
        loss = (lin2(h) + h).pow(2).sum()  # h is used twice: its gradient is accumulated
        opt.zero_grad()
        loss.backward()
        opt.step()
    print("RESULT " + json.dumps({"w1": lin1.weight.tolist(), "w2": lin2.weight.tolist(), "traced": traced,
                                  "opt_traces": lf.optim.optimizer.cache_info().traces}))
    """
)


def _run(cache_dir, data):
    env = dict(os.environ, JAX_PLATFORMS="cpu", LAZYFLOW_COMPILE_CACHE_DIR=str(cache_dir))
    for k in ("JAX_COMPILATION_CACHE_DIR", "LAZYFLOW_COMPILE_CACHE", "LAZYFLOW_KERNEL_CACHE"):
        env.pop(k, None)
    p = subprocess.run(
        [sys.executable, "-c", SCRIPT, json.dumps(data)], env=env, capture_output=True, text=True, timeout=300
    )
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(next(ln for ln in p.stdout.splitlines() if ln.startswith("RESULT "))[7:])


def _torch_reference(w1, w2, x):
    a = torch.tensor(w1, requires_grad=True)
    b = torch.tensor(w2, requires_grad=True)
    opt = torch.optim.SGD([a, b], lr=0.1, momentum=0.9)
    for _ in range(2):
        h = torch.tanh(torch.tensor(x) @ a.T)
        loss = (h @ b.T + h).pow(2).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return a.detach().numpy(), b.detach().numpy()


def test_a_warm_process_traces_neither_the_optimizer_step_nor_the_accumulation(tmp_path):
    rng = np.random.default_rng(1)
    data = [rng.standard_normal((4, 4)).astype(np.float32) * 0.5 for _ in range(2)]
    data.append(rng.standard_normal((3, 4)).astype(np.float32))
    cold = _run(tmp_path, [d.tolist() for d in data])
    warm = _run(tmp_path, [d.tolist() for d in data])
    assert cold["traced"].get("run", 0) >= 1 and cold["traced"].get("_sum", 0) >= 1, cold["traced"]
    assert "run" not in warm["traced"] and "_sum" not in warm["traced"], warm["traced"]
    assert warm["opt_traces"] == 0 and cold["opt_traces"] >= 1
    w1, w2 = _torch_reference(*data)
    np.testing.assert_allclose(warm["w1"], w1, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(warm["w2"], w2, rtol=1e-5, atol=1e-6)
    assert (warm["w1"], warm["w2"]) == (cold["w1"], cold["w2"])  # bit for bit


# ---- in process: the cache pointed at a temporary directory, the in-memory program caches emptied ----


@pytest.fixture
def store(tmp_path, monkeypatch):
    monkeypatch.setattr(ks, "ENABLED", True)  # tests/conftest.py switches the store off for the rest of the suite
    before = lf.config.compile_cache_info()
    lf.config.set_compile_cache(True, tmp_path)
    optimizer_mod.clear_cache()
    cc._warn.seen.clear()
    yield tmp_path
    optimizer_mod.clear_cache()
    interpreter._add.variants.clear()
    lf.config.set_compile_cache(
        before.enabled, os.path.dirname(before.directory) if before.directory else None, max_bytes=before.max_bytes
    )


P0 = np.array([1.0, -2.0, 0.5], np.float32)
G = np.array([0.5, 0.25, -1.0], np.float32)


def _step(cls=lf.optim.SGD):
    """A fresh optimizer program cache, one momentum-SGD step with a gradient set by hand (no eager kernel runs):
    (new parameter, traces of the step program)."""
    optimizer_mod.clear_cache()
    p = lf.nn.Parameter(lf.tensor(P0))
    p.grad = lf.tensor(G)
    opt = cls([p], lr=0.5, momentum=0.9)
    opt.step()
    return p.detach().numpy(), optimizer_mod.cache_info().traces


def _entries(d):
    return set(d.rglob("k-*.xc"))


def test_a_damaged_stored_step_program_is_recompiled_with_the_right_result(store):
    expected = P0 - 0.5 * G  # torch's first momentum-SGD step: the buffer is the gradient itself
    out, traces = _step()
    np.testing.assert_allclose(out, expected, rtol=1e-6)
    (entry,) = _entries(store)
    assert traces == 1
    out, traces = _step()
    assert traces == 0  # loaded
    np.testing.assert_allclose(out, expected, rtol=1e-6)
    blob = entry.read_bytes()
    entry.write_bytes(blob[: len(blob) // 2])
    corrupted = cc.info().corrupted
    with pytest.warns(RuntimeWarning, match="compile cache"):
        out, traces = _step()
    assert traces == 1 and cc.info().corrupted == corrupted + 1
    np.testing.assert_allclose(out, expected, rtol=1e-6)
    assert _entries(store) == {entry}  # written again
    assert _step()[1] == 0


def test_a_user_subclass_is_not_stored(store):
    class MySGD(lf.optim.SGD):
        pass

    out, traces = _step(MySGD)
    np.testing.assert_allclose(out, P0 - 0.5 * G, rtol=1e-6)
    assert traces == 1 and not _entries(store)
    assert optimizer_mod._store_ident(lf.optim.SGD) == "optim:lazyflow.optim.sgd.SGD"
    assert optimizer_mod._store_ident(MySGD) is None


def test_a_stored_accumulation_takes_other_shapes_and_traced_operands(store):
    a, b = jax.numpy.ones(3), jax.numpy.full(3, 2.0)
    np.testing.assert_array_equal(interpreter.accumulate(a, b), np.full(3, 3.0))
    assert len(_entries(store)) == 1
    interpreter._add.variants.clear()
    np.testing.assert_array_equal(interpreter.accumulate(a, b), np.full(3, 3.0))  # loaded
    c = jax.numpy.ones((2, 2), jax.numpy.float64 if jax.config.jax_enable_x64 else jax.numpy.int32)
    np.testing.assert_array_equal(interpreter.accumulate(c, c), 2 * np.ones((2, 2)))
    assert len(_entries(store)) == 2
    traced = jax.jit(lambda u, v: interpreter.accumulate(u, v))(a, b)  # tracers: the plain jitted sum
    np.testing.assert_array_equal(traced, np.full(3, 3.0))


def test_a_loaded_program_refuses_other_arguments_and_the_jitted_one_takes_over(store):
    """The same caller signature with arguments of another type (a caller's summary too coarse): the loaded
    executable's argument check refuses them before running, the jitted function computes them."""
    prog = ks.Program(lambda u, v: u * v, "test:mul")
    a = jax.numpy.arange(3.0)
    np.testing.assert_array_equal(prog.call("sig", a, a), np.arange(3.0) ** 2)
    b = jax.numpy.arange(4.0)
    np.testing.assert_array_equal(prog.call("sig", b, b), np.arange(4.0) ** 2)
    assert prog.variants["sig"] is prog.jitted
    assert ks.Program(lambda u: u, None).call("s", a) is not None and not ks.program_key("x", (object(),), ())


def test_a_new_argument_structure_on_the_same_optimizer_gets_the_right_step(store):
    """A flag changed between steps (another static structure): the executable loaded for the first structure
    refuses the call, the jitted step computes it -- torch's numbers either way."""
    p = lf.nn.Parameter(lf.tensor(P0))
    opt = lf.optim.SGD([p], lr=0.5, momentum=0.9)
    tp = torch.tensor(P0, requires_grad=True)
    topt = torch.optim.SGD([tp], lr=0.5, momentum=0.9)
    for nesterov in (False, True, True):
        opt.param_groups[0]["nesterov"] = topt.param_groups[0]["nesterov"] = nesterov
        p.grad = lf.tensor(G)
        tp.grad = torch.tensor(G)
        opt.step()
        topt.step()
        np.testing.assert_allclose(p.detach().numpy(), tp.detach().numpy(), rtol=1e-6)
    prog = optimizer_mod._programs[(lf.optim.SGD, True)]
    assert len(_entries(store)) == 1 and prog.variants[id(opt)] is prog.jitted  # stored, then taken over


def test_signatures_beyond_the_bound_run_the_jitted_function(store, monkeypatch):
    monkeypatch.setattr(ks, "_MAX_VARIANTS", 1)
    prog = ks.Program(lambda u: u + 1, "test:inc")
    np.testing.assert_array_equal(prog.call("a", jax.numpy.zeros(2)), np.ones(2))
    np.testing.assert_array_equal(prog.call("b", jax.numpy.zeros(3)), np.ones(3))
    assert list(prog.variants) == ["a"] and len(_entries(store)) == 1
