"""``CheckpointManager``: numbered checkpoints of a training run in one directory, with retention."""

from __future__ import annotations

import os
import re
import shutil
import threading
from typing import Any

from .._core.errors import CheckpointError
from . import _layout, _multi
from ._load import load
from ._save import SaveHandle, _save

__all__ = ["CheckpointManager"]

_STEP = re.compile(r"^step_(\d+)$")


class CheckpointManager:
    """Save step-numbered checkpoints under ``directory`` and keep only some of them.

    Each step is a complete :func:`lf.save` checkpoint at ``directory/step_<n>``, so every crash-safety
    guarantee of ``lf.save`` holds per step; steps whose save never completed are invisible and are removed
    (with any other leftovers of interrupted saves) when the manager is created.

    Args:
        directory: where the steps live (created if missing).
        max_to_keep: keep at most this many of the newest steps (None: all).
        keep_every: additionally keep every step divisible by this (None: none), like orbax's
            ``keep_period``.
    Raises:
        CheckpointError: ``directory`` is a file, or a bad ``max_to_keep``/``keep_every``.

    >>> mgr = lf.checkpoint.CheckpointManager("run", max_to_keep=3)
    >>> mgr.save(100, {"model": model.state_dict()})
    >>> state = mgr.restore()  # the latest step
    """

    def __init__(self, directory: str | os.PathLike, max_to_keep: int | None = None, keep_every: int | None = None):
        for name, v in (("max_to_keep", max_to_keep), ("keep_every", keep_every)):
            if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 1):
                raise CheckpointError(f"CheckpointManager: {name} must be a positive int or None, got {v!r}")
        self.directory = os.path.abspath(os.fspath(directory))
        if os.path.exists(self.directory) and not os.path.isdir(self.directory):
            raise CheckpointError(f"CheckpointManager: '{self.directory}' is a file, expected a directory")
        os.makedirs(self.directory, exist_ok=True)
        self.max_to_keep, self.keep_every = max_to_keep, keep_every
        self._pending: list[SaveHandle] = []
        self._lock = threading.Lock()
        self.cleanup()

    def _step_path(self, step: int) -> str:
        return os.path.join(self.directory, f"step_{step}")

    def cleanup(self) -> list[str]:
        """Remove leftovers of interrupted saves and deletions (incomplete steps); returns what went. With
        several processes only process 0 removes anything."""
        removed = []
        if not _multi.is_primary():
            return removed
        for e in sorted(os.listdir(self.directory)):
            full = os.path.join(self.directory, e)
            if _STEP.match(e):
                removed += _layout.cleanup(full)
                if not os.path.exists(os.path.join(full, _layout.POINTER)) and _only_leftovers(full):
                    shutil.rmtree(full, ignore_errors=True)
                    removed.append(full)
        for e in os.listdir(self.directory):
            if e.startswith(".step_") and _layout._TMP_MARK in e:
                full = os.path.join(self.directory, e)
                pid = _layout._pid_of(e)
                if pid is not None and not _layout._busy(full, pid):
                    shutil.rmtree(full, ignore_errors=True)
                    removed.append(full)
        return removed

    def all_steps(self) -> list[int]:
        """The steps with a complete checkpoint, ascending."""
        steps = []
        for e in os.listdir(self.directory):
            m = _STEP.match(e)
            if m and os.path.isfile(os.path.join(self.directory, e, _layout.POINTER)):
                steps.append(int(m.group(1)))
        return sorted(steps)

    def latest_step(self) -> int | None:
        """The newest complete step, or None when there is none."""
        steps = self.all_steps()
        return steps[-1] if steps else None

    def save(self, step: int, obj: Any, *, async_save: bool = False) -> SaveHandle | None:
        """Save ``obj`` as ``step`` (replacing that step atomically if it exists), then apply retention.

        Args:
            step: a non-negative int.
            obj: what :func:`lf.save` accepts.
            async_save: as in :func:`lf.save`; retention runs once the step is complete, before the
                handle reports done.
        Returns:
            None, or the :class:`SaveHandle` of the asynchronous save.
        Raises:
            CheckpointError: a bad step, a previous asynchronous save of this manager that failed, or as
                :func:`lf.save`.

        A save first waits for the manager's previous asynchronous save (as orbax's manager does): steps
        complete in order, and saving faster than the disk writes slows the caller down instead of piling
        up snapshots in memory.
        """
        if not isinstance(step, int) or isinstance(step, bool) or step < 0:
            raise CheckpointError(f"CheckpointManager.save: step must be a non-negative int, got {step!r}")
        self.wait()
        handle = _save(obj, self._step_path(step), async_save=async_save, after_commit=self._prune)
        if handle is not None:
            with self._lock:
                self._pending = [h for h in self._pending if not h.done()] + [handle]
        return handle

    def wait(self) -> None:
        """Wait for every asynchronous save of this manager (raises the first failure)."""
        with self._lock:
            pending, self._pending = self._pending, []
        for h in pending:
            h.wait()

    def restore(self, step: int | None = None, **load_kwargs: Any) -> Any:
        """Load ``step`` (default: the latest) with :func:`lf.load` and ``load_kwargs``.

        Raises:
            CheckpointError: no complete step (or not that one) in the directory.
        """
        self.wait()
        if step is None:
            step = self.latest_step()
            if step is None:
                raise CheckpointError(f"CheckpointManager: no complete checkpoint in '{self.directory}'")
        elif step not in self.all_steps():
            raise CheckpointError(
                f"CheckpointManager: no complete checkpoint for step {step} in "
                f"'{self.directory}' (steps: {self.all_steps()})"
            )
        return load(self._step_path(step), **load_kwargs)

    def delete(self, step: int) -> None:
        """Remove ``step`` (first renamed aside atomically, so a crash never leaves half a step visible)."""
        path = self._step_path(step)
        if not os.path.exists(path) or not _multi.is_primary():
            return
        aside = os.path.join(self.directory, f".step_{step}{_layout._TMP_MARK}{_layout._stamp()}")
        with _layout.path_lock(path):
            os.rename(path, aside)
            _layout.fsync_path(self.directory)
        shutil.rmtree(aside, ignore_errors=True)

    def _prune(self) -> None:
        if not _multi.is_primary():
            return
        steps = self.all_steps()
        if self.max_to_keep is None:
            return
        keep = set(steps[-self.max_to_keep :])
        if self.keep_every:
            keep |= {s for s in steps if s % self.keep_every == 0}
        for s in steps:
            if s not in keep:
                self.delete(s)


def _only_leftovers(path: str) -> bool:
    return all(
        (pid := _layout._pid_of(e)) is not None and not _layout._busy(os.path.join(path, e), pid)
        for e in os.listdir(path)
    )
