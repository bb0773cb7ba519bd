"""Gradient-mode switches with torch's names: context managers that also work as decorators."""

from __future__ import annotations

import contextlib

from .._core.context import state

__all__ = ["no_grad", "enable_grad", "set_grad_enabled", "is_grad_enabled", "inference_mode"]


def is_grad_enabled() -> bool:
    """Whether operations are being recorded for autograd."""
    return state.grad_enabled


class _Mode(contextlib.ContextDecorator):
    _mode = True

    def __enter__(self):
        self._prev = state.grad_enabled
        state.grad_enabled = self._mode
        return self

    def __exit__(self, *exc):
        state.grad_enabled = self._prev
        return False


class no_grad(_Mode):
    """Disable gradient recording: ``with lf.no_grad(): ...`` or ``@lf.no_grad()``."""

    _mode = False


class enable_grad(_Mode):
    """Enable gradient recording inside a ``no_grad`` region."""

    _mode = True


class inference_mode(_Mode):
    """Like :class:`no_grad` (lazyflow has no separate inference tensors)."""

    def __init__(self, mode: bool = True):
        self._mode = not mode


class set_grad_enabled(_Mode):
    """Set gradient recording on or off. Takes effect at once, and as a context manager restores it.

    >>> with lf.set_grad_enabled(False):
    ...     y = x * 2
    """

    def __init__(self, mode: bool):
        self._prev = state.grad_enabled
        self._mode = bool(mode)
        state.grad_enabled = self._mode

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        state.grad_enabled = self._prev
        return False
