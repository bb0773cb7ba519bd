"""lazyflow's glibc malloc defaults (lazyflow/_core/host_memory.py): a freed big buffer is reused without page faults,
and ``LAZYFLOW_MALLOC_DEFAULTS=0`` leaves malloc as it was. Each case runs in a fresh process (the setting is
process-wide); faults are counted, not timed."""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="the defaults apply to glibc only")

# malloc 64 MiB, touch every page, free; then the same again, counting the minor faults of the second round
_SCRIPT = r"""
import ctypes, resource
import lazyflow
from lazyflow._core import host_memory
libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
n = 64 << 20
def round_trip():
    p = libc.malloc(n)
    ctypes.memset(p, 1, n)
    libc.free(p)
round_trip()
f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
round_trip()
print(host_memory.MALLOC_DEFAULTS_APPLIED, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0)
"""


def _run(env_value):
    env = dict(os.environ)
    env.pop("LAZYFLOW_MALLOC_DEFAULTS", None)
    if env_value is not None:
        env["LAZYFLOW_MALLOC_DEFAULTS"] = env_value
    out = subprocess.run([sys.executable, "-c", _SCRIPT], env=env, capture_output=True, text=True, check=True)
    applied, faults = out.stdout.split()
    return applied == "True", int(faults)


def test_a_freed_big_buffer_is_reused_without_faults():
    applied, faults = _run(None)
    assert applied
    assert faults < 1000  # 64 MiB is 16384 pages: a fresh mapping would fault each one in again


def test_opt_out_leaves_malloc_as_it_was():
    applied, faults = _run("0")
    assert not applied
    assert faults >= 16000  # glibc mmaps the 64 MiB afresh and every page faults
