"""``lf.utils``: data loading (``lf.utils.data``), JAX interop (``lf.utils.jax``) and activation checkpointing
(``lf.utils.checkpoint``)."""

from . import checkpoint, data, jax

__all__ = ["checkpoint", "data", "jax"]
