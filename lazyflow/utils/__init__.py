"""``lf.utils``: data loading (``lf.utils.data``), JAX interop (``lf.utils.jax``), activation checkpointing
(``lf.utils.checkpoint``) and scanned layers (``lf.utils.scan``)."""

from . import checkpoint, data, jax, scan

__all__ = ["checkpoint", "data", "jax", "scan"]
