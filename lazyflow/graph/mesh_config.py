"""Data-parallel / sharded-parameter placement shared by ``lf.compile`` and ``lf.nn.Graph`` (their ``.config``)."""

from __future__ import annotations

from .._core.placement import sharding_of
from .._tensor import Tensor, _make, _meta_of, _publish
from ..distributed.spmd import batch_sharding, batch_to_global, param_sharding, replicated, to_global

__all__ = ["MeshConfig"]


def _check_axis(mesh, axis) -> None:
    names = (axis,) if isinstance(axis, str) else tuple(axis)
    missing = [a for a in names if a not in mesh.axis_names]
    if missing:
        raise ValueError(f"mesh has axes {mesh.axis_names}, not {missing}")


def _ensure_placed(t: Tensor, sharding) -> None:
    """Rebind ``t`` (same object) to ``sharding`` if it is placed differently."""
    if t._meta[2] and sharding_of(t._meta[2]) == sharding:
        return
    t._value = to_global(t._value, sharding)
    t._meta = _meta_of(t._value)
    if t._peers is not None:
        _publish(t)


class MeshConfig:
    """Where a compiled program's state and inputs live on a device mesh."""

    def __init__(self):
        self.mesh = None
        self.data_axis = None
        self.param_axis = None

    def data_parallel(self, mesh, axis: str = "data") -> None:
        """Split each batch (dim 0 of every tensor argument) over mesh axis ``axis``; parameters are replicated and
        XLA all-reduces the gradients inside the program. Same results as one device with the same global batch.
        In several processes, each passes its own slice of the global batch."""
        _check_axis(mesh, axis)
        if self.mesh is not None and self.mesh is not mesh:
            raise ValueError("data_parallel and shard_parameters must use the same mesh")
        self.mesh, self.data_axis = mesh, axis

    def shard_parameters(self, mesh, axis: str = "data") -> None:
        """FSDP-style: parameters (and optimizer state) are split over mesh axis ``axis`` (first divisible dimension;
        others replicated) and gathered inside the program where needed; ``state_dict()`` then holds the sharded
        tensors, in the eager layout."""
        _check_axis(mesh, axis)
        if self.mesh is not None and self.mesh is not mesh:
            raise ValueError("data_parallel and shard_parameters must use the same mesh")
        self.mesh, self.param_axis = mesh, axis

    def _mesh_key(self):
        return (id(self.mesh), self.data_axis, self.param_axis)

    def _param_sharding(self, shape):
        """Where a parameter (or optimizer state) of ``shape`` lives on the mesh."""
        return param_sharding(shape, self.mesh, self.param_axis)

    def _place_array(self, value):
        """``value`` (optimizer state) placed like a parameter of its shape."""
        sharding = self._param_sharding(value.shape)
        return value if value.sharding == sharding else to_global(value, sharding)

    def _place(self, params, replicated_state, leaves):
        """Place state in the mesh (rebinding the same tensor objects) and return batch leaves placed for it."""
        if self.mesh is None:
            return leaves
        for t in params:
            _ensure_placed(t, param_sharding(t.shape, self.mesh, self.param_axis))
        for t in replicated_state:
            _ensure_placed(t, replicated(self.mesh))
        return [
            _make(batch_to_global(x._value, batch_sharding(x.shape, self.mesh, self.data_axis)))
            if isinstance(x, Tensor)
            else x
            for x in leaves
        ]
