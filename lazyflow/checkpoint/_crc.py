"""CRC-32 checksums over a thread pool (zlib releases the GIL), and stored dtype names.

``crc32`` is zlib-ng's (SIMD, ~4x zlib's speed) when the optional ``zlib-ng`` package is installed (the
``fast-load`` extra), else the standard library's: the same CRC-32, so files written with either check with either.
"""

from __future__ import annotations

import concurrent.futures
import os
import zlib

import numpy as np

try:
    from zlib_ng.zlib_ng import crc32 as _fast_crc32
except ImportError:  # the fast-load extra is optional
    _fast_crc32 = None

from .._core import dtypes as D
from .._core.errors import CheckpointError
from ._allowlist import numeric_dtype

__all__ = [
    "crc32",
    "CRC_CHUNK",
    "executor",
    "crc_chunks",
    "crc_many",
    "crc_list",
    "batches",
    "dtype_from_name",
    "bytes_view",
]

CRC_CHUNK = 16 << 20  # one CRC per this many bytes of a tensor
_PAR_MIN = 4 << 20  # below this many bytes in total, checksums run in the calling thread
_BATCH = 4 << 20  # bytes per thread-pool job

_pool: concurrent.futures.ThreadPoolExecutor | None = None
crc32 = zlib.crc32 if _fast_crc32 is None else _fast_crc32
FAST = _fast_crc32 is not None  # zlib-ng's crc32 is in use


def done(value) -> concurrent.futures.Future:
    """A finished future holding ``value`` (a checksum computed inline, beside pooled ones)."""
    f: concurrent.futures.Future = concurrent.futures.Future()
    f.set_result(value)
    return f


def executor() -> concurrent.futures.ThreadPoolExecutor:
    """The process-wide checksum thread pool (created on first use)."""
    global _pool
    if _pool is None:
        _pool = concurrent.futures.ThreadPoolExecutor(
            max(2, min(4, os.cpu_count() or 2)), thread_name_prefix="lazyflow-crc"
        )
    return _pool


# crc32 reads these arrays through the buffer protocol; numpy's stubs declare ndarray.__buffer__ only for
# Python >= 3.12, hence the reportArgumentType ignores on the crc32 calls below (pyright checks for 3.10).
def bytes_view(a: np.ndarray) -> np.ndarray:
    """``a``'s bytes in C order as a flat uint8 array (a view when ``a`` is contiguous)."""
    return np.ascontiguousarray(a).reshape(-1).view(np.uint8)


def crc_chunks(a: np.ndarray) -> list[int]:
    """CRC-32 of each ``CRC_CHUNK``-byte chunk of ``a``'s bytes (C order)."""
    b = bytes_view(a)
    return [
        crc32(b[i : i + CRC_CHUNK])  # pyright: ignore[reportArgumentType]
        for i in range(0, max(len(b), 1), CRC_CHUNK)
    ]


def crc_list(flat: np.ndarray, spans) -> list[int]:
    """CRC-32 of ``flat[lo:hi]`` for each ``(lo, hi)`` in ``spans``."""
    return [crc32(flat[lo:hi]) for lo, hi in spans]  # pyright: ignore[reportArgumentType]


def batches(spans, target: int = _BATCH) -> list[list]:
    """``(lo, hi)`` spans grouped into consecutive runs of at least ``target`` bytes (one thread-pool job
    each: a job per small tensor would cost more than its checksum)."""
    out, cur, size = [], [], 0
    for lo, hi in spans:
        cur.append((lo, hi))
        size += hi - lo
        if size >= target:
            out.append(cur)
            cur, size = [], 0
    if cur:
        out.append(cur)
    return out


def crc_many(arrays: list[np.ndarray]) -> list[list[int]]:
    """:func:`crc_chunks` of each array, in batched jobs over a thread pool (zlib releases the GIL)."""
    views = [bytes_view(a) for a in arrays]
    pieces = [(i, v[lo : lo + CRC_CHUNK]) for i, v in enumerate(views) for lo in range(0, max(len(v), 1), CRC_CHUNK)]
    out: list[list[int]] = [[] for _ in views]
    if sum(len(v) for v in views) < _PAR_MIN:
        for i, piece in pieces:
            out[i].append(crc32(piece))  # pyright: ignore[reportArgumentType]
        return out
    groups, cur, size = [], [], 0
    for item in pieces:
        cur.append(item)
        size += len(item[1])
        if size >= _BATCH:
            groups.append(cur)
            cur, size = [], 0
    if cur:
        groups.append(cur)
    pool = executor()
    jobs = [pool.submit(lambda g=g: [crc32(piece) for _, piece in g]) for g in groups]
    for g, job in zip(groups, jobs):
        for (i, _), crc in zip(g, job.result()):
            out[i].append(crc)
    return out


def dtype_from_name(name: str) -> np.dtype:
    """The numpy dtype of a stored dtype name (lazyflow names first, then numpy's numeric ones).

    Raises:
        CheckpointError: a name that is neither (the metadata validation reports it first, with context).
    """
    try:
        return D.to_dtype(name).np
    except Exception:
        pass
    try:
        dt = np.dtype(name)
    except Exception:
        dt = None
    if not numeric_dtype(dt):
        raise CheckpointError(
            f"the checkpoint stores the dtype {name!r}; expected a lazyflow dtype name or a numeric "
            "numpy dtype string such as '<f4'"
        )
    return dt
