"""The eager interpreter: every op call is one cache lookup and one compiled-kernel launch.

On a hit there is no tracing and no shape inference: the entry holds the jitted kernel and the output
metadata inferred on the miss. The entry also holds the op's backward kernel (compiled on first use).
In-place ops donate the target's buffer when no other reference to it exists (checked with the buffer's
reference count), so updates cost O(update); otherwise they copy, and no alias ever sees a change.
"""

from __future__ import annotations

import builtins
import sys

import jax
import numpy as np

from .._core.context import state
from .._core.errors import AutogradError, DTypeError, OpError, ShapeError
from .._tensor import Tensor, _make, _meta_of
from ..autograd.node import Node
from ..ops.table import OpDef, backward_fn, diff_positions, specialize
from . import cache as _cache

_entries = _cache.entries
_stats = _cache.stats
_get = _entries.get
_touch = _entries.move_to_end
_getrefcount = sys.getrefcount
_SCALAR_TYPES = frozenset({builtins.int, builtins.float, builtins.bool, type(None)})
_DONATE = "donate"


class Entry:
    """One cached op signature."""

    __slots__ = ("kernel", "outs", "multi", "op", "statics", "descs", "diff", "name", "_bwd", "_bwd_op",
                 "__weakref__")

    def __init__(self, kernel, outs, multi, op, statics, descs):
        self.kernel = kernel
        self.outs = outs
        self.multi = multi
        self.op = op
        self.statics = statics
        self.descs = descs
        self.diff = diff_positions(descs)
        self.name = op.name
        self._bwd = None
        self._bwd_op = None

    def bwd_call(self, vals, gs):
        if self._bwd is None:
            self._bwd = jax.jit(backward_fn(self.op, self.statics, self.descs, self.diff))
            _stats.backward_compiles += 1
        return self._bwd(*vals, *gs)

    def bwd_op(self) -> OpDef:
        if self._bwd_op is None:
            self._bwd_op = OpDef(f"{self.op.name}_backward",
                                 backward_fn(self.op, self.statics, self.descs, self.diff), dtypes="none")
        return self._bwd_op


def _convert(a):
    """Non-tensor, non-scalar operands: numpy/jax arrays, lists, numpy scalars."""
    if isinstance(a, np.generic):
        return a.item()
    from .._creation import as_tensor

    return as_tensor(a)


def _describe(args):
    parts = []
    for a in args:
        if isinstance(a, Tensor):
            parts.append(f"Tensor(shape={list(a.shape)}, dtype={a.dtype.name})")
        else:
            parts.append(repr(a))
    return ", ".join(parts)


def _translate(err, op, args, statics):
    msg = str(err).split("\n")[0]
    stat = dict(zip(op.static, statics))
    where = f"{op.name}({_describe(args)}" + (f", {stat}" if stat else "") + ")"
    low = msg.lower()
    if isinstance(err, (DTypeError,)):
        return err
    if "shape" in low or "broadcast" in low or "dimension" in low or "size" in low or "axis" in low:
        return ShapeError(f"{where}: {msg}")
    if isinstance(err, TypeError):
        return DTypeError(f"{where}: {msg}")
    return OpError(f"{where}: {msg}")


def _miss(key, op, args, vals, statics, donate):
    descs = key[2:-1] if donate else key[2:]
    fn = specialize(op, statics, descs)
    kernel = jax.jit(fn, donate_argnums=(0,) if donate else ())
    try:
        out = kernel(*vals)
    except (TypeError, ValueError, IndexError) as e:
        raise _translate(e, op, args, statics) from e
    _stats.misses += 1
    if isinstance(out, (tuple, list)):
        entry = Entry(kernel, tuple(_meta_of(o) for o in out), True, op, statics, descs)
    else:
        entry = Entry(kernel, _meta_of(out), False, op, statics, descs)
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
    try:
        key, vals, rg = _prepare(op, args, statics)
    except _NeedsConvert:
        args = tuple(a if isinstance(a, Tensor) or a.__class__ in _SCALAR_TYPES else _convert(a) for a in args)
        key, vals, rg = _prepare(op, args, statics)
    entry = _get(key)
    if entry is None:
        entry, out = _miss(key, op, args, vals, statics, False)
    else:
        _touch(key)
        _stats.hits += 1
        out = entry.kernel(*vals)
    if entry.multi:
        res = tuple(_make(v, m) for v, m in zip(out, entry.outs))
    else:
        res = _make(out, entry.outs)
    if rg and state.grad_enabled and op.differentiable:
        _record(entry, args, res)
    return res


def _record(entry, args, res):
    if not entry.diff or not any(args[i]._rg for i in entry.diff):
        return
    outs = res if entry.multi else (res,)
    node = Node(entry, args, tuple(a._version if isinstance(a, Tensor) else None for a in args), len(outs))
    for i, t in enumerate(outs):
        if t._meta[1].is_floating_point:
            t._rg = True
            t._node = node
            t._oidx = i


def apply_inplace(op, target, args, statics=()):
    """Run ``op`` and store its result into ``target`` (``args[0] is target``); returns ``target``."""
    grad_on = state.grad_enabled
    if grad_on and target._rg and target._node is None:
        raise AutogradError(
            f"a leaf Variable that requires grad is being used in an in-place operation ({op.name}); wrap "
            "it in `with lf.no_grad():` or operate on a clone")
    # the target's own slot and getrefcount's argument are the only references: safe to donate
    donate = _getrefcount(target._value) <= 2 and not isinstance(target._value, jax.core.Tracer)
    try:
        key, vals, rg = _prepare(op, args, statics, _DONATE if donate else None)
    except _NeedsConvert:
        args = tuple(a if isinstance(a, Tensor) or a.__class__ in _SCALAR_TYPES else _convert(a) for a in args)
        key, vals, rg = _prepare(op, args, statics, _DONATE if donate else None)
    record = rg and grad_on and op.differentiable
    if record:
        # the node must see the pre-update value: hand it a snapshot, and never donate that buffer
        old = _make(target._value, target._meta)
        old._rg, old._node, old._oidx = target._rg, target._node, target._oidx
        args = (old,) + tuple(args[1:])
        if donate:
            key, vals, rg = _prepare(op, args, statics)
            donate = False
    entry = _get(key)
    if entry is None:
        entry, out = _miss(key, op, args, vals, statics, donate)
    else:
        _touch(key)
        _stats.hits += 1
        out = entry.kernel(*vals)
    if entry.multi:
        raise OpError(f"{op.name} has several outputs and cannot run in place")
    meta = entry.outs
    if meta[0] != target._meta[0]:
        raise ShapeError(f"{op.name}_: output with shape {list(target.shape)} doesn't match the broadcast "
                         f"shape {list(meta[0])}")
    if meta[1] is not target._meta[1]:
        if target._meta[1].is_floating_point or not meta[1].is_floating_point:
            out = out.astype(target._meta[1].np)
            meta = (meta[0], target._meta[1], meta[2])
        else:
            raise DTypeError(f"{op.name}_: result type {meta[1].name} can't be cast to the desired output "
                             f"type {target.dtype.name}")
    target._value = out
    target._meta = meta
    target._version += 1
    if record:
        res = _make(out, meta)
        _record(entry, args, res)
        if res._node is not None:
            target._rg, target._node, target._oidx = True, res._node, res._oidx
    return target


@jax.jit
def _add(a, b):
    return a + b


def accumulate(a, b):
    """Sum two gradient values (arrays, or Tensors under create_graph)."""
    if isinstance(a, Tensor):
        return a + b
    return _add(a, b)


class EagerInterpreter:
    """The default interpreter (``lazyflow._core.context.state.interp``)."""

    apply = staticmethod(apply)
    apply_inplace = staticmethod(apply_inplace)
    accumulate = staticmethod(accumulate)
    name = "eager"


INTERPRETER = EagerInterpreter()
if type(state).interp is None:
    type(state).interp = INTERPRETER  # the default in every thread
