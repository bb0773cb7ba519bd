"""Process groups for eager collectives: ``ReduceOp``, ``new_group`` and the mesh each group runs on.

A group is a 1-d mesh (axis ``"rank"``) over one device per member process (each process's first local device);
a collective is a program compiled for that mesh, so only member processes take part in it.
"""

from __future__ import annotations

import enum

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from .._core.errors import DistributedError, DistributedNotInitializedError
from .process_group import is_initialized

__all__ = ["ReduceOp", "ProcessGroup", "new_group", "group_of", "is_available"]

AXIS = "rank"


class ReduceOp(enum.Enum):
    """How :func:`all_reduce` and friends combine the ranks' values (torch.distributed.ReduceOp's members)."""

    SUM = "sum"
    AVG = "avg"
    PRODUCT = "product"
    MIN = "min"
    MAX = "max"
    BAND = "band"
    BOR = "bor"
    BXOR = "bxor"


class ProcessGroup:
    """A set of ranks that run collectives together (from :func:`new_group`; ``None`` means every rank).

    Attributes:
        ranks: the member ranks (global numbering), in group-rank order.
    """

    def __init__(self, ranks: list[int]) -> None:
        self.ranks = list(ranks)
        me = jax.process_index()
        self.rank = self.ranks.index(me) if me in self.ranks else -1
        first: dict = {}
        for d in jax.devices():
            if d.process_index in self.ranks and (d.process_index not in first or d.id < first[d.process_index].id):
                first[d.process_index] = d
        self.mesh = Mesh(np.array([first[r] for r in self.ranks]), (AXIS,))
        self.device = first.get(me)
        self.sharding = NamedSharding(self.mesh, PartitionSpec(AXIS))

    def size(self) -> int:
        """Number of member ranks."""
        return len(self.ranks)

    def __repr__(self) -> str:
        return f"ProcessGroup(ranks={self.ranks})"


_world: dict[str, ProcessGroup] = {}


def is_available() -> bool:
    """Whether collectives can be used (always: JAX provides them on every backend)."""
    return True


def _world_group() -> ProcessGroup:
    if not is_initialized():
        raise DistributedNotInitializedError(
            "Default process group has not been initialized, please make sure to call "
            "lf.distributed.init_process_group() (under python -m lazyflow.distributed.run) first"
        )
    g = _world.get("world")
    if g is None or g.size() != jax.process_count():
        g = _world["world"] = ProcessGroup(list(range(jax.process_count())))
    return g


def group_of(group: ProcessGroup | None, what: str) -> ProcessGroup:
    """``group`` (the default group for None), checked: initialized, and this process a member."""
    g = _world_group() if group is None else group
    if not isinstance(g, ProcessGroup):
        raise TypeError(f"{what}: group must be a ProcessGroup from new_group() or None, got {type(g).__name__}")
    if g.rank < 0:
        raise DistributedError(
            f"{what}: rank {jax.process_index()} is not a member of {g!r}; call collectives on a group only from "
            "its member ranks"
        )
    return g


def new_group(
    ranks: list[int] | None = None,
    timeout=None,
    backend=None,
    pg_options=None,
    use_local_synchronization: bool = False,
    group_desc: str | None = None,
    device_id=None,
    sort_ranks: bool = True,
) -> ProcessGroup:
    """A group of ``ranks`` (all ranks when None) for collectives; every process must call it, like torch.

    A process that is not in ``ranks`` gets the group too, but its :func:`get_rank` in it is -1 and a collective
    on it raises.

    Args:
        ranks: distinct global ranks.
        sort_ranks: number the members in ascending global rank (torch's default); False keeps ``ranks``' order.
        timeout, backend, pg_options, use_local_synchronization, group_desc, device_id: accepted for torch
            compatibility and ignored.
    Raises:
        DistributedNotInitializedError: before ``init_process_group``.
        ValueError: a rank out of range or repeated.
    """
    _world_group()
    n = jax.process_count()
    ranks = list(range(n)) if ranks is None else [int(r) for r in ranks]
    if len(set(ranks)) != len(ranks) or not ranks or any(not 0 <= r < n for r in ranks):
        raise ValueError(f"new_group: ranks must be distinct ranks in [0, {n}), got {ranks}")
    return ProcessGroup(sorted(ranks) if sort_ranks else ranks)
