"""``DataParallel``: one process, the batch split over its local devices (torch.nn.DataParallel's contract).

torch copies the module to each GPU and scatters the batch; here the parameters and buffers are replicated over
a mesh of the local devices once (the same Parameter objects, new placement) and each tensor argument is split
along ``dim`` over it; JAX's SPMD partitioner runs every op on all devices and the gradients of the replicated
parameters come back summed over the batch, as on one device.
"""

from __future__ import annotations

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from ..._tensor import Tensor, _rebind
from ...distributed.placement import shard
from ..module import Module

__all__ = ["DataParallel"]


class DataParallel(Module):
    """Run ``module`` data-parallel over this process's devices; ``dp(x)`` equals ``module(x)``.

    With one device (or one id in ``device_ids``) it only calls ``module``. With several, the module's
    parameters and buffers are replicated over them at construction and every tensor argument whose ``dim``
    divides by the device count is split along ``dim``; others are passed unchanged. The output stays split
    (eager ops and ``.item()``/``.numpy()`` work on it as on any tensor). State dict keys carry the ``module.``
    prefix, as torch's.

    Args:
        module: the model.
        device_ids: indices into ``jax.local_devices()`` (default: all of them).
        output_device: accepted for torch compatibility and ignored.
        dim: the batch dimension of the inputs.
    Raises:
        ValueError: a device id out of range.

    >>> dp = lf.nn.DataParallel(model)
    >>> loss = loss_fn(dp(x), y)
    """

    def __init__(self, module: Module, device_ids: list[int] | None = None, output_device=None, dim: int = 0) -> None:
        super().__init__()
        if not isinstance(module, Module):
            raise TypeError(f"DataParallel wraps an lf.nn.Module, got {type(module).__name__}")
        local = jax.local_devices()
        ids = list(range(len(local))) if device_ids is None else [int(i) for i in device_ids]
        if not ids or any(not 0 <= i < len(local) for i in ids):
            raise ValueError(f"DataParallel: device_ids must be indices in [0, {len(local)}), got {device_ids}")
        self.module = module
        self.device_ids = ids
        self.dim = dim
        self._mesh = Mesh(np.array([local[i] for i in ids]), ("batch",)) if len(ids) > 1 else None
        if self._mesh is not None:
            everywhere = NamedSharding(self._mesh, PartitionSpec())
            for t in list(module.parameters()) + list(module.buffers()):
                _rebind(t, jax.device_put(t._value, everywhere))

    def _split(self, x):
        mesh = self._mesh
        if mesh is None or not isinstance(x, Tensor) or x.ndim <= self.dim or x.shape[self.dim] % len(self.device_ids):
            return x
        return shard(x, mesh, tuple("batch" if d == self.dim else None for d in range(x.ndim)))

    def forward(self, *inputs, **kwargs):
        inputs = tuple(self._split(x) for x in inputs)
        kwargs = {k: self._split(v) for k, v in kwargs.items()}
        return self.module(*inputs, **kwargs)
