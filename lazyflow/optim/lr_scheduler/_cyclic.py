"""``CyclicLR``: the learning rate (and momentum, inversely) cycles between two bounds (Smith, 2017)."""

from __future__ import annotations

import math
import types
from collections.abc import Callable
from typing import Any

from ..optimizer import Optimizer
from ._base import LRScheduler, _cycle_momentum, _per_group, _set_group_value, _set_momentum

_MODES = ("triangular", "triangular2", "exp_range")


class CyclicLR(LRScheduler):
    """Cycle each group's lr between ``base_lr`` and ``max_lr`` (per batch), torch's recurrence and state dict.

    Args:
        optimizer: the optimizer.
        base_lr, max_lr: the bounds, one or one per group (``base_lr`` also becomes the current lr).
        step_size_up, step_size_down: steps of the rising and falling halves (``step_size_down`` defaults to
            ``step_size_up``).
        mode: ``"triangular"`` (constant amplitude), ``"triangular2"`` (halved each cycle), ``"exp_range"``
            (scaled by ``gamma ** iteration``); ignored when ``scale_fn`` is given.
        gamma: the ``exp_range`` base.
        scale_fn: a custom amplitude ``scale_fn(x)``, of the cycle number or the iteration (``scale_mode``).
        cycle_momentum: cycle momentum (or Adam's beta1) between ``max_momentum`` and ``base_momentum``.
        last_epoch: see ``LRScheduler``.
    Raises:
        TypeError: ``optimizer`` is not a lazyflow Optimizer.
        ValueError: an unknown ``mode`` without ``scale_fn``, or ``cycle_momentum`` with an optimizer that has
            neither ``momentum`` nor ``betas``.
    """

    def __init__(
        self,
        optimizer: Optimizer,
        base_lr: float | list[float],
        max_lr: float | list[float],
        step_size_up: int = 2000,
        step_size_down: int | None = None,
        mode: str = "triangular",
        gamma: float = 1.0,
        scale_fn: Callable[[float], float] | None = None,
        scale_mode: str = "cycle",
        cycle_momentum: bool = True,
        base_momentum: float | list[float] = 0.8,
        max_momentum: float | list[float] = 0.9,
        last_epoch: int = -1,
    ) -> None:
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")
        self.optimizer = optimizer
        base_lrs = _per_group("base_lr", optimizer, base_lr)
        if last_epoch == -1:
            for lr, group in zip(base_lrs, optimizer.param_groups):
                _set_group_value(group, "lr", lr)
        self.max_lrs = _per_group("max_lr", optimizer, max_lr)
        up = float(step_size_up)
        down = float(step_size_down) if step_size_down is not None else up
        self.total_size = up + down
        self.step_ratio = up / self.total_size
        if mode not in _MODES and scale_fn is None:
            raise ValueError(f"mode is invalid and scale_fn is None: mode must be one of {_MODES}, got {mode!r}")
        self.mode = mode
        self.gamma = gamma
        self._scale_fn_custom = scale_fn
        self.scale_mode = scale_mode
        self._init_scale_fn()
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            self.use_beta1, self.base_momentums, self.max_momentums = _cycle_momentum(
                optimizer, base_momentum, max_momentum, last_epoch
            )
        super().__init__(optimizer, last_epoch)
        self.base_lrs = base_lrs

    def _init_scale_fn(self) -> None:
        if self._scale_fn_custom is None:  # the built-in modes fix their scale mode, as torch's do
            self.scale_mode = "iterations" if self.mode == "exp_range" else "cycle"

    def scale_fn(self, x: float) -> float:
        """The amplitude factor at ``x`` (a cycle number or an iteration, per ``scale_mode``)."""
        if self._scale_fn_custom is not None:
            return self._scale_fn_custom(x)
        if self.mode == "triangular":
            return 1.0
        if self.mode == "triangular2":
            return 1 / (2.0 ** (x - 1))
        return self.gamma**x

    def get_lr(self) -> list:
        cycle = math.floor(1 + self.last_epoch / self.total_size)
        x = 1.0 + self.last_epoch / self.total_size - cycle
        scale_factor = x / self.step_ratio if x <= self.step_ratio else (x - 1) / (self.step_ratio - 1)
        at = cycle if self.scale_mode == "cycle" else self.last_epoch
        lrs = [b + (m - b) * scale_factor * self.scale_fn(at) for b, m in zip(self.base_lrs, self.max_lrs)]
        if self.cycle_momentum:
            for bm, mm, group in zip(self.base_momentums, self.max_momentums, self.optimizer.param_groups):
                _set_momentum(group, self.use_beta1, mm - (mm - bm) * scale_factor * self.scale_fn(at))
        return lrs

    def state_dict(self) -> dict[str, Any]:
        """torch's layout: a custom ``scale_fn`` is kept only when it is a callable object (its ``__dict__``),
        not a function or lambda."""
        state = super().state_dict()
        fn = state.pop("_scale_fn_custom")
        state["_scale_fn_custom"] = None
        if fn is not None and not isinstance(fn, types.FunctionType):
            state["_scale_fn_custom"] = fn.__dict__.copy()
        return state

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        state_dict = dict(state_dict)
        fn = state_dict.pop("_scale_fn_custom", None)
        custom = self._scale_fn_custom
        super().load_state_dict(state_dict)
        self._scale_fn_custom = custom
        if fn is not None and custom is not None:
            custom.__dict__.update(fn)
        self._init_scale_fn()
