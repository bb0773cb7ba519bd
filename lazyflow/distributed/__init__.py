"""Beyond one device, in PyTorch/OneFlow terms over JAX's own engine (meshes, shardings, ``jax.distributed``).

* Placement: ``Mesh``, ``shard(t, mesh, spec)``, ``replicate(t, mesh)``, ``t.to(sharding)``, ``t.sharding``,
  ``t.is_sharded``. Eager ops on sharded tensors run as usual (JAX propagates shardings; the eager op cache key
  includes each operand's placement).
* Processes: ``init_process_group``, ``get_rank``, ``get_world_size``, ``is_initialized``,
  ``broadcast_object_list``, ``all_gather_object``; the launcher
  ``python -m lazyflow.distributed.run --nproc N script.py args...``.
* Eager collectives (torch.distributed's names): ``all_reduce``, ``broadcast``, ``reduce``, ``all_gather``,
  ``all_gather_into_tensor``, ``reduce_scatter_tensor``, ``all_to_all_single``, ``scatter``, ``gather``,
  ``ReduceOp``, ``new_group``, ``is_available``, ``barrier``; ``async_op=True`` returns a ``Work`` handle. Inside
  ``lf.compile`` / ``lf.nn.Graph`` the same calls compile to XLA collectives (the program runs as a ``shard_map``
  over every process: :mod:`.traced`, :mod:`.program`).
"""

from __future__ import annotations

from .._core.errors import DistributedError, DistributedNotInitializedError
from .collectives import (
    Work,
    all_gather,
    all_gather_into_tensor,
    all_reduce,
    all_to_all_single,
    barrier,
    broadcast,
    gather,
    reduce,
    reduce_scatter_tensor,
    scatter,
)
from .groups import ProcessGroup, ReduceOp, is_available, new_group
from .placement import Mesh, NamedSharding, PartitionSpec, replicate, shard
from .process_group import (
    all_gather_object,
    broadcast_object_list,
    destroy_process_group,
    get_rank,
    get_world_size,
    init_process_group,
    is_initialized,
)

__all__ = [
    "Mesh",
    "NamedSharding",
    "PartitionSpec",
    "shard",
    "replicate",
    "init_process_group",
    "get_rank",
    "get_world_size",
    "barrier",
    "is_initialized",
    "is_available",
    "destroy_process_group",
    "broadcast_object_list",
    "all_gather_object",
    "ReduceOp",
    "ProcessGroup",
    "new_group",
    "Work",
    "all_reduce",
    "reduce",
    "broadcast",
    "all_gather",
    "all_gather_into_tensor",
    "reduce_scatter_tensor",
    "all_to_all_single",
    "scatter",
    "gather",
    "DistributedError",
    "DistributedNotInitializedError",
]
