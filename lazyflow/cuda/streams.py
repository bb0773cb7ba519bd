"""``lf.cuda.Stream``/``Event`` and the stream contexts, honest about XLA: it offers no user streams.

JAX runs each device's programs in the order they were queued, on streams XLA owns. So a :class:`Stream` here is a
name for that one ordered queue: code inside ``with lf.cuda.stream(s):`` runs as it is, ``wait_stream``/``wait_event``
have nothing to reorder, and ``synchronize()``/``query()`` wait for the device's queued work. An :class:`Event`
waits for that work when it is recorded and then takes a host timestamp, so timing code written for torch measures
what it means to::

    start, end = lf.cuda.Event(enable_timing=True), lf.cuda.Event(enable_timing=True)
    start.record(); y = model(x); end.record(); lf.cuda.synchronize()
    ms = start.elapsed_time(end)

Without a GPU every call answers as torch's CPU build: ``Stream()``/``Event()`` raise :class:`lazyflow.NoCudaError`
(a RuntimeError), ``current_stream()`` too (an AssertionError), ``stream(None)`` and ``set_stream(None)`` do nothing.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import jax
import numpy as np

from .._core.device import Device, current_index
from .._core.errors import OpError
from ._common import DeviceLike, NoCudaTypeError, gpus, index, is_available, jax_device, no_cuda

__all__ = [
    "Stream",
    "ExternalStream",
    "Event",
    "StreamContext",
    "stream",
    "current_stream",
    "default_stream",
    "set_stream",
    "get_stream_from_external",
    "is_current_stream_capturing",
]


def _drain(dev: Any) -> None:
    """Wait for the work queued on the JAX device ``dev``: a tiny program queued behind it is awaited."""
    (jax.device_put(np.zeros((), np.float32), dev) + 1).block_until_ready()


class Stream:
    """A name for the GPU's one ordered work queue (see the module docstring); ``priority`` is kept, not used.

    Raises:
        NoCudaError: JAX has no GPU (a RuntimeError, as torch's CPU build raises).
    """

    def __init__(self, device: DeviceLike = None, priority: int = 0, **kwargs: Any) -> None:
        if not is_available():
            raise no_cuda(f"{type(self).__name__}()")
        self.device_index = index(device, optional=True)
        jax_device(self.device_index, "Stream()")
        self.device = Device(f"cuda:{self.device_index}")
        self.priority = int(priority)
        self.cuda_stream = int(kwargs.get("stream_ptr", 0))

    def _jax(self):
        return jax_device(self.device_index, "Stream")

    def query(self) -> bool:
        """Whether the queued work is done: waits for it, so always True."""
        _drain(self._jax())
        return True

    def synchronize(self) -> None:
        """Wait for the work queued on this GPU."""
        _drain(self._jax())

    def wait_event(self, event: Event) -> None:
        """Nothing to reorder: work on the GPU runs in queue order, after ``event``'s work."""

    def wait_stream(self, stream: Stream) -> None:
        """Nothing to reorder: every stream here is the GPU's one ordered queue."""

    def record_event(self, event: Event | None = None) -> Event:
        """Record ``event`` (a new one if None) here; returns it."""
        event = Event() if event is None else event
        event.record(self)
        return event

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Stream) and (self.device_index, self.cuda_stream) == (
            other.device_index,
            other.cuda_stream,
        )

    def __hash__(self) -> int:
        return hash((self.device_index, self.cuda_stream))

    def __repr__(self) -> str:
        return f"<lazyflow.cuda.Stream device={self.device} cuda_stream={self.cuda_stream:#x}>"


class ExternalStream(Stream):
    """A stream made elsewhere (a pointer from another library): kept as ``cuda_stream``; XLA does not run on it, so
    it behaves as :class:`Stream`.

    Raises:
        NoCudaError: JAX has no GPU (a TypeError, as torch's CPU build raises).
    """

    def __init__(self, stream_ptr: int, device: DeviceLike = None, **kwargs: Any) -> None:
        if not is_available():
            raise no_cuda("ExternalStream()", NoCudaTypeError)
        super().__init__(device, stream_ptr=int(stream_ptr))


def get_stream_from_external(data_ptr: int, device: DeviceLike = None) -> Stream:
    """An :class:`ExternalStream` for a stream pointer from another library.

    Raises:
        NoCudaError: JAX has no GPU (an AssertionError, as torch's CPU build raises).
    """
    jax_device(device, "get_stream_from_external()")
    return ExternalStream(data_ptr, device)


class Event:
    """A point in the GPU's queue: :meth:`record` waits for the work queued so far, then takes a host timestamp
    (``time.perf_counter``), so :meth:`elapsed_time` measures the work between two records.

    Raises:
        NoCudaError: JAX has no GPU (a RuntimeError, as torch's CPU build raises).
    """

    def __init__(
        self, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False, external: bool = False
    ) -> None:
        if not is_available():
            raise no_cuda("Event()")
        self.enable_timing, self.blocking, self.interprocess = bool(enable_timing), bool(blocking), bool(interprocess)
        self._time: float | None = None

    def record(self, stream: Stream | None = None) -> None:
        """Wait for the work queued on ``stream``'s GPU (the current one if None), then timestamp."""
        _drain(stream._jax() if stream is not None else jax_device(None, "Event.record()"))
        self._time = time.perf_counter()

    def wait(self, stream: Stream | None = None) -> None:
        """Nothing to reorder: the GPU runs its queue in order."""

    def query(self) -> bool:
        """Whether the recorded work is done: :meth:`record` waited for it, so True (and True before a record, as
        CUDA answers)."""
        return True

    def synchronize(self) -> None:
        """Nothing left to wait for: :meth:`record` waited."""

    def elapsed_time(self, end_event: Event) -> float:
        """Milliseconds from this event's record to ``end_event``'s.

        Raises:
            OpError: either event was made without ``enable_timing=True`` or is not recorded (a RuntimeError, as in
                torch).
        """
        if not (self.enable_timing and end_event.enable_timing):
            raise OpError(
                "Both events must be created with argument 'enable_timing=True' to measure elapsed time "
                f"(start: {self.enable_timing}, end: {end_event.enable_timing})"
            )
        if self._time is None or end_event._time is None:
            raise OpError("Both events must be recorded (event.record()) before calculating elapsed time")
        return (end_event._time - self._time) * 1000.0

    def __repr__(self) -> str:
        return f"<lazyflow.cuda.Event recorded={self._time is not None}>"


_current = threading.local()  # device index -> the Stream set_stream chose, per thread


def default_stream(device: DeviceLike = None) -> Stream:
    """The GPU's default stream.

    Raises:
        NoCudaError: JAX has no GPU (an AssertionError, as torch's CPU build raises).
    """
    jax_device(device, "default_stream()")
    return Stream(index(device, optional=True))


def current_stream(device: DeviceLike = None) -> Stream:
    """The stream :func:`set_stream`/:func:`stream` selected on the GPU (else its default stream).

    Raises:
        NoCudaError: JAX has no GPU (an AssertionError, as torch's CPU build raises).
    """
    jax_device(device, "current_stream()")
    idx = index(device, optional=True)
    chosen = getattr(_current, "by_device", {}).get(idx)
    return chosen if chosen is not None else Stream(idx)


def set_stream(stream: Stream | None) -> None:
    """Make ``stream`` what :func:`current_stream` answers on its GPU; None: a no-op (as in torch)."""
    if stream is None:
        return
    if not isinstance(stream, Stream):
        raise TypeError(f"lf.cuda.set_stream expects a lf.cuda.Stream or None, got {type(stream).__name__}")
    if not hasattr(_current, "by_device"):
        _current.by_device = {}
    _current.by_device[stream.device_index] = stream


class StreamContext:
    """Selects ``stream`` for its block (code runs as it is: see the module docstring); None, or no GPU: a no-op."""

    def __init__(self, stream: Stream | None) -> None:
        self.stream = stream
        self.idx = current_index("cuda") if gpus() else -1
        self.prev: Stream | None = None

    def __enter__(self) -> None:
        if self.stream is None or self.idx == -1:
            return
        self.prev = current_stream(self.stream.device_index)
        set_stream(self.stream)

    def __exit__(self, *exc: object) -> None:
        if self.prev is not None:
            set_stream(self.prev)


def stream(stream: Stream | None) -> StreamContext:
    """``with lf.cuda.stream(s):`` -- a :class:`StreamContext`."""
    return StreamContext(stream)


def is_current_stream_capturing() -> bool:
    """False: lazyflow does not capture CUDA graphs (XLA compiles whole programs instead).

    Raises:
        NoCudaError: JAX has no GPU (a RuntimeError, as torch's CPU build raises).
    """
    jax_device(None, "is_current_stream_capturing()")
    return False
