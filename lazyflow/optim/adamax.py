"""Adamax (``torch.optim.Adamax``): the class and its pure update, like torch's ``optim/adamax.py``."""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp

from .._tensor import Tensor, _make
from ._functional import _lerp, _scalar_dtype
from .optimizer import Optimizer, _check_betas, _check_flags, _check_lr, _check_nonneg, _scalar_state, _state_array

__all__ = ["Adamax", "adamax"]


def adamax(
    params: list,
    grads: list,
    states: list[dict],
    *,
    lr,
    beta1,
    beta2,
    eps,
    weight_decay,
    maximize: bool,
    has_weight_decay: bool,
) -> tuple[list, list]:
    """Adamax's update (Adam with an infinity norm), operation by operation as torch's single-tensor implementation.

    Args:
        params, grads: arrays. states: dicts with ``step``, ``exp_avg`` and ``exp_inf``.
        lr, beta1, beta2, eps, weight_decay: hyperparameters (numbers or tracers).
        maximize: torch's flag. has_weight_decay: ``weight_decay != 0``.
    Returns:
        ``(new_params, new_states)``.
    """
    sd = _scalar_dtype()
    new_params, new_states = [], []
    for p, g, st in zip(params, grads, states):
        if maximize:
            g = -g
        step = st["step"] + 1
        if has_weight_decay:
            g = g + weight_decay * p
        exp_avg = _lerp(st["exp_avg"], g, 1 - beta1)
        exp_inf = jnp.maximum(st["exp_inf"] * beta2, jnp.abs(g) + eps)
        clr = lr / (1 - jnp.asarray(beta1, sd) ** step.astype(sd))
        new_params.append(p + (-clr).astype(p.dtype) * exp_avg / exp_inf)
        new_states.append({"step": step, "exp_avg": exp_avg, "exp_inf": exp_inf})
    return new_params, new_states


class Adamax(Optimizer):
    """Adamax: Adam whose second moment is an exponentially weighted infinity norm.

    Args:
        params: parameters or param groups to optimize.
        lr: learning rate (default 2e-3).
        betas: coefficients of the running average and of the infinity norm (default (0.9, 0.999)).
        eps: term added to the denominator (default 1e-8).
        weight_decay: L2 penalty (default 0).
        foreach, capturable: accepted for torch compatibility (every group runs as one compiled program).
        maximize: maximize the objective instead of minimizing.
        differentiable: must be False.
    Raises:
        ValueError: a negative lr, eps or weight_decay, or betas outside [0, 1).
    >>> opt = lf.optim.Adamax(model.parameters(), lr=2e-3)
    """

    _dynamic = ("lr", "betas", "eps", "weight_decay")
    _static = ("maximize",)
    _state_keys = ("exp_avg", "exp_inf")

    def __init__(
        self,
        params,
        lr: float | Tensor = 2e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0,
        foreach: bool | None = None,
        *,
        maximize: bool = False,
        differentiable: bool = False,
        capturable: bool = False,
    ) -> None:
        _check_lr(lr)
        _check_nonneg("epsilon value", eps)
        _check_betas(betas)
        _check_nonneg("weight_decay value", weight_decay)
        _check_flags(differentiable, foreach, None)
        defaults = {
            "lr": lr,
            "betas": betas,
            "eps": eps,
            "weight_decay": weight_decay,
            "foreach": foreach,
            "maximize": maximize,
            "differentiable": differentiable,
            "capturable": capturable,
        }
        super().__init__(params, defaults)

    def _new_state(self, p, group):
        return {"step": _scalar_state(like=p), "exp_avg": _make(_state_array(p)), "exp_inf": _make(_state_array(p))}

    def _derived_static(self, group: dict) -> dict[str, Any]:
        return {"has_weight_decay": bool(group["weight_decay"] != 0)}

    def _update(self, hyper, params, grads, states):
        hyper = dict(hyper)
        beta1, beta2 = hyper.pop("betas")
        return adamax(params, grads, states, beta1=beta1, beta2=beta2, **hyper)
