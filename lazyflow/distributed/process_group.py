"""Several processes over ``jax.distributed`` with torch.distributed's names.

Tensors move between processes inside compiled programs (XLA's collectives over a mesh); small Python objects
(:func:`broadcast_object_list`, :func:`all_gather_object`) go through the coordination service's key-value store.
"""

from __future__ import annotations

import os
import pickle
import sys
from typing import Any

import jax

from .._core.errors import DeviceError

__all__ = [
    "init_process_group",
    "get_rank",
    "get_world_size",
    "is_initialized",
    "destroy_process_group",
    "broadcast_object_list",
    "all_gather_object",
]

_state = {"initialized": False, "seq": 0}
_TIMEOUT_MS = 30 * 60 * 1000  # object exchanges wait for peers still busy with a long step


def _env_config(coordinator_address, num_processes, process_id):
    env = os.environ
    if coordinator_address is None:
        coordinator_address = env.get("LAZYFLOW_COORDINATOR")
        if coordinator_address is None and "MASTER_ADDR" in env:
            coordinator_address = f"{env['MASTER_ADDR']}:{env.get('MASTER_PORT', '29500')}"
    if num_processes is None and "WORLD_SIZE" in env:
        num_processes = int(env["WORLD_SIZE"])
    if process_id is None and "RANK" in env:
        process_id = int(env["RANK"])
    return coordinator_address, num_processes, process_id


def init_process_group(
    backend: str | None = None,
    *,
    coordinator_address: str | None = None,
    num_processes: int | None = None,
    process_id: int | None = None,
    local_device_ids=None,
    timeout: float | None = None,
) -> None:
    """Join the process group (``jax.distributed.initialize``); afterwards ``jax.devices()`` lists every
    process's devices and a mesh over them spans all processes.

    Call it before any tensor is created (JAX's backend must not have started yet; ``import lazyflow`` is fine).
    A process that dies of an uncaught exception afterwards exits at once with status 1 (its traceback
    printed) instead of waiting in JAX's shutdown barrier for peers that are blocked in a collective it will
    never join; the launcher then stops the others. A process that cannot reach the coordinator within
    ``timeout`` is terminated by JAX's runtime (a fatal ``DEADLINE_EXCEEDED`` in its log), not given an exception.

    Args:
        backend: accepted for torch compatibility ("gloo", "nccl", ...) and ignored: JAX picks the collectives
            (NCCL on GPUs, gloo over TCP between CPU processes).
        coordinator_address: ``host:port`` of process 0's coordinator. Default: ``LAZYFLOW_COORDINATOR``, else
            ``MASTER_ADDR:MASTER_PORT`` (torchrun's variables; port 29500 when unset).
        num_processes: number of processes. Default: ``WORLD_SIZE``.
        process_id: this process's rank in ``[0, num_processes)``. Default: ``RANK``.
        local_device_ids: restrict this process to these local devices (e.g. ``[int(os.environ["LOCAL_RANK"])]``
            to run one process per GPU); default: all of them.
        timeout: seconds to wait for every process to join (JAX's default: 300).
    Raises:
        ValueError: the coordinator, world size or rank is missing from both arguments and environment, or
            the rank is out of range.
        DeviceError: called twice, or after JAX's backend started (a tensor was already created).

    >>> lf.distributed.init_process_group()  # under python -m lazyflow.distributed.run --nproc 2 train.py
    """
    coordinator_address, num_processes, process_id = _env_config(coordinator_address, num_processes, process_id)
    missing = [
        n
        for n, v in (
            ("coordinator_address", coordinator_address),
            ("num_processes", num_processes),
            ("process_id", process_id),
        )
        if v is None
    ]
    if missing or num_processes is None or process_id is None:  # the None checks restate `missing` for pyright
        raise ValueError(
            f"init_process_group: missing {missing}; pass them or set LAZYFLOW_COORDINATOR (or "
            "MASTER_ADDR/MASTER_PORT), WORLD_SIZE and RANK (the lazyflow launcher sets them)"
        )
    num_processes, process_id = int(num_processes), int(process_id)
    if num_processes < 1 or not 0 <= process_id < num_processes:
        raise ValueError(
            f"init_process_group: rank {process_id} is not in [0, {num_processes}) (world size {num_processes})"
        )
    if _state["initialized"]:
        raise DeviceError("init_process_group was already called in this process")
    from jax._src import xla_bridge

    if xla_bridge.backends_are_initialized():
        raise DeviceError(
            "init_process_group must run before JAX starts its backend: call it right after "
            "`import lazyflow`, before creating any tensor or listing devices"
        )
    kw = {}
    if timeout is not None:
        kw["initialization_timeout"] = int(timeout)
    if local_device_ids is not None:
        kw["local_device_ids"] = local_device_ids
    jax.distributed.initialize(
        coordinator_address=coordinator_address, num_processes=num_processes, process_id=process_id, **kw
    )
    _state["initialized"] = True
    if num_processes > 1:
        _exit_on_uncaught_exception()


def _exit_on_uncaught_exception() -> None:
    previous = sys.excepthook

    def hook(exc_type, exc, tb):
        try:
            previous(exc_type, exc, tb)
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(1)

    sys.excepthook = hook


def is_initialized() -> bool:
    """Whether :func:`init_process_group` has run in this process."""
    return _state["initialized"]


def get_rank(group=None) -> int:
    """This process's index (0 when not distributed); with a ``group`` from ``new_group``, its index in that
    group (-1 when it is not a member, like torch)."""
    return jax.process_index() if group is None else group.rank


def get_world_size(group=None) -> int:
    """Number of processes (1 when not distributed); with a ``group``, the number of its members."""
    return jax.process_count() if group is None else group.size()


def destroy_process_group() -> None:
    """Leave the process group (``jax.distributed.shutdown``); a no-op when not initialized."""
    if _state["initialized"]:
        jax.distributed.shutdown()
        _state["initialized"] = False


# ------------------------------------------------------------------------------------------ objects
def _client():
    from jax._src import distributed

    client = distributed.global_state.client
    if client is None:
        raise DeviceError(
            f"{jax.process_count()} processes but no coordination client: call "
            "lf.distributed.init_process_group() first"
        )
    return client


def _key(tag: str) -> str:
    """A key unique to this exchange: every process makes the same sequence of exchanges (SPMD), so the
    n-th exchange has the same number everywhere."""
    _state["seq"] += 1
    return f"lazyflow/distributed/{_state['seq']}/{tag}"


def broadcast_object_list(object_list: list, src: int = 0) -> None:
    """Replace the items of ``object_list`` in every process by those of process ``src`` (in place, like torch).

    The objects travel pickled through the coordination service's key-value store (small control data: a
    decision, a path, a config), not through the devices.

    Args:
        object_list: a list of picklable objects, of the same length in every process.
        src: the rank whose objects are sent.
    Raises:
        ValueError: ``src`` is not a rank.

    >>> obj = [run_id if lf.distributed.get_rank() == 0 else None]
    >>> lf.distributed.broadcast_object_list(obj)  # obj[0] is rank 0's run_id everywhere
    """
    n = jax.process_count()
    if not 0 <= src < n:
        raise ValueError(f"broadcast_object_list: src {src} is not a rank of the {n} processes")
    if n == 1:
        return
    client, key = _client(), _key("broadcast")
    if jax.process_index() == src:
        client.key_value_set_bytes(key, pickle.dumps(list(object_list)))
        return
    object_list[:] = pickle.loads(client.blocking_key_value_get_bytes(key, _TIMEOUT_MS))


def all_gather_object(object_list: list, obj: Any) -> None:
    """Fill ``object_list`` (of length world size) with every process's ``obj``, by rank (like torch).

    Args:
        object_list: a list of ``get_world_size()`` items, overwritten.
        obj: this process's picklable object.
    Raises:
        ValueError: ``object_list`` does not have one slot per process.
    """
    n = jax.process_count()
    if len(object_list) != n:
        raise ValueError(f"all_gather_object: object_list has {len(object_list)} slots for {n} processes")
    if n == 1:
        object_list[0] = obj
        return
    client, key = _client(), _key("all_gather")
    me = jax.process_index()
    client.key_value_set_bytes(f"{key}/{me}", pickle.dumps(obj))
    for r in range(n):
        object_list[r] = (
            obj if r == me else pickle.loads(client.blocking_key_value_get_bytes(f"{key}/{r}", _TIMEOUT_MS))
        )
