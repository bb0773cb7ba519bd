"""Eager kernels stored under lazyflow's own signature (lazyflow/eager/kernel_store.py).

A fresh process with a warm cache neither traces nor lowers an eager kernel (JAX's trace events are counted) and
gets the numbers numpy gives; a damaged, foreign or booby-trapped entry is removed and recompiled, never run; a
change of source, settings or default dtype is a miss; the cache switched off writes nothing.
"""

import hashlib
import json
import os
import pickle
import subprocess
import sys
import textwrap

import jax
import numpy as np
import pytest

import lazyflow as lf
from lazyflow._core import compile_cache as cc
from lazyflow.eager import kernel_store as ks
from lazyflow.ops.table import REGISTRY

SCRIPT = textwrap.dedent(
    """
    import json
    import jax
    traces = []
    jax.monitoring.register_event_duration_secs_listener(
        lambda ev, d, **kw: traces.append(1) if ev == "/jax/core/compile/jaxpr_trace_duration" else None
    )
    import numpy as np
    import lazyflow as lf

    rng = np.random.default_rng(0)
    a = lf.tensor(rng.standard_normal((3, 4)).astype(np.float32), requires_grad=True)
    b = lf.tensor(rng.standard_normal((4, 2)).astype(np.float32))
    before = len(traces)
    y = ((a * 2.0).tanh() @ b).relu().sum()
    y.backward()
    c = lf.zeros(5)
    c.add_(1.5)
    info = lf.config.compile_cache_info()
    print("RESULT " + json.dumps({"y": y.item(), "grad": a.grad.numpy().tolist(), "c": c.tolist(),
                                  "traces": len(traces) - before, "hits": info.hits, "misses": info.misses,
                                  "writes": info.writes, "corrupted": info.corrupted}))
    """
)


def _run(cache_dir, **env_extra):
    env = dict(os.environ, JAX_PLATFORMS="cpu", LAZYFLOW_COMPILE_CACHE_DIR=str(cache_dir))
    for k in ("JAX_COMPILATION_CACHE_DIR", "LAZYFLOW_COMPILE_CACHE", "LAZYFLOW_KERNEL_CACHE"):
        env.pop(k, None)
    env.update(env_extra)
    p = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(next(ln for ln in p.stdout.splitlines() if ln.startswith("RESULT "))[7:])


def _reference(r):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((3, 4)).astype(np.float32)
    b = rng.standard_normal((4, 2)).astype(np.float32)
    t = np.tanh(2 * a)
    z = t @ b
    np.testing.assert_allclose(r["y"], np.maximum(z, 0).sum(), rtol=1e-5)
    grad = ((z > 0).astype(np.float32) @ b.T) * (1 - t**2) * 2
    np.testing.assert_allclose(r["grad"], grad, rtol=1e-5, atol=1e-6)
    assert r["c"] == [1.5] * 5


def _kernels(d):
    return sorted(d.rglob("k-*.xc"))


@pytest.fixture(scope="module")
def warm(tmp_path_factory):
    d = tmp_path_factory.mktemp("ks")
    return d, _run(d), _run(d)


def test_a_warm_process_traces_no_eager_kernel_and_gets_numpys_numbers(warm):
    d, cold, second = warm
    kernels = len(_kernels(d))
    assert cold["traces"] > 0 and cold["writes"] >= kernels > 0
    # no eager kernel traced or lowered: only the programs outside the store (a dtype conversion jax.numpy runs)
    assert second["traces"] == cold["writes"] - kernels < kernels / 4, (second, kernels)
    assert second["hits"] == cold["writes"] and second["misses"] == second["writes"] == 0, second
    _reference(second)
    assert {k: second[k] for k in ("y", "grad", "c")} == {k: cold[k] for k in ("y", "grad", "c")}  # bit for bit


# ---- in process: the cache pointed at a temporary directory, the in-memory eager cache emptied between runs ----


@pytest.fixture
def store(tmp_path, monkeypatch):
    monkeypatch.setattr(ks, "ENABLED", True)  # tests/conftest.py switches the store off for the rest of the suite
    before = lf.config.compile_cache_info()
    lf.config.set_compile_cache(True, tmp_path)
    lf.eager.clear_cache()
    cc._warn.seen.clear()  # one warning per kind per process: each test expects its own
    yield tmp_path
    lf.eager.clear_cache()
    lf.config.set_compile_cache(
        before.enabled, os.path.dirname(before.directory) if before.directory else None, max_bytes=before.max_bytes
    )


_traces: list = []


def _count_traces(event: str, duration_secs: float, **kwargs) -> None:
    if event == "/jax/core/compile/jaxpr_trace_duration":
        _traces.append(1)


jax.monitoring.register_event_duration_secs_listener(_count_traces)


def _tanh(n=6):
    """A fresh in-memory cache, then tanh of a known vector: (result, traces it took)."""
    lf.eager.clear_cache()
    before = len(_traces)
    x = np.linspace(-1.0, 1.0, n).astype(np.float32)
    out = lf.tanh(lf.tensor(x)).numpy()
    np.testing.assert_allclose(out, np.tanh(x), rtol=1e-6)
    return len(_traces) - before


def _rewrite(path, payload: bytes):
    """An entry with a valid checksum around ``payload`` (what a careless or hostile writer could leave)."""
    path.write_bytes(cc._MAGIC + hashlib.sha256(payload).digest() + payload)


def test_in_process_hit_skips_tracing(store):
    assert _tanh() > 0 and len(_kernels(store)) == 1
    assert _tanh() == 0


def test_bfloat16_kernels_are_stored_and_loaded(store):
    """An extension dtype's executable names its ml_dtypes scalar type: allowed, so the kernel is kept."""
    x = np.linspace(-1.0, 1.0, 5).astype(np.float32)

    def run():
        lf.eager.clear_cache()
        before = len(_traces)
        out = lf.tanh(lf.tensor(x).to(lf.bfloat16)).float().numpy()
        np.testing.assert_allclose(out, np.tanh(x), atol=1e-2)
        return len(_traces) - before

    assert run() > 0
    assert run() == 0


@pytest.mark.parametrize("damage", ["flip", "truncate", "inner"])
def test_damaged_entries_are_recompiled_with_the_right_result(store, damage):
    _tanh()
    (f,) = _kernels(store)
    blob = f.read_bytes()
    if damage == "flip":
        f.write_bytes(blob[:-10] + bytes([blob[-10] ^ 1]) + blob[-9:])
    elif damage == "truncate":
        f.write_bytes(blob[: len(blob) // 3])
    else:  # damaged inside a valid checksum: the executable's bytes cut short
        fmt, chars, tree, exe = pickle.loads(blob[len(cc._MAGIC) + 32 :])
        _rewrite(f, pickle.dumps((fmt, chars, tree, exe[: len(exe) // 2])))
    corrupted = cc.info().corrupted
    with pytest.warns(RuntimeWarning, match="compile cache"):
        assert _tanh() > 0  # recompiled
    assert cc.info().corrupted == corrupted + 1 and len(_kernels(store)) == 1
    assert _tanh() == 0  # the rewritten entry loads


def test_a_foreign_entry_is_refused_not_run(store):
    """Another kernel's executable under this kernel's name (argument types differ): refused, recompiled."""
    _tanh(6)
    (six,) = _kernels(store)
    _tanh(7)
    (seven,) = [f for f in _kernels(store) if f != six]
    seven.write_bytes(six.read_bytes())
    with pytest.warns(RuntimeWarning, match="unusable entry"):
        assert _tanh(7) > 0


def test_a_pickle_gadget_is_refused_never_called(store, tmp_path_factory):
    _tanh()
    (f,) = _kernels(store)
    flag = tmp_path_factory.mktemp("gadget") / "ran"

    class Gadget:
        def __reduce__(self):
            return (os.mkdir, (str(flag),))

    _rewrite(f, pickle.dumps((1, 10, Gadget(), b"")))
    with pytest.warns(RuntimeWarning, match="unusable entry"):
        assert _tanh() > 0
    assert not flag.exists()


def test_source_settings_and_default_dtype_are_in_the_key(store, monkeypatch):
    op = REGISTRY["tanh"]
    x = jax.numpy.zeros(3, jax.numpy.float32)
    base = ks.key(op, (), ((lf.Size([3]), lf.float32, 1),), [x], False, "forward")
    assert base is not None and base == ks.key(op, (), ((lf.Size([3]), lf.float32, 1),), [x], False, "forward")
    k = lambda: ks.key(op, (), ((lf.Size([3]), lf.float32, 1),), [x], False, "forward")
    source = ks.source_hash()
    monkeypatch.setattr(ks, "_source_hash", "0" * 64)  # an edited lazyflow
    assert k() != base
    monkeypatch.setattr(ks, "_source_hash", source)
    monkeypatch.setenv("LAZYFLOW_SOMETHING", "1")  # a lazyflow setting
    assert k() != base
    monkeypatch.delenv("LAZYFLOW_SOMETHING")
    with jax.default_matmul_precision("highest"):
        assert k() != base
    lf.set_default_dtype(lf.float64)
    try:
        assert k() != base
    finally:
        lf.set_default_dtype(lf.float32)
    assert k() == base
    assert ks.key(op, (), ((lf.Size([3]), lf.float32, 1),), [x], True, "forward") != base  # donation
    assert ks.key(op, (), ((lf.Size([3]), lf.float32, 1),), [x], False, "backward(0,)") != base
    jax.config.update("jax_enable_compilation_cache", False)
    try:
        assert k() is None  # JAX's cache off: this one too
    finally:
        jax.config.update("jax_enable_compilation_cache", True)
    assert ks.key(op, (object(),), (), [x], False, "forward") is None  # a static without a stable text form


def test_switched_off_no_kernel_entries_are_written(store, monkeypatch):
    """``LAZYFLOW_KERNEL_CACHE=0``: JAX's cache keeps the program, this store nothing (the whole cache switched off
    writes no file at all: tests/test_compile_cache.py)."""
    monkeypatch.setenv("LAZYFLOW_KERNEL_CACHE", "0")
    assert not ks.enabled_by_env()
    monkeypatch.setattr(ks, "ENABLED", ks.enabled_by_env())
    writes = cc.info().writes
    assert _tanh() > 0 and not _kernels(store)
    assert cc.info().writes == writes + 1 and len(list(store.rglob("*.xc"))) == 1


def test_loaded_in_place_kernels_still_donate(store):
    """A donated buffer is reused for the result: the same address before and after (a copy needs a new buffer
    while the old one is alive)."""

    def step():
        lf.eager.clear_cache()
        t = lf.zeros(4)
        t.add_(2.0)  # a miss: compiled, or loaded from disk
        address = t._value.unsafe_buffer_pointer()
        t.add_(1.0)  # a hit on the same entry
        return address, t

    address, t = step()
    assert t._value.unsafe_buffer_pointer() == address and t.tolist() == [3.0] * 4
    before = len(_traces)
    address, t = step()
    assert len(_traces) == before  # loaded, not traced
    assert t._value.unsafe_buffer_pointer() == address and t.tolist() == [3.0] * 4


def test_a_loaded_backward_takes_another_cotangent_structure(store):
    """A backward loaded for cotangents of every output, called with only some (None for the rest): jax.jit would
    retrace, a loaded executable refuses -- the jitted backward takes over, with the right gradient."""
    x_np = np.arange(6.0, dtype=np.float32).reshape(3, 2)

    def grad(used):
        x = lf.tensor(x_np, requires_grad=True)
        parts = x.unbind(0)
        total = parts[used[0]].sum()
        for i in used[1:]:
            total = total + parts[i].sum()
        total.backward()
        assert x.grad is not None
        return x.grad.numpy()

    grad([0, 1, 2])
    lf.eager.clear_cache()
    np.testing.assert_array_equal(grad([0, 1, 2]), np.ones((3, 2)))  # the backward loaded from disk
    np.testing.assert_array_equal(grad([1]), [[0, 0], [1, 1], [0, 0]])  # same entry, None cotangents


def test_a_jax_without_the_private_unpickler_still_imports_with_the_store_off():
    """The store subclasses a private JAX class (jax.experimental.serialize_executable._JaxPjrtUnpickler): a JAX
    that drops it must leave the store off (kernels through JAX's own cache), never break ``import lazyflow``."""
    code = textwrap.dedent(
        """
        import jax.experimental.serialize_executable as se
        del se._JaxPjrtUnpickler
        import lazyflow as lf
        from lazyflow.eager import kernel_store
        assert kernel_store.ENABLED is False
        print(float((lf.ones(3) * 2).sum()))
        """
    )
    env = {k: v for k, v in os.environ.items() if k != "LAZYFLOW_KERNEL_CACHE"}  # the store's default: on
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout.split()[-1] == str(float(np.sum(np.ones(3) * 2)))
