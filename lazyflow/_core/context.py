"""The active interpreter. Tensor methods call ``state.interp.apply``; eager installs itself as the
default, graph mode swaps in its tracing interpreter for the duration of a trace."""

from __future__ import annotations

import threading


class _State(threading.local):
    interp = None  # set by lazyflow.eager at import
    grad_enabled = True
    tracing = False  # True while graph mode traces user code
    rng_hook = None  # graph mode: Generator -> (seed, offset) traced values


state = _State()
