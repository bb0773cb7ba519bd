"""``lf.multiprocessing``: torch.multiprocessing's names -- Python's ``multiprocessing`` plus ``spawn`` /
``start_processes`` and the sharing-strategy switches.

``spawn(fn, args, nprocs)`` runs ``fn(i, *args)`` in ``nprocs`` fresh processes and, with ``join=True``, waits for
all of them: when one raises, the others are terminated and the parent raises :class:`ProcessRaisedException`
carrying the child's traceback; when one dies without raising (killed, ``os._exit``), :class:`ProcessExitedException`
with its exit code. ``"fork"`` is refused once this process has started JAX's runtime: a forked child inherits
JAX's thread locks held and hangs at its first lazyflow op (use ``"spawn"``, torch's default here, or
``"forkserver"``). Tensors cross processes by value (pickled): there is no shared-memory tensor here, so the
sharing strategy is a recorded setting.
"""

from __future__ import annotations

import multiprocessing as _mp
import multiprocessing.connection as _conn
import signal
import traceback
import warnings
from multiprocessing import *  # noqa: F403 - torch.multiprocessing re-exports the standard library's names

from jax._src import xla_bridge as _xb

from ._core.errors import NotSupportedError, ValueRangeError

__all__ = [
    *_mp.__all__,  # pyright: ignore[reportUnsupportedDunderAll]
    "get_all_sharing_strategies",
    "get_sharing_strategy",
    "set_sharing_strategy",
    "spawn",
    "start_processes",
    "ProcessContext",
    "ProcessException",
    "ProcessRaisedException",
    "ProcessExitedException",
]

_STRATEGIES = ("file_descriptor", "file_system")
_strategy = ["file_descriptor"]


def get_all_sharing_strategies() -> set[str]:
    """torch's tensor-sharing strategies on Linux."""
    return set(_STRATEGIES)


def get_sharing_strategy() -> str:
    """The recorded sharing strategy (``"file_descriptor"`` unless set)."""
    return _strategy[0]


def set_sharing_strategy(new_strategy: str) -> None:
    """Record a sharing strategy (tensors are pickled by value here, whichever is set).

    Raises:
        ValueRangeError: not one of :func:`get_all_sharing_strategies` (a ValueError).
    """
    if new_strategy not in _STRATEGIES:
        raise ValueRangeError(f"unknown sharing strategy {new_strategy!r}; expected one of {list(_STRATEGIES)}")
    _strategy[0] = new_strategy


class ProcessException(Exception):
    """A process started by :func:`spawn` failed: ``error_index`` (its rank) and ``pid`` name it."""

    def __init__(self, msg: str, error_index: int, pid: int | None) -> None:
        super().__init__(msg)
        self.msg, self.error_index, self.pid = msg, error_index, pid

    def __reduce__(self):
        return type(self), (self.msg, self.error_index, self.pid)


class ProcessRaisedException(ProcessException):
    """The process raised: the message holds its traceback."""


class ProcessExitedException(ProcessException):
    """The process ended without raising (a signal, ``os._exit``): ``exit_code`` and ``signal_name`` say how."""

    def __init__(
        self, msg: str, error_index: int, error_pid: int | None, exit_code: int | None, signal_name: str | None = None
    ) -> None:
        super().__init__(msg, error_index, error_pid)
        self.exit_code, self.signal_name = exit_code, signal_name

    def __reduce__(self):
        return type(self), (self.msg, self.error_index, self.pid, self.exit_code, self.signal_name)


def _run(fn, i: int, args: tuple, errors) -> None:
    try:
        fn(i, *args)
    except KeyboardInterrupt:
        pass
    except BaseException:
        errors.put(traceback.format_exc())
        raise SystemExit(1) from None


class ProcessContext:
    """The processes one :func:`start_processes` call started; :meth:`join` waits for them."""

    def __init__(self, processes: list, error_queues: list) -> None:
        self.processes, self.error_queues = processes, error_queues
        self.sentinels = {p.sentinel: i for i, p in enumerate(processes)}

    def pids(self) -> list[int | None]:
        return [p.pid for p in self.processes]

    def join(self, timeout: float | None = None) -> bool:
        """Wait up to ``timeout`` seconds (None: until something happens) for the processes. True when all have
        ended successfully, False while some still run.

        Raises:
            ProcessRaisedException: a process raised (the others are terminated first).
            ProcessExitedException: a process ended with a nonzero code without raising.
        """
        if not self.sentinels:
            return True
        ready = _conn.wait(list(self.sentinels), timeout=timeout)
        failed = None
        for s in ready:
            i = self.sentinels.pop(s)
            p = self.processes[i]
            p.join()
            if p.exitcode != 0:
                failed = i
                break
        if failed is None:
            return not self.sentinels
        for p in self.processes:  # the rest would wait forever for the failed one (a collective, a barrier)
            if p.is_alive():
                p.terminate()
            p.join()
        p, q = self.processes[failed], self.error_queues[failed]
        if not q.empty():
            tb = q.get()
            raise ProcessRaisedException(
                f"\n\n-- Process {failed} terminated with the following error:\n{tb}", failed, p.pid
            )
        code = p.exitcode
        if code is not None and code < 0:
            name = signal.Signals(-code).name
            raise ProcessExitedException(f"process {failed} terminated with signal {name}", failed, p.pid, code, name)
        raise ProcessExitedException(f"process {failed} terminated with exit code {code}", failed, p.pid, code)


def _check_method(start_method: str) -> None:
    if start_method == "fork" and _xb.backends_are_initialized():
        raise NotSupportedError(
            "start_method='fork' after JAX's runtime has started in this process: a forked child inherits its "
            "thread locks held and hangs at its first lazyflow op; use 'spawn' (the default) or 'forkserver'"
        )


def start_processes(fn, args: tuple = (), nprocs: int = 1, join: bool = True, daemon: bool = False,
                    start_method: str = "spawn") -> ProcessContext | None:  # fmt: skip
    """Run ``fn(i, *args)`` for ``i`` in ``range(nprocs)``, each in its own process started with ``start_method``;
    with ``join`` wait for all (see :meth:`ProcessContext.join`) and return None, else return the context.

    Raises:
        NotSupportedError: ``"fork"`` once JAX's runtime runs in this process.
        ProcessRaisedException, ProcessExitedException: with ``join``, a process failed.
    """
    _check_method(start_method)
    ctx = _mp.get_context(start_method)
    processes, queues = [], []
    for i in range(nprocs):
        q = ctx.SimpleQueue()
        p = ctx.Process(target=_run, args=(fn, i, tuple(args), q), daemon=daemon)  # type: ignore[attr-defined]
        p.start()
        processes.append(p)
        queues.append(q)
    context = ProcessContext(processes, queues)
    if not join:
        return context
    while not context.join():
        pass
    return None


def spawn(fn, args: tuple = (), nprocs: int = 1, join: bool = True, daemon: bool = False,
          start_method: str = "spawn") -> ProcessContext | None:  # fmt: skip
    """:func:`start_processes` (torch's ``mp.spawn``; another ``start_method`` warns as torch does)."""
    if start_method != "spawn":
        warnings.warn(
            f"This method only supports start_method=spawn (got: {start_method}). To use a different start_method "
            "use: lf.multiprocessing.start_processes(...)",
            FutureWarning,
            stacklevel=2,
        )
    return start_processes(fn, args, nprocs, join, daemon, start_method)
