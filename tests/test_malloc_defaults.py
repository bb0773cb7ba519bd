"""lazyflow's glibc malloc settings (``lazyflow._core.malloc``): applied at import, so a compiled program's large
scratch block is reused instead of faulted in afresh each call; switched off by ``LAZYFLOW_MALLOC_DEFAULTS=0`` or by
a malloc setting of the user's own. Each case is a fresh process; page faults are counted with ``getrusage``."""

import json
import os
import platform
import subprocess
import sys

import pytest

from lazyflow._core import config, malloc

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGE = os.sysconf("SC_PAGE_SIZE")

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc", reason="glibc's malloc only"
)

# a program whose 64 MiB scratch block (XLA's "preallocated temp") is taken on the calling thread
_PROBE = """
import json, resource
import lazyflow
from lazyflow._core import config
import jax, jax.numpy as jnp
f = jax.jit(lambda x: (jnp.exp(x)[::-1] * jnp.cos(x)).cumsum()[::-1][:8])
x = jnp.ones((1 << 23,), jnp.float32)
temp = f.lower(x).compile().memory_analysis().temp_size_in_bytes
f(x).block_until_ready(); f(x).block_until_ready()
per_call = []
for _ in range(7):
    r0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    f(x).block_until_ready()
    per_call.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - r0)
faults = sorted(per_call)[3]  # the median call: a stray fault burst elsewhere in the process does not decide
print(json.dumps({"applied": config.MALLOC_DEFAULTS_APPLIED, "temp": temp, "faults": faults}))
"""

_KNOBS = ("LAZYFLOW_MALLOC_DEFAULTS", "GLIBC_TUNABLES", *malloc._USER_KNOBS)


def _probe(**env):
    e = {k: v for k, v in os.environ.items() if k not in _KNOBS}
    e.update(env, PYTHONPATH=ROOT, JAX_PLATFORMS="cpu")
    out = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, env=e, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_defaults_apply_and_a_programs_scratch_block_is_not_faulted_in_each_call():
    r = _probe()
    assert r["applied"]["M_MMAP_MAX"] == 0
    assert 256 << 20 <= r["applied"]["M_TRIM_THRESHOLD"] <= (1 << 31) - 1
    assert r["temp"] >= 64 << 20  # past glibc's largest mmap threshold (32 MiB): without the settings, a fresh map
    assert r["faults"] < 0.05 * r["temp"] / PAGE


def test_switched_off_glibc_maps_and_faults_the_block_each_call():
    r = _probe(LAZYFLOW_MALLOC_DEFAULTS="0")
    assert r["applied"] == {}
    assert r["faults"] > 0.8 * r["temp"] / PAGE  # the whole block, page by page: what the defaults remove


@pytest.mark.parametrize(
    "env",
    [
        {"MALLOC_TRIM_THRESHOLD_": "1000000"},
        {"MALLOC_MMAP_MAX_": "65536"},
        {"GLIBC_TUNABLES": "glibc.malloc.mmap_max=9"},
    ],
)
def test_a_users_own_malloc_setting_wins(env):
    # the module alone (it imports only the standard library): what lazyflow's import would apply, without JAX
    code = (
        "import importlib.util, json\n"
        f"spec = importlib.util.spec_from_file_location('m', {malloc.__file__!r})\n"
        "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
        "print(json.dumps(m.MALLOC_DEFAULTS_APPLIED))\n"
    )
    e = {k: v for k, v in os.environ.items() if k not in _KNOBS}
    probe = lambda **extra: subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env={**e, **extra}, timeout=60, check=True
    )
    assert json.loads(probe().stdout) != {}  # the same probe applies the defaults without the user's setting
    assert json.loads(probe(**env).stdout) == {}


def test_this_test_process_runs_under_the_defaults():
    # the conv/BatchNorm/Graph tests against torch run in processes like this one: the defaults are what they test
    if any(k in os.environ for k in _KNOBS):
        pytest.skip("a malloc setting in this environment switched the defaults off")
    assert config.MALLOC_DEFAULTS_APPLIED == {"M_TRIM_THRESHOLD": malloc._trim_threshold(), "M_MMAP_MAX": 0}
