"""Adadelta (``torch.optim.Adadelta``): the class and its pure update, like torch's ``optim/adadelta.py``."""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp

from .._tensor import Tensor, _make
from .optimizer import Optimizer, _check_flags, _check_lr, _check_nonneg, _scalar_state, _state_array

__all__ = ["Adadelta", "adadelta"]


def adadelta(
    params: list,
    grads: list,
    states: list[dict],
    *,
    lr,
    rho,
    eps,
    weight_decay,
    maximize: bool,
    has_weight_decay: bool,
) -> tuple[list, list]:
    """Adadelta's update, operation by operation as torch's single-tensor implementation.

    Args:
        params, grads: arrays. states: dicts with ``step``, ``square_avg`` and ``acc_delta``.
        lr, rho, eps, weight_decay: hyperparameters (numbers or tracers).
        maximize: torch's flag. has_weight_decay: ``weight_decay != 0``.
    Returns:
        ``(new_params, new_states)``.
    """
    new_params, new_states = [], []
    for p, g, st in zip(params, grads, states):
        if maximize:
            g = -g
        if has_weight_decay:
            g = g + weight_decay * p
        square_avg = st["square_avg"] * rho + (1 - rho) * g * g
        std = jnp.sqrt(square_avg + eps)
        delta = jnp.sqrt(st["acc_delta"] + eps) / std * g
        acc_delta = st["acc_delta"] * rho + (1 - rho) * delta * delta
        new_params.append(p + (-lr) * delta)
        new_states.append({"step": st["step"] + 1, "square_avg": square_avg, "acc_delta": acc_delta})
    return new_params, new_states


class Adadelta(Optimizer):
    """Adadelta: step sizes from running averages of squared gradients and squared updates.

    Args:
        params: parameters or param groups to optimize.
        lr: coefficient that scales the update (default 1.0).
        rho: coefficient of the running averages (default 0.9).
        eps: term added inside the square roots (default 1e-6).
        weight_decay: L2 penalty (default 0).
        foreach, capturable: accepted for torch compatibility (every group runs as one compiled program).
        maximize: maximize the objective instead of minimizing.
        differentiable: must be False.
    Raises:
        ValueError: a negative lr, eps or weight_decay, or rho outside [0, 1].
    >>> opt = lf.optim.Adadelta(model.parameters())
    """

    _dynamic = ("lr", "rho", "eps", "weight_decay")
    _static = ("maximize",)
    _state_keys = ("square_avg", "acc_delta")

    def __init__(
        self,
        params,
        lr: float | Tensor = 1.0,
        rho: float = 0.9,
        eps: float = 1e-6,
        weight_decay: float = 0,
        foreach: bool | None = None,
        *,
        capturable: bool = False,
        maximize: bool = False,
        differentiable: bool = False,
    ) -> None:
        _check_lr(lr)
        if not 0.0 <= rho <= 1.0:
            raise ValueError(f"Invalid rho value: {rho} (expected 0 <= rho <= 1)")
        _check_nonneg("epsilon value", eps)
        _check_nonneg("weight_decay value", weight_decay)
        _check_flags(differentiable, foreach, None)
        defaults = {
            "lr": lr,
            "rho": rho,
            "eps": eps,
            "weight_decay": weight_decay,
            "maximize": maximize,
            "capturable": capturable,
            "foreach": foreach,
            "differentiable": differentiable,
        }
        super().__init__(params, defaults)

    def _new_state(self, p, group):
        return {
            "step": _scalar_state(like=p),
            "square_avg": _make(_state_array(p)),
            "acc_delta": _make(_state_array(p)),
        }

    def _derived_static(self, group: dict) -> dict[str, Any]:
        return {"has_weight_decay": bool(group["weight_decay"] != 0)}

    def _update(self, hyper, params, grads, states):
        return adadelta(params, grads, states, **hyper)
