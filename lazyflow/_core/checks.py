"""Deferred index checks: how graph mode raises where eager mode would inspect an index.

Eager check sites read an index's values and raise :class:`IndexOutOfRangeError` before the op runs. Inside a
trace the index is a JAX tracer -- its values exist only when the program runs -- and XLA clamps out-of-range
gathers and drops out-of-range scatters, silently. So a check site calls :func:`defer_bounds` instead: while a trace
collects checks (``state.checks`` is a list, opened by ``lazyflow.graph.functionalize.trace_pure``) it records a
traced "bad" flag, the offending index and the eager message (:func:`defer_value` does the same for an op record's
value check, such as integer division by zero, with its own error class). The compiled program's last output is one
small summary (:func:`summarize`). A program that donates nothing (``lf.compile``) is read after it ran and a failed
check writes nothing back; one that donates (``lf.nn.Graph``'s step) is first reduced by ``lazyflow.graph.compile``
to that output and the arrays it reads, and that check program runs first, so a failed check raises eager's error
(:func:`failure` builds it) before the step runs -- nothing is donated or written. A program that records no check
has no check program and reads nothing back.

The checks cost one device-to-host read per call of a program that indexes with traced tensors, and a donating
step one small program besides (the step itself leaves the summary to it; checks of small integer inputs run as
numpy on the first calls while that program compiles after the step: ``lazyflow.graph.host_eval``). Switch them off
with ``lf.graph.set_index_checks(False)`` or ``LAZYFLOW_GRAPH_INDEX_CHECKS=0``; out-of-range indices are then
clamped (gathers) or dropped (scatters) by XLA, as in ``jax.numpy``.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .config import GRAPH_INDEX_CHECKS
from .context import state
from .errors import IndexOutOfRangeError

__all__ = [
    "DeferredCheck",
    "defer_bounds",
    "defer_value",
    "index_checks_enabled",
    "failure",
    "set_index_checks",
    "summarize",
]

_enabled = GRAPH_INDEX_CHECKS


class DeferredCheck(NamedTuple):
    """One check recorded in a trace."""

    bad: Any  # traced bool scalar: some index is out of range
    value: Any  # traced integer scalar: the offending index (meaningful only where ``bad``)
    message: str  # eager's message, with ``{index}`` where the offending index goes
    error: type = IndexOutOfRangeError  # what eager raises


def set_index_checks(enabled: bool) -> None:
    """Switch graph mode's deferred index checks on (the default) or off, for programs compiled from now on.

    With the checks on, a compiled call (``lf.compile``, ``lf.nn.Graph``) whose traced index is out of range raises
    :class:`IndexOutOfRangeError` with eager mode's message after the program ran, and the call's state updates
    are discarded. Off, nothing is checked: XLA clamps out-of-range gathers and drops out-of-range scatters. The
    environment variable ``LAZYFLOW_GRAPH_INDEX_CHECKS=0`` starts a process with the checks off.

    >>> lf.graph.set_index_checks(False)   # trust the indices: no read-back per call
    """
    global _enabled
    if not isinstance(enabled, bool):
        raise TypeError(f"set_index_checks expects a bool, got {type(enabled).__name__}")
    _enabled = enabled


def index_checks_enabled() -> bool:
    """Whether graph mode's deferred index checks are on (see :func:`set_index_checks`)."""
    return _enabled


def defer_bounds(a, size: int, message: str, *, low: int = 0, ignore: int | None = None) -> None:
    """Record "every element of the traced index ``a`` lies in ``[low, size)``" in the collecting trace, if any.

    Args:
        a: a traced integer array.
        size: the exclusive upper bound.
        message: what eager raises, with ``{index}`` for the offending index (the largest if one is too large,
            else the smallest, as eager reports it).
        low: the inclusive lower bound (``-size`` where negative indices count from the end).
        ignore: a value exempt from the check (a loss's ``ignore_index``).
    """
    checks = state.checks
    if checks is None or a.size == 0:
        return
    wide = jnp.int64 if jax.config.read("jax_enable_x64") else jnp.int32
    a = a.astype(wide)
    info = jnp.iinfo(wide)
    if ignore is None:
        lo, hi = jnp.min(a), jnp.max(a)
    else:  # ignored entries can be neither the smallest nor the largest; all ignored: lo > hi, nothing is bad
        skip = a == ignore
        lo, hi = jnp.min(jnp.where(skip, info.max, a)), jnp.max(jnp.where(skip, info.min, a))
    too_big = hi >= size
    checks.append(DeferredCheck(too_big | (lo < low), jnp.where(too_big, hi, lo), message))


def defer_value(bad, message: str, error: type) -> None:
    """Record a value condition an op refuses (an op record's ``check``, e.g. integer division by zero) in the
    collecting trace, if any: ``bad`` is a traced boolean scalar; the call raises ``error(message)`` after the
    program, like eager does before its kernel."""
    checks = state.checks
    if checks is None:
        return
    checks.append(DeferredCheck(jnp.asarray(bad), jnp.zeros((), jnp.int32), message, error))


def summarize(checks: list[DeferredCheck]):
    """Inside the program: ``(bad, summary)`` -- whether any check failed, and ``[first failed check or -1, its
    offending index]`` as one small integer array for the host to read."""
    flags = jnp.stack([c.bad for c in checks])
    values = jnp.stack([c.value for c in checks])
    first = jnp.argmax(flags)
    bad = flags[first]
    return bad, jnp.stack([jnp.where(bad, first, -1).astype(values.dtype), values[first]])


def failure(checks: tuple[tuple[str, type], ...], summary) -> Exception | None:
    """On the host, after the program ran: eager's error if ``summary`` (from :func:`summarize`) says a check
    failed, else None. ``checks``: each recorded check's ``(message, error)``. Reading ``summary`` waits for the
    program."""
    first, value = np.asarray(summary).tolist()
    if first < 0:
        return None
    message, error = checks[first]
    return error(message.replace("{index}", str(value)))
