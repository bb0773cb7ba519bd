"""The directory layout and the crash-safe switch from the old checkpoint to the new one.

A checkpoint at ``path`` is a directory::

    path/
      LAZYFLOW_CHECKPOINT      pointer file (JSON): format name, format version, current version dir
      v-<pid>-<stamp>/         the current version: one orbax checkpoint (see _store)

A save writes a complete new version, fsyncs every file and directory of it, and only then makes it
current with one atomic rename: of the pointer file (``os.replace``) when ``path`` already is a
checkpoint, of a whole temporary sibling directory ``.<name>.lftmp-<pid>-<stamp>`` when it does not exist
yet. A process killed at any instant therefore leaves ``path`` holding the complete old or the complete new
checkpoint. Anything else inside ``path`` or next to it with lazyflow's name patterns is a leftover of an
interrupted save: loads ignore it and the next save removes it (entries of live processes are kept).
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import json
import os
import shutil
import threading
import time
import uuid
from collections.abc import Callable
from typing import TypeVar

from .._core.errors import CheckpointError

__all__ = [
    "POINTER",
    "FORMAT_NAME",
    "Transaction",
    "Follower",
    "as_path",
    "resolve",
    "read_pointer",
    "current_name",
    "cleanup",
    "leftovers",
    "path_lock",
    "fsync_tree",
    "wait_for_cleanups",
    "staging_prefix",
    "retrying",
]

POINTER = "LAZYFLOW_CHECKPOINT"
FORMAT_NAME = "lazyflow.checkpoint"
_VERSION_PREFIX = "v-"
_TMP_MARK = ".lftmp-"
_POINTER_TMP = POINTER + ".tmp-"
_NAME_MAX = 255  # bytes in one file name (Linux, macOS)
_LONG_BASE = _NAME_MAX - 1 - len(_TMP_MARK) - 48  # longer names are hashed in the staging name (48: the stamp)

_in_flight: set[str] = set()  # absolute paths this process is writing right now (never cleaned up)
_locks: dict[str, threading.Lock] = {}
_locks_guard = threading.Lock()
_cleanups: list[threading.Thread] = []
T = TypeVar("T")


def path_lock(path: str) -> threading.Lock:
    """The process-wide lock serialising saves to one checkpoint path."""
    with _locks_guard:
        return _locks.setdefault(os.path.abspath(path), threading.Lock())


def as_path(path, what: str) -> str:
    """``path`` as an absolute string path (lazyflow checkpoints are directories, never file objects).

    Raises:
        CheckpointError: ``path`` is not a ``str``/``os.PathLike`` (an open file, a BytesIO...).
    """
    if not isinstance(path, (str, os.PathLike)):
        raise CheckpointError(
            f"{what} expects a directory path (str or os.PathLike), got {type(path).__name__}; "
            "lazyflow checkpoints are directories, not file objects"
        )
    return os.path.abspath(os.fspath(path))


def _stamp() -> str:
    return f"{os.getpid()}-{time.time_ns():x}-{uuid.uuid4().hex[:6]}"


def _pid_of(name: str) -> int | None:
    """The pid embedded in a lazyflow leftover name, or None when the name is not lazyflow's."""
    for marker in (_VERSION_PREFIX, _TMP_MARK, _POINTER_TMP):
        i = name.find(marker)
        if i == 0 or (marker == _TMP_MARK and i > 0):
            head = name[i + len(marker) :].split("-", 1)[0]
            return int(head) if head.isdigit() else None
    return None


def _busy(full: str, pid: int) -> bool:
    """Whether a leftover-looking entry may still be written: by a save of this process in flight (orbax
    stages ``<version>.orbax-checkpoint-tmp`` next to it) or by another live process."""
    if pid == os.getpid():
        return any(full == f or full.startswith(f + ".") for f in _in_flight)
    return _alive(pid)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def fsync_path(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_tree(root: str) -> None:
    """fsync every file and directory under ``root``. The calls run in parallel: the filesystem journal
    then commits them together instead of one commit (milliseconds each) per call."""
    paths = []
    for dirpath, _dirs, files in os.walk(root):
        paths.extend(os.path.join(dirpath, f) for f in files)
        paths.append(dirpath)
    with concurrent.futures.ThreadPoolExecutor(min(16, len(paths))) as pool:
        list(pool.map(fsync_path, paths))


def staging_prefix(base: str) -> str:
    """``.<base>.lftmp-``, the name prefix of a first save's staging directory next to ``path``. Names too
    long to fit a file name with the stamp (~200 bytes) keep their first 64 bytes plus a hash of the rest."""
    raw = base.encode("utf-8", "surrogateescape")
    if len(raw) > _LONG_BASE:
        head = raw[:64].decode("utf-8", "ignore")
        base = f"{head}~{hashlib.sha256(raw).hexdigest()[:16]}"
    return f".{base}{_TMP_MARK}"


def _remove(p: str) -> str | None:
    """Remove the file or tree ``p`` (gone already is fine); returns why it could not be removed, or None."""
    if not os.path.lexists(p):
        return None
    if os.path.isdir(p) and not os.path.islink(p):
        shutil.rmtree(p, ignore_errors=True)
    else:
        try:
            os.unlink(p)
        except FileNotFoundError:
            pass
        except OSError as e:
            return f"{p}: {e.strerror or e}"
    return f"{p}: could not be removed" if os.path.lexists(p) else None


def read_pointer(path: str) -> dict:
    """The parsed pointer file of the checkpoint at ``path``.

    Raises:
        CheckpointError: ``path`` missing, not a directory, without pointer file (partial or foreign), or
            the pointer names another format.
    """
    if not os.path.exists(path):
        raise CheckpointError(f"no checkpoint at '{path}': the path does not exist")
    if not os.path.isdir(path):
        raise CheckpointError(
            f"'{path}' is a file, not a lazyflow checkpoint directory (lf.save writes a "
            f"directory with a {POINTER} file)"
        )
    ptr = os.path.join(path, POINTER)
    try:
        with open(ptr, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        entries = sorted(os.listdir(path))
        shown = ", ".join(entries[:8]) + (", ..." if len(entries) > 8 else "")
        raise CheckpointError(
            f"'{path}' is not a complete lazyflow checkpoint: its pointer file {POINTER} is missing (the "
            f"directory holds: {shown or 'nothing'}); it is a foreign directory or the leftover of a save "
            "that never completed"
        ) from None
    try:
        info = json.loads(raw.decode("utf-8"))
        if info.get("format") != FORMAT_NAME:
            raise ValueError(f"format {info.get('format')!r}")
        if not isinstance(info.get("current"), str) or not isinstance(info.get("version"), int):
            raise ValueError("no 'current'/'version' entry")
    except (ValueError, UnicodeDecodeError, AttributeError) as e:
        raise CheckpointError(f"'{path}': the pointer file {POINTER} is not lazyflow's ({e})") from None
    return info


def current_name(path: str) -> str | None:
    """The version directory the pointer file of ``path`` names now, or None when it cannot be read."""
    try:
        return read_pointer(path)["current"]
    except CheckpointError:
        return None


def retrying(path: str, attempt: Callable[[], T], retries: int = 4) -> T:
    """``attempt()`` (a read of the checkpoint at ``path``), again when it failed while the pointer switched to
    another version: a save by another process may have removed the version being read. A failure with the
    pointer unchanged is the checkpoint's own and raises at once."""
    for _ in range(retries):
        before = current_name(path)
        try:
            return attempt()
        except CheckpointError:
            after = current_name(path)
            if after is None or after == before:
                raise
    return attempt()


def resolve(path: str, format_version: int) -> str:
    """The directory of the current version of the checkpoint at ``path``, checked to be complete.

    Raises:
        CheckpointError: see :func:`read_pointer`; a newer format than ``format_version``; the version
            directory or its metadata file missing.
    """
    from . import _store

    info = read_pointer(path)
    if info["version"] > format_version:
        raise CheckpointError(
            f"'{path}' has checkpoint format version {info['version']}, newer than the versions this lazyflow "
            f"reads (<= {format_version}); upgrade lazyflow to load it"
        )
    name = info["current"]
    if "/" in name or name in ("", ".", ".."):
        raise CheckpointError(f"'{path}': the pointer file names an invalid version directory {name!r}")
    vdir = os.path.join(path, name)
    if not os.path.isdir(vdir):
        raise CheckpointError(f"'{path}' is damaged: the version directory '{name}' named by {POINTER} is missing")
    meta = os.path.join(vdir, _store.META, _store.META_FILE)
    if not os.path.isfile(meta):
        raise CheckpointError(
            f"'{path}' is damaged: the metadata file '{name}/{_store.META}/{_store.META_FILE}' is missing"
        )
    return vdir


def _reusable(path: str) -> bool:
    """Whether ``path`` is an existing directory that a save may write into in place: a checkpoint, an
    empty directory, or one holding only leftovers of interrupted lazyflow saves."""
    if os.path.exists(os.path.join(path, POINTER)):
        read_pointer(path)  # raises when the pointer is foreign
        return True
    return all(_pid_of(e) is not None for e in os.listdir(path))


class Transaction:
    """One save: ``begin`` picks where the new version goes, ``commit`` makes it current atomically."""

    def __init__(self, path: str):
        self.path = os.path.abspath(path)
        self.name = _VERSION_PREFIX + _stamp()
        if os.path.isdir(self.path):
            if not _reusable(self.path):
                raise CheckpointError(
                    f"refusing to save to '{path}': it is a non-empty directory that is not a lazyflow "
                    "checkpoint; remove it or choose another path"
                )
            self.staging = None  # in place: new version dir inside path, then the pointer switches
            self.version_dir = os.path.join(self.path, self.name)
        elif os.path.exists(self.path):
            raise CheckpointError(
                f"refusing to save to '{path}': it is an existing file (lf.save writes a "
                "directory); remove it or choose another path"
            )
        else:
            parent, base = os.path.split(self.path)
            if not os.path.isdir(parent):
                raise CheckpointError(f"cannot save to '{path}': the parent directory '{parent}' does not exist")
            self.staging = os.path.join(parent, staging_prefix(base) + _stamp())
            os.mkdir(self.staging)
            self.version_dir = os.path.join(self.staging, self.name)
        self.switched = False  # the pointer (or the staging directory) names the new version: never abort it
        _in_flight.add(self.version_dir)
        if self.staging:
            _in_flight.add(self.staging)

    def commit(self, format_version: int) -> None:
        """fsync the new version and switch ``path`` to it; then remove the previous version."""
        fsync_tree(self.version_dir)
        home = self.staging or self.path
        _write_pointer(home, {"format": FORMAT_NAME, "version": format_version, "current": self.name})
        self.switched = not self.staging  # os.replace done: path names the new version
        fsync_path(home)
        if self.staging:
            try:
                os.rename(self.staging, self.path)
            except OSError as e:
                raise CheckpointError(
                    f"could not move the new checkpoint into place at '{self.path}' "
                    f"({e}); another process may have created it meanwhile"
                ) from e
            self.switched = True
            fsync_path(os.path.dirname(self.path))
        self.release()
        # Removing the old version (10s of ms per 100 MB) need not delay the caller. What to remove is decided
        # now, under the path lock; those names can never become current again (every version has a unique
        # name and the current one is excluded), so the removal itself needs no lock.
        victims = leftovers(self.path)
        if victims:
            t = threading.Thread(target=_remove_all, args=(victims,), name="lazyflow-ckpt-cleanup")
            with _locks_guard:
                _cleanups[:] = [c for c in _cleanups if c.is_alive()] + [t]
            t.start()

    def abort(self) -> list[str]:
        """Remove what this save wrote (the previous checkpoint at ``path`` stays untouched). Never raises:
        the save's own error is what the caller reports; returns what could not be removed (the next save
        to ``path`` removes those leftovers). After the switch (a failure while fsyncing it) the new version
        is the checkpoint and stays."""
        self.release()
        if self.switched:
            return []
        targets = [self.staging] if self.staging else [self.version_dir]
        try:
            if not self.staging and os.path.isdir(self.path):  # orbax's temporary siblings of the version
                targets += [
                    os.path.join(self.path, p)
                    for p in os.listdir(self.path)
                    if p.startswith(self.name) and os.path.join(self.path, p) != self.version_dir
                ]
        except OSError as e:
            return [f"{self.path}: {e.strerror or e}"]
        return [why for why in map(_remove, targets) if why]

    def release(self) -> None:
        _in_flight.discard(self.version_dir)
        if self.staging:
            _in_flight.discard(self.staging)


class Follower:
    """A save's counterpart in a process other than the primary: orbax writes its shards into the version
    directory the primary chose; creating, committing and aborting are the primary's business."""

    def __init__(self, version_dir: str):
        self.version_dir = version_dir
        self.staging = None

    def commit(self, format_version: int) -> None:
        pass

    def abort(self) -> list[str]:
        return []

    def release(self) -> None:
        pass


def _write_pointer(directory: str, info: dict) -> None:
    """Write the pointer file to a temporary name, fsync it, ``os.replace`` it over the pointer (the caller
    fsyncs ``directory``)."""
    tmp = os.path.join(directory, _POINTER_TMP + _stamp())
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        os.write(fd, json.dumps(info).encode("utf-8"))
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, os.path.join(directory, POINTER))


def wait_for_cleanups() -> None:
    """Wait until the background removals of old versions started so far have finished."""
    with _locks_guard:
        pending = list(_cleanups)
    for t in pending:
        t.join()


def _remove_all(paths: list[str]) -> None:
    for p in paths:
        _remove(p)


def leftovers(path: str) -> list[str]:
    """Leftovers of interrupted saves and old versions in and next to ``path``: everything with lazyflow's
    name patterns except the pointer file, the current version and entries still being written (by a save of
    this process in flight, or by another live process). Names that are not lazyflow's are never listed."""
    path = os.path.abspath(path)
    found = []
    current = None
    if os.path.isfile(os.path.join(path, POINTER)):
        try:
            current = read_pointer(path)["current"]
        except CheckpointError:
            return found
    if os.path.isdir(path):
        for e in os.listdir(path):
            if e == POINTER or e == current:
                continue
            pid = _pid_of(e)
            full = os.path.join(path, e)
            if pid is not None and not _busy(full, pid):
                found.append(full)
    parent, base = os.path.split(path)
    prefix = staging_prefix(base)
    if os.path.isdir(parent):
        for e in os.listdir(parent):
            if e.startswith(prefix):
                full = os.path.join(parent, e)
                pid = _pid_of(e)
                if pid is not None and not _busy(full, pid):
                    found.append(full)
    return found


def cleanup(path: str) -> list[str]:
    """Remove the :func:`leftovers` of ``path`` now; returns what was removed."""
    with path_lock(path):
        found = leftovers(path)
        _remove_all(found)
    return found
