"""Placement rules for data-parallel and sharded-parameter training (used by lf.nn.Graph and lf.compile).

Single process: values are moved with ``jax.device_put``. Several processes (``init_process_group``): a value every
process holds in full (a parameter) becomes a global array with ``jax.make_array_from_callback``; a batch each
process holds its own slice of becomes one with ``jax.make_array_from_process_local_data``.
"""

from __future__ import annotations

import math

import jax
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec

__all__ = ["param_sharding", "batch_sharding", "replicated", "to_global", "batch_to_global"]


def replicated(mesh) -> NamedSharding:
    return NamedSharding(mesh, PartitionSpec())


def _axis_size(mesh, axis) -> int:
    names = (axis,) if isinstance(axis, str) else tuple(axis)
    return math.prod(mesh.shape[a] for a in names)


def param_sharding(shape, mesh, axis) -> NamedSharding:
    """FSDP-style: split the first dimension divisible by the axis size; replicate tensors with none."""
    if axis is None:
        return replicated(mesh)
    n = _axis_size(mesh, axis)
    for d, s in enumerate(shape):
        if s % n == 0 and s >= n:
            spec = [None] * len(shape)
            spec[d] = axis
            return NamedSharding(mesh, PartitionSpec(*spec))
    return replicated(mesh)


def batch_sharding(shape, mesh, axis) -> NamedSharding:
    """Split dim 0 (the batch) over ``axis``; 0-d values are replicated."""
    if axis is None or not shape:
        return replicated(mesh)
    return NamedSharding(mesh, PartitionSpec(axis, *([None] * (len(shape) - 1))))


def to_global(value, sharding):
    """``value`` (held in full by every process) placed as ``sharding``."""
    if getattr(value, "sharding", None) == sharding:
        return value
    if jax.process_count() == 1:
        return jax.device_put(value, sharding)
    full = np.asarray(value) if getattr(value, "is_fully_addressable", True) is not False else None
    if full is None:
        from jax.experimental import multihost_utils

        full = np.asarray(multihost_utils.process_allgather(value, tiled=True))
    return jax.make_array_from_callback(full.shape, sharding, lambda idx: full[idx])


def batch_to_global(value, sharding):
    """A batch: the whole global batch in one process, or this process's slice of it in several."""
    if getattr(value, "sharding", None) == sharding:
        return value
    if jax.process_count() == 1:
        return jax.device_put(value, sharding)
    return jax.make_array_from_process_local_data(sharding, np.asarray(value))
