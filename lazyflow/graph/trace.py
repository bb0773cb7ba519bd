"""Graph mode's interpreter: the same op-table functions, called inside a JAX trace.

While a :class:`Tracing` context is active, every Tensor op goes through :class:`TraceInterpreter`, which calls
``ops.specialize(...)`` directly on tracer values (XLA sees one program), records tape nodes exactly like eager
mode (so ``loss.backward()`` inside ``lf.nn.Graph.build`` works), and reports tensors captured from outside.
"""

from __future__ import annotations

import functools

import jax
import jax.core

from .._core.checks import defer_value
from .._core.context import state
from .._core.dtypes import from_jax_dtype
from .._core.errors import GraphError, user_frame
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
from .._tensor import Tensor, _make
from ..ops.table import specialize

_Tracer = jax.core.Tracer


@functools.lru_cache(maxsize=8192)
def _specialized(op, statics, descs, rules=True):
    return specialize(op, statics, descs, rules)


class TraceEntry(OpRecord):
    """A traced op signature: the backward runs inline in the trace."""

    __slots__ = ()


def _stopped(v):
    return jax.lax.stop_gradient(v) if jax.numpy.issubdtype(v.dtype, jax.numpy.inexact) else v


@jax.custom_jvp
def _through(old, new):
    """``new``, differentiating as ``old`` does (identity tangent from ``old``; ``new`` is a constant)."""
    return new


@_through.defjvp
def _through_jvp(primals, tangents):
    return primals[1], tangents[0]


def _tmeta(v):
    return (tuple(v.shape), from_jax_dtype(v.dtype), 0)


class Tracing:
    """Context for one trace: installs the trace interpreter and records captured concrete tensors."""

    def __init__(self, readonly_ids=(), rng_hook=None, vjp_rules=None, tape: bool = False):
        self.captured: dict[int, Tensor] = {}
        # tape: ops record tape nodes (lf.nn.Graph's trace, whose build() calls backward); otherwise JAX
        # differentiates the traced program as a whole (lf.compile, lf.func), and a user's no_grad region is
        # expressed in the program itself: `stop` makes every op's floating outputs stop_gradient there
        self.tape = tape
        self.stop = False
        self.readonly = set(readonly_ids)
        self.rng_hook = rng_hook
        # the op table's backward rules (jax.custom_vjp) are attached unless a forward-mode transform (lf.func.jacfwd,
        # jvp) traces this code; None inherits the enclosing trace's choice
        self.vjp_rules = vjp_rules

    def __enter__(self):
        self._prev = (state.interp, state.tracing, state.rng_hook, getattr(state, "trace_ctx", None))
        outer = self._prev[3] if state.tracing else None
        if self.vjp_rules is None:
            self.vjp_rules = True if outer is None else outer.vjp_rules
        if outer is not None and outer.stop:  # a trace opened inside a no_grad region stays inside it
            self.stop = True
        state.interp = TraceInterpreter(self)
        state.tracing = True
        state.rng_hook = self.rng_hook
        state.trace_ctx = self
        return self

    def __exit__(self, *exc):
        state.interp, state.tracing, state.rng_hook, state.trace_ctx = self._prev
        return False


class TraceInterpreter:
    """Interpreter used while tracing (see module docstring)."""

    name = "graph"

    def __init__(self, ctx: Tracing):
        self.ctx = ctx

    def _prepare(self, args):
        descs, vals, rg = [], [], False
        for a in args:
            if isinstance(a, Tensor):
                v = a._value
                if not isinstance(v, _Tracer):
                    self.ctx.captured.setdefault(id(a), a)
                descs.append(a._meta)
                vals.append(v)
                if a._rg:
                    rg = True
            elif isinstance(a, _Tracer):  # raw traced operands (the rng seed/offset of random ops)
                descs.append("raw")
                vals.append(a)
            else:
                descs.append(a.__class__)
                vals.append(a)
        return tuple(descs), vals, rg

    def _run(self, op, args, statics, descs, vals):
        fn = _specialized(op, statics, descs, self.ctx.vjp_rules)
        if op.check is not None and state.checks is not None:
            check = op.check(descs, statics)
            if check is not None:  # a value condition eager tests on the host: deferred to after the program
                defer_value(check.bad(*vals), check.message, check.error)
        try:
            return fn(*vals)
        except (
            jax.errors.ConcretizationTypeError,
            jax.errors.TracerBoolConversionError,
            jax.errors.TracerIntegerConversionError,
        ) as e:
            raise GraphError(
                f"{op.name} needs concrete values inside graph mode at {user_frame()}: {str(e).splitlines()[0]}"
            ) from e
        except (TypeError, ValueError, IndexError) as e:
            raise translate_error(e, op, args, statics) from e

    def apply(self, op, args, statics=()):
        if not all(isinstance(a, (Tensor, _Tracer)) or a.__class__ in SCALAR_TYPES for a in args):
            args = convert_all(args)
        descs, vals, rg = self._prepare(args)
        out = self._run(op, args, statics, descs, vals)
        multi = isinstance(out, (tuple, list))
        if self.ctx.stop:
            out = type(out)(map(_stopped, out)) if multi else _stopped(out)
        res = tuple(_make(o, _tmeta(o)) for o in out) if multi else _make(out, _tmeta(out))
        if rg and state.grad_enabled and op.differentiable:
            record(TraceEntry(op, statics, descs), args, res, multi)
        return res

    def apply_inplace(self, op, target, args, statics=()):
        readonly = self.ctx.readonly
        if (
            not isinstance(target._value, _Tracer)
            or id(target) in readonly
            # a p.data / p.detach() alias of a read-only tensor: the write would reach it and be dropped
            or (readonly and target._peers is not None and any(id(r()) in readonly for r, _ in target._peers))
        ):
            raise GraphError(
                f"in-place {op.name}_ on a tensor captured from outside the compiled code (shape "
                f"{list(target.shape)}) at {user_frame()}: graph mode cannot write to it; make it a "
                "parameter/buffer of the module, or use an out-of-place op and return the result"
            )
        grad_on = state.grad_enabled
        check_inplace(op, target, grad_on)
        if not all(isinstance(a, (Tensor, _Tracer)) or a.__class__ in SCALAR_TYPES for a in args):
            args = convert_all(args)
        descs, vals, rg = self._prepare(args)
        record_grad = rg and grad_on and op.differentiable
        if record_grad:
            old = snapshot(target)
            args = tuple(old if a is target else a for a in args)
        out = self._run(op, args, statics, descs, vals)
        if isinstance(out, (tuple, list)):
            raise multi_inplace_error(op)
        out, meta = inplace_result(op, target, out, _tmeta(out))
        if self.ctx.stop and jax.numpy.issubdtype(out.dtype, jax.numpy.inexact):
            # torch: an in-place write under no_grad leaves the tensor's place in the graph as it was, so a later
            # use differentiates to the tensor as if unmodified -- the new value, the old value's gradient path
            out = _through(target._value, out)
        entry = TraceEntry(op, statics, descs) if record_grad else None
        return commit_inplace(target, out, meta, entry, args, record_grad)

    @staticmethod
    def accumulate(a, b):
        return a + b
