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


def Mesh(shape, axis_names, *, devices=None) -> _JaxMesh:
    """A device mesh: ``Mesh((2, 4), ("data", "model"))`` over ``devices`` (default: all of JAX's devices).

    Args:
        shape: the mesh's size per axis (an int for a 1-d mesh).
        axis_names: one name per axis (a str for a 1-d mesh).
        devices: the devices to lay out, in mesh order (default ``jax.devices()``, every process's devices
            after ``init_process_group``); the first ``prod(shape)`` are used.
    Returns:
        A plain ``jax.sharding.Mesh``, so anything taking a mesh also accepts one built with JAX.
    Raises:
        ShapeError: ``shape`` and ``axis_names`` differ in length, a size is below 1, or a name repeats.
        DeviceError: the mesh needs more devices than exist.

    >>> mesh = lf.distributed.Mesh((8,), ("data",))
    """
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    axis_names = (axis_names,) if isinstance(axis_names, str) else tuple(axis_names)
    if len(shape) != len(axis_names):
        raise ShapeError(f"Mesh: {len(shape)} dimensions {shape} but {len(axis_names)} axis names {axis_names}")
    if any(not isinstance(s, int) or s < 1 for s in shape):
        raise ShapeError(f"Mesh: every axis size must be a positive int, got {shape}")
    if len(set(axis_names)) != len(axis_names):
        raise ShapeError(f"Mesh: axis names must be distinct, got {axis_names}")
    devs = list(jax.devices() if devices is None else devices)
    n = math.prod(shape)
    if n > len(devs):
        raise DeviceError(
            f"Mesh{shape} needs {n} devices but only {len(devs)} exist (on CPU, set "
            f"XLA_FLAGS=--xla_force_host_platform_device_count={n} before importing jax)"
        )
    return _JaxMesh(np.array(devs[:n], dtype=object).reshape(shape), axis_names)


def _spec(spec):
    if spec is None:
        return PartitionSpec()
    if isinstance(spec, PartitionSpec):
        return spec
    if isinstance(spec, str):
        return PartitionSpec(spec)
    return PartitionSpec(*spec)


def _check_spec(shape, mesh, ps, where: str) -> None:
    if len(ps) > len(shape):
        raise ShapeError(f"{where}: spec {ps} has {len(ps)} entries for a {len(shape)}-d tensor of shape {list(shape)}")
    used = []
    for dim, axes in enumerate(ps):
        if axes is None:
            continue
        names = (axes,) if isinstance(axes, str) else tuple(axes)
        unknown = [a for a in names if a not in mesh.shape]
        if unknown:
            raise ShapeError(
                f"{where}: spec {ps} names mesh axes {unknown}, but the mesh has axes {tuple(mesh.axis_names)}"
            )
        used.extend(names)
        size = math.prod(mesh.shape[a] for a in names)
        if shape[dim] % size:
            raise ShapeError(
                f"{where}: dim {dim} of size {shape[dim]} is not divisible by mesh axes {names} (size {size})"
            )
    if len(set(used)) != len(used):
        raise ShapeError(f"{where}: spec {ps} uses a mesh axis for more than one dimension")


def shard(t: Tensor, mesh: _JaxMesh, spec) -> Tensor:
    """Place ``t`` on ``mesh`` split as ``spec`` (OneFlow's ``to_global(placement, sbp)``).

    Gradients flow through unchanged (the placement is the identity on values).

    Args:
        t: the tensor (held in full by this process).
        mesh: a mesh from :func:`Mesh` or ``jax.sharding.Mesh``.
        spec: one entry per leading dimension: a mesh axis name, a tuple of names, or None (not split);
            e.g. ``("data", None)`` splits dim 0 over axis "data". A ``PartitionSpec`` works too.
    Returns:
        A tensor whose ``sharding`` is ``NamedSharding(mesh, spec)``.
    Raises:
        TypeError: ``t`` is not a lazyflow Tensor.
        ShapeError: more spec entries than dimensions, an axis the mesh lacks, an axis used twice, or a split
            dimension not divisible by its mesh axes' size.

    >>> x = lf.distributed.shard(lf.randn(8, 4), mesh, ("data", None))
    """
    if not isinstance(t, Tensor):
        raise TypeError(f"shard expects a lazyflow Tensor, got {type(t).__name__}")
    ps = _spec(spec)
    _check_spec(t.shape, mesh, ps, "shard")
    return _to_device(t, NamedSharding(mesh, ps))


def replicate(t: Tensor, mesh: _JaxMesh) -> Tensor:
    """A copy of ``t`` on every device of ``mesh`` (OneFlow's ``broadcast`` sbp).

    Args:
        t: the tensor.
        mesh: the mesh.
    Returns:
        A tensor whose ``sharding`` is ``NamedSharding(mesh, PartitionSpec())``.
    Raises:
        TypeError: ``t`` is not a lazyflow Tensor.
    """
    return shard(t, mesh, PartitionSpec())
