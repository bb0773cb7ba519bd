"""The compile cache across runs (issue 15): fresh processes against a temporary cache directory.

A second process compiles nothing the first compiled (eager kernels, ``lf.compile``, ``lf.nn.Graph``) and gets the
same numbers (checked against numpy); damaged entries are removed and recompiled, never loaded; an unusable
directory costs a recompile and one warning; concurrent writers leave a consistent cache; the fingerprint keeps
entries of another version/flags apart; the size bound holds.
"""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import lazyflow as lf
from lazyflow._core import compile_cache as cc

HERE = os.path.dirname(os.path.abspath(__file__))

SCRIPT = textwrap.dedent(
    """
    import json, warnings
    import numpy as np
    warnings.simplefilter("always")
    import lazyflow as lf

    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((5, 4)).astype(np.float32), rng.standard_normal((4, 3)).astype(np.float32)
    eager = (lf.tensor(a) @ lf.tensor(b)).relu().sum(0)

    lf.manual_seed(0)
    model = lf.nn.Sequential(lf.nn.Linear(4, 8), lf.nn.Tanh(), lf.nn.Linear(8, 2))
    w0 = [p.detach().numpy().copy() for p in model.parameters()]
    compiled = lf.compile(model)(lf.tensor(a)).detach()

    opt = lf.optim.SGD(model.parameters(), lr=0.1)

    class Step(lf.nn.Graph):
        def __init__(self):
            super().__init__()
            self.m = model
            self.add_optimizer(opt)

        def build(self, x):
            loss = (self.m(x) ** 2).mean()
            loss.backward()
            return loss

    step = Step()
    losses = [step(lf.tensor(a)).item() for _ in range(2)]
    info = lf.config.compile_cache_info()
    print("RESULT " + json.dumps({
        "eager": eager.tolist(), "compiled": compiled.tolist(), "losses": losses,
        "w0": [w.tolist() for w in w0],
        "info": {k: getattr(info, k) for k in ("enabled", "directory", "hits", "misses", "writes", "corrupted",
                                               "write_errors")},
    }))
    """
)


def _run(cache_dir, *, env_extra=None, script=SCRIPT, timeout=300):
    env = dict(os.environ, JAX_PLATFORMS="cpu", LAZYFLOW_COMPILE_CACHE_DIR=str(cache_dir))
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    env.pop("LAZYFLOW_COMPILE_CACHE", None)
    env.update(env_extra or {})
    p = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=timeout)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    line = next(ln for ln in p.stdout.splitlines() if ln.startswith("RESULT "))
    return json.loads(line[len("RESULT ") :]), p.stderr


def _reference(r):
    """The numbers the script must print, from numpy: the eager expression and the compiled forward."""
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((5, 4)).astype(np.float32), rng.standard_normal((4, 3)).astype(np.float32)
    np.testing.assert_allclose(r["eager"], np.maximum(a @ b, 0).sum(0), rtol=1e-5, atol=1e-6)
    w1, b1, w2, b2 = (np.array(w, np.float32) for w in r["w0"])
    np.testing.assert_allclose(r["compiled"], np.tanh(a @ w1.T + b1) @ w2.T + b2, rtol=1e-5, atol=1e-6)


def _entries(d):
    return sorted(p for p in (d.rglob("*.xc")))


@pytest.fixture(scope="module")
def warm(tmp_path_factory):
    d = tmp_path_factory.mktemp("cc")
    first, _ = _run(d)
    second, err = _run(d)
    return d, first, second, err


def test_second_process_compiles_nothing_and_gets_the_same_numbers(warm):
    d, first, second, err = warm
    assert first["info"]["enabled"] and first["info"]["writes"] > 0 and first["info"]["misses"] > 0
    assert second["info"]["misses"] == 0 and second["info"]["writes"] == 0, second["info"]
    assert second["info"]["hits"] == first["info"]["writes"]
    for k in ("eager", "compiled", "losses"):
        assert second[k] == first[k], k  # bit for bit: the very same executables
    _reference(second)
    assert "compile cache" not in err
    assert len(_entries(d)) == first["info"]["writes"]


def test_a_cache_directory_can_be_moved(tmp_path, warm):
    import shutil

    src, first, _, _ = warm
    shutil.copytree(src, tmp_path / "moved")
    r, _ = _run(tmp_path / "moved")
    assert r["info"]["misses"] == 0 and r["info"]["hits"] == first["info"]["writes"], r["info"]


def test_damaged_entries_are_recompiled_never_loaded(tmp_path, warm):
    # every kind of damage in one cache directory (one process loads them all): a flipped bit, a truncated entry,
    # an empty file, random bytes of the same length -- each entry gets one kind, each kind at least one entry
    src, first, _, _ = warm
    d = tmp_path / "cc"
    import shutil

    shutil.copytree(src, d)
    files = _entries(d)
    kinds = ["flip", "truncate", "empty", "garbage"]
    assert len(files) >= len(kinds), files
    for i, f in enumerate(files):
        blob = bytearray(f.read_bytes())
        damage = kinds[i % len(kinds)]
        if damage == "flip":
            blob[len(blob) // 2] ^= 0x40
        elif damage == "truncate":
            blob = blob[: len(blob) // 2]
        elif damage == "empty":
            blob = bytearray()
        else:
            blob = bytearray(os.urandom(len(blob)))
        f.write_bytes(bytes(blob))
    r, err = _run(d)
    assert r["info"]["corrupted"] == len(files) and r["info"]["hits"] == 0, r["info"]
    assert r["info"]["writes"] == len(files)  # rewritten whole
    _reference(r)
    assert r["losses"] == first["losses"]
    assert err.count("compile cache: damaged entry") == 1  # one warning per process
    again, _ = _run(d)
    assert again["info"]["corrupted"] == 0 and again["info"]["misses"] == 0


def test_concurrent_processes_fill_one_cache_consistently(tmp_path):
    env = dict(os.environ, JAX_PLATFORMS="cpu", LAZYFLOW_COMPILE_CACHE_DIR=str(tmp_path))
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    env.pop("LAZYFLOW_COMPILE_CACHE", None)
    procs = [
        subprocess.Popen([sys.executable, "-c", SCRIPT], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for _ in range(3)
    ]
    outs = [p.communicate(timeout=400) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1][-2000:] for o in outs]
    results = [json.loads(next(ln for ln in o[0].decode().splitlines() if ln.startswith("RESULT "))[7:]) for o in outs]
    assert all(r["losses"] == results[0]["losses"] for r in results)
    assert not list(tmp_path.rglob("*.tmp"))  # no temporary file left behind
    after, _ = _run(tmp_path)
    assert after["info"]["misses"] == 0 and after["info"]["corrupted"] == 0, after["info"]
    _reference(after)


def test_an_unusable_directory_costs_a_recompile_and_one_warning(tmp_path):
    blocker = tmp_path / "not_a_dir"
    blocker.write_text("a file where the cache directory should be")
    r, err = _run(blocker)
    assert not r["info"]["enabled"] and r["info"]["writes"] == 0
    _reference(r)
    assert err.count("lazyflow compile cache:") == 1


def test_a_directory_others_can_write_is_refused(tmp_path):
    d = tmp_path / "shared"
    d.mkdir()
    os.chmod(d, 0o777)
    r, err = _run(d)
    assert not r["info"]["enabled"] and not _entries(d)
    assert "writable by other users" in err
    _reference(r)


def test_write_failures_keep_the_process_running(tmp_path):
    """The directory disappears after the cache was set up (a full or removed disk): writes fail, numbers stay."""
    script = (
        "import shutil, lazyflow as lf\n"
        "shutil.rmtree(lf.config.compile_cache_info().directory)\n" + SCRIPT.replace("import lazyflow as lf\n", "")
    )
    r, err = _run(tmp_path, script=script)
    assert r["info"]["enabled"] and r["info"]["write_errors"] == 1 and r["info"]["writes"] == 0
    _reference(r)
    assert err.count("lazyflow compile cache:") == 1


def test_switched_off_by_environment_and_left_to_a_user_jax_cache(tmp_path):
    r, _ = _run(tmp_path, env_extra={"LAZYFLOW_COMPILE_CACHE": "0"})
    assert not r["info"]["enabled"] and not _entries(tmp_path)
    _reference(r)
    jax_dir = tmp_path / "jax_own"
    r, _ = _run(tmp_path / "lf", env_extra={"JAX_COMPILATION_CACHE_DIR": str(jax_dir)})
    assert not r["info"]["enabled"] and not (tmp_path / "lf").exists()


def test_fingerprint_separates_versions_flags_and_dtype_modes(tmp_path, monkeypatch):
    base = cc.fingerprint()
    monkeypatch.setenv("XLA_FLAGS", os.environ.get("XLA_FLAGS", "") + " --xla_cpu_use_thunk_runtime=true")
    assert cc.fingerprint() != base
    monkeypatch.undo()
    monkeypatch.setattr(cc, "__version__", "999.0")
    assert cc.fingerprint() != base
    monkeypatch.undo()
    monkeypatch.setenv("LAZYFLOW_X64", "0")
    assert cc.fingerprint() != base
    monkeypatch.undo()
    assert cc.fingerprint() == base
    # a process with other XLA flags writes into another directory
    r, _ = _run(tmp_path, env_extra={"XLA_FLAGS": "--xla_force_host_platform_device_count=2"})
    r2, _ = _run(tmp_path)
    assert r["info"]["directory"] != r2["info"]["directory"] and r2["info"]["hits"] == 0


def test_size_bound_and_clear_in_process(tmp_path):
    before = lf.config.compile_cache_info()
    try:
        lf.config.set_compile_cache(True, tmp_path, max_bytes=60_000)
        for n in range(3, 40):
            (lf.arange(float(n)) * 3.0).sum()  # a new kernel per length
        info = lf.config.compile_cache_info()
        files = _entries(tmp_path)
        assert info.writes > 20 and info.evictions > 0
        assert sum(f.stat().st_size for f in files) <= 60_000
        lf.config.clear_compile_cache()
        assert not _entries(tmp_path)
        with pytest.raises(ValueError, match="max_bytes"):
            lf.config.set_compile_cache(True, tmp_path, max_bytes=0)
        # switching again without max_bytes restores the default bound, not the last one
        lf.config.set_compile_cache(True, tmp_path)
        assert lf.config.compile_cache_info().max_bytes == 2 << 30
    finally:
        lf.config.set_compile_cache(
            before.enabled, os.path.dirname(before.directory) if before.directory else None, max_bytes=before.max_bytes
        )
