"""Meshes and shardings for tensors (JAX's ``Mesh``/``NamedSharding`` under torch-like names)."""

from __future__ import annotations

import math

import jax
import numpy as np
from jax.sharding import Mesh as _JaxMesh
from jax.sharding import NamedSharding, PartitionSpec

from .._core.errors import DeviceError, ShapeError
from .._tensor import Tensor, _to_device

__all__ = ["Mesh", "NamedSharding", "PartitionSpec", "shard", "replicate"]


def Mesh(shape, axis_names, *, devices=None) -> _JaxMesh:  # noqa: N802  (a constructor, like jax's)
    """A device mesh: ``Mesh((2, 4), ("data", "model"))`` over ``devices`` (default: all of JAX's devices).

    Returns a plain ``jax.sharding.Mesh``, so anything taking a mesh also accepts one built with JAX.
    Raises:
        DeviceError: the mesh needs more devices than exist.
    """
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    axis_names = (axis_names,) if isinstance(axis_names, str) else tuple(axis_names)
    if len(shape) != len(axis_names):
        raise ShapeError(f"Mesh: {len(shape)} dimensions {shape} but {len(axis_names)} axis names {axis_names}")
    devs = list(jax.devices() if devices is None else devices)
    n = math.prod(shape)
    if n > len(devs):
        raise DeviceError(f"Mesh{shape} needs {n} devices but only {len(devs)} exist (on CPU, set "
                          f"XLA_FLAGS=--xla_force_host_platform_device_count={n} before importing jax)")
    return _JaxMesh(np.array(devs[:n], dtype=object).reshape(shape), axis_names)


def _spec(spec):
    if spec is None:
        return PartitionSpec()
    if isinstance(spec, PartitionSpec):
        return spec
    if isinstance(spec, str):
        return PartitionSpec(spec)
    return PartitionSpec(*spec)


def shard(t: Tensor, mesh: _JaxMesh, spec) -> Tensor:
    """Place ``t`` on ``mesh`` split as ``spec`` (e.g. ``("data", None)``: dim 0 over the "data" axis).

    Gradients flow through unchanged (the placement is the identity on values).
    Raises:
        ShapeError: a split dimension is not divisible by its mesh axis size.
    """
    if not isinstance(t, Tensor):
        raise TypeError(f"shard expects a lazyflow Tensor, got {type(t).__name__}")
    ps = _spec(spec)
    if len(ps) > t.ndim:
        raise ShapeError(f"shard: spec {ps} has {len(ps)} entries for a {t.ndim}-d tensor of shape {list(t.shape)}")
    for dim, axes in enumerate(ps):
        if axes is None:
            continue
        names = (axes,) if isinstance(axes, str) else tuple(axes)
        size = math.prod(mesh.shape[a] for a in names)
        if t.shape[dim] % size:
            raise ShapeError(f"shard: dim {dim} of size {t.shape[dim]} is not divisible by mesh axes {names} "
                             f"(size {size})")
    return _to_device(t, NamedSharding(mesh, ps))


def replicate(t: Tensor, mesh: _JaxMesh) -> Tensor:
    """A copy of ``t`` on every device of ``mesh``."""
    return shard(t, mesh, PartitionSpec())
