"""The eager interpreter: every op call is one cache lookup and one compiled-kernel launch.

On a hit there is no tracing and no shape inference: the entry holds the jitted kernel and the output
metadata inferred on the miss. The entry also holds the op's backward kernels (compiled on first use). Every
kernel jits a function object owned by its entry alone, so evicting the entry releases its executables (see
``cache.py``).
In-place ops donate the target's buffer when no other reference to it exists (checked with the buffer's
reference count), so updates cost O(update); otherwise they copy, and no alias ever sees a change.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import jax
import numpy as np
from jax.core import Tracer

from .._core.context import state
from .._core.errors import OutOfMemoryError
from .._dispatch import (
    SCALAR_TYPES,
    OpRecord,
    check_inplace,
    commit_inplace,
    convert_all,
    inplace_result,
    multi_inplace_error,
    record,
    snapshot,
    translate_error,
)
from .._tensor import Tensor, _make, _meta_of, _publish
from ..ops.table import specialize
from . import cache as _cache
from . import kernel_store as _kstore

_stats = _cache.stats
_tick = _cache.tick
_new = object.__new__
_get: Callable[[Any], Any] = _cache.entries.get  # the current table's get: set by _use_entries (use_table below)


def _use_entries(table) -> None:
    global _get
    _get = table.get


_cache._switch_hooks.append(_use_entries)
_getrefcount = sys.getrefcount
_SCALAR_TYPES = SCALAR_TYPES
_DONATE = "donate"


def _owned(fn, name: str):
    """A new function object calling ``fn``, for ``jax.jit`` to key its caches on.

    JAX keeps compiled executables in caches keyed (weakly) by the jitted function, shared by every ``jax.jit`` of
    that function; jitting an op's shared implementation would leave each executable there after its entry is
    evicted. A function object per entry dies with the entry, and its executables with it.
    """

    def kernel(*xs):
        return fn(*xs)

    kernel.__name__ = kernel.__qualname__ = name
    return kernel


class Entry(OpRecord):
    """One cached op signature: the jitted kernel, the output metadata, and (on first use) the jitted backward;
    ``nbytes`` estimates the resident bytes of its executables, ``key`` is where the cache holds it."""

    __slots__ = ("kernel", "outs", "multi", "tick", "nbytes", "key", "__weakref__")

    def __init__(self, kernel, outs, multi, op, statics, descs, nbytes):
        super().__init__(op, statics, descs)
        self.kernel = kernel
        self.outs = outs
        self.multi = multi
        self.nbytes = nbytes

    def _make_bwd(self, diff):
        _stats.backward_compiles += 1
        return jax.jit(_owned(super()._make_bwd(diff), f"{self.name}_backward"))

    def _loaded_bwd(self, diff, fast):
        """A backward kernel loaded for one operand structure; ``self._bwd`` is keyed by ``diff`` alone, and a later
        call may pass None where this one passed a cotangent (``jax.jit`` would retrace): then the jitted backward
        takes over."""

        def run(*xs):
            try:
                return fast(*xs)
            except TypeError:  # the executable's argument check, raised before anything runs
                fn = self._bwd[diff] = self._make_bwd(diff)
                return fn(*xs)

        return run

    def bwd_call(self, vals, gs, diff=None):
        diff = self.diff if diff is None else diff
        fn = self._bwd.get(diff)
        if fn is not None:
            return fn(*vals, *gs)
        xs = (*vals, *gs)
        name = _kstore.key(self.op, self.statics, self.descs, xs, False, f"backward{diff}")
        stored = _kstore.load(name, xs, False) if name is not None else None
        if stored is not None:
            _stats.backward_compiles += 1
            out = stored[0](*xs)
            self._bwd[diff] = self._loaded_bwd(diff, _kstore.fast_call(stored[0]))
            _cache.charge(self, _cache.hlo_bytes(stored[1]))
            return out
        fn = self._bwd[diff] = self._make_bwd(diff)
        if name is None:
            out = fn(*xs)
            _cache.charge(self, _cache.executable_bytes(fn, xs))
            return out
        with _kstore.bypass():
            out = fn(*xs)
            _cache.charge(self, _cache.hlo_bytes(_kstore.save(name, fn.lower(*xs).compile())))
        return out


def _checked(kernel, check):
    """``kernel`` behind the op's value check, tested on the host before the launch (nothing runs, nothing is
    donated, when it fails)."""

    reads = check.reads

    def run(*vals):
        host = [np.asarray(v) if i in reads and v.__class__ not in _SCALAR_TYPES else v for i, v in enumerate(vals)]
        if check.bad(*host):
            raise check.error(check.message)
        return kernel(*vals)

    return run


def _out_of_memory(err, op, args, statics) -> OutOfMemoryError:
    shapes = ", ".join(f"{list(a.shape)} {a.dtype.name}" if isinstance(a, Tensor) else repr(a) for a in args)
    attrs = ", ".join(f"{k}={v!r}" for k, v in zip(op.static, statics))
    return OutOfMemoryError(
        f"{op.name}({shapes}{', ' if shapes and attrs else ''}{attrs}): the device is out of memory "
        f"({str(err).splitlines()[0]})"
    )


def _miss(key, op, args, vals, statics, donate):
    descs = key[2:-1] if donate else key[2:]
    name = _kstore.key(op, statics, descs, vals, donate, "forward")
    stored = _kstore.load(name, vals, donate) if name is not None else None
    jitted: Any
    if stored is None:
        fn = specialize(op, statics, descs)
        jitted = jax.jit(_owned(fn, op.name), donate_argnums=(0,) if donate else ())
    else:
        jitted = stored[0]
    check = op.check(descs, statics) if op.check is not None else None
    kernel = jitted if check is None else _checked(jitted, check)
    try:
        if name is None or stored is not None:
            out = kernel(*vals)
        else:
            with _kstore.bypass():
                out = kernel(*vals)
    except (TypeError, ValueError, IndexError) as e:
        raise translate_error(e, op, args, statics) from e
    except jax.errors.JaxRuntimeError as e:
        if "RESOURCE_EXHAUSTED" in str(e):
            raise _out_of_memory(e, op, args, statics) from None
        raise
    _stats.misses += 1
    # donated operands: only their shapes and dtypes are read
    if stored is not None:
        nbytes = _cache.hlo_bytes(stored[1])
        fast = _kstore.fast_call(jitted)
        kernel = fast if check is None else _checked(fast, check)
    elif name is not None:
        with _kstore.bypass():
            nbytes = _cache.hlo_bytes(_kstore.save(name, jitted.lower(*vals).compile()))
    else:
        nbytes = _cache.executable_bytes(jitted, vals)
    if isinstance(out, (tuple, list)):
        entry = Entry(kernel, tuple(_meta_of(o) for o in out), True, op, statics, descs, nbytes)
    else:
        entry = Entry(kernel, _meta_of(out), False, op, statics, descs, nbytes)
    _cache.insert(key, entry)
    return entry, out


def _prepare(op, args, statics, extra=None):
    key = [op, statics]
    vals = []
    rg = False
    for a in args:
        if isinstance(a, Tensor):
            key.append(a._meta)
            vals.append(a._value)
            if a._rg:
                rg = True
        elif a.__class__ in _SCALAR_TYPES:
            key.append(a.__class__)
            vals.append(a)
        else:
            raise _NeedsConvert
    if extra is not None:
        key.append(extra)
    return tuple(key), vals, rg


class _NeedsConvert(Exception):
    pass


def apply(op, args, statics=()):
    """Run ``op`` on ``args`` (Tensors, Python scalars, None) with static attributes ``statics``."""
    # Fast path for the common one/two-operand call on a cache hit: no list building, one dict lookup, one kernel
    # launch, the output Tensor built inline (a call to _make is a Python frame: ~0.1 us of a ~7 us dispatch)
    n = len(args)
    if n == 2:
        a, b = args
        if isinstance(a, Tensor):
            if isinstance(b, Tensor):
                entry = _get((op, statics, a._meta, b._meta))
                if entry is None:
                    return _apply_general(op, args, statics)
                out = entry.kernel(a._value, b._value)
                rg = a._rg or b._rg
            elif b.__class__ in _SCALAR_TYPES:
                entry = _get((op, statics, a._meta, b.__class__))
                if entry is None:
                    return _apply_general(op, args, statics)
                out = entry.kernel(a._value, b)
                rg = a._rg
            else:
                return _apply_general(op, args, statics)
        else:
            return _apply_general(op, args, statics)
    elif n == 1 and isinstance(args[0], Tensor):
        a = args[0]
        entry = _get((op, statics, a._meta))
        if entry is None:
            return _apply_general(op, args, statics)
        out = entry.kernel(a._value)
        rg = a._rg
    else:
        return _apply_general(op, args, statics)
    entry.tick = _tick()
    if entry.multi:
        res = tuple(map(_make, out, entry.outs))
    else:  # _make's body
        res = _new(Tensor)
        res._value = out
        res._meta = entry.outs
        res._rg = False
        res.grad = None
        res._node = None
        res._oidx = 0
        res._version = 0
        res._peers = None
        res._retain = False
    if rg and state.grad_enabled and op.differentiable:
        record(entry, args, res, entry.multi)
    return res


def _apply_general(op, args, statics):
    try:
        key, vals, rg = _prepare(op, args, statics)
    except _NeedsConvert:
        args = convert_all(args)
        key, vals, rg = _prepare(op, args, statics)
    entry = _get(key)
    if entry is None:
        entry, out = _miss(key, op, args, vals, statics, False)
    else:
        entry.tick = _tick()
        out = entry.kernel(*vals)
    if entry.multi:
        res = tuple(_make(v, m) for v, m in zip(out, entry.outs))
    else:
        res = _make(out, entry.outs)
    if rg and state.grad_enabled and op.differentiable:
        record(entry, args, res, entry.multi)
    return res


def apply_inplace(op, target, args, statics=()):
    """Run ``op`` and store its result into ``target`` (``args[0] is target``); returns ``target``."""
    grad_on = state.grad_enabled
    # the target's own slot and getrefcount's argument are the only references: safe to donate, unless the
    # target is also a later operand (t.add_(t)): XLA refuses a donated buffer passed twice in one call
    donate = _getrefcount(target._value) <= 2
    if donate:
        for a in args[1:]:
            if a is target:
                donate = False
                break
    if not target._rg:
        # fast path: nothing to record on the target; build the key without a list when all operands are plain
        key = [op, statics]
        vals = []
        for a in args:
            if isinstance(a, Tensor):
                if a._rg and grad_on:
                    break
                key.append(a._meta)
                vals.append(a._value)
            elif a.__class__ in _SCALAR_TYPES:
                key.append(a.__class__)
                vals.append(a)
            else:
                break
        else:
            if donate:
                key.append(_DONATE)
            key = tuple(key)
            entry = _get(key)
            if entry is not None:
                entry.tick = _tick()
                out = entry.kernel(*vals)
                meta = entry.outs
                if meta == target._meta:
                    target._value = out
                    target._version += 1
                    if target._peers is not None:
                        _publish(target)
                    return target
                out, meta = inplace_result(op, target, out, meta) if not entry.multi else (None, None)
                if entry.multi:
                    raise multi_inplace_error(op)
                return commit_inplace(target, out, meta, entry, args, False)
    check_inplace(op, target, grad_on)
    try:
        key, vals, rg = _prepare(op, args, statics, _DONATE if donate else None)
    except _NeedsConvert:
        args = convert_all(args)
        key, vals, rg = _prepare(op, args, statics, _DONATE if donate else None)
    record_grad = rg and grad_on and op.differentiable
    if record_grad:
        # the node must see the pre-update value: hand it a snapshot, and never donate that buffer
        old = snapshot(target)
        args = tuple(old if a is target else a for a in args)
        if donate:
            donate = False
            key, vals, rg = _prepare(op, args, statics)
    entry = _get(key)
    if entry is None:
        entry, out = _miss(key, op, args, vals, statics, donate)
    else:
        entry.tick = _tick()
        out = entry.kernel(*vals)
    if entry.multi:
        raise multi_inplace_error(op)
    out, meta = inplace_result(op, target, out, entry.outs)
    return commit_inplace(target, out, meta, entry, args, record_grad)


def _sum(a, b):
    return a + b


_add = _kstore.Program(_sum, "eager.accumulate:a+b")
_Array, _Tracer = jax.Array, Tracer


def accumulate(a, b):
    """Sum two gradient values (arrays, or Tensors under create_graph); the program is kept in the kernel store."""
    if isinstance(a, Tensor):
        return a + b
    if isinstance(a, _Array) and isinstance(b, _Array) and not isinstance(a, _Tracer) and not isinstance(b, _Tracer):
        sig = (a.shape, a.dtype, a.weak_type, a.sharding, b.shape, b.dtype, b.weak_type, b.sharding)
        return _add.call(sig, a, b)
    return _add.jitted(a, b)


class EagerInterpreter:
    """The default interpreter (``lazyflow._core.context.state.interp``)."""

    apply = staticmethod(apply)
    apply_inplace = staticmethod(apply_inplace)
    accumulate = staticmethod(accumulate)
    name = "eager"


INTERPRETER = EagerInterpreter()
if type(state).interp is None:
    type(state).interp = INTERPRETER  # the default in every thread


def _on_default_dtype(d) -> None:
    _cache.use_table(d)


from .._core import dtypes as _D

_D._listeners.append(_on_default_dtype)
_cache.use_table(_D.get_default_dtype())
