"""Reading a file's tensor bytes in one pass into memory laid out for a zero-copy device transfer.

On the CPU, ``jax.device_put`` wraps a 64-byte-aligned numpy buffer without copying it; any other buffer is
copied. A load that reads each tensor into bytes it then hands to the device pays two copies of every byte (the
file read, the transfer) plus per-record file calls. Here the bytes land once, in buffers this load allocated
itself (never memory the caller can reach), each tensor at a 64-byte boundary of a buffer of at most 8 MiB (or of
its own, if larger: one kept tensor never pins the rest of the file), with as few ``preadv`` calls as the kernel
allows (one per ``IOV_MAX`` tensors).
"""

from __future__ import annotations

import ctypes
import mmap
import os
import sys
import weakref

import numpy as np

from .._core.errors import CheckpointError

__all__ = ["aligned", "read_range", "read_records", "read_spans", "ALIGN"]

ALIGN = 64  # jax's CPU client wraps host buffers aligned to this many bytes without a copy
_IOV_MAX = 1024  # POSIX's minimum for a Linux/macOS preadv; sysconf may allow more, never needed here
try:
    _IOV_MAX = max(16, min(os.sysconf("SC_IOV_MAX"), 1024))
except (AttributeError, ValueError, OSError):  # pragma: no cover - platform dependent
    pass
_HUGE = 2 << 20  # a huge page
_CHUNK = 8 << 20  # records below this size share buffers of at most this size (see _buffers)
_GAP = 1 << 16  # records at most this many bytes apart share a preadv (torch's zip headers are ~100 bytes)


_LIBC = None
if sys.platform.startswith("linux"):
    try:
        _LIBC = ctypes.CDLL(None, use_errno=True)
        _LIBC.aligned_alloc.restype = ctypes.c_void_p
        _LIBC.aligned_alloc.argtypes = [ctypes.c_size_t, ctypes.c_size_t]
        _LIBC.free.restype, _LIBC.free.argtypes = None, [ctypes.c_void_p]
        _LIBC.madvise.restype = ctypes.c_int
        _LIBC.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        _LIBC.mincore.restype = ctypes.c_int
        _LIBC.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    except (OSError, AttributeError):  # pragma: no cover - a libc without these symbols: numpy's allocator
        _LIBC = None
_PAGE = mmap.PAGESIZE
_MADV_NOHUGEPAGE = 15
_MADV_POPULATE_WRITE = 23  # Linux 5.14+: fault a range in, writable, in one call (older kernels: EINVAL, ignored)


def _prepare(addr: int, n: int) -> None:
    """Advise the pages ``[addr, addr + n)`` against huge pages (numpy advises *for* them on each array of
    4 MiB or more, and under lazyflow's malloc defaults those arrays live in the same heap: the advice stays on the
    range after numpy frees it), then fault them in at once when the middle one is not resident yet (fresh memory: one
    call instead of a fault per page); memory malloc hands back from an earlier load is left as it is."""
    assert _LIBC is not None
    lo, hi = addr, addr + n  # whole pages (see _raw)
    _LIBC.madvise(lo, hi - lo, _MADV_NOHUGEPAGE)
    vec = ctypes.c_ubyte(0)
    mid = lo + (hi - lo) // 2 // _PAGE * _PAGE  # the ends' pages may be shared with neighbouring blocks
    if _LIBC.mincore(mid, _PAGE, ctypes.byref(vec)) == 0 and vec.value & 1:
        return
    _LIBC.madvise(lo, hi - lo, _MADV_POPULATE_WRITE)


def _raw(n: int) -> np.ndarray:
    """``n`` uninitialised bytes. From 2 MiB on (on Linux), straight from libc's ``malloc`` rather than
    ``numpy.empty``: numpy asks the kernel for transparent huge pages (``MADV_HUGEPAGE``) on arrays of 4 MiB or
    more, and where the kernel's THP defrag setting is ``madvise`` (a common default) each fault may then compact
    memory synchronously -- a fresh process's first ResNet-50 load took 320-660 ms that way on this project's box,
    against 70-115 ms with ordinary pages. malloc's pages are private (Python's ``mmap.mmap(-1, n)`` maps *shared*
    anonymous memory, whose pages fault ~40% slower) and, under lazyflow's malloc defaults
    (:mod:`lazyflow._core.malloc`), come back to the next load already faulted in: 6 in-process loads of a 400 MB
    checkpoint took ~410 ms of CPU each from fresh mappings, ~220 ms from malloc. Fresh pages are faulted in with
    one ``madvise(MADV_POPULATE_WRITE)`` (the load writes every byte). The block is freed when the last array
    viewing it goes. Its pages are advised against huge pages (see :func:`_prepare`)."""
    if n < _HUGE or _LIBC is None:
        return np.empty(n, np.uint8)
    size = -(-n // _PAGE) * _PAGE  # whole pages of its own: no neighbour's huge-page advice covers a shared page
    addr = _LIBC.aligned_alloc(_PAGE, size)
    if not addr:
        raise MemoryError(f"cannot allocate {n} bytes for a load buffer")
    holder = (ctypes.c_ubyte * size).from_address(addr)
    weakref.finalize(holder, _LIBC.free, addr)
    _prepare(addr, size)
    return np.frombuffer(memoryview(holder).cast("B"), np.uint8)[:n]


def aligned(n: int, phase: int = 0) -> np.ndarray:
    """An uninitialised uint8 buffer of ``n`` bytes whose start address is ``phase`` modulo 64."""
    raw = _raw(n + ALIGN)
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


def _huge(n: int) -> np.ndarray:
    """``n`` bytes at a 64-byte boundary (from 2 MiB on, malloc'd pages without huge-page advice: :func:`_raw`)."""
    return aligned(n)


def _buffers(sizes: list[int]) -> list[np.ndarray]:
    """A 64-byte-aligned buffer for each size: a size of ``_CHUNK`` or more gets an allocation of its own; smaller
    ones share chunks of at most ``_CHUNK`` bytes (big enough for the kernel's transparent huge pages, which numpy
    asks for from 4 MiB on: a load of many small records faults far fewer pages than with one allocation each).
    So a tensor kept from a load pins at most ``_CHUNK`` bytes beyond its own, never the whole file."""
    out: list[np.ndarray] = []
    group: list[tuple[int, int]] = []  # (offset in the chunk, size) of the pieces of the chunk being filled
    fill = 0

    def close() -> None:
        nonlocal fill
        if group:
            chunk = _huge(max(fill, 1))
            out.extend(chunk[o : o + n] for o, n in group)
            group.clear()
        fill = 0

    for n in sizes:
        if n >= _CHUNK:
            close()
            out.append(_huge(n))
            continue
        padded = -(-n // ALIGN) * ALIGN
        if fill + padded > _CHUNK:
            close()
        group.append((fill, n))
        fill += padded
    close()
    return out


def read_records(fd: int, spans: list[tuple[int, int]], where: str) -> list[np.ndarray]:
    """The file's bytes ``[start, start + n)`` for each ``(start, n)`` of ``spans`` (ascending starts), each at a
    64-byte boundary of this load's memory (:func:`_buffers`: a kept tensor pins at most 8 MiB beyond its own bytes,
    never the whole file's).
    Records a short gap apart (zip headers, padding) come in one ``preadv`` (the gap bytes land in a scratch
    buffer), so a file of records laid out one after another still takes one call per ``IOV_MAX`` buffers.

    Raises:
        CheckpointError: the file ends before a record's last byte (truncated), or the read fails.
    """
    out = _buffers([n for _, n in spans])
    scratch = memoryview(np.empty(_GAP, np.uint8).data)
    i = 0
    while i < len(spans):
        first = end = spans[i][0]
        views: list[memoryview] = []
        j = i
        while j < len(spans):
            start, n = spans[j]
            gap = start - end
            if j > i and not 0 <= gap <= _GAP:  # overlapping (forged) or far apart: a read of its own
                break
            if gap:
                views.append(scratch[:gap])
            if n:
                views.append(memoryview(out[j].data))
            end, j = start + n, j + 1
        try:
            got = _preadv_all(fd, views, first) if views else 0
        except OSError as e:
            raise CheckpointError(f"{where}: reading the file failed ({e})") from e
        if got != end - first:
            raise CheckpointError(
                f"{where}: the file ends {end - first - got} bytes before its last tensor (truncated)"
            )
        i = j
    return out


def read_spans(fd: int, start: int, sizes: list[int], where: str) -> list[np.ndarray]:
    """The file's bytes from ``start`` on, cut into consecutive pieces of ``sizes`` bytes, each at a 64-byte boundary
    (:func:`_buffers`), in one ``preadv`` (per ``IOV_MAX`` pieces).

    Raises:
        CheckpointError: the file ends before ``sum(sizes)`` bytes (truncated), or the read fails.
    """
    spans, pos = [], start
    for n in sizes:
        spans.append((pos, n))
        pos += n
    return read_records(fd, spans, where)
