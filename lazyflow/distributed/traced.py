"""Collectives inside compiled code: the same torch.distributed calls, lowered to XLA collectives.

A compiled program (``lf.compile`` / ``lf.nn.Graph``) that calls a collective runs as a ``shard_map`` over the
default group's mesh (one device per process, axis ``"rank"``; :mod:`.program`); inside it each process's value
is its own block, so ``all_reduce`` is ``lax.psum`` on the traced value, ``all_gather`` is ``lax.all_gather`` and so
on. This module holds the bodies (pure ``lax`` functions of this rank's block) and the trace's record of the
collectives it ran, which the ranks compare before every call (:func:`.program.check_program`).

The first trace of a program does not know yet that it will meet a collective: the collective raises
:class:`NeedsSpmd` there, and the compile pipeline traces the program again as a ``shard_map``.
"""

from __future__ import annotations

import functools
import threading
from typing import Any

import jax.numpy as jnp
from jax import lax

from .._core.errors import NotSupportedError
from .groups import AXIS, ReduceOp

__all__ = ["NeedsSpmd", "SpmdTrace", "current", "reduce_block", "run_traced", "spmd_summary"]


class NeedsSpmd(NotSupportedError):
    """A collective met in a trace that does not run over the process mesh. ``lf.compile`` and ``lf.nn.Graph``
    catch it and trace again as a ``shard_map``; any other tracer (``lf.export``, ``jax.jit`` of lazyflow code via
    ``lf.utils.jax``) lets it through to the user."""


class SpmdTrace:
    """The process mesh a trace runs over (``size`` ranks, axis ``"rank"``) and the collectives it recorded."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.log: list[str] = []
        self.last: Any = None  # the previous collective's result: the next one is ordered after it

    def ordered(self, v, what: str):
        """``v`` made to depend on the previous collective's result, and ``what`` logged: XLA then runs the
        collectives in trace order on every rank, even where the ranks' programs differ around them (rank-dependent
        code), where its scheduler would order independent collectives differently -- which would pair one rank's
        first collective with another's second and hang."""
        self.log.append(what)
        return v if self.last is None else after(v, self.last)


def _uint(x):
    """``x`` (one element) as an unsigned integer of its width."""
    if x.dtype == jnp.bool_:
        return x.astype(jnp.uint8)
    width = jnp.dtype(x.dtype).itemsize * 8
    return lax.bitcast_convert_type(x, jnp.dtype(f"uint{width}")) if width <= 32 else (x != 0).astype(jnp.uint8)


def zero_from(dep):
    """A uint32 zero computed from ``dep`` (its first element's population count, shifted out)."""
    if dep.size == 0:
        return jnp.zeros((), jnp.uint32)
    return lax.shift_right_logical(lax.population_count(_uint(dep[(0,) * dep.ndim]).astype(jnp.uint32)), jnp.uint32(6))


def after(v, dep):
    """``v`` unchanged, but computed from ``dep`` as far as XLA knows: one element of ``v`` is OR-ed with a zero
    derived from ``dep`` (a population count shifted out), which no simplifier folds away -- unlike an
    ``optimization_barrier``, which XLA's CPU pipeline drops."""
    if v.size == 0 or dep.size == 0:
        return v
    first = (0,) * v.ndim
    zero = zero_from(dep)
    e = v[first]
    if v.dtype == jnp.bool_:
        e = e | (zero > 0)
    elif jnp.dtype(v.dtype).itemsize * 8 <= 32 and not jnp.issubdtype(v.dtype, jnp.complexfloating):
        u = _uint(e)
        e = lax.bitcast_convert_type(u | zero.astype(u.dtype), v.dtype)
    else:  # 64-bit and complex: an exact add of a zero of v's type (the sign of a zero element may flip)
        e = e + zero.astype(v.dtype)
    return v.at[first].set(e)


class _Local(threading.local):
    trace: SpmdTrace | None = None


_local = _Local()


def current() -> SpmdTrace | None:
    """The SPMD trace being recorded in this thread (None: not inside a shard_map program)."""
    return _local.trace


def enter(trace: SpmdTrace | None) -> SpmdTrace | None:
    """Make ``trace`` current; returns the previous one (restore it with ``enter(previous)``)."""
    prev, _local.trace = _local.trace, trace
    return prev


def reduce_block(v, op: ReduceOp, n: int):
    """``op`` over the ranks of this rank's block ``v`` (inside a shard_map over axis ``"rank"``)."""
    if v.dtype == jnp.bool_:
        i = v.astype(jnp.int32)
        return (lax.pmin(i, AXIS) if op in (ReduceOp.MIN, ReduceOp.PRODUCT, ReduceOp.BAND) else lax.pmax(i, AXIS)) > 0
    if op is ReduceOp.SUM:
        return lax.psum(v, AXIS)
    if op is ReduceOp.AVG:
        return lax.psum(v, AXIS) / n
    if op is ReduceOp.MAX:
        return lax.pmax(v, AXIS)
    if op is ReduceOp.MIN:
        return lax.pmin(v, AXIS)
    g = lax.all_gather(v, AXIS)
    if op is ReduceOp.PRODUCT:
        return jnp.prod(g, axis=0)
    f = {ReduceOp.BAND: jnp.bitwise_and, ReduceOp.BOR: jnp.bitwise_or, ReduceOp.BXOR: jnp.bitwise_xor}[op]
    return functools.reduce(f, [g[i] for i in range(n)])


def block(kind: str, v, op: ReduceOp | None, n: int, extra: int):
    """This rank's result of collective ``kind`` on every rank's block ``v`` (``extra``: the src/dst index)."""
    if kind in ("all_reduce", "reduce"):
        out = reduce_block(v, op, n)  # type: ignore[arg-type]
        if kind == "reduce":
            out = jnp.where(lax.axis_index(AXIS) == extra, out.astype(v.dtype), v)
    elif kind == "broadcast":
        out = lax.all_gather(v, AXIS)[extra]
    elif kind in ("all_gather", "gather", "signature"):
        out = lax.all_gather(v, AXIS)
    elif kind == "scatter":
        out = lax.all_gather(v, AXIS)[extra][lax.axis_index(AXIS)]
    elif kind == "reduce_scatter_tensor":
        k = v.shape[0] // n
        if op in (ReduceOp.SUM, ReduceOp.AVG) and v.dtype != jnp.bool_:
            out = lax.psum_scatter(v, AXIS, scatter_dimension=0, tiled=True)
            out = out / n if op is ReduceOp.AVG else out
        else:
            out = lax.dynamic_slice_in_dim(reduce_block(v, op, n), lax.axis_index(AXIS) * k, k, 0)  # type: ignore[arg-type]
    elif kind == "all_to_all_single":
        out = lax.all_to_all(v, AXIS, 0, 0, tiled=True)
    else:
        raise AssertionError(kind)
    return out.astype(v.dtype)


def run_traced(kind: str, group, v, op: ReduceOp | None = None, extra: int = 0):
    """Inside a trace: this rank's result of ``kind`` as a traced value, recorded for the ranks' comparison.

    Raises:
        NeedsSpmd: the trace does not run over the process mesh yet (the compile pipeline retraces).
        NotSupportedError: a sub-group (compiled collectives run over every rank).
    """
    t = current()
    if t is None:
        raise NeedsSpmd(
            f"{kind} inside a traced program: collectives are compiled only by lf.compile and lf.nn.Graph (which "
            "run the program over every process); call it eagerly or inside one of them"
        )
    if group.ranks != list(range(t.size)):
        raise NotSupportedError(
            f"{kind} on {group!r} inside lf.compile / nn.Graph: compiled collectives run over every rank (the "
            f"default group of {t.size}); call sub-group collectives eagerly, outside the compiled function"
        )
    where = f" src/dst {extra}" if kind in ("broadcast", "reduce", "scatter") else ""
    v = t.ordered(v, f"{kind} {'' if op is None else op.name + ' '}{v.dtype}{list(v.shape)}{where}")
    t.last = out = block(kind, v, op, t.size, extra)
    return out


def spmd_summary(summary):
    """A trace's deferred-check summary (``[first failed check or -1, its index]``) made the same on every rank:
    the first failing rank's, so every rank raises the same error after the call (or none does)."""
    t = current()
    assert t is not None  # called only while tracing a shard_map program
    t.last = rows = lax.all_gather(t.ordered(summary, "index checks"), AXIS)
    return rows[jnp.argmax(rows[:, 0] >= 0)]
