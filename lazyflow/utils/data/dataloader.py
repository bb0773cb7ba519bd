"""``DataLoader``: batches from a dataset, in the main process or in worker processes with prefetching.

Workers are started with the ``"forkserver"`` method (``"spawn"`` where it does not exist), never ``"fork"`` by
default: JAX is multithreaded, and a forked child of a process that has run JAX hangs at its first lazyflow op (a
dataset of lazyflow tensors, a transform using lazyflow). With forkserver and spawn a worker re-imports the main
module, which is right for a script guarded by ``if __name__ == "__main__":``. A script without that guard (the
torch examples' style, which torch's Linux default of fork serves) would run its whole top level again in each
worker; its workers instead rebuild only the script's definitions (:mod:`._main_image`: its imports, functions,
classes and the picklable globals they read), so it works as under torch. ``multiprocessing_context="fork"`` is
still accepted: it starts workers fastest and is safe only when the dataset, collate function and
``worker_init_fn`` use numpy / plain Python alone. ``persistent_workers=True`` pays the start-up once.
"""

from __future__ import annotations

import ast
import atexit
import contextlib
import itertools
import multiprocessing
import os
import pickle
import queue
import sys
import time
import warnings
import weakref
from collections.abc import Callable, Iterable, Sized
from multiprocessing import resource_tracker, shared_memory
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

from . import _main_image, _worker
from .collate import default_collate, default_convert, to_lazyflow
from .dataset import Dataset, IterableDataset
from .sampler import BatchSampler, RandomSampler, Sampler, SequentialSampler, _rng

if TYPE_CHECKING:
    from multiprocessing.context import DefaultContext, ForkContext, ForkServerContext, SpawnContext

    _Context = DefaultContext | ForkContext | ForkServerContext | SpawnContext

__all__ = ["DataLoader"]

T_co = TypeVar("T_co", covariant=True)


class _InfiniteConstantSampler(Sampler):
    """Yields None forever: the index stream of an IterableDataset."""

    def __iter__(self):
        while True:
            yield None


# imported once by the fork server, so workers forked from it skip these imports; importing them starts no
# JAX backend (no XLA threads), so forking afterwards is safe (JAX itself warns at fork time if its backend is running)
_PRELOAD = ["numpy", "jax", "jax.numpy", "lazyflow.utils.data._worker", "lazyflow.utils.data._main_image"]


def _main_source() -> tuple[str, str] | None:
    """``(path, source)`` of the main module when it is a script whose top level is not under
    ``if __name__ == "__main__":`` (a forkserver/spawn worker would run all of it again -- the training loop
    included -- when it imports it); otherwise None."""
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if not path or not os.path.isfile(path):
        return None
    try:
        with open(path, encoding="utf-8") as f:
            source = f.read()
        tree = ast.parse(source)
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return None
    for node in tree.body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Compare):
            names = [node.test.left, *node.test.comparators]
            if any(isinstance(n, ast.Name) and n.id == "__name__" for n in names) and any(
                isinstance(n, ast.Constant) and n.value == "__main__" for n in names
            ):
                return None
    return path, source


def _context(ctx) -> _Context:
    if ctx is None:
        if "forkserver" not in multiprocessing.get_all_start_methods():
            return multiprocessing.get_context("spawn")
        ctx = multiprocessing.get_context("forkserver")
        from multiprocessing import forkserver

        server = forkserver._forkserver
        if getattr(server, "_forkserver_pid", None) is None:  # not started yet: preload can still change
            current = list(getattr(server, "_preload_modules", []))
            # (an unguarded script's workers start with its file hidden: the server then does not preload it)
            ctx.set_forkserver_preload(current + [m for m in _PRELOAD if m not in current])
        return ctx
    if isinstance(ctx, str):
        return cast("_Context", multiprocessing.get_context(ctx))
    return ctx


_live_iterators: weakref.WeakSet = weakref.WeakSet()


@atexit.register
def _shutdown_all() -> None:
    """Stop every worker before interpreter teardown (atexit runs before multiprocessing's own handler)."""
    for it in list(_live_iterators):
        it._shutdown_workers()


class DataLoader(Generic[T_co]):
    """Iterate over a dataset in batches of lazyflow tensors (``torch.utils.data.DataLoader``).

    Args:
        dataset: a map-style ``Dataset`` (``__getitem__``/``__len__``) or an ``IterableDataset``.
        batch_size: samples per batch (default 1); None disables automatic batching.
        shuffle: reshuffle every epoch (map-style datasets only).
        sampler: the order of indices (exclusive with ``shuffle``).
        batch_sampler: yields lists of indices (exclusive with batch_size, shuffle, sampler, drop_last).
        num_workers: worker processes (0: load in the main process).
        collate_fn: merges a list of samples into a batch (default ``default_collate``: lazyflow tensors).
        pin_memory: accepted for torch compatibility and ignored (JAX manages host transfers).
        drop_last: drop the last incomplete batch.
        timeout: seconds to wait for a batch from the workers before raising (0: forever).
        worker_init_fn: called in each worker with its id, after seeding.
        multiprocessing_context: start method name or context (default forkserver; see module docstring).
        generator: ``lazyflow.Generator`` (or ``numpy.random.Generator``) for shuffling and worker seeds.
        prefetch_factor: batches loaded in advance per worker (default 2 with workers; must be None without).
        persistent_workers: keep the workers (and their dataset copies) alive between epochs.
        pin_memory_device: accepted for torch compatibility and ignored.
    Raises:
        ValueError: incompatible or invalid options (same checks and messages as torch).
    >>> loader = DataLoader(ds, batch_size=32, shuffle=True, num_workers=2, generator=lf.Generator().manual_seed(0))
    >>> for x, y in loader: ...
    """

    def __init__(
        self,
        dataset: Dataset[T_co],
        batch_size: int | None = 1,
        shuffle: bool | None = None,
        sampler: Sampler | Iterable | None = None,
        batch_sampler: Sampler | Iterable | None = None,
        num_workers: int = 0,
        collate_fn: Callable | None = None,
        pin_memory: bool = False,
        drop_last: bool = False,
        timeout: float = 0,
        worker_init_fn: Callable[[int], None] | None = None,
        multiprocessing_context=None,
        generator=None,
        *,
        prefetch_factor: int | None = None,
        persistent_workers: bool = False,
        pin_memory_device: str = "",
    ) -> None:
        if num_workers < 0:
            raise ValueError("num_workers option should be non-negative; use num_workers=0 to disable multiprocessing.")
        if timeout < 0:
            raise ValueError("timeout option should be non-negative")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError(
                "prefetch_factor option could only be specified in multiprocessing. Let num_workers > 0 "
                "to enable multiprocessing, otherwise set prefetch_factor to None."
            )
        if num_workers > 0 and prefetch_factor is None:
            prefetch_factor = 2
        elif prefetch_factor is not None and prefetch_factor < 0:
            raise ValueError("prefetch_factor option should be non-negative")
        if persistent_workers and num_workers == 0:
            raise ValueError("persistent_workers option needs num_workers > 0")
        self.dataset = dataset
        self.num_workers = num_workers
        self.prefetch_factor = prefetch_factor
        self.pin_memory = pin_memory
        self.pin_memory_device = pin_memory_device
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.multiprocessing_context = multiprocessing_context
        self._iterable = isinstance(dataset, IterableDataset)
        if self._iterable:
            if shuffle not in {False, None}:
                raise ValueError(
                    f"DataLoader with IterableDataset: expected unspecified shuffle option, but got shuffle={shuffle}"
                )
            if sampler is not None:
                raise ValueError(
                    f"DataLoader with IterableDataset: expected unspecified sampler option, but got sampler={sampler}"
                )
            if batch_sampler is not None:
                raise ValueError(
                    f"DataLoader with IterableDataset: expected unspecified batch_sampler option, but "
                    f"got batch_sampler={batch_sampler}"
                )
        shuffle = bool(shuffle)
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError(
                    "batch_sampler option is mutually exclusive with batch_size, shuffle, sampler, and drop_last"
                )
            batch_size = None
            drop_last = False
        elif batch_size is None and drop_last:
            raise ValueError("batch_size=None option disables auto-batching and is mutually exclusive with drop_last")
        if sampler is None:
            if self._iterable:
                sampler = _InfiniteConstantSampler()
            elif shuffle:
                sampler = RandomSampler(cast(Sized, dataset), generator=generator)
            else:
                sampler = SequentialSampler(cast(Sized, dataset))
        if batch_size is not None and batch_sampler is None:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        self.generator = generator
        if collate_fn is None:
            collate_fn = default_collate if self._auto_collation else default_convert
        self.collate_fn = collate_fn
        self.persistent_workers = persistent_workers
        self._iterator = None

    @property
    def _auto_collation(self) -> bool:
        return self.batch_sampler is not None

    @property
    def _index_sampler(self) -> Sampler | Iterable:
        return self.batch_sampler if self.batch_sampler is not None else self.sampler  # _auto_collation

    def __iter__(self):
        """A new iterator over one epoch (with persistent workers, the same workers are reused)."""
        if self.num_workers == 0:
            return _SingleProcessIter(self)
        if self.persistent_workers:
            if self._iterator is None:
                self._iterator = _MultiProcessIter(self)
            else:
                self._iterator._reset(self)
            return self._iterator
        return _MultiProcessIter(self)

    def __len__(self) -> int:
        """The number of batches per epoch (for an IterableDataset with ``__len__``, an estimate)."""
        if self._iterable:
            n = len(cast(Sized, self.dataset))
            if self.batch_size is not None:
                n = n // self.batch_size if self.drop_last else -(-n // self.batch_size)
            return n
        return len(cast(Sized, self._index_sampler))

    def _base_seed(self) -> int:
        return int(_rng(self.generator).integers(0, 2**62))


class _BaseIter:
    _next_data: Callable[[], Any]  # defined by each subclass (the base class is never instantiated)

    def __init__(self, loader: DataLoader) -> None:
        self._dataset = loader.dataset
        self._iterable = loader._iterable
        self._auto_collation = loader._auto_collation
        self._drop_last = loader.drop_last
        self._index_sampler = loader._index_sampler
        self._num_workers = loader.num_workers
        self._timeout = loader.timeout
        self._collate_fn = loader.collate_fn
        self._sampler_iter = iter(self._index_sampler)
        self._num_yielded = 0
        self._base_seed = loader._base_seed()

    def __iter__(self):
        return self

    def __len__(self) -> int:
        return len(cast(Sized, self._index_sampler))

    def _reset(self, loader: DataLoader) -> None:
        self._sampler_iter = iter(self._index_sampler)
        self._num_yielded = 0

    def __next__(self) -> Any:
        data = self._next_data()
        self._num_yielded += 1
        return data


class _SingleProcessIter(_BaseIter):
    def __init__(self, loader: DataLoader) -> None:
        super().__init__(loader)
        self._fetcher = _worker.make_fetcher(
            self._iterable, self._dataset, self._auto_collation, self._collate_fn, self._drop_last
        )

    def _next_data(self):
        index = next(self._sampler_iter)
        return self._fetcher.fetch(index)


class _MultiProcessIter(_BaseIter):
    """Workers fed round robin with ``prefetch_factor * num_workers`` outstanding batches, results
    re-ordered to the sampler's order; worker errors re-raised here with their traceback."""

    def __init__(self, loader: DataLoader) -> None:
        super().__init__(loader)
        if loader.prefetch_factor is None:  # DataLoader sets it (default 2) whenever num_workers > 0
            raise TypeError("DataLoader with workers needs an int prefetch_factor, got None")
        self._prefetch_factor = loader.prefetch_factor
        self._persistent = loader.persistent_workers
        if self._collate_fn is default_collate:
            mode = "default"
        elif self._collate_fn is default_convert:
            mode = "convert"
        else:
            mode = "custom"
        self._collate_mode = mode
        ctx = _context(loader.multiprocessing_context)
        image = None
        if ctx.get_start_method() != "fork":
            main = _main_source()
            if main is not None:  # an unguarded script: workers rebuild its definitions, not its top level
                image = _main_image.build_image(sys.modules["__main__"], main[1], main[0])
        # one resource tracker for this process and its workers (forked workers would otherwise start their
        # own): the shared-memory slots workers create and this process attaches are then accounted once
        resource_tracker.ensure_running()
        self._result_queue = ctx.Queue()
        self._done_event = ctx.Event()
        self._epoch_value = ctx.RawValue("q", 0)
        self._epoch = 0
        self._shutdown = False
        self._maps: dict[tuple[int, int], shared_memory.SharedMemory] = {}
        self._index_queues = []
        self._workers = []
        payload = b""
        if image is not None:  # what may name the script's classes travels pickled, opened after the image is installed
            collate = None if mode != "custom" else self._collate_fn
            payload = pickle.dumps((self._dataset, collate, loader.worker_init_fn), pickle.HIGHEST_PROTOCOL)
        owner = _worker.owner_identity()  # workers exit on their own if this process dies without shutting them down
        try:
            for i in range(self._num_workers):
                iq = ctx.Queue()
                iq.cancel_join_thread()
                collate_fn = None if mode != "custom" else self._collate_fn
                args = (
                    self._iterable,
                    self._dataset,
                    iq,
                    self._result_queue,
                    self._done_event,
                    self._epoch_value,
                    self._auto_collation,
                    mode,
                    collate_fn,
                    self._drop_last,
                    self._base_seed,
                    loader.worker_init_fn,
                    i,
                    self._num_workers,
                    self._prefetch_factor + 1,
                    owner,
                )
                if image is None:
                    w = ctx.Process(target=_worker.worker_loop, args=args)
                else:
                    held = (*args[:1], None, *args[2:8], None, *args[9:11], None, *args[12:])
                    w = ctx.Process(target=_main_image.worker_loop_from_image, args=(image, payload, held))
                w.daemon = True
                with _main_image.hidden_main_path() if image is not None else contextlib.nullcontext():
                    w.start()
                self._index_queues.append(iq)
                self._workers.append(w)
        except BaseException:
            self._shutdown_workers()
            raise
        _live_iterators.add(self)
        self._reset(loader, first=True)

    def _reset(self, loader: DataLoader, first: bool = False) -> None:
        super()._reset(loader)
        if not first:
            self._epoch += 1
            self._epoch_value.value = self._epoch
        self._send_idx = 0
        self._rcvd_idx = 0
        self._task_info: dict[int, tuple] = {}
        self._tasks_outstanding = 0
        self._workers_status = [True] * self._num_workers
        self._queue_cycle = itertools.cycle(range(self._num_workers))
        for _ in range(self._prefetch_factor * self._num_workers):
            self._try_put_index()

    def _try_put_index(self) -> None:
        try:
            index = next(self._sampler_iter)
        except StopIteration:
            return
        for _ in range(self._num_workers):
            w = next(self._queue_cycle)
            if self._workers_status[w]:
                break
        else:
            return
        self._index_queues[w].put((self._epoch, self._send_idx, index))
        self._task_info[self._send_idx] = (w,)
        self._tasks_outstanding += 1
        self._send_idx += 1

    def _next_data(self):
        while True:
            while self._rcvd_idx < self._send_idx:
                info = self._task_info.get(self._rcvd_idx)
                if info is not None and (len(info) == 2 or self._workers_status[info[0]]):
                    break
                self._task_info.pop(self._rcvd_idx, None)
                self._rcvd_idx += 1
            else:
                if not self._persistent:
                    self._shutdown_workers()
                raise StopIteration
            if len(self._task_info[self._rcvd_idx]) == 2:
                data = self._task_info.pop(self._rcvd_idx)[1]
                self._rcvd_idx += 1
                return self._process(data)
            if self._shutdown or self._tasks_outstanding <= 0:
                raise RuntimeError("DataLoader iterator is in an inconsistent state (no outstanding batch)")
            idx, data = self._get_data()
            self._tasks_outstanding -= 1
            if isinstance(data, _worker.IterableStop):
                if self._persistent:
                    self._workers_status[data.worker_id] = False
                else:
                    self._mark_unavailable(data.worker_id)
                self._try_put_index()
                continue
            if idx != self._rcvd_idx:
                if idx in self._task_info:
                    self._task_info[idx] += (data,)
                continue
            del self._task_info[idx]
            self._rcvd_idx += 1
            return self._process(data)

    def _process(self, data):
        self._try_put_index()
        if isinstance(data, _worker.ExceptionWrapper):
            data.reraise()
        if self._collate_mode != "custom":
            data = to_lazyflow(data)
        return data

    def _get_data(self):
        """The next (task index, data) of the current epoch; stale results are dropped."""
        while True:
            msg = self._receive()
            epoch, task, worker_id, slot, name, payload = msg
            if slot is not None:
                buf = self._attach(worker_id, slot, name).buf if epoch == self._epoch else None
            else:
                buf = None
            data = None
            if epoch == self._epoch:
                try:
                    data = _worker.loads(payload, buf)
                except Exception as e:
                    data = _worker.ExceptionWrapper(
                        where=f"while receiving a batch from DataLoader worker process {worker_id} ({e})"
                    )
            del buf
            if slot is not None and not self._shutdown:
                self._index_queues[worker_id].put(_worker.Free(slot))
            if epoch == self._epoch:
                return task, data

    def _receive(self):
        if self._timeout > 0:
            ok, msg = self._try_receive(self._timeout)
            if not ok:
                self._shutdown_workers()
                raise RuntimeError(f"DataLoader timed out after {self._timeout} seconds")
            return msg
        while True:
            ok, msg = self._try_receive(_worker.STATUS_CHECK_INTERVAL)
            if ok:
                return msg

    def _try_receive(self, timeout: float) -> tuple[bool, Any]:
        try:
            return True, self._result_queue.get(timeout=timeout)
        except Exception as e:
            failed = [w for i, w in enumerate(self._workers) if self._workers_status[i] and not w.is_alive()]
            if failed:
                desc = ", ".join(f"pid {w.pid} exit code {w.exitcode}" for w in failed)
                self._shutdown_workers()
                raise RuntimeError(
                    f"DataLoader worker ({desc}) exited unexpectedly. A negative exit code is the "
                    "signal that killed it (-9: out of memory or killed)."
                ) from e
            if isinstance(e, queue.Empty):
                return False, None
            raise

    def _attach(self, worker_id: int, slot: int, name: str):
        key = (worker_id, slot)
        shm = self._maps.get(key)
        if shm is None or shm.name != name:
            if shm is not None:
                _close(shm)
            shm = self._maps[key] = shared_memory.SharedMemory(name=name)
        return shm

    def _mark_unavailable(self, worker_id: int) -> None:
        self._index_queues[worker_id].put(None)
        self._workers_status[worker_id] = False

    def _shutdown_workers(self) -> None:
        if self._shutdown:
            return
        self._shutdown = True
        try:
            self._done_event.set()
            for q in self._index_queues:
                try:
                    q.put(None)
                except (OSError, ValueError):
                    pass
            deadline = time.monotonic() + 1.0  # idle workers exit at once; busy ones are stopped below
            for w in self._workers:
                w.join(timeout=max(0.0, deadline - time.monotonic()))
        finally:
            for w in self._workers:
                if w.is_alive():
                    w.terminate()  # SIGTERM: the worker exits through its cleanup (shared memory unlinked)
            for w in self._workers:
                w.join(timeout=5.0)
                if w.is_alive():
                    w.kill()
                    w.join(timeout=1.0)
            for q in self._index_queues:
                q.close()
            self._result_queue.cancel_join_thread()
            self._result_queue.close()
            for shm in self._maps.values():
                _close(shm)
                if any(not w.is_alive() and w.exitcode not in (0, None) for w in self._workers):
                    try:
                        shm.unlink()  # its worker died before it could
                    except FileNotFoundError:
                        pass
            self._maps.clear()

    def __del__(self) -> None:
        try:
            self._shutdown_workers()
        except Exception as e:  # interpreter shutdown: modules may be half torn down
            warnings.warn(f"DataLoader worker shutdown failed: {e}", RuntimeWarning, stacklevel=1)


def _close(shm) -> None:
    try:
        shm.close()
    except BufferError:
        pass
