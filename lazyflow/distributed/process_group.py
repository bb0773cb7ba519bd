"""Several processes over ``jax.distributed`` with torch.distributed's names."""

from __future__ import annotations

import os

import jax

__all__ = ["init_process_group", "get_rank", "get_world_size", "barrier", "is_initialized", "destroy_process_group"]

_state = {"initialized": False}


def init_process_group(backend: str | None = None, *, coordinator_address: str | None = None,
                       num_processes: int | None = None, process_id: int | None = None,
                       local_device_ids=None, timeout: float | None = None) -> None:
    """Join the process group (``jax.distributed.initialize``).

    Arguments default to the environment: ``LAZYFLOW_COORDINATOR`` (or ``MASTER_ADDR``:``MASTER_PORT``),
    ``WORLD_SIZE`` and ``RANK`` -- what ``python -m lazyflow.distributed.run`` and torchrun-style launchers set.
    Call it before any other JAX work in the process.
    Raises:
        ValueError: the coordinator, world size or rank is missing from both arguments and environment.
    """
    env = os.environ
    if coordinator_address is None:
        coordinator_address = env.get("LAZYFLOW_COORDINATOR")
        if coordinator_address is None and "MASTER_ADDR" in env:
            coordinator_address = f"{env['MASTER_ADDR']}:{env.get('MASTER_PORT', '29500')}"
    if num_processes is None and "WORLD_SIZE" in env:
        num_processes = int(env["WORLD_SIZE"])
    if process_id is None and "RANK" in env:
        process_id = int(env["RANK"])
    missing = [n for n, v in (("coordinator_address", coordinator_address), ("num_processes", num_processes),
                              ("process_id", process_id)) if v is None]
    if missing:
        raise ValueError(f"init_process_group: missing {missing}; pass them or set LAZYFLOW_COORDINATOR (or "
                         "MASTER_ADDR/MASTER_PORT), WORLD_SIZE and RANK (the lazyflow launcher sets them)")
    kw = {}
    if timeout is not None:
        kw["initialization_timeout"] = int(timeout)
    if local_device_ids is not None:
        kw["local_device_ids"] = local_device_ids
    jax.distributed.initialize(coordinator_address=coordinator_address, num_processes=int(num_processes),
                               process_id=int(process_id), **kw)
    _state["initialized"] = True


def is_initialized() -> bool:
    return _state["initialized"]


def get_rank() -> int:
    """This process's index (0 when not distributed)."""
    return jax.process_index()


def get_world_size() -> int:
    """Number of processes (1 when not distributed)."""
    return jax.process_count()


def barrier(name: str = "lazyflow_barrier") -> None:
    """Block until every process reaches this point."""
    if jax.process_count() == 1:
        return
    from jax.experimental import multihost_utils

    multihost_utils.sync_global_devices(name)


def destroy_process_group() -> None:
    if _state["initialized"]:
        jax.distributed.shutdown()
        _state["initialized"] = False
