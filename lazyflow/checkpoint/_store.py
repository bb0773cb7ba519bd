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
from typing import Any, Literal, cast, overload

import jax
import numpy as np

logging.getLogger("absl").setLevel(logging.ERROR)  # orbax logs every save at INFO through absl

import orbax.checkpoint as ocp
import tensorstore as ts
from orbax.checkpoint import checkpoint_args
from orbax.checkpoint import future as ocp_future
from orbax.checkpoint._src import asyncio_utils as _asyncio_utils
from orbax.checkpoint._src.serialization import tensorstore_utils as _ts_utils

from . import _arena, _crc

__all__ = [
    "TENSORS",
    "META",
    "META_FILE",
    "aligned_empty",
    "HostRestoreArgs",
    "HostResult",
    "write",
    "read_meta",
    "read_arrays",
]

TENSORS = "tensors"
META = "meta"
META_FILE = "metadata.lfpkl"
ALIGN = _arena.ALIGN  # XLA's CPU client aliases host buffers aligned to this instead of copying them


def aligned_empty(nbytes: int) -> np.ndarray:
    """An uninitialised uint8 buffer of ``nbytes`` whose address is a multiple of 64 (from 2 MiB on, pages without
    numpy's huge-page advice: see :func:`._arena.aligned`)."""
    return _arena.aligned(nbytes)


@dataclasses.dataclass
class HostRestoreArgs(ocp.RestoreArgs):
    """Restore a host array into an aligned buffer.

    ``ranges`` (element ranges of a 1-D array) reads only those ranges, one buffer each; ``checks`` lists,
    per buffer, the byte spans whose CRC-32 to compute as soon as that buffer has been read (overlapping
    the checksums with the remaining reads).
    """

    ranges: tuple[tuple[int, int], ...] | None = None
    checks: tuple[tuple[tuple[int, int], ...], ...] | None = None


class HostResult:
    """What :class:`_HostArrayHandler` returns per array: the buffers and the CRC-32s of ``checks``."""

    __slots__ = ("buffers", "crcs")

    def __init__(self, buffers: list, crcs: list):
        self.buffers, self.crcs = buffers, crcs


class _HostArrayHandler(ocp.type_handlers.NumpyHandler):
    """orbax's numpy handler without its defensive deep copy (lazyflow snapshots the data itself) and with
    reads into aligned buffers, optionally of element ranges only, checksummed as they arrive."""

    def __init__(self, crc_executor: Callable[[], Any] | None = None):
        super().__init__(deepcopy_host_arrays=False)
        self._executor = crc_executor

    async def deserialize(self, infos: Sequence[Any], args: Sequence[Any] | None = None) -> list:
        args = args or [HostRestoreArgs()] * len(infos)
        stores = []
        for info in infos:
            await info.await_path_creation()
            spec = _ts_utils.build_array_read_spec(
                info,
                use_ocdbt=info.is_ocdbt_checkpoint,
                metadata_key=self._metadata_key,
                raise_array_data_missing_error=info.raise_array_data_missing_error,
            ).json
            stores.append(ts.open(ts.Spec(spec), open=True, context=info.ts_context))
        stores = await _gather_all(*stores)
        return await _gather_all(*(self._read(store, arg) for store, arg in zip(stores, args)))

    async def _read(self, store, arg) -> HostResult:
        dtype = store.dtype.numpy_dtype
        ranges = getattr(arg, "ranges", None)
        if ranges is None:
            n = int(np.prod(store.shape, dtype=np.int64))
            buffers = [aligned_empty(n * dtype.itemsize).view(dtype).reshape(store.shape)]
            sources = [store]
        else:
            buffers = [aligned_empty((hi - lo) * dtype.itemsize).view(dtype) for lo, hi in ranges]
            sources = [store[lo:hi] for lo, hi in ranges]
        checks = getattr(arg, "checks", None) or [()] * len(buffers)
        loop = asyncio.get_running_loop()

        async def one(buf, src, spans):
            await ts.array(buf, copy=False, write=True).write(src)
            flat = buf.reshape(-1).view(np.uint8)
            if not spans:
                return []
            pool = self._executor() if self._executor else None
            parts = await _gather_all(
                *(loop.run_in_executor(pool, _crc.crc_list, flat, b) for b in _crc.batches(spans))
            )
            return [c for part in parts for c in part]

        crcs = await _gather_all(*(one(b, s, c) for b, s, c in zip(buffers, sources, checks)))
        return HostResult(buffers, list(crcs))


async def _gather_all(*aws) -> list[Any]:
    """``asyncio.gather`` that lets every awaitable finish before raising the first error (orbax closes its
    event loop right after: nothing may still be pending on it)."""
    results = await asyncio.gather(*aws, return_exceptions=True)
    for r in results:
        if isinstance(r, BaseException):
            raise r
    return list(results)


@dataclasses.dataclass
class MetaSave(checkpoint_args.CheckpointArgs):
    """The metadata bytes, or a function producing them (run in the background commit of an async save);
    None (or a function returning None) writes nothing."""

    data: bytes | None | Callable[[], bytes | None]


_Meta = bytes | None | Callable[[], bytes | None]


@dataclasses.dataclass
class MetaRestore(checkpoint_args.CheckpointArgs):
    """Read the metadata bytes back."""


def _write_file(path: str, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)


class _MetaHandler(ocp.handlers.AsyncCheckpointHandler):
    """Writes the pickled metadata as one file, ``metadata.lfpkl``, fsynced."""

    async def async_save(self, directory, args: MetaSave | None = None, item=None):
        if args is None:
            raise TypeError("_MetaHandler.async_save needs MetaSave args (orbax passes them)")
        data = args.data

        async def commit():
            payload = await asyncio.to_thread(data) if callable(data) else data
            if payload is not None:  # None: a process other than the primary (which writes the file)
                await asyncio.to_thread(_write_file, os.fspath(directory / META_FILE), payload)

        return [ocp_future.CommitFutureAwaitingContractedSignals(commit(), name="lazyflow_meta")]

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


checkpoint_args.register_with_handler(_MetaHandler, for_save=True)(MetaSave)
checkpoint_args.register_with_handler(_MetaHandler, for_restore=True)(MetaRestore)


# (orbax releases without the option keep their own default)
_ASYNC_OPTION_VALUES: dict[str, Any] = (
    {"create_directories_asynchronously": False}
    if "create_directories_asynchronously" in {f.name for f in dataclasses.fields(ocp.options.AsyncOptions)}
    else {}
)
_ASYNC_OPTIONS = ocp.options.AsyncOptions(**_ASYNC_OPTION_VALUES)


def _type_registry(crc_executor=None):
    return ocp.type_handlers.create_type_handler_registry(
        (np.ndarray, _HostArrayHandler(crc_executor)), (jax.Array, ocp.type_handlers.ArrayHandler())
    )


def _checkpointer(async_: bool, crc_executor=None):
    tensors = ocp.PyTreeCheckpointHandler(
        use_compression=False, use_ocdbt=True, type_handler_registry=_type_registry(crc_executor)
    )
    registry = ocp.handlers.DefaultCheckpointHandlerRegistry()
    registry.add(TENSORS, ocp.args.PyTreeSave, tensors)
    registry.add(TENSORS, ocp.args.PyTreeRestore, tensors)
    meta = _MetaHandler()
    registry.add(META, MetaSave, meta)
    registry.add(META, MetaRestore, meta)
    handler = ocp.CompositeCheckpointHandler(handler_registry=registry)
    if not async_:
        return ocp.Checkpointer(handler)
    # The version directory is created in the caller's thread: a directory that cannot be created (read-only
    # filesystem, permission denied) fails lf.save at once. Created in the background, the failure left orbax's
    # other commit threads waiting 300 s for a "directory created" signal, and the process could not exit.
    return ocp.AsyncCheckpointer(handler, async_options=_ASYNC_OPTIONS)


@overload
def write(
    directory: str, arrays: Mapping[str, Any], save_args: Mapping[str, Any], meta: _Meta, *, async_: Literal[True]
) -> ocp.AsyncCheckpointer: ...


@overload
def write(
    directory: str,
    arrays: Mapping[str, Any],
    save_args: Mapping[str, Any],
    meta: _Meta,
    *,
    async_: Literal[False] = False,
) -> None: ...


def write(
    directory: str, arrays: Mapping[str, Any], save_args: Mapping[str, Any], meta: _Meta, *, async_: bool = False
) -> ocp.AsyncCheckpointer | None:
    """Write one orbax checkpoint at ``directory`` (which must not exist).

    Returns None for a synchronous write; for ``async_`` the ``AsyncCheckpointer`` whose
    ``wait_until_finished()`` completes it (the data were handed over before this returns).
    """
    ckptr = _checkpointer(async_)
    items: dict[str, ocp.args.CheckpointArgs] = {META: MetaSave(meta)}
    if arrays:
        items[TENSORS] = ocp.args.PyTreeSave(dict(arrays), save_args=dict(save_args))
    ckptr.save(directory, ocp.args.Composite(**items))
    return cast(ocp.AsyncCheckpointer, ckptr) if async_ else None  # _checkpointer(async_) built one


def read_meta(directory: str) -> bytes:
    """The metadata bytes of the orbax checkpoint at ``directory``."""
    with open(os.path.join(directory, META, META_FILE), "rb") as f:
        return f.read()


def read_arrays(directory: str, restore_args: Mapping[str, Any], crc_executor=None) -> dict:
    """Restore the named arrays (``{name: RestoreArgs}``; a subset of the saved ones is fine): host arrays
    as :class:`HostResult`, sharded ones as ``jax.Array``. ``crc_executor()`` gives the checksum pool."""
    if not restore_args:
        return {}
    ckptr = _checkpointer(False, crc_executor)
    item = dict.fromkeys(restore_args, 0)
    out = ckptr.restore(
        directory,
        ocp.args.Composite(
            **{TENSORS: ocp.args.PyTreeRestore(item=item, restore_args=dict(restore_args), partial_restore=True)}
        ),
    )
    return dict(out[TENSORS])
