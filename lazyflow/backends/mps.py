"""``lf.backends.mps``: Apple's Metal backend, which lazyflow does not target."""

from __future__ import annotations

__all__ = ["is_available", "is_built"]


def is_available() -> bool:
    """False: lazyflow runs on JAX's CPU, GPU and TPU backends, never on MPS."""
    return False


def is_built() -> bool:
    """False: lazyflow is not built for MPS."""
    return False
