"""Pickling of the metadata: a pickler that moves tensors out of the pickle, and the two unpicklers.

Tensors and numpy arrays never enter the pickle: the pickler replaces each one with a persistent id
``("lazyflow.tensor", index)`` (``persistent_id``, as torch does for storages) and the loader hands back the
loaded tensor for it. ``weights_only=True`` loads run lazyflow's own restricted pickle machine
(:mod:`._safe_unpickler`, allowlist in :mod:`._allowlist`): a refused global, call, opcode or state raises
:class:`CheckpointUnpicklingError` before anything runs. ``weights_only=False`` uses :mod:`pickle` itself.
"""

from __future__ import annotations

import io
import pickle
from collections.abc import Callable
from typing import Any

from .._core.errors import CheckpointError, CheckpointUnpicklingError
from ._allowlist import add_safe_globals, allowed_globals, clear_safe_globals, get_safe_globals
from ._safe_unpickler import SafeUnpickler

__all__ = [
    "PID_TAG",
    "PROTOCOL",
    "dumps",
    "loads",
    "load_record",
    "add_safe_globals",
    "get_safe_globals",
    "clear_safe_globals",
    "allowed_globals",
]

PID_TAG = "lazyflow.tensor"
PROTOCOL = 5


class _Pickler(pickle.Pickler):
    def __init__(self, file, persistent_id_fn: Callable[[Any], Any]):
        super().__init__(file, protocol=PROTOCOL)
        self._pid = persistent_id_fn

    def persistent_id(self, obj):
        return self._pid(obj)


def dumps(obj: Any, persistent_id: Callable[[Any], Any] = lambda obj: None) -> bytes:
    """Pickle ``obj`` (protocol 5), asking ``persistent_id`` for the id of every object first."""
    buf = io.BytesIO()
    _Pickler(buf, persistent_id).dump(obj)
    return buf.getvalue()


class _TrustingUnpickler(pickle.Unpickler):
    """``weights_only=False``: pickle's own unpickler, which imports and calls whatever the pickle names."""

    def __init__(self, data: bytes, persistent_load: Callable[[Any], Any]):
        super().__init__(io.BytesIO(data))
        self._load_pid = persistent_load

    def persistent_load(self, pid):
        return self._load_pid(pid)


def _wrap(where: str, e: Exception) -> CheckpointUnpicklingError:
    return CheckpointUnpicklingError(f"{where}: the metadata could not be unpickled ({type(e).__name__}: {e})")


def loads(
    data: bytes,
    persistent_load: Callable[[Any], Any] | None = None,
    *,
    weights_only: bool = True,
    where: str = "checkpoint",
) -> Any:
    """Unpickle ``data`` (the saved structure); ``weights_only`` runs the restricted machine.

    Raises:
        CheckpointUnpicklingError: a refused global, call, opcode or state, or a malformed pickle.
        CheckpointError: what ``persistent_load`` raises (a bad tensor reference).
    """
    try:
        if weights_only:
            return SafeUnpickler(data, persistent_load, where, allow_globals=True).load()

        def no_pid(pid):
            raise CheckpointUnpicklingError(f"{where}: unexpected persistent id {pid!r} in the metadata")

        return _TrustingUnpickler(data, persistent_load or no_pid).load()
    except CheckpointError:
        raise
    except Exception as e:  # a constructor's own error on malformed arguments (np.dtype('xyz'), ...)
        raise _wrap(where, e) from e


def load_record(data: bytes, where: str) -> Any:
    """Unpickle the metadata record: plain values only (never a global, never a persistent id).

    Raises:
        CheckpointUnpicklingError: anything but plain values, or a malformed pickle.
    """
    try:
        return SafeUnpickler(data, None, where, allow_globals=False).load()
    except CheckpointError:
        raise
    except Exception as e:
        raise _wrap(where, e) from e
