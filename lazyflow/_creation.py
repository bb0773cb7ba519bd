"""Tensor creation with torch's signatures, and the random-number generator."""

from __future__ import annotations

import builtins
import math
import operator
import os
from typing import cast

import jax
import numpy as np

from . import _sample
from ._core import dtypes as D
from ._core import formats as _formats
from ._core.context import state
from ._core.device import Device, default_device
from ._core.errors import ArgumentError, DTypeError, NotSupportedError, OpError, OutOfMemoryError, ShapeError
from ._core.placement import pid_of
from ._ingress import array as _owned_array
from ._ingress import check_fits
from ._tensor import Tensor, _make, _to_device, _Tracer
from .ops.table import REGISTRY as R

__all__ = [
    "tensor",
    "as_tensor",
    "from_numpy",
    "zeros",
    "ones",
    "full",
    "empty",
    "arange",
    "linspace",
    "eye",
    "zeros_like",
    "ones_like",
    "full_like",
    "empty_like",
    "rand",
    "randn",
    "randint",
    "randperm",
    "rand_like",
    "randn_like",
    "randint_like",
    "normal",
    "bernoulli",
    "multinomial",
    "Generator",
    "default_generator",
    "manual_seed",
    "seed",
    "initial_seed",
    "get_rng_state",
    "set_rng_state",
]

_apply = lambda op, args, statics=(): state.interp.apply(op, args, statics)


def _shape(size) -> tuple:
    if len(size) == 1 and isinstance(size[0], (tuple, list, jax.ShapeDtypeStruct)):
        size = tuple(size[0])
    if len(size) == 1 and isinstance(size[0], Tensor) and size[0].ndim == 1:
        size = tuple(size[0].tolist())
    out = []
    for i, s in enumerate(size):
        try:
            s = operator.index(s) if not isinstance(s, builtins.bool) else None
        except TypeError:
            s = None
        if s is None:
            raise ArgumentError(
                f"size must be a tuple of ints, but found element of type {type(size[i]).__name__} "
                f"at pos {i} (got {size!r})"
            )
        if s < 0:
            raise ShapeError(f"sizes must be non-negative integers, got negative dimension {s} in {list(size)}")
        out.append(s)
    return tuple(out)


def _keyword_sizes(what: str, name: str, args: tuple, value) -> tuple:
    """The varargs of a function such as ``zeros(*size)`` or ``reshape(input, *shape)`` when torch's keyword
    spelling is used instead (``zeros(size=(2, 3))``): callers test ``value is not None`` first, so the positional
    form pays nothing."""
    if args:
        raise TypeError(f"{what}() got multiple values for argument '{name}' (positional {args} and {name}=)")
    return (value,)


def _options(where: str, layout, pin_memory, memory_format=None, ndim=None, preserve: bool = True) -> None:
    """The keywords torch's factories take that change no value here (``lazyflow._core.formats``), checked as torch
    checks them: ``layout`` (only ``lf.strided``), ``pin_memory`` (needs an accelerator), ``memory_format``."""
    _formats.check_layout(layout, where)
    _formats.check_pin_memory(pin_memory, where)
    _formats.check_memory_format(memory_format, ndim, where, preserve=preserve)


def _finish(t: Tensor, device, requires_grad: bool) -> Tensor:
    if device is not None:
        t = _to_device(t, device)
    if requires_grad:
        t.requires_grad_(True)
    return t


def tensor(data, dtype=None, device=None, requires_grad: bool = False, pin_memory: bool = False) -> Tensor:
    """A new tensor holding a copy of ``data`` (scalar, nested lists, numpy/jax array or Tensor).

    Args:
        data: the values.
        dtype: lazyflow dtype; inferred like torch when None (Python floats -> default float dtype,
            ints -> int64, numpy arrays keep theirs).
        device: where to put it (default: JAX's default device).
        requires_grad: make it a leaf that records gradients (floating dtypes only).
    Raises:
        DTypeError: an unsupported dtype, or a 64-bit dtype while x64 is off.
    >>> lf.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    """
    _options("tensor()", None, pin_memory)
    if isinstance(data, (Tensor, jax.Array)):
        return _finish(_make(_owned_array(data, dtype)), device, requires_grad)
    return _finish(_make(_owned_array(data, dtype, device)), None, requires_grad)


def as_tensor(data, dtype=None, device=None) -> Tensor:
    """``data`` as a tensor, without a copy when it already is one with that dtype and device."""
    if isinstance(data, Tensor):
        return data.to(dtype=dtype, device=device) if (dtype is not None or device is not None) else data
    if isinstance(data, jax.Array) and dtype is None:
        return _finish(_make(data), device, False)
    return tensor(data, dtype=dtype, device=device)


def from_numpy(ndarray: np.ndarray) -> Tensor:
    """A tensor from a numpy array (a copy: JAX buffers cannot alias numpy memory that may change)."""
    if not isinstance(ndarray, np.ndarray):
        raise DTypeError(f"from_numpy expects a numpy.ndarray, got {type(ndarray).__name__}")
    return tensor(ndarray)


def from_dlpack(ext_tensor, *, device=None, copy: bool | None = None) -> Tensor:
    """A tensor from any object with ``__dlpack__`` (a JAX array, a numpy array, a torch tensor, a lazyflow tensor).

    A jax array (or lazyflow tensor) is wrapped without a copy: its buffer is immutable. Anything else is caller
    memory that can still change under the tensor, so it is copied once -- lazyflow's ingress rule, where
    ``torch.from_dlpack`` would share it (mutating the source afterwards never changes the tensor).

    Args:
        ext_tensor: the object to import.
        device: where the tensor should live (default: where the data is).
        copy: True always copies; False refuses to copy (so only jax arrays and tensors are accepted); None copies
            caller memory only.
    Raises:
        DTypeError: the object does not support DLPack.
        NotSupportedError: ``copy=False`` for caller memory (numpy, torch), which lazyflow never aliases.
    """
    if isinstance(ext_tensor, Tensor):
        ext_tensor = ext_tensor._value
    if isinstance(ext_tensor, jax.Array):
        out = jax.numpy.array(ext_tensor, copy=True) if copy else ext_tensor
    elif not hasattr(ext_tensor, "__dlpack__"):
        raise DTypeError(
            f"from_dlpack expects an object with __dlpack__ (a jax/numpy array or torch tensor), got "
            f"{type(ext_tensor).__name__}"
        )
    elif copy is False:
        raise NotSupportedError(
            f"from_dlpack(copy=False): a {type(ext_tensor).__name__} is caller memory that can change under the "
            "tensor; lazyflow copies it once (pass copy=None or True), or hand over a jax array"
        )
    elif isinstance(ext_tensor, np.ndarray):  # numpy's own arrays (also read-only ones, which DLPack cannot export)
        out = _owned_array(ext_tensor)
    else:
        shared = jax.dlpack.from_dlpack(ext_tensor)  # may alias the caller's buffer (JAX ignores copy=True on CPU)
        out = jax.numpy.array(shared, copy=True)
    t = _make(out)
    return t if device is None else _to_device(t, device)


def _fdtype(dtype):
    return D.get_default_dtype() if dtype is None else D.to_dtype(dtype)


def _constant(shape: tuple, value, d: D.DType) -> Tensor:
    """A new tensor of ``shape`` filled with ``value``: in eager mode on a CPU device a host array placed as it is (no
    kernel, so no compile per shape, see lazyflow/_sample.py); on an accelerator (where that would be a host-to-device
    copy per call) and inside a trace the ``full`` op."""
    if not state.tracing and _sample.host_is_device() and _sample.exact_fill(value, d):
        try:
            return _make(_sample.place(_sample.constant(shape, d, value)))
        except MemoryError:
            n = math.prod(shape) * d.itemsize
            raise OutOfMemoryError(
                f"full(shape={shape}, dtype={d}): the device is out of memory (allocating {n} bytes)"
            ) from None
    return _apply(R["full"], (value,), (shape, d))


def full(size, fill_value, *, dtype=None, device=None, requires_grad: bool = False, layout=None) -> Tensor:
    """A tensor of shape ``size`` filled with ``fill_value``."""
    _options("full()", layout, False)
    if dtype is None:
        dtype = (
            D.result_type(type(fill_value))
            if isinstance(fill_value, (builtins.int, builtins.float, builtins.bool))
            else None
        )
    d = _fdtype(dtype)
    d.to_jax()
    if isinstance(fill_value, (builtins.int, builtins.float)):
        check_fits(fill_value, d, "full()")
    t = _constant(_shape((size,) if isinstance(size, int) else (size,)), fill_value, d)
    return _finish(t, device, requires_grad)


def zeros(*args, size=None, dtype=None, device=None, requires_grad: bool = False, layout=None) -> Tensor:
    """A tensor of zeros: ``zeros(2, 3)``, ``zeros((2, 3))`` or ``zeros(size=(2, 3))``."""
    _options("zeros()", layout, False)
    d = _fdtype(dtype)
    d.to_jax()
    if size is not None:
        args = _keyword_sizes("zeros", "size", args, size)
    return _finish(_constant(_shape(args), 0, d), device, requires_grad)


def ones(*args, size=None, dtype=None, device=None, requires_grad: bool = False, layout=None) -> Tensor:
    """A tensor of ones: ``ones(2, 3)``, ``ones((2, 3))`` or ``ones(size=(2, 3))``."""
    _options("ones()", layout, False)
    d = _fdtype(dtype)
    d.to_jax()
    if size is not None:
        args = _keyword_sizes("ones", "size", args, size)
    return _finish(_constant(_shape(args), 1, d), device, requires_grad)


def empty(
    *args,
    size=None,
    dtype=None,
    device=None,
    requires_grad: bool = False,
    layout=None,
    pin_memory: bool = False,
    memory_format=None,
) -> Tensor:
    """An uninitialised tensor (zeros here: XLA has no uninitialised buffers)."""
    if size is not None:
        args = _keyword_sizes("empty", "size", args, size)
    _options("empty()", layout, pin_memory, memory_format, len(_shape(args)), preserve=False)
    return zeros(*args, dtype=dtype, device=device, requires_grad=requires_grad)


def _like(t, dtype):
    return t.dtype if dtype is None else D.to_dtype(dtype)


def zeros_like(
    input: Tensor, *, dtype=None, device=None, requires_grad: bool = False, layout=None, memory_format=None
) -> Tensor:
    """Zeros with ``input``'s shape, and its dtype and device unless given."""
    _options("zeros_like()", layout, False, memory_format, input.ndim, preserve=True)
    return zeros(input.shape, dtype=_like(input, dtype), device=device or _dev(input), requires_grad=requires_grad)


def ones_like(
    input: Tensor, *, dtype=None, device=None, requires_grad: bool = False, layout=None, memory_format=None
) -> Tensor:
    """Ones with ``input``'s shape, and its dtype and device unless given."""
    _options("ones_like()", layout, False, memory_format, input.ndim, preserve=True)
    return ones(input.shape, dtype=_like(input, dtype), device=device or _dev(input), requires_grad=requires_grad)


def empty_like(
    input: Tensor, *, dtype=None, device=None, requires_grad: bool = False, layout=None, memory_format=None
) -> Tensor:
    """:func:`empty` with ``input``'s shape (zeros: XLA has no uninitialised buffers)."""
    _options("empty_like()", layout, False, memory_format, input.ndim, preserve=True)
    return zeros_like(input, dtype=dtype, device=device, requires_grad=requires_grad)


def full_like(
    input: Tensor, fill_value, *, dtype=None, device=None, requires_grad: bool = False, layout=None, memory_format=None
) -> Tensor:
    """``fill_value`` in ``input``'s shape, and its dtype and device unless given."""
    _options("full_like()", layout, False, memory_format, input.ndim, preserve=True)
    return full(
        input.shape, fill_value, dtype=_like(input, dtype), device=device or _dev(input), requires_grad=requires_grad
    )


def _dev(t):
    return None if t._meta[2] in (0, _default_pid()) else t.device


_DEFAULT_PID = []


def _default_pid():
    if not _DEFAULT_PID:
        _DEFAULT_PID.append(pid_of(jax.device_put(np.zeros(()))))
    return _DEFAULT_PID[0]


def arange(
    start=None, end=None, step=1, *, dtype=None, device=None, requires_grad: bool = False, layout=None
) -> Tensor:
    """Values from ``start`` (default 0) to ``end`` (exclusive) by ``step``; int64 for integer arguments:
    ``arange(5)``, ``arange(1, 5)``, ``arange(end=5)``.

    Raises:
        TypeError: no ``end``.
        OpError: a zero step, or bounds inconsistent with the step's sign.
    """
    _options("arange()", layout, False)
    if end is None:
        if start is None:
            raise TypeError("arange() missing required argument 'end'")
        start, end = 0, start
    elif start is None:
        start = 0
    vals = [v.item() if isinstance(v, Tensor) else v for v in (start, end, step)]
    start, end, step = vals
    if step == 0:
        raise OpError("arange: step must be nonzero")
    if not all(math.isfinite(v) for v in vals):
        raise OpError(f"arange: unsupported range {start} -> {end} (step {step}): start, end and step must be finite")
    if (end - start) * step < 0:
        raise OpError(
            f"arange: upper bound and larger bound inconsistent with step sign (start={start}, end={end}, step={step})"
        )
    if dtype is None:
        dtype = D.get_default_dtype() if any(isinstance(v, builtins.float) for v in vals) else D.default_int()
    d = D.to_dtype(dtype)
    n = max(0, math.ceil((end - start) / step))
    t = _apply(R["arange"], (start, step), (n, d))
    return _finish(t, device, requires_grad)


def linspace(start, end, steps: int, *, dtype=None, device=None, requires_grad: bool = False, layout=None) -> Tensor:
    """``steps`` evenly spaced values from ``start`` to ``end`` inclusive."""
    _options("linspace()", layout, False)
    d = _fdtype(dtype)
    if int(steps) < 0:
        raise OpError(f"linspace: number of steps must be non-negative, got {steps}")
    t = _apply(R["linspace"], (builtins.float(start), builtins.float(end)), (int(steps), d))
    return _finish(t, device, requires_grad)


def eye(n: int, m: int | None = None, *, dtype=None, device=None, requires_grad: bool = False, layout=None) -> Tensor:
    """The identity matrix (``n`` x ``m``)."""
    _options("eye()", layout, False)
    m = n if m is None else m
    if int(n) < 0 or int(m) < 0:
        raise ShapeError(f"eye: n and m must be non-negative, got n={n}, m={m}")
    t = _apply(R["eye"], (), (int(n), int(m), _fdtype(dtype)))
    return _finish(t, device, requires_grad)


# ---------------------------------------------------------------- random
class Generator:
    """A random-number generator owning a seed and an offset (``torch.Generator``).

    Every random op folds ``(seed, offset)`` into a JAX key inside its kernel and advances the offset by one,
    so a seeded sequence of random ops is reproducible, and no randomness is ever baked into a kernel.

    Args:
        device: accepted for torch compatibility (keys are device-independent).
    >>> g = lf.Generator().manual_seed(0)
    >>> lf.rand(2, generator=g)  # the same two numbers after every manual_seed(0)
    """

    def __init__(self, device=None):
        self._device = None if device is None else Device(device)
        self._seed = 67280421310721
        self._offset = 0

    @property
    def device(self):
        """The generator's device (resolved on first use: importing lazyflow must not start JAX's backend,
        so that ``lf.distributed.init_process_group()`` can still run after ``import lazyflow``)."""
        if self._device is None:
            self._device = default_device()
        return self._device

    def manual_seed(self, seed: int) -> Generator:
        """Reset to ``seed`` (any int in ``[-2**63, 2**64)``); returns the generator.

        Raises:
            OpError: a seed outside that range.
        """
        seed = int(seed)
        if not -(2**63) <= seed < 2**64:
            raise OpError(f"manual_seed: seed must be within [-2**63, 2**64), got {seed}")
        self._seed = seed % 2**64
        self._offset = 0
        return self

    def seed(self) -> int:
        """Reseed from the operating system's entropy; returns the new seed."""
        s = int.from_bytes(os.urandom(8), "little") >> 1
        self.manual_seed(s)
        return s

    def initial_seed(self) -> int:
        """The seed last set."""
        return self._seed

    def get_state(self) -> Tensor:
        """The state as an int64 tensor ``[seed_hi, seed_lo, offset]`` (for :meth:`set_state`)."""
        return tensor([self._seed >> 32, self._seed & 0xFFFFFFFF, self._offset], dtype=D.int64)

    def set_state(self, new_state) -> Generator:
        """Restore a state from :meth:`get_state`; returns the generator.

        Raises:
            ShapeError: not a 3-element state.
        """
        vals = new_state.tolist() if isinstance(new_state, Tensor) else list(new_state)
        if len(vals) != 3:
            raise ShapeError(f"set_state expects the 3-element state returned by get_state, got {vals!r}")
        hi, lo, off = (int(v) for v in vals)
        self._seed, self._offset = (hi << 32) | lo, off
        return self

    def _next(self):
        hook = state.rng_hook
        if hook is not None:
            return hook(self)
        off = self._offset
        self._offset = off + 1
        s = self._seed
        return (s ^ (s >> 32)) & 0xFFFFFFFF, off & 0xFFFFFFFF


default_generator = Generator()


def manual_seed(seed: int) -> Generator:
    """Seed the default generator: every random op after it is reproducible. Returns the generator."""
    return default_generator.manual_seed(seed)


def seed() -> int:
    """Reseed the default generator non-deterministically; returns the seed."""
    return default_generator.seed()


def initial_seed() -> int:
    """The default generator's seed."""
    return default_generator.initial_seed()


def get_rng_state() -> Tensor:
    """The default generator's state (see :meth:`Generator.get_state`)."""
    return default_generator.get_state()


def set_rng_state(new_state) -> None:
    """Restore the default generator's state."""
    default_generator.set_state(new_state)


def _gen(generator):
    if generator is None:
        return default_generator
    if not isinstance(generator, Generator):
        raise DTypeError(f"generator must be a lazyflow.Generator, got {type(generator).__name__}")
    return generator


def _float_dtype(dtype, what):
    d = _fdtype(dtype)
    if not d.is_floating_point:
        raise DTypeError(f"{what}: expected a floating dtype, got {d}")
    d.to_jax()
    return d


def rand(
    *args,
    size=None,
    generator=None,
    dtype=None,
    device=None,
    requires_grad: bool = False,
    layout=None,
    pin_memory: bool = False,
) -> Tensor:
    """Samples uniform on ``[0, 1)``: ``rand(2, 3)``, ``rand((2, 3))`` or ``rand(size=(2, 3))``.

    Args:
        size: the shape.
        generator: the :class:`Generator` to draw from (default: the global one, see :func:`manual_seed`).
        dtype: a floating dtype (default float32).
        device, requires_grad: as :func:`tensor`.
    Raises:
        DTypeError: a non-floating dtype.
        ShapeError: a negative size.
    """
    _options("rand()", layout, pin_memory)
    d = _float_dtype(dtype, "rand")
    if size is not None:
        args = _keyword_sizes("rand", "size", args, size)
    t = _apply(R["uniform"], (*_gen(generator)._next(), 0.0, 1.0), (_shape(args), d))
    return _finish(t, device, requires_grad)


def randn(
    *args,
    size=None,
    generator=None,
    dtype=None,
    device=None,
    requires_grad: bool = False,
    layout=None,
    pin_memory: bool = False,
) -> Tensor:
    """Standard normal samples (same arguments as :func:`rand`)."""
    _options("randn()", layout, pin_memory)
    d = _float_dtype(dtype, "randn")
    if size is not None:
        args = _keyword_sizes("randn", "size", args, size)
    t = _apply(R["normal"], (*_gen(generator)._next(), 0.0, 1.0), (_shape(args), d))
    return _finish(t, device, requires_grad)


def randint(
    low=0, high=None, size=None, *, generator=None, dtype=None, device=None, requires_grad: bool = False, layout=None
) -> Tensor:
    """Integers uniform on ``[low, high)``: ``randint(high, size)``, ``randint(low, high, size)`` or
    ``randint(high=high, size=size)``.

    Args:
        low, high: the bounds (``low`` defaults to 0).
        size: the shape (a tuple).
        dtype: int64 by default; a floating dtype holds the integers as floats.
    Raises:
        OpError: ``low >= high``.
    """
    _options("randint()", layout, False)
    if size is None:
        if high is None:
            raise OpError("randint() missing required argument 'size'")
        low, high, size = 0, low, high
    if high is None:
        low, high = 0, low
    low, high = int(low), int(high)
    if low >= high:
        raise OpError(f"randint: expected low < high, got low={low}, high={high}")
    d = D.default_int() if dtype is None else D.to_dtype(dtype)
    gen = D.default_int() if d.is_floating_point or d is D.bool_ else d
    t = _apply(R["randint"], (*_gen(generator)._next(), low, high), (_shape((size,)), gen))
    if gen is not d:
        t = t.to(d)
    return _finish(t, device, requires_grad)


def randperm(
    n: int,
    *,
    generator=None,
    dtype=None,
    device=None,
    requires_grad: bool = False,
    layout=None,
    pin_memory: bool = False,
) -> Tensor:
    """A random permutation of ``0 .. n-1`` (int64 by default).

    Raises:
        OpError: a negative ``n``.
    """
    _options("randperm()", layout, pin_memory)
    if int(n) < 0:
        raise OpError(f"randperm: n must be non-negative, got {n}")
    d = D.default_int() if dtype is None else D.to_dtype(dtype)
    return _finish(_apply(R["randperm"], _gen(generator)._next(), (int(n), d)), device, requires_grad)


def _random_like(fill, input: Tensor, generator, dtype, device, requires_grad, layout, memory_format) -> Tensor:
    _options(f"{fill.__name__}_like()", layout, False, memory_format, input.ndim, preserve=True)
    dtype, device = _like(input, dtype), device or _dev(input)
    return fill(input.shape, generator=generator, dtype=dtype, device=device, requires_grad=requires_grad)


def rand_like(
    input: Tensor,
    *,
    generator=None,
    dtype=None,
    device=None,
    requires_grad: bool = False,
    layout=None,
    memory_format=None,
) -> Tensor:
    """:func:`rand` with ``input``'s shape (and dtype and device unless given)."""
    return _random_like(rand, input, generator, dtype, device, requires_grad, layout, memory_format)


def randn_like(
    input: Tensor,
    *,
    generator=None,
    dtype=None,
    device=None,
    requires_grad: bool = False,
    layout=None,
    memory_format=None,
) -> Tensor:
    """:func:`randn` with ``input``'s shape (and dtype and device unless given)."""
    return _random_like(randn, input, generator, dtype, device, requires_grad, layout, memory_format)


def randint_like(
    input: Tensor,
    low=0,
    high=None,
    *,
    generator=None,
    dtype=None,
    device=None,
    requires_grad: bool = False,
    layout=None,
    memory_format=None,
) -> Tensor:
    """:func:`randint` with ``input``'s shape (and dtype and device unless given): ``randint_like(x, high)`` or
    ``randint_like(x, low, high)``."""
    _options("randint_like()", layout, False, memory_format, input.ndim, preserve=True)
    if high is None:
        low, high = 0, low
    return randint(
        low,
        high,
        input.shape,
        generator=generator,
        dtype=_like(input, dtype),
        device=device or _dev(input),
        requires_grad=requires_grad,
    )


def normal(
    mean=0.0, std=1.0, size=None, *, generator=None, dtype=None, device=None, requires_grad: bool = False
) -> Tensor:
    """Normal samples: scalar ``mean``/``std`` with ``size``, or tensor ``mean``/``std`` (broadcast).

    As in torch, no gradient flows back into tensor ``mean``/``std``.

    Raises:
        OpError: a negative scalar ``std``, or scalar mean and std without ``size``.
    """
    if isinstance(mean, Tensor) or isinstance(std, Tensor):
        shape = np.broadcast_shapes(getattr(mean, "shape", ()), getattr(std, "shape", ()))
        d = (mean if isinstance(mean, Tensor) else cast(Tensor, std)).dtype
        if not d.is_floating_point:
            raise DTypeError(f"normal expects floating mean/std tensors, got {d}")
        if not isinstance(std, Tensor) and std < 0:
            raise OpError(f"normal expects std >= 0.0, got std={std}")
        z = randn(shape, generator=generator, dtype=d, device=device)
        m = mean.detach() if isinstance(mean, Tensor) else mean
        s = std.detach() if isinstance(std, Tensor) else std
        return _finish(z * s + m, None, requires_grad)
    if size is None:
        raise OpError("normal() with scalar mean and std needs size=")
    if std < 0:
        raise OpError(f"normal expects std >= 0.0, got std={std}")
    d = _float_dtype(dtype, "normal")
    t = _apply(R["normal"], (*_gen(generator)._next(), builtins.float(mean), builtins.float(std)), (_shape((size,)), d))
    return _finish(t, device, requires_grad)


def bernoulli(input: Tensor, p: float | None = None, *, generator=None) -> Tensor:
    """0/1 samples, 1 with probability ``input`` (elementwise), or with a scalar ``p`` in input's shape.

    Returns:
        A tensor of input's (floating) dtype; no gradient flows back into the probabilities.
    Raises:
        DTypeError: non-floating probabilities.
    """
    input = as_tensor(input)
    probs = input if p is None else full(input.shape, builtins.float(p), dtype=input.dtype)
    if not probs.dtype.is_floating_point:
        raise DTypeError(f"bernoulli expects floating probabilities, got {probs.dtype}")
    return _apply(R["bernoulli"], (*_gen(generator)._next(), probs.detach()))


def multinomial(input: Tensor, num_samples: int, replacement: bool = False, *, generator=None) -> Tensor:
    """Sample category indices (int64) from the non-negative weight rows of ``input`` (need not sum to 1).

    Args:
        input: a 1-D or 2-D tensor of weights.
        num_samples: samples per row.
        replacement: draw with replacement (else each category at most once per row).
    Raises:
        ShapeError: input not 1-D or 2-D.
        OpError: more samples than categories without replacement, or negative/non-finite/all-zero weights
            (checked in eager mode).
    """
    input = as_tensor(input)
    if input.ndim not in (1, 2):
        raise ShapeError(f"multinomial expects a 1-D or 2-D probability tensor, got shape {list(input.shape)}")
    if not input.dtype.is_floating_point:
        raise DTypeError(f"multinomial expects floating weights, got {input.dtype}")
    if num_samples <= 0:
        raise OpError(f"multinomial: num_samples must be positive, got {num_samples}")
    if not replacement and num_samples > input.shape[-1]:
        raise OpError(f"multinomial: cannot sample {num_samples} > {input.shape[-1]} categories without replacement")
    if not isinstance(input._value, _Tracer):
        w = np.asarray(input._value, np.float64)
        if not np.all(np.isfinite(w)) or np.any(w < 0) or np.any(w.sum(-1) <= 0):
            raise OpError(
                "multinomial: probability weights must be finite, non-negative and have a positive sum per row"
            )
    return _apply(
        R["multinomial"], (*_gen(generator)._next(), input.detach()), (int(num_samples), builtins.bool(replacement))
    )
