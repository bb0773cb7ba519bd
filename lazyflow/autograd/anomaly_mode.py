"""``detect_anomaly`` / ``set_detect_anomaly``: each tape node remembers where its forward ran, and the backward
raises as soon as a node produces NaN, naming the node and that place (torch's anomaly mode)."""

from __future__ import annotations

import contextlib

from .node import _anomaly

__all__ = ["detect_anomaly", "set_detect_anomaly", "is_anomaly_enabled", "is_anomaly_check_nan_enabled"]

_check_nan = [True]


def is_anomaly_enabled() -> bool:
    """Whether anomaly detection is on."""
    return _anomaly[0]


def is_anomaly_check_nan_enabled() -> bool:
    """Whether anomaly mode checks backward results for NaN."""
    return _anomaly[0] and _check_nan[0]


def _set(mode: bool, check_nan: bool) -> None:
    _anomaly[0] = bool(mode) and bool(check_nan)
    _check_nan[0] = bool(check_nan)


class detect_anomaly(contextlib.ContextDecorator):
    """Context manager (and decorator) turning anomaly detection on: nodes recorded inside remember the user's
    ``file:line``, and a backward run inside raises ``AutogradError`` (a RuntimeError) naming the first node whose
    gradient holds NaN and that place. Costs a stack walk per op and a host sync per node: for debugging only.

    >>> with lf.autograd.detect_anomaly():
    ...     loss = model(x).sum(); loss.backward()
    """

    def __init__(self, check_nan: bool = True) -> None:
        self.check_nan = check_nan

    def __enter__(self):
        self._prev = (_anomaly[0], _check_nan[0])
        _set(True, self.check_nan)
        return self

    def __exit__(self, *exc) -> bool:
        _anomaly[0], _check_nan[0] = self._prev
        return False


class set_detect_anomaly(contextlib.ContextDecorator):
    """Turn anomaly detection on or off at once (and restore the previous setting on exit as a context manager)."""

    def __init__(self, mode: bool, check_nan: bool = True) -> None:
        self._prev = (_anomaly[0], _check_nan[0])
        _set(mode, check_nan)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> bool:
        _anomaly[0], _check_nan[0] = self._prev
        return False
