"""``lf.backends.cpu``: the host CPU's vector capability, named as torch names it."""

from __future__ import annotations

import platform

__all__ = ["get_cpu_capability"]

# torch uses AVX512 kernels when all of these are present (ATen's compute_cpu_capability)
_AVX512 = frozenset({"avx512f", "avx512bw", "avx512vl", "avx512dq", "fma"})


def _cpu_flags() -> set[str]:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith(("flags", "Features")):
                    return set(line.partition(":")[2].split())
    except OSError:
        pass
    return set()


def get_cpu_capability() -> str:
    """The vector instruction set torch's CPU kernels would use on this machine: ``'AVX512'``, ``'AVX2'`` or
    ``'DEFAULT'`` (x86 only; torch's ARM, POWER and s390 names are not detected). It describes the host; XLA:CPU
    compiles for the host's features by itself."""
    machine = platform.machine().lower()
    flags = _cpu_flags()
    if machine in ("x86_64", "amd64"):
        if _AVX512 <= flags:
            return "AVX512"
        if {"avx2", "fma"} <= flags:
            return "AVX2"
    return "DEFAULT"
