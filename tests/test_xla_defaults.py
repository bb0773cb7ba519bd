"""lazyflow's XLA CPU defaults (oneDNN) reach XLA_FLAGS before JAX's backend starts, a user's own value wins, the
switch turns them off, and a backend started before the import is left alone; the compile cache's fingerprint
sees the final flags. Each case is a fresh process."""

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_PROBE = """
import json, os, sys
if sys.argv[1] == "started":
    import jax
    jax.devices()  # the backend starts (and reads XLA_FLAGS) before lazyflow is imported
import lazyflow
from lazyflow._core import compile_cache
print(json.dumps({"flags": os.environ.get("XLA_FLAGS", ""), "fingerprint": compile_cache.fingerprint()}))
"""


def _probe(mode="fresh", **env):
    e = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "LAZYFLOW_XLA_DEFAULTS")}
    e.update(env, PYTHONPATH=ROOT, JAX_PLATFORMS="cpu")
    out = subprocess.run([sys.executable, "-c", _PROBE, mode], capture_output=True, text=True, env=e, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def default():
    return _probe()


def test_onednn_is_on_by_default(default):
    assert default["flags"].split() == ["--xla_cpu_use_onednn=true"]


def test_the_users_value_wins_and_other_flags_are_kept():
    r = _probe(XLA_FLAGS="--xla_cpu_use_onednn=false --xla_force_host_platform_device_count=2")
    assert r["flags"].split() == ["--xla_cpu_use_onednn=false", "--xla_force_host_platform_device_count=2"]
    r = _probe(XLA_FLAGS="--xla_force_host_platform_device_count=2")
    assert r["flags"].split() == ["--xla_force_host_platform_device_count=2", "--xla_cpu_use_onednn=true"]


def test_switch_off_adds_nothing_and_changes_the_cache_key(default):
    r = _probe(LAZYFLOW_XLA_DEFAULTS="0")
    assert r["flags"] == ""
    assert r["fingerprint"] != default["fingerprint"]  # programs compiled under other flags are never reused


def test_a_backend_started_before_the_import_is_left_alone():
    assert _probe("started")["flags"] == ""
