"""Several processes (``jax.distributed``): how the processes of one save agree with each other.

Every process calls ``lf.save``/``lf.load`` with the same path in the same order (SPMD). Process 0 (the
primary) picks the names, writes the metadata and switches the pointer; orbax writes each process's shards;
the other processes send their shard checksums to the primary and wait for its verdict. The exchanges go
through the coordination service's key-value store under keys made of the path and a per-path counter, so
they never depend on what else (other saves, other threads) exchanges messages meanwhile.
"""

from __future__ import annotations

import pickle
import threading
from typing import Any

import jax

from .._core.errors import CheckpointError

__all__ = ["count", "rank", "is_primary", "Exchange"]

_TIMEOUT_MS = 30 * 60 * 1000  # a peer may take long to write its shards
_counters: dict[str, int] = {}
_counters_lock = threading.Lock()


def count() -> int:
    return jax.process_count()


def rank() -> int:
    return jax.process_index()


def is_primary() -> bool:
    return jax.process_index() == 0


def _client():
    from jax._src import distributed

    client = distributed.global_state.client
    if client is None:
        raise CheckpointError(
            f"{jax.process_count()} processes but no jax.distributed coordination client: "
            "call lf.distributed.init_process_group() first"
        )
    return client


class Exchange:
    """The messages of one save to one path (create it where the saves to that path are serialised)."""

    def __init__(self, op: str, path: str):
        with _counters_lock:
            n = _counters[path] = _counters.get(path, 0) + 1
        self.base = f"lazyflow/checkpoint/{op}/{n}/{path}"

    def broadcast(self, tag: str, obj: Any = None) -> Any:
        """The primary's ``obj`` in every process."""
        key = f"{self.base}/{tag}"
        if is_primary():
            _client().key_value_set_bytes(key, pickle.dumps(obj))
            return obj
        return pickle.loads(_client().blocking_key_value_get_bytes(key, _TIMEOUT_MS))

    def gather(self, tag: str, obj: Any) -> list | None:
        """Every process's ``obj`` by rank at the primary; None elsewhere."""
        key = f"{self.base}/{tag}"
        if not is_primary():
            _client().key_value_set_bytes(f"{key}/{rank()}", pickle.dumps(obj))
            return None
        out = [obj]
        for r in range(1, count()):
            out.append(pickle.loads(_client().blocking_key_value_get_bytes(f"{key}/{r}", _TIMEOUT_MS)))
        return out
