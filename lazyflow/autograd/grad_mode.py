"""Gradient-mode switches with torch's names: context managers that also work as decorators."""

from __future__ import annotations

import contextlib
import copy
import threading

from .._core.context import state

__all__ = [
    "no_grad",
    "enable_grad",
    "set_grad_enabled",
    "is_grad_enabled",
    "inference_mode",
    "enforce_grad_layout_policy",
]


def _jax_differentiated():
    """The active trace when JAX differentiates it as a whole (``lf.compile``, ``lf.func``): there the grad mode is
    the trace's ``stop`` flag (no_grad regions become ``stop_gradient`` in the program), not the tape switch."""
    ctx = state.trace_ctx
    return ctx if state.tracing and ctx is not None and not ctx.tape else None


def _get() -> bool:
    ctx = _jax_differentiated()
    return state.grad_enabled if ctx is None else not ctx.stop


def _set(mode: bool) -> None:
    ctx = _jax_differentiated()
    if ctx is not None:
        ctx.stop = not mode
    # inside such a trace too: enable_grad() there records the tape (so lf.autograd.grad works inside lf.compile)
    state.grad_enabled = mode


def _save() -> tuple:
    ctx = _jax_differentiated()
    return state.grad_enabled, ctx, None if ctx is None else ctx.stop


def _restore(saved: tuple) -> None:
    state.grad_enabled, ctx, stop = saved
    if ctx is not None:
        ctx.stop = stop


def is_grad_enabled() -> bool:
    """Whether operations are being recorded for autograd (inside ``lf.compile``: whether gradients flow through
    what runs now, as in torch)."""
    return _get()


class _Mode(contextlib.ContextDecorator):
    _mode = True

    def __enter__(self):
        st = state
        if st.tracing:
            self._prev = _save()
            _set(self._mode)
        else:  # outside a trace _save/_set touch the tape switch alone: done inline (``with no_grad()`` per call)
            self._prev = (st.grad_enabled, None, None)
            st.grad_enabled = self._mode
        return self

    def __exit__(self, *exc):
        prev = self._prev
        if prev[1] is None:
            state.grad_enabled = prev[0]
        else:
            _restore(prev)
        return False

    def _recreate_cm(self):
        # a fresh object per decorated call (torch's clone()): recursive or concurrent calls of a decorated
        # function must not overwrite each other's saved mode
        return copy.copy(self)


class _NoParamMode(_Mode):
    def __new__(cls, orig_func=None):
        # torch also accepts the bare decorator: @lf.no_grad
        if orig_func is None:
            return super().__new__(cls)
        return cls()(orig_func)


class no_grad(_NoParamMode):
    """Disable gradient recording: ``with lf.no_grad(): ...``, ``@lf.no_grad()`` or ``@lf.no_grad``."""

    _mode = False


class enable_grad(_NoParamMode):
    """Enable gradient recording inside a ``no_grad`` region (also ``@lf.enable_grad()``/``@lf.enable_grad``)."""

    _mode = True


class inference_mode(_Mode):
    """Like :class:`no_grad` (lazyflow has no separate inference tensors)."""

    def __init__(self, mode: bool = True):
        self._mode = not mode


class set_grad_enabled(_Mode):
    """Set gradient recording on or off. Takes effect at once, and as a context manager restores it.
    As a decorator it leaves the mode alone until the function is called (torch's behaviour).

    >>> with lf.set_grad_enabled(False):
    ...     y = x * 2
    """

    def __init__(self, mode: bool):
        self._prev = _save()
        self._mode = bool(mode)
        _set(self._mode)

    def __call__(self, func):
        _restore(self._prev)  # undo the switch made by construction
        return super().__call__(func)

    def _recreate_cm(self):
        return type(self)(self._mode)  # saves the mode in force at call time, then switches

    def __enter__(self):
        _set(self._mode)
        return self


_layout = threading.local()  # enforce_grad_layout_policy's flag, per thread as in torch


def is_grad_layout_enforced() -> bool:
    """The flag :class:`enforce_grad_layout_policy` sets in this thread (True unless relaxed)."""
    return getattr(_layout, "enabled", True)


class enforce_grad_layout_policy(contextlib.ContextDecorator):
    """torch's switch for the gradient layout contract (a ``.grad`` has its parameter's strides), per thread: sets the
    flag at once; as a context manager it restores the previous flag on exit; as a decorator it leaves the flag alone
    until the function runs, as in torch.

    lazyflow has one dense layout (a tensor is a jax array: no strides), so every gradient already has its
    parameter's layout and the contract holds either way: the flag changes no gradient, which is torch's own answer
    for dense contiguous parameters.
    """

    def __init__(self, enable: bool = True) -> None:
        self.prev = is_grad_layout_enforced()
        self.mode = bool(enable)
        _layout.enabled = self.mode

    def __call__(self, func):
        _layout.enabled = self.prev  # undo the switch made by construction
        return super().__call__(func)

    def _recreate_cm(self):
        return type(self)(self.mode)

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> bool:
        _layout.enabled = self.prev
        return False

    def clone(self) -> enforce_grad_layout_policy:
        """A copy of this switch (torch's ``clone``)."""
        return type(self)(self.mode)
