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

import jax
import numpy as np

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
    ``uniform_into`` draws."""
    n = math.prod(shape)
    return _run_chunks(_UNIFORM_CHUNK, seed_offset, (float(low), float(high)), n, dtype).reshape(shape)


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
