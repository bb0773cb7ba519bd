"""``lf.save`` and the handle of an asynchronous save."""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable, Sequence
from typing import Any

from .._core.errors import CheckpointError, CheckpointWriteError, LazyflowError
from . import _layout, _multi, _pending
from ._meta import FORMAT_VERSION, encode_meta

__all__ = ["save", "SaveHandle"]


class SaveHandle:
    """The handle of ``lf.save(..., async_save=True)``: the data were captured before it was returned.

    A save still running when the process ends is finished first; one that failed without anybody calling
    :meth:`wait` is reported on stderr and the process exits with status 1 (see ``docs/checkpoint-format.md``,
    "Asynchronous saves, failures and process exit").
    """

    def __init__(self, path: str):
        self.path = path
        self._done = threading.Event()
        self._error: BaseException | None = None
        self._collected = False  # the failure reached the program (wait() raised it, exception() returned it)

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
            _pending.collected(self)
            raise self._error

    def exception(self) -> BaseException | None:
        """The error of a finished failed save, else None."""
        if not self._done.is_set():
            return None
        if self._error is not None:
            _pending.collected(self)
        return self._error

    def __repr__(self) -> str:
        state = "running" if not self.done() else "failed" if self._error else "done"
        return f"SaveHandle('{self.path}', {state})"


def _fail(path: str, e: BaseException, leftovers: Sequence[str] = (), *, committed: bool = False) -> BaseException:
    """The error a failed save raises: lazyflow's own as is; a filesystem error as CheckpointWriteError (an
    OSError with the same errno); anything else as CheckpointError. Each names the path and the cause.
    ``committed``: the checkpoint is complete, what ran after it (a manager's retention) failed."""
    if isinstance(e, LazyflowError) or not isinstance(e, Exception):
        return e
    if committed:
        msg = f"the checkpoint at '{path}' was saved, but the step after it failed: {type(e).__name__}: {e}"
    else:
        msg = (
            f"saving a checkpoint to '{path}' failed: {type(e).__name__}: {e}; the previous checkpoint there "
            "(if any) is unchanged"
        )
    if leftovers:
        msg += f". Removing the partial save failed too ({'; '.join(leftovers)}); the next save to this path removes it"
    code = e.errno if isinstance(e, OSError) else _ts_errno(str(e))
    if isinstance(e, OSError) or code is not None:
        err = CheckpointWriteError(msg)
        err.errno = code  # not strerror/filename: OSError.__str__ would then replace the message
        return err
    return CheckpointError(msg)


def _ts_errno(message: str) -> int | None:
    """The errno tensorstore reports inside its own errors (``[os_error_code='28']`` for a full disk)."""
    m = re.search(r"os_error_code='(\d+)'", message)
    return int(m.group(1)) if m else None


def _abort(txn) -> list[str]:
    """Undo a save that did not commit; never raises (the save's own error is the one to report)."""
    if txn is None:
        return []
    try:
        return txn.abort()
    except Exception as e:
        return [f"{type(e).__name__}: {e}"]


def save(obj: Any, path: str | os.PathLike, *, async_save: bool = False) -> SaveHandle | None:
    """Save ``obj`` (a Tensor, or dicts/lists/tuples of Tensors, numpy arrays and picklable values) as a
    checkpoint directory at ``path``, atomically replacing any checkpoint already there.

    Saves to one path are serialised within a process (a save waits for the previous one to that path,
    asynchronous ones included). With several processes (``jax.distributed``) every process calls it.

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


def _metadata(plan, ex) -> bytes | None:
    """Checksums (gathered at the primary when several processes save) and the encoded metadata; None in
    the other processes, which write no metadata."""
    plan.checksum(host_data=ex is None or _multi.is_primary())
    if ex is not None:
        parts = ex.gather("crc", plan.sharded_crcs())
        if parts is None:
            return None
        plan.merge_sharded_crcs(parts)
    return encode_meta(plan)


def _begin(path: str, ex):
    """The save's transaction: in several processes the primary's, mirrored by a Follower elsewhere."""
    if ex is None:
        return _layout.Transaction(path)
    if _multi.is_primary():
        try:
            txn = _layout.Transaction(path)
        except BaseException as e:
            ex.broadcast("begin", ("error", str(e)))
            raise
        ex.broadcast("begin", ("ok", txn.version_dir))
        return txn
    status, value = ex.broadcast("begin")
    if status != "ok":
        raise CheckpointError(f"saving to '{path}': process 0 could not start the save: {value}")
    return _layout.Follower(value)


def _commit(txn, ex, path: str) -> None:
    """Make the new version current; in several processes the primary does it and tells the others."""
    if ex is None:
        txn.commit(FORMAT_VERSION)
        return
    if _multi.is_primary():
        try:
            txn.commit(FORMAT_VERSION)
        except BaseException as e:
            ex.broadcast("commit", str(e))
            raise
        ex.broadcast("commit", None)
        return
    error = ex.broadcast("commit")
    if error is not None:
        raise CheckpointError(f"saving to '{path}': process 0 could not commit the checkpoint: {error}")


def _fail_peers(ex, e: BaseException) -> None:
    """A primary that failed before committing tells the other processes, which wait for its verdict."""
    if ex is not None and _multi.is_primary():
        try:
            ex.broadcast("commit", f"{type(e).__name__}: {e}")
        except Exception:
            pass


def _save(obj: Any, path, *, async_save: bool, after_commit: Callable[[], None] | None = None):
    """:func:`save`, running ``after_commit()`` once the checkpoint is complete (before an async handle
    reports done). With several processes (``jax.distributed``) every process must call it, in the same
    order for each path."""
    from . import _plan, _store

    path = _layout.as_path(path, "lf.save")
    lock = _layout.path_lock(path)
    lock.acquire()
    txn = ex = None
    committing = False
    try:  # every exit from here releases the lock: a failed save must never block the next one
        ex = _multi.Exchange("save", path) if _multi.count() > 1 else None
        plan = _plan.Plan(obj, snapshot_numpy=async_save)
        txn = _begin(path, ex)
        if async_save:  # checksums and metadata are computed in the background commit
            ckptr = _store.write(txn.version_dir, plan.arrays, plan.save_args, lambda: _metadata(plan, ex), async_=True)
        else:  # checksums first (in parallel threads): measured faster than racing the writes for the cores
            _store.write(txn.version_dir, plan.arrays, plan.save_args, _metadata(plan, ex))
            committing = True
            _commit(txn, ex, path)
            txn = None
            if after_commit is not None and (ex is None or _multi.is_primary()):
                after_commit()
    except BaseException as e:
        try:
            leftovers = _abort(txn)
            if txn is not None and not committing:
                _fail_peers(ex, e)
        finally:
            lock.release()
        error = _fail(path, e, leftovers, committed=committing and txn is None)
        if error is e:
            raise
        raise error from e
    if not async_save:
        lock.release()
        return None
    handle = SaveHandle(path)
    _pending.track(handle)

    def finish():
        error, leftovers, stage = None, [], "write"
        try:
            ckptr.wait_until_finished()
            stage = "commit"
            _commit(txn, ex, path)
            stage = "after_commit"
            if after_commit is not None and (ex is None or _multi.is_primary()):
                after_commit()
        except BaseException as e:
            error = e
            if stage != "after_commit":  # the checkpoint is complete once committed: keep it
                leftovers = _abort(txn)
            if stage == "write":
                _fail_peers(ex, e)
        finally:
            try:
                ckptr.close()
            except Exception:
                pass
            plan.arrays.clear()  # drop the references that kept the buffers from being donated
            lock.release()
            handle._error = None if error is None else _fail(path, error, leftovers, committed=stage == "after_commit")
            handle._done.set()
            _pending.settle(handle)

    threading.Thread(target=finish, name=f"lazyflow-save:{os.path.basename(path)}").start()
    return handle
