"""The active interpreter. Tensor methods call ``state.interp.apply``; eager installs itself as the
default, graph mode swaps in its tracing interpreter for the duration of a trace."""

from __future__ import annotations

import threading
from typing import Any, Protocol


class Interpreter(Protocol):
    """What Tensor code calls on the active interpreter (eager's kernel cache, or graph mode's tracer)."""

    def apply(self, op: Any, args: tuple, statics: tuple = ()) -> Any: ...

    def apply_inplace(self, op: Any, target: Any, args: tuple, statics: tuple = ()) -> Any: ...

    name: str

    def accumulate(self, a: Any, b: Any) -> Any: ...


class _State(threading.local):
    interp: Interpreter = None  # type: ignore[assignment]  # set by lazyflow.eager at import
    grad_enabled = True
    tracing = False  # True while graph mode traces user code
    rng_hook: Any = None  # graph mode: Generator -> (seed, offset) traced values
    # graph mode: the trace's deferred index checks (lazyflow._core.checks); None: nothing collects them
    checks: list | None = None
    trace_ctx: Any = None  # graph mode: the active trace's context (lazyflow.graph.trace.Tracing)


state = _State()
