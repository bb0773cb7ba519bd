"""Eager fills without a compile per shape: random samples and constants built on the host.

Building a model fills one parameter after another, nearly every one of its own shape. A kernel per shape would cost
one XLA compile per parameter shape (most of the time it takes to build a ResNet or a GPT). Here a random fill runs
the fixed-length ``uniform_chunk``/``normal_chunk`` kernels of ``lazyflow/ops/random.py`` (one compile per
distribution and dtype, whatever the shapes) over consecutive ranges of the flat sample, copies them into a host
array and places that; a constant is a numpy array placed as it is. The numbers are exactly those of the per-shape
ops (``uniform_into``/``normal_into``, ``rand``...), which graph mode still traces: a sample is a function of the
flat element index, so a prefix of the chunks is the sample of any shape.

Only concrete (eager) values take this route: inside a graph-mode trace the target is a tracer and the generator's
offset a traced value, and the callers use the ops.
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor

import jax
import numpy as np

from ._core import dtypes as D
from ._core.context import state
from ._dispatch import check_inplace
from ._tensor import Tensor, _rebind, _Tracer
from .ops.random import CHUNK, full_range
from .ops.table import REGISTRY as R

__all__ = ["eager", "uniform", "normal", "constant", "exact_fill", "place", "write"]

_UNIFORM_CHUNK = R["uniform_chunk"]
_NORMAL_CHUNK = R["normal_chunk"]
_MAX_ELEMENTS = (1 << 31) - CHUNK  # chunk offsets are 32-bit counters


def eager(target: Tensor | None = None, numel: int = 0) -> bool:
    """Whether a fill of ``numel`` elements (into ``target``) can take the host route: eager mode, a concrete target,
    no graph-mode generator hook, and a flat index that fits the chunk kernels' 32-bit counter."""
    return (
        not state.tracing
        and state.rng_hook is None
        and (target is None or not isinstance(target._value, _Tracer))
        and numel <= _MAX_ELEMENTS
    )


def _run_chunks(op, seed_offset, params, n: int, dtype) -> np.ndarray:
    """The first ``n`` elements of the flat sample ``op`` draws for the generator draw ``seed_offset``, as a new host
    array."""
    seed, offset = seed_offset
    out = np.empty(n, dtype.np)
    statics = (CHUNK, dtype)
    # launch every chunk before reading any back: the kernels run while Python dispatches the next ones
    chunks = [state.interp.apply(op, (seed, offset, base, *params), statics) for base in range(0, n, CHUNK)]
    for i, c in enumerate(chunks):
        base = i * CHUNK
        m = min(CHUNK, n - base)
        out[base : base + m] = np.asarray(c._value)[:m]
    return out


def uniform(seed_offset, shape, dtype, low: float, high: float) -> np.ndarray:
    """U(low, high) samples of ``shape`` and ``dtype`` for the generator draw ``seed_offset``: the values
    ``uniform_into`` draws. For float32 on a CPU backend the first call starts compiling the chunk kernel in a
    background thread and, until it is ready, fills are computed on the host (threefry in numpy, bit for bit the
    kernel's), so a cold process's model construction does not wait for a compile; other dtypes and accelerators
    run the chunk kernel."""
    n = math.prod(shape)
    if dtype.np == _F32 and host_is_device():
        kernel = _background_chunk_kernel()
        if kernel is None:
            return _host_uniform(seed_offset, n, float(low), float(high)).reshape(shape)
        seed, offset = seed_offset
        out = np.empty(n, np.float32)
        lo, hi = float(low), float(high)
        chunks = [kernel(int(seed), int(offset), base, lo, hi) for base in range(0, n, CHUNK)]
        for i, c in enumerate(chunks):
            m = min(CHUNK, n - i * CHUNK)
            out[i * CHUNK : i * CHUNK + m] = np.asarray(c)[:m]
        return out.reshape(shape)
    return _run_chunks(_UNIFORM_CHUNK, seed_offset, (float(low), float(high)), n, dtype).reshape(shape)


_F32 = np.dtype(np.float32)
_COMPILING: list = []  # the future of the float32 uniform chunk kernel's compile


def _background_chunk_kernel():
    """The compiled float32 ``uniform_chunk`` kernel (the op table's record, jitted with its statics), or ``None``
    while it is still compiling in a background thread (started by the first call)."""
    if not _COMPILING:
        pool = ThreadPoolExecutor(1, thread_name_prefix="lazyflow-compile")
        impl = _UNIFORM_CHUNK.impl
        f32 = D.float32
        args = (0, 0, 0, 0.0, 1.0)  # Python scalars, as the eager interpreter passes them (weakly typed)
        _COMPILING.append(pool.submit(lambda: jax.jit(lambda *a: impl(*a, n=CHUNK, dtype=f32)).lower(*args).compile()))
        pool.shutdown(wait=False)
    fut = _COMPILING[0]
    if not fut.done():
        return None
    if fut.exception() is not None:  # the host path still works: keep it
        return None
    return fut.result()


# -- threefry2x32 on the host ------------------------------------------------------------------------------------
# The same integer function as JAX's threefry2x32 (Salmon et al. 2011, 20 rounds), so a host sample equals the
# kernel's bit for bit; numpy's ufuncs release the GIL, so two threads split a large sample.

_ROT = ((13, 15, 26, 6), (17, 29, 16, 24))
_BLOCK = 1 << 15  # elements per block: its temporaries stay in a core's cache


def _threefry(k1: int, k2: int, x0: np.ndarray, x1: np.ndarray) -> None:
    """threefry2x32 of the counter pairs ``(x0, x1)`` under the key ``(k1, k2)``, in place."""
    u = np.uint32
    ks = (u(k1), u(k2), u(k1 ^ k2 ^ 0x1BD11BDA))
    tmp = np.empty_like(x0)
    x0 += ks[0]
    x1 += ks[1]
    for i in range(5):
        for r in _ROT[i % 2]:
            x0 += x1
            np.left_shift(x1, u(r), out=tmp)
            x1 >>= u(32 - r)
            x1 |= tmp
            x1 ^= x0
        x0 += ks[(i + 1) % 3]
        x1 += u((int(ks[(i + 2) % 3]) + i + 1) & 0xFFFFFFFF)


def _fold_in(k1: int, k2: int, data: int) -> tuple[int, int]:
    """``jax.random.fold_in`` of a threefry key with a uint32."""
    x0, x1 = np.zeros(1, np.uint32), np.array([data & 0xFFFFFFFF], np.uint32)
    _threefry(k1, k2, x0, x1)
    return int(x0[0]), int(x1[0])


def _host_key(seed: int, offset: int) -> tuple[int, int]:
    """:func:`lazyflow.ops.random.key_of` on the host."""
    return _fold_in(*_fold_in(0, 0, seed), offset)


def _host_block(key: tuple[int, int], lo: np.float32, span: np.float32, out: np.ndarray, start: int) -> None:
    """Elements ``start .. start + len(out)`` (``start`` even) of the float32 sample, into ``out``."""
    n = out.shape[0]
    x1 = np.arange(start // 2, start // 2 + (n + 1) // 2, dtype=np.uint32)
    x0 = np.zeros_like(x1)
    _threefry(key[0], key[1], x0, x1)
    bits = np.stack([x0, x1], axis=1).reshape(-1)[:n]  # counter j: the words of elements 2j and 2j + 1
    bits >>= np.uint32(9)
    bits |= np.array(1.0, np.float32).view(np.uint32)
    u = bits.view(np.float32)
    u -= np.float32(1.0)
    out[:] = _affine(u, lo, span)


def _host_uniform(seed_offset, n: int, low: float, high: float) -> np.ndarray:
    """``_uniform_values(_unit(...))`` of lazyflow/ops/random.py for float32, on the host, bit for bit: in blocks
    that stay in cache, on two threads when there are many."""
    key = _host_key(int(seed_offset[0]), int(seed_offset[1]))
    # the kernel takes low/high as float64 scalars: the span is rounded to float32 once, after the subtraction
    lo, span = np.float32(low), np.float32(high - low)
    out = np.empty(n, np.float32)
    starts = range(0, n, _BLOCK)
    work = lambda i: _host_block(key, lo, span, out[i : i + _BLOCK], i)
    if n >= 4 * _BLOCK:
        with ThreadPoolExecutor(2) as pool:
            list(pool.map(work, starts))
    else:
        for i in starts:
            work(i)
    return out


def _affine(u: np.ndarray, lo: np.float32, span: np.float32) -> np.ndarray:
    """``lo + u * span`` in float32 as XLA's CPU backend computes it: one fused multiply-add (one rounding) where
    it contracts them, as probed once per process; else a product and a sum (two roundings)."""
    if not _contracts():
        u *= span
        u += lo
        return u
    # float32 FMA through float64: the product is exact (24 + 24 bits); the sum rounds once in float64 and once
    # more to float32, which differs from one rounding only when the float64 sum lands exactly halfway between two
    # float32 values while the exact sum is not there (the sum's error, by TwoSum, says which way it lies)
    p = u.astype(np.float64)
    p *= np.float64(span)
    lo64 = np.float64(lo)
    s = p + lo64
    out = s.astype(np.float32)
    maybe = np.flatnonzero((s.view(np.uint64) & np.uint64(0xFFFFFFF)) == 0)  # a halfway float64 has these zero
    if maybe.size:
        sm, pm = s[maybe], p[maybe]
        bb = sm - pm
        err = (pm - (sm - bb)) + (lo64 - bb)
        r = out[maybe]
        r64 = r.astype(np.float64)
        toward = np.nextafter(r, np.where(sm > r64, np.float32(np.inf), np.float32(-np.inf)))
        halfway = (r64 != sm) & ((r64 + toward.astype(np.float64)) / 2 == sm) & (err != 0)
        wrong = halfway & ((err > 0) == (toward.astype(np.float64) > r64))
        out[maybe[wrong]] = toward[wrong]
    return out


_CONTRACTS: list[bool] = []


def _contracts() -> bool:
    """Whether XLA fuses ``lo + u * span`` into an FMA on this machine: one tiny kernel, on values where one
    rounding and two differ."""
    if not _CONTRACTS:
        u = np.array([0.6180339, 0.4142135, 0.7320508, 0.2360679], np.float32)
        span, lo = np.float32(5.9), np.float32(-3.7)
        fused = np.asarray(jax.jit(lambda u, s, l: l + u * s)(u, span, lo))
        two = u * span + lo
        _CONTRACTS.append(not np.array_equal(fused, two))
    return _CONTRACTS[0]


def normal(
    seed_offset,
    shape,
    dtype,
    mean: float,
    std: float,
    ulo: float | None = None,
    uhi: float = 1.0,
    a: float = -math.inf,
    b: float = math.inf,
) -> np.ndarray:
    """N(mean, std**2) samples (inverse CDF of uniforms on ``[ulo, uhi)``, default the whole of (-1, 1); clamped to
    ``[a, b]``): the values ``normal_into`` draws."""
    if ulo is None:
        ulo, uhi = full_range(dtype.to_jax())
    n = math.prod(shape)
    params = (float(mean), float(std), float(ulo), float(uhi), float(a), float(b))
    return _run_chunks(_NORMAL_CHUNK, seed_offset, params, n, dtype).reshape(shape)


def constant(shape, dtype, value) -> np.ndarray:
    """A new host array of ``shape`` and ``dtype`` filled with ``value``."""
    return np.zeros(shape, dtype.np) if value == 0 else np.full(shape, value, dtype.np)  # calloc: lazy pages


def exact_fill(value, dtype) -> bool:
    """Whether numpy stores the Python scalar ``value`` in ``dtype`` exactly as the ``full`` kernel would: a bool
    anywhere, an in-range int into an integer or floating dtype, a float into a floating dtype. (Other cases, such as
    a float into an integer dtype, keep the kernel and its conversion rules.)"""
    cls = value.__class__
    if cls is bool:
        return True
    if cls is int:
        if dtype.is_floating_point:
            return True
        if not np.issubdtype(dtype.np, np.integer):
            return False
        info = np.iinfo(dtype.np)
        return info.min <= value <= info.max
    return cls is float and dtype.is_floating_point


_HOST_IS_DEVICE: list[bool] = []


def host_is_device() -> bool:
    """Whether the default device is the CPU: a host array then becomes a device array without a transfer."""
    if not _HOST_IS_DEVICE:
        _HOST_IS_DEVICE.append(jax.default_backend() == "cpu")
    return _HOST_IS_DEVICE[0]


def place(arr: np.ndarray, like=None) -> jax.Array:
    """A host array that this module has just built (nothing else refers to it) as a jax array: on the default device
    (uncommitted, as ``lf.tensor`` places data), or where the jax array ``like`` is when that is committed to a device.
    No further copy: the array is lazyflow's own, not user memory."""
    return jax.device_put(arr, like.sharding if like is not None and like.committed else None)


def write(target: Tensor, arr: np.ndarray, what) -> Tensor:
    """Rebind ``target`` to ``arr`` (of its shape and dtype) in place, with the checks of an in-place op ``what``."""
    check_inplace(what, target, state.grad_enabled)
    _rebind(target, place(arr, target._value))
    return target
