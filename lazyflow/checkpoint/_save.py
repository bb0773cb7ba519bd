"""``lf.save`` and the handle of an asynchronous save."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any

from .._core.errors import CheckpointError, LazyflowError
from . import _layout
from ._meta import FORMAT_VERSION, encode_meta

__all__ = ["save", "SaveHandle"]


class SaveHandle:
    """The handle of ``lf.save(..., async_save=True)``: the data were captured before it was returned."""

    def __init__(self, path: str):
        self.path = path
        self._done = threading.Event()
        self._error: BaseException | None = None

    def done(self) -> bool:
        """Whether the save has finished (successfully or not)."""
        return self._done.is_set()

    def wait(self, timeout: float | None = None) -> None:
        """Block until the checkpoint is complete at ``path``.

        Args:
            timeout: seconds to wait at most (None: no limit).
        Raises:
            CheckpointError: the save failed, or ``timeout`` passed first.
        """
        if not self._done.wait(timeout):
            raise CheckpointError(f"async save to '{self.path}' still running after {timeout} s")
        if self._error is not None:
            raise self._error

    def exception(self) -> BaseException | None:
        """The error of a finished failed save, else None."""
        return self._error if self._done.is_set() else None

    def __repr__(self) -> str:
        state = "running" if not self.done() else "failed" if self._error else "done"
        return f"SaveHandle('{self.path}', {state})"


def _fail(path: str, e: BaseException) -> CheckpointError:
    if isinstance(e, CheckpointError):
        return e
    return CheckpointError(f"saving a checkpoint to '{path}' failed: {type(e).__name__}: {e}")


def save(obj: Any, path: str | os.PathLike, *, async_save: bool = False) -> SaveHandle | None:
    """Save ``obj`` (a Tensor, or dicts/lists/tuples of Tensors, numpy arrays and picklable values) as a
    checkpoint directory at ``path``, atomically replacing any checkpoint already there.

    Tensor bytes go through orbax-checkpoint (small tensors packed per dtype, sharded tensors shard by shard);
    the structure and every other value go into a pickled metadata file with a CRC-32 per tensor.

    Args:
        obj: what to save, e.g. ``{"model": model.state_dict(), "optim": opt.state_dict(), "epoch": 3}``.
        path: the checkpoint directory (created; an existing checkpoint there stays intact until the new
            one is complete).
        async_save: return at once with a :class:`SaveHandle` while the bytes are written in the
            background; the tensors' values are captured before returning, so they may be updated
            in place right away.
    Returns:
        None, or a :class:`SaveHandle` for ``async_save=True``.
    Raises:
        CheckpointError: ``path`` is a foreign file/directory, a tensor is traced in graph mode, or the
            write failed (the previous checkpoint at ``path`` is then kept).

    >>> lf.save({"model": model.state_dict(), "epoch": 3}, "ckpt")
    """
    return _save(obj, path, async_save=async_save)


def _save(obj: Any, path, *, async_save: bool, after_commit: Callable[[], None] | None = None):
    """:func:`save`, running ``after_commit()`` once the checkpoint is complete (before an async handle
    reports done)."""
    from . import _plan, _store

    path = os.path.abspath(os.fspath(path))
    lock = _layout.path_lock(path)
    lock.acquire()
    txn = None
    try:
        plan = _plan.Plan(obj, snapshot_numpy=async_save)
        txn = _layout.Transaction(path)
        if async_save:  # checksums and metadata are computed in the background commit
            ckptr = _store.write(txn.version_dir, plan.arrays, plan.save_args, lambda: encode_meta(plan),
                                 async_=True)
        else:  # checksums first (in parallel threads): measured faster than racing the writes for the cores
            _store.write(txn.version_dir, plan.arrays, plan.save_args, encode_meta(plan))
            txn.commit(FORMAT_VERSION)
            txn = None
            if after_commit is not None:
                after_commit()
    except BaseException as e:
        if txn is not None:
            txn.abort()
        lock.release()
        if isinstance(e, LazyflowError) or not isinstance(e, Exception):
            raise
        raise _fail(path, e) from e
    if not async_save:
        lock.release()
        return None
    handle = SaveHandle(path)

    def finish():
        try:
            ckptr.wait_until_finished()
            txn.commit(FORMAT_VERSION)
        except BaseException as e:  # noqa: BLE001 - reported through the handle
            txn.abort()
            handle._error = _fail(path, e)
        else:
            if after_commit is not None:
                try:
                    after_commit()
                except BaseException as e:  # noqa: BLE001 - reported through the handle
                    handle._error = _fail(path, e)
        finally:
            try:
                ckptr.close()
            except Exception:  # noqa: BLE001 - the save's own outcome is what matters
                pass
            plan.arrays.clear()  # drop the references that kept the buffers from being donated
            lock.release()
            handle._done.set()

    threading.Thread(target=finish, name=f"lazyflow-save:{os.path.basename(path)}").start()
    return handle


