"""``lf.backends.cudnn``: torch's cuDNN switches, as settable flags with torch's defaults.

XLA picks (and autotunes) its convolution algorithms itself, so ``benchmark``, ``deterministic``, ``allow_tf32`` and
``enabled`` keep the value a script sets and change nothing: XLA's determinism is the ``XLA_FLAGS`` option
``--xla_gpu_deterministic_ops``, read when JAX starts; convolution precision follows
``lf.set_float32_matmul_precision``.
"""

from __future__ import annotations

from .._core.device import devices_of

__all__ = ["is_available", "benchmark", "deterministic", "allow_tf32", "enabled"]

benchmark: bool = False
deterministic: bool = False
allow_tf32: bool = True
enabled: bool = True


def is_available() -> bool:
    """Whether cuDNN can be used: JAX has a GPU (XLA's GPU backend calls cuDNN); False without one, as torch's CPU
    build."""
    return bool(devices_of("cuda"))
