"""Reading a file's tensor bytes in one pass into memory laid out for a zero-copy device transfer.

On the CPU, ``jax.device_put`` wraps a 64-byte-aligned numpy buffer without copying it; any other buffer is
copied. A load that reads each tensor into bytes it then hands to the device pays two copies of every byte (the
file read, the transfer) plus per-record file calls. Here the bytes land once, in buffers this load allocated
itself (never memory the caller can reach), each tensor at a 64-byte boundary, with as few ``preadv`` calls as
the kernel allows (one per ``IOV_MAX`` tensors).
"""

from __future__ import annotations

import os

import numpy as np

from .._core.errors import CheckpointError

__all__ = ["aligned", "read_range", "read_spans", "ALIGN"]

ALIGN = 64  # jax's CPU client wraps host buffers aligned to this many bytes without a copy
_IOV_MAX = 1024  # POSIX's minimum for a Linux/macOS preadv; sysconf may allow more, never needed here
try:
    _IOV_MAX = max(16, min(os.sysconf("SC_IOV_MAX"), 1024))
except (AttributeError, ValueError, OSError):  # pragma: no cover - platform dependent
    pass


def aligned(n: int, phase: int = 0) -> np.ndarray:
    """An uninitialised uint8 buffer of ``n`` bytes whose start address is ``phase`` modulo 64."""
    raw = np.empty(n + ALIGN, np.uint8)
    off = (phase - raw.ctypes.data) % ALIGN
    return raw[off : off + n]


def _read_at(fd: int, batch: list[memoryview], offset: int) -> int:
    if hasattr(os, "preadv"):
        return os.preadv(fd, batch, offset)
    os.lseek(fd, offset, os.SEEK_SET)  # pragma: no cover - platforms without preadv (Windows): one buffer a call
    data = os.read(fd, len(batch[0]))
    batch[0][: len(data)] = data
    return len(data)


def _preadv_all(fd: int, views: list[memoryview], offset: int) -> int:
    """Fill ``views`` from the file's bytes at ``offset`` on; returns the bytes read (short only at end of file)."""
    done, i, part = 0, 0, 0  # part: bytes of views[i] already filled
    while i < len(views):
        batch = [views[i][part:], *views[i + 1 : i + _IOV_MAX]]
        got = _read_at(fd, batch, offset + done)
        if got <= 0:
            return done
        done += got
        while i < len(views) and got >= len(views[i]) - part:  # advance past the buffers this call filled
            got -= len(views[i]) - part
            i, part = i + 1, 0
        part += got
    return done


def read_range(fd: int, start: int, n: int, where: str) -> np.ndarray:
    """The file's bytes ``[start, start + n)`` in a buffer whose address is congruent to ``start`` modulo 64, so
    that a record the writer aligned to 64 bytes in the file (torch does) is 64-byte-aligned in memory. Fewer
    bytes come back when the file ends early (the caller checks each record against what arrived).

    Raises:
        CheckpointError: the read fails (an I/O error).
    """
    buf = aligned(n, start % ALIGN)
    try:
        got = _preadv_all(fd, [memoryview(buf.data)], start) if n else 0
    except OSError as e:
        raise CheckpointError(f"{where}: reading the file failed ({e})") from e
    return buf[:got]


def read_spans(fd: int, start: int, sizes: list[int], where: str) -> list[np.ndarray]:
    """The file's bytes from ``start`` on, cut into consecutive pieces of ``sizes`` bytes, each landed at a 64-byte
    boundary of one buffer (one allocation, so the transfer of a large file stays one hugepage-friendly region).

    Raises:
        CheckpointError: the file ends before ``sum(sizes)`` bytes (truncated), or the read fails.
    """
    offsets, pos = [], 0
    for n in sizes:
        offsets.append(pos)
        pos += -(-n // ALIGN) * ALIGN
    arena = aligned(max(pos, 1))
    pieces = [arena[o : o + n] for o, n in zip(offsets, sizes)]
    want = sum(sizes)
    try:
        got = _preadv_all(fd, [memoryview(p.data) for p in pieces if p.size], start)
    except OSError as e:
        raise CheckpointError(f"{where}: reading the file failed ({e})") from e
    if got != want:
        raise CheckpointError(f"{where}: the file ends {want - got} bytes before its last tensor (truncated)")
    return pieces
