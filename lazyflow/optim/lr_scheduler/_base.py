"""The scheduler base class: ``step()``/``get_last_lr()``, torch's state-dict layout, and per-group helpers."""

from __future__ import annotations

import warnings
from typing import Any

from ..._tensor import Tensor
from ..optimizer import Optimizer

_EPOCH_DEPRECATION = (
    "The epoch parameter in `scheduler.step()` is deprecated (as in torch): when given, the "
    "closed-form schedule is used where available. Call `scheduler.step()` without it."
)


def _lr_list(optimizer: Optimizer, key: str) -> list:
    return [g[key].clone() if isinstance(g[key], Tensor) else g[key] for g in optimizer.param_groups]


def _set_group_value(group: dict, key: str, value) -> None:
    if isinstance(group[key], Tensor):
        group[key].fill_(float(value))
    else:
        group[key] = value


def _per_group(name: str, optimizer: Optimizer, value) -> list:
    if isinstance(value, (list, tuple)):
        if len(value) != len(optimizer.param_groups):
            raise ValueError(
                f"{name} must have the same length as optimizer.param_groups. {name} has "
                f"{len(value)} values, param_groups has {len(optimizer.param_groups)}."
            )
        return list(value)
    return [value] * len(optimizer.param_groups)


def _set_momentum(group: dict, use_beta1: bool, momentum: float) -> None:
    """Write a cycled momentum: Adam-style optimizers' beta1, others' ``momentum``."""
    if use_beta1:
        group["betas"] = (momentum, *group["betas"][1:])
    else:
        group["momentum"] = momentum


def _cycle_momentum(optimizer: Optimizer, base_momentum, max_momentum, last_epoch: int) -> tuple[bool, list, list]:
    """Set up momentum cycling (OneCycleLR, CyclicLR): ``(use_beta1, base_momentums, max_momentums)``; a new
    schedule starts each group at its max momentum and records both bounds in the group, as torch does.

    Raises:
        ValueError: the optimizer has neither ``momentum`` nor ``betas``.
    """
    if "momentum" not in optimizer.defaults and "betas" not in optimizer.defaults:
        raise ValueError("optimizer must support momentum or beta1 with `cycle_momentum` option enabled")
    use_beta1 = "betas" in optimizer.defaults
    base_ms = _per_group("base_momentum", optimizer, base_momentum)
    max_ms = _per_group("max_momentum", optimizer, max_momentum)
    if last_epoch == -1:
        for mm, bm, group in zip(max_ms, base_ms, optimizer.param_groups):
            _set_momentum(group, use_beta1, mm)
            group["max_momentum"] = mm
            group["base_momentum"] = bm
    return use_beta1, base_ms, max_ms


class LRScheduler:
    """Base class of learning-rate schedulers: subclasses implement ``get_lr()``.

    Args:
        optimizer: the optimizer whose ``param_groups[i]["lr"]`` this scheduler sets.
        last_epoch: index of the last epoch; -1 (default) starts a new schedule, other values resume one
            (the groups must then hold ``"initial_lr"``).
    Raises:
        TypeError: ``optimizer`` is not a lazyflow Optimizer.
        KeyError: resuming (``last_epoch >= 0``) without ``"initial_lr"`` in the param groups.
    """

    _get_lr_called_within_step: bool = False
    _is_initial: bool = False

    def __init__(self, optimizer: Optimizer, last_epoch: int = -1) -> None:
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")
        self.optimizer = optimizer
        if last_epoch == -1:
            for group in optimizer.param_groups:
                lr = group["lr"]
                group.setdefault("initial_lr", lr.clone() if isinstance(lr, Tensor) else lr)
        else:
            for i, group in enumerate(optimizer.param_groups):
                if "initial_lr" not in group:
                    raise KeyError(
                        f"param 'initial_lr' is not specified in param_groups[{i}] when resuming a "
                        "scheduler with last_epoch >= 0: load the optimizer's state dict first"
                    )
        self.base_lrs: list = _lr_list(optimizer, "initial_lr")
        self.last_epoch = last_epoch
        self._initial_step()

    def _initial_step(self) -> None:
        self._step_count = 0
        self._is_initial = True
        try:
            self.step()
        finally:
            self._is_initial = False

    def state_dict(self) -> dict[str, Any]:
        """Every attribute except the optimizer (torch's layout)."""
        return {k: v for k, v in self.__dict__.items() if k != "optimizer"}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore attributes from ``state_dict()``.

        Args:
            state_dict: a dict returned by ``state_dict()``.
        """
        self.__dict__.update(state_dict)

    def get_last_lr(self) -> list:
        """The learning rates of the param groups after the last ``step()``."""
        return self._last_lr

    def get_lr(self) -> list:
        """The next learning rates (computed by ``step()``; read ``get_last_lr()`` instead)."""
        raise NotImplementedError(f"{type(self).__name__} must implement get_lr() (an abstract method, as in torch)")

    def step(self, epoch: int | None = None) -> None:
        """Advance the schedule by one epoch (call after ``optimizer.step()``).

        Args:
            epoch: deprecated; sets ``last_epoch`` and uses the closed form where one exists.
        """
        self._step_count += 1
        if epoch is not None:
            warnings.warn(_EPOCH_DEPRECATION, UserWarning, stacklevel=2)
        self._update_lr(epoch)

    def _update_lr(self, epoch: int | None = None) -> None:
        self._get_lr_called_within_step = True
        try:
            if epoch is None:
                self.last_epoch += 1
                values = self.get_lr()
            else:
                self.last_epoch = epoch
                closed = getattr(self, "_get_closed_form_lr", None)
                values = closed() if closed is not None else self.get_lr()
        finally:
            self._get_lr_called_within_step = False
        for group, lr in zip(self.optimizer.param_groups, values):
            _set_group_value(group, "lr", lr)
        self._last_lr = _lr_list(self.optimizer, "lr")
