"""DataLoader worker processes: the loop each worker runs, and how batches travel to the main process.

Workers build NUMPY batches, never JAX arrays. The default collate stacks each batch straight into a
shared-memory slot owned by the worker (``prefetch_factor + 1`` slots per worker, grown to the largest
batch seen); the pickled message carries only references into the slot, and the main process copies the
arrays out into private, aligned memory (which JAX on CPU then adopts without another copy) and hands the
slot back. Anything that does not fit (the first batch, odd sizes, custom collate results) is pickled
in-band through the result queue.

Message protocol. Main -> worker (index queue): ``(epoch, task, indices)``, ``_Free(slot)``, or ``None``
(exit). Worker -> main (result queue): ``(epoch, task, worker_id, slot, slot_name, payload)`` where
``payload`` is pickled data, an ``ExceptionWrapper`` or an ``IterableStop``, and ``slot`` is None when the
payload references no shared memory.

Orphans. A worker exits on its own when the process that owns its DataLoader dies without shutting it down
(SIGKILL, the OOM killer): it releases its shared-memory slots and never blocks on the result queue again. The
owner is watched by pid (see ``OwnerWatch``), not through ``os.getppid()``: with the forkserver start method the
parent is the fork server, which outlives a killed owner for as long as any worker is alive.
"""

from __future__ import annotations

import io
import os
import pickle
import queue
import random
import signal
import sys
import time
import traceback
from dataclasses import dataclass
from multiprocessing import shared_memory

import numpy as np

from .collate import aligned_empty, numpy_collate, numpy_convert

__all__ = ["WorkerInfo", "get_worker_info"]

# seconds between checks that the other side is alive (the main process on its result queue, a worker on its owner)
STATUS_CHECK_INTERVAL = 1.0
_ALIGN = 64


@dataclass(frozen=True)
class WorkerInfo:
    """What a worker process knows about itself (``get_worker_info()``).

    Attributes:
        id: this worker's index in ``[0, num_workers)``.
        num_workers: the number of workers of the DataLoader.
        seed: the seed of this worker's ``random``, numpy and lazyflow generators.
        dataset: this worker's copy of the dataset.
    """

    id: int
    num_workers: int
    seed: int
    dataset: object


_worker_info: WorkerInfo | None = None


def get_worker_info() -> WorkerInfo | None:
    """Inside a DataLoader worker, its ``WorkerInfo``; in the main process, None.

    >>> info = get_worker_info(); shard = range(info.id, n, info.num_workers) if info else range(n)
    """
    return _worker_info


class KeyErrorMessage(str):
    """A string whose repr is itself, so a re-raised KeyError shows the worker's traceback readably."""

    def __repr__(self) -> str:
        return self


class ExceptionWrapper:
    """An exception caught in a worker, with its formatted traceback, re-raised in the main process."""

    def __init__(self, exc_info=None, where: str = "in background") -> None:
        exc_info = exc_info or sys.exc_info()
        self.exc_type = exc_info[0]
        self.exc_msg = "".join(traceback.format_exception(*exc_info))
        self.where = where

    def reraise(self):
        msg = f"Caught {self.exc_type.__name__} {self.where}.\nOriginal {self.exc_msg}"
        if self.exc_type is KeyError:
            msg = KeyErrorMessage(msg)
        try:
            exc = self.exc_type(msg)
        except Exception:
            raise RuntimeError(msg) from None
        try:
            raise exc
        finally:
            del exc  # no frame -> exception -> traceback -> frame cycle keeping the loader's workers alive


@dataclass(frozen=True)
class IterableStop:
    """A worker's iterable dataset is exhausted."""

    worker_id: int


@dataclass(frozen=True)
class Free:
    """The main process has copied a batch out of shared-memory slot ``slot``."""

    slot: int


# ------------------------------------------------------------------ watching the owner
def _proc_stat(pid: int) -> tuple[str, str] | None:
    """``(state, start time)`` of ``pid`` from ``/proc/<pid>/stat``; None when there is no such process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    fields = raw[raw.rindex(b")") + 2:].split()  # after "pid (comm) ": comm may hold spaces and parentheses
    return fields[0].decode(), fields[19].decode()  # stat fields 3 (state) and 22 (start time, clock ticks)


def owner_identity() -> tuple[int, str | None]:
    """This process as a worker's ``OwnerWatch`` identifies it: its pid and, where /proc exists, its start time."""
    pid = os.getpid()
    stat = _proc_stat(pid)
    return pid, None if stat is None else stat[1]


class OwnerWatch:
    """Whether the process that owns a DataLoader (``owner_identity()`` taken there) is still running.

    The owner is named by pid, not found with ``os.getppid()``: under the forkserver start method a worker's parent
    is the fork server, and the fork server only exits once every process holding its liveness pipe has closed
    it, workers included, so a worker watching its parent outlives a SIGKILLed owner forever. The start time
    recorded next to the pid tells a recycled pid from the owner, and a zombie (killed, not yet reaped) owner
    counts as gone. ``prctl(PR_SET_PDEATHSIG)`` is not used: it would watch the fork server too, and it fires when
    the parent *thread* that started the worker exits, which a DataLoader iterated from a short-lived thread does.
    """

    def __init__(self, pid: int, start: str | None) -> None:
        self.pid = pid
        self.start = start

    def alive(self) -> bool:
        if self.start is None:  # no /proc: signal 0 (a zombie or a recycled pid still reads as alive)
            try:
                os.kill(self.pid, 0)
            except ProcessLookupError:
                return False
            except PermissionError:
                return True
            return True
        stat = _proc_stat(self.pid)
        return stat is not None and stat[0] not in ("Z", "X", "x") and stat[1] == self.start


# ------------------------------------------------------------------ shared-memory transport
class _Pickler(pickle.Pickler):
    def __init__(self, file, views: dict) -> None:
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self._views = views

    def persistent_id(self, obj):
        if type(obj) is np.ndarray and self._views:
            off = self._views.get(id(obj))
            if off is not None:
                return (off, obj.shape, obj.dtype.str)
        return None


class _Unpickler(pickle.Unpickler):
    def __init__(self, file, buf) -> None:
        super().__init__(file)
        self._buf = buf

    def persistent_load(self, pid):
        off, shape, dtype = pid
        view = np.ndarray(shape, np.dtype(dtype), buffer=self._buf, offset=off)
        out = aligned_empty(shape, dtype)
        np.copyto(out, view)
        return out


def dumps(obj, views: dict | None = None) -> bytes:
    f = io.BytesIO()
    _Pickler(f, views or {}).dump(obj)
    return f.getvalue()


def loads(payload: bytes, buf=None):
    return _Unpickler(io.BytesIO(payload), buf).load()


class _Arena:
    """Bump allocator over one slot; what does not fit is allocated privately (and pickled in-band)."""

    def __init__(self, shm) -> None:
        self.buf = shm.buf if shm is not None else None
        self.cap = shm.size if shm is not None else 0
        self.off = 0
        self.views: dict[int, int] = {}
        self.keep: list = []
        self.overflow = 0

    def __call__(self, shape, dtype) -> np.ndarray:
        dtype = np.dtype(dtype)
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        start = -(-self.off // _ALIGN) * _ALIGN
        if self.buf is not None and start + nbytes <= self.cap:
            a = np.ndarray(shape, dtype, buffer=self.buf, offset=start)
            self.off = start + nbytes
            self.views[id(a)] = start
            self.keep.append(a)
            return a
        self.overflow += nbytes + _ALIGN
        return aligned_empty(shape, dtype)

    @property
    def used(self) -> int:
        return self.off + self.overflow


class _Slots:
    """A worker's shared-memory slots, grown to the largest batch seen."""

    def __init__(self, n: int) -> None:
        self.shm: list = [None] * n
        self.free = list(range(n))
        self.size_hint = 0

    def acquire(self):
        if not self.free:
            return None, None
        i = self.free.pop()
        shm = self.shm[i]
        if self.size_hint and (shm is None or shm.size < self.size_hint):
            if shm is not None:
                _destroy(shm)
            shm = self.shm[i] = shared_memory.SharedMemory(create=True, size=self.size_hint)
        return i, shm

    def release(self, i: int) -> None:
        self.free.append(i)

    def close(self) -> None:
        for shm in self.shm:
            if shm is not None:
                _destroy(shm)
        self.shm = [None] * len(self.shm)


def _destroy(shm) -> None:
    try:
        shm.close()
    except BufferError:
        pass
    try:
        shm.unlink()
    except FileNotFoundError:
        pass


# ------------------------------------------------------------------ fetching
class MapFetcher:
    """Fetch and collate the samples of a batch of indices from a map-style dataset."""

    def __init__(self, dataset, auto_collation: bool, collate, drop_last: bool) -> None:
        self.dataset = dataset
        self.auto_collation = auto_collation
        self.collate = collate
        self.drop_last = drop_last

    def fetch(self, index):
        if self.auto_collation:
            getitems = getattr(self.dataset, "__getitems__", None)
            data = getitems(index) if callable(getitems) else [self.dataset[i] for i in index]
        else:
            data = self.dataset[index]
        return self.collate(data)


class IterableFetcher(MapFetcher):
    """Pull the next batch from an iterable dataset (``StopIteration`` when exhausted)."""

    def __init__(self, dataset, auto_collation: bool, collate, drop_last: bool) -> None:
        super().__init__(dataset, auto_collation, collate, drop_last)
        self.iterator = iter(dataset)
        self.ended = False

    def fetch(self, index):
        if self.ended:
            raise StopIteration
        if self.auto_collation:
            data = []
            for _ in index:
                try:
                    data.append(next(self.iterator))
                except StopIteration:
                    self.ended = True
                    break
            if not data or (self.drop_last and len(data) < len(index)):
                raise StopIteration
        else:
            data = next(self.iterator)
        return self.collate(data)


def make_fetcher(iterable: bool, dataset, auto_collation: bool, collate, drop_last: bool) -> MapFetcher:
    cls = IterableFetcher if iterable else MapFetcher
    return cls(dataset, auto_collation, collate, drop_last)


def _seed_all(base_seed: int, worker_id: int) -> int:
    seed = (base_seed + worker_id) % 2 ** 63
    random.seed(seed)
    np.random.seed(np.random.SeedSequence([base_seed % 2 ** 64, worker_id]).generate_state(4))
    from ..._creation import manual_seed

    manual_seed(seed)
    return seed


def _exit_on_sigterm(signum, frame):
    raise SystemExit(128 + signum)


def worker_loop(iterable: bool, dataset, index_queue, result_queue, done_event, epoch_value, auto_collation: bool,
                collate_mode: str, collate_fn, drop_last: bool, base_seed: int, init_fn, worker_id: int,
                num_workers: int, num_slots: int, owner: tuple[int, str | None]) -> None:
    """The body of a worker process (see the module docstring for the protocol).

    Args:
        collate_mode: ``"default"`` (numpy collate into shared memory), ``"convert"`` (numpy convert,
            no batching) or ``"custom"`` (``collate_fn`` as given).
        owner: ``owner_identity()`` of the main process; the worker exits when that process is gone.
    """
    global _worker_info
    slots = _Slots(num_slots if collate_mode == "default" else 0)
    arena = [None]

    def collate(data):
        if collate_mode == "default":
            return numpy_collate(data, arena[0])
        if collate_mode == "convert":
            return numpy_convert(data)
        return collate_fn(data)

    orphaned = False
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    try:
        seed = _seed_all(base_seed, worker_id)
        _worker_info = WorkerInfo(id=worker_id, num_workers=num_workers, seed=seed, dataset=dataset)
        init_error = None
        fetcher = None
        try:
            if init_fn is not None:
                init_fn(worker_id)
            fetcher = make_fetcher(iterable, dataset, auto_collation, collate, drop_last)
        except Exception:
            init_error = ExceptionWrapper(where=f"in DataLoader worker process {worker_id}")
        epoch = None
        ended = False
        watch = OwnerWatch(*owner)
        next_check = time.monotonic() + STATUS_CHECK_INTERVAL
        while True:
            now = time.monotonic()
            if now >= next_check:  # also between queued tasks: a busy worker must notice too
                if not watch.alive():
                    orphaned = True
                    break
                next_check = now + STATUS_CHECK_INTERVAL
            try:
                r = index_queue.get(timeout=STATUS_CHECK_INTERVAL)
            except queue.Empty:
                continue
            if r is None:
                break
            if isinstance(r, Free):
                slots.release(r.slot)
                continue
            task_epoch, task, index = r
            if done_event.is_set() or task_epoch < epoch_value.value:
                continue  # shutting down, or a task of an abandoned epoch
            if task_epoch != epoch:
                if epoch is not None and init_error is None:
                    fetcher = make_fetcher(iterable, dataset, auto_collation, collate, drop_last)
                epoch, ended = task_epoch, False
            if ended:
                continue
            slot, shm = slots.acquire() if collate_mode == "default" else (None, None)
            arena[0] = _Arena(shm)
            if init_error is not None:
                data, init_error = init_error, None
            else:
                try:
                    data = fetcher.fetch(index)
                except StopIteration:
                    if not iterable:
                        data = ExceptionWrapper(where=f"in DataLoader worker process {worker_id}")
                    else:
                        data, ended = IterableStop(worker_id), True
                except Exception:
                    data = ExceptionWrapper(where=f"in DataLoader worker process {worker_id}")
            a = arena[0]
            try:
                payload = dumps(data, a.views)
            except Exception:
                payload = dumps(ExceptionWrapper(where=f"while sending a batch from DataLoader worker process "
                                                       f"{worker_id}"))
                a.views.clear()
            if slot is not None:
                slots.size_hint = max(slots.size_hint, int(a.used * 1.05) + _ALIGN)
                if not a.views:
                    slots.release(slot)
                    slot = None
            name = shm.name if slot is not None else None
            arena[0] = None
            del data, a
            result_queue.put((task_epoch, task, worker_id, slot, name, payload))
    except KeyboardInterrupt:
        pass  # the main process raises it
    finally:
        slots.close()
        # nobody will drain the queue: exit without waiting for the feeder thread (``orphaned`` first: the
        # event's lock may have died with its holder)
        if orphaned or done_event.is_set():
            result_queue.cancel_join_thread()
            result_queue.close()
