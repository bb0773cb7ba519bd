"""The orbax layer: one orbax checkpoint per lazyflow checkpoint version.

It is an orbax v0 ``CompositeCheckpointHandler`` checkpoint with two items:

* ``tensors``: a ``PyTreeCheckpointHandler(use_compression=False)`` tree (OCDBT on) whose leaves are flat
  dicts ``{name: array}``: host numpy arrays (single-device tensors and packed groups, written by
  :class:`_HostArrayHandler`) and ``jax.Array`` leaves for sharded tensors (orbax's ``ArrayHandler``
  writes each device's shard, never gathering the array into one host buffer).
* ``meta``: the pickled metadata file, written by :class:`_MetaHandler` (orbax rejects ``bytes`` leaves).

Host arrays are read back into 64-byte aligned buffers so that ``jax.device_put`` on CPU wraps them without
a copy; a read may ask for element ranges of a 1-D array only (partial loads of packed groups).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import numpy as np

logging.getLogger("absl").setLevel(logging.ERROR)  # orbax logs every save at INFO through absl

import orbax.checkpoint as ocp  # noqa: E402
import tensorstore as ts  # noqa: E402
from orbax.checkpoint._src import asyncio_utils as _asyncio_utils  # noqa: E402
from orbax.checkpoint._src.serialization import tensorstore_utils as _ts_utils  # noqa: E402

__all__ = ["TENSORS", "META", "META_FILE", "aligned_empty", "HostRestoreArgs", "Pieces", "write", "read_meta",
           "read_arrays"]

TENSORS = "tensors"
META = "meta"
META_FILE = "metadata.lfpkl"
ALIGN = 64  # XLA's CPU client aliases host buffers aligned to this instead of copying them


def aligned_empty(nbytes: int) -> np.ndarray:
    """An uninitialised uint8 buffer of ``nbytes`` whose address is a multiple of 64."""
    raw = np.empty(nbytes + ALIGN, np.uint8)
    off = (-raw.ctypes.data) % ALIGN
    return raw[off:off + nbytes]


@dataclasses.dataclass
class HostRestoreArgs(ocp.RestoreArgs):
    """Restore a host array into an aligned buffer; ``ranges`` (element ranges of a 1-D array) reads only
    those ranges, returned as :class:`Pieces`."""

    ranges: tuple[tuple[int, int], ...] | None = None


class Pieces(list):
    """The buffers read for one array's ``ranges`` (a list subclass, so that JAX treats it as a leaf)."""


class _HostArrayHandler(ocp.type_handlers.NumpyHandler):
    """orbax's numpy handler without its defensive deep copy (lazyflow snapshots the data itself) and with
    reads into aligned buffers, optionally of element ranges only."""

    def __init__(self):
        super().__init__(deepcopy_host_arrays=False)

    async def deserialize(self, infos: Sequence[Any], args: Sequence[Any] | None = None) -> list:
        args = args or [HostRestoreArgs()] * len(infos)
        stores = []
        for info in infos:
            await info.await_path_creation()
            spec = _ts_utils.build_array_read_spec(
                info, use_ocdbt=info.is_ocdbt_checkpoint, metadata_key=self._metadata_key,
                raise_array_data_missing_error=info.raise_array_data_missing_error).json
            stores.append(ts.open(ts.Spec(spec), open=True, context=info.ts_context))
        stores = await asyncio.gather(*stores)
        out, copies = [], []
        for store, arg in zip(stores, args):
            dtype = store.dtype.numpy_dtype
            ranges = getattr(arg, "ranges", None)
            if ranges is None:
                buf = aligned_empty(int(np.prod(store.shape, dtype=np.int64)) * dtype.itemsize)
                buf = buf.view(dtype).reshape(store.shape)
                copies.append(ts.array(buf, copy=False, write=True).write(store))
                out.append(buf)
            else:
                pieces = Pieces()
                for lo, hi in ranges:
                    buf = aligned_empty((hi - lo) * dtype.itemsize).view(dtype)
                    copies.append(ts.array(buf, copy=False, write=True).write(store[lo:hi]))
                    pieces.append(buf)
                out.append(pieces)
        await asyncio.gather(*copies)
        return out


@dataclasses.dataclass
class MetaSave(ocp.checkpoint_args.CheckpointArgs):
    """The metadata bytes, or a function producing them (run in the background commit of an async save)."""

    data: bytes | Callable[[], bytes]


@dataclasses.dataclass
class MetaRestore(ocp.checkpoint_args.CheckpointArgs):
    """Read the metadata bytes back."""


def _write_file(path: str, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)


class _MetaHandler(ocp.handlers.AsyncCheckpointHandler):
    """Writes the pickled metadata as one file, ``metadata.lfpkl``, fsynced."""

    async def async_save(self, directory, args: MetaSave | None = None, item=None):
        data = args.data

        async def commit():
            payload = await asyncio.to_thread(data) if callable(data) else data
            await asyncio.to_thread(_write_file, os.fspath(directory / META_FILE), payload)

        return [ocp.future.CommitFutureAwaitingContractedSignals(commit(), name="lazyflow_meta")]

    def save(self, directory, args: MetaSave | None = None, item=None) -> None:
        async def run():
            for f in await self.async_save(directory, args):
                f.result()

        _asyncio_utils.run_sync(run())

    def restore(self, directory, args: MetaRestore | None = None, item=None) -> bytes:
        with open(os.fspath(directory / META_FILE), "rb") as f:
            return f.read()

    def metadata(self, directory):
        return None


ocp.checkpoint_args.register_with_handler(_MetaHandler, for_save=True)(MetaSave)
ocp.checkpoint_args.register_with_handler(_MetaHandler, for_restore=True)(MetaRestore)


def _type_registry():
    return ocp.type_handlers.create_type_handler_registry(
        (np.ndarray, _HostArrayHandler()), (jax.Array, ocp.type_handlers.ArrayHandler()))


def _checkpointer(async_: bool):
    tensors = ocp.PyTreeCheckpointHandler(use_compression=False, use_ocdbt=True,
                                          type_handler_registry=_type_registry())
    registry = ocp.handlers.DefaultCheckpointHandlerRegistry()
    registry.add(TENSORS, ocp.args.PyTreeSave, tensors)
    registry.add(TENSORS, ocp.args.PyTreeRestore, tensors)
    meta = _MetaHandler()
    registry.add(META, MetaSave, meta)
    registry.add(META, MetaRestore, meta)
    handler = ocp.CompositeCheckpointHandler(handler_registry=registry)
    return ocp.AsyncCheckpointer(handler) if async_ else ocp.Checkpointer(handler)


def write(directory: str, arrays: Mapping[str, Any], save_args: Mapping[str, Any],
          meta: bytes | Callable[[], bytes], *, async_: bool = False):
    """Write one orbax checkpoint at ``directory`` (which must not exist).

    Returns None for a synchronous write; for ``async_`` the ``AsyncCheckpointer`` whose
    ``wait_until_finished()`` completes it (the data were handed over before this returns).
    """
    ckptr = _checkpointer(async_)
    items = {META: MetaSave(meta)}
    if arrays:
        items[TENSORS] = ocp.args.PyTreeSave(dict(arrays), save_args=dict(save_args))
    ckptr.save(directory, ocp.args.Composite(**items))
    return ckptr if async_ else None


def read_meta(directory: str) -> bytes:
    """The metadata bytes of the orbax checkpoint at ``directory``."""
    with open(os.path.join(directory, META, META_FILE), "rb") as f:
        return f.read()


def read_arrays(directory: str, restore_args: Mapping[str, Any]) -> dict:
    """Restore the named arrays (``{name: RestoreArgs}``; a subset of the saved ones is fine)."""
    if not restore_args:
        return {}
    ckptr = _checkpointer(False)
    item = dict.fromkeys(restore_args, 0)
    out = ckptr.restore(directory, ocp.args.Composite(**{TENSORS: ocp.args.PyTreeRestore(
        item=item, restore_args=dict(restore_args), partial_restore=True)}))
    return dict(out[TENSORS])
